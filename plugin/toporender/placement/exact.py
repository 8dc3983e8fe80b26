"""An exact re-packing of a small neighbourhood: every gang of one region plus the gang that did not fit.

The bounded repair search is greedy where it puts pods onto nodes, so on small, tight pools it can miss an
arrangement that exists (a rack-bound subgroup spread over the cliques a later clique-bound one needed). When
the region is small, this search decides it exactly, up to a fixed step budget. It works like bin completion
for bin packing: it fills one *unit* (a domain of the coarsest level any leaf group is bound to; units share no
node) at a time instead of placing one group at a time:

* units are taken in order of free GPUs, fewest first (or, as a second try, most first; or, as another, those
  that are the only ones with room for some group first: that group is decided before other units take what
  the rest must be filled with); for each, a depth-first search chooses the leaf groups it holds, largest
  first, each of a finer level in one of the unit's domains of that level (best fit first);
* the GPUs a unit leaves free are lost to the groups still to place, so each unit may leave at most the slack
  (free GPUs minus GPUs asked) not yet lost, and the groups left must fit, size by size, the whole pods the
  units after it can take (those that may use no tainted node, on their untainted nodes), which is checked
  each time the unit's search leaves a group out, not only once the unit is filled (proving that a pool of
  eight gangs has no room took 1,246,032 steps without it, 483,367 with it); so must the groups left of every
  coarser group (a gang bound to a rack): within the domain an earlier choice fixed it to, else
  within some domain of its level, counting only untainted GPUs for groups that may use no tainted node;
  while a unit is filled, its groups' pods must fit, size by size, the whole pods its nodes can take, and
  once a group is put in a domain of the unit, the groups left under each coarser group that this fixes there
  (the other pods of a rack-bound subgroup) must fit that domain;
* with little slack left (``SUMS_SLACK``), every domain that holds units still to fill must be fillable to
  within it by sums of the groups left that may go there, and the units after a unit are bounded before its
  node search;
* the pods of a unit's groups are fitted onto its nodes by an inner depth-first search over pods, largest
  first, that remembers the states it has proven infeasible, after a test that the pods fit the GPUs their
  nodes can take at all (on each node, multiples of the GCD of the pod sizes that may go there); in every
  state, the pods left that may use only some of the nodes (a clique, the untainted ones) must fit those, size
  by size, and once the pods left are all of one size a maximum flow decides whether they fit;
* interchangeable choices are tried once: leaf groups of the same shape (the first k of them, in domains in path
  order), sibling domains that are still empty and have the same free GPUs per node, nodes of one finest domain
  with the same free GPUs, pods of one group; a set of groups left that has failed from some unit on is not tried
  again;
* groups of one pod bound to nothing finer than the region (a zone-bound gang's one-GPU pods, each a group of its
  own: see below) bind no other group, so once a unit's filling with some of them fails further on, the same
  other groups with fewer of each shape are not tried: the units after it would have those groups and more to
  place, with less slack. Without this, a zone with thirty such pods tried each count of them in every unit.

With ``fluid``, one-GPU pods whose groups bind nothing finer than the region, or than a domain another group of
their gang fixes, are left out of the units; once the other groups are placed a maximum flow gives them nodes
among the GPUs left. A tight pool with many such pods otherwise makes the search choose which of them fill each
unit. After each unit a flow of those pods and of the other groups' GPUs (as one-GPU pods) must still fit, and
inside units pods that tolerate a taint take tainted nodes first. Which node a unit's pods take is fixed by its
node search, so this search can miss an arrangement: it proves nothing.

A group bound to no finer domain than its parent (pods outside every subgroup, a subgroup without a level)
has each of its pods searched as a group of its own, bound to the units' level: a pod lies in one domain of
every level, so this rules out no arrangement, and such a group does not make the whole region one unit.

When the gangs' common required level is finer than the region, whole gangs are first given domains of that
level (their old domain first) and each domain is searched on its own, each time a gang is given one: the gangs
a domain holds only grow as more are given domains, so a set that does not pack there rules out every
assignment that extends it. Checked only once every gang had a domain, such a set (two large gangs in a zone
that cannot hold both) was searched again under each assignment of the smaller gangs after it. Steps (choices
tried) are counted, never seconds, so the outcome is the same on every machine; a search that runs out of steps
reports no arrangement, and one that ends within its steps without an arrangement has proven that there is
none.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Mapping, Sequence

from toporender.placement.compiled import CompiledGang, Group, search_over, size_counts, tolerated
from toporender.placement.tree import Tree

EXACT_MAX_NODES = 128
"""Regions with more schedulable nodes than this are not searched exactly."""
EXACT_MAX_PODS = 256
"""Neighbourhoods with more pods than this are not searched exactly."""
EXACT_MAX_PARTS = 8
"""Parts the gangs bound to no domain may add to a search (see ``ExactRepack._parts``), unless it is ``wide``."""
EXACT_MAX_SPLITS = 256
"""Ways to give those parts domains of their level a ``wide`` search may try: parts of one kind are
interchangeable, so only how many of each kind go to each domain counts (eight parts of different kinds in two
domains are 256 ways; thirty of one kind in three, 496)."""

NODE_DEAD_ENDS = 16
"""States a unit's node search proves infeasible before it starts counting the pods left (:class:`_PodsLeft`)."""
SUMS_SLACK = 8
"""Free GPUs not yet lost below which the units left are bounded by subset sums (``ExactRepack._sums_fit``) too,
and bounded before a unit's node search rather than after: with more to spare the sums seldom refuse anything
(on a fragmented development seed, 1 in 270 such calls against 1 in 12 below), and the bound would cost more
than the node searches it saves."""

LeafKey = tuple[int, int]
"""(gang index, group index) of a leaf group."""
UnitKey = tuple[int, tuple[tuple[LeafKey, int], ...]]
"""A unit and the leaf groups in it with their domains (sorted): the key of a unit's remembered answer."""
Item = tuple[int, int, tuple[tuple[int, int], ...], int]
"""A cluster of leaf groups as the subset sums read it: the level it is bound to, its GPUs, its leaves' GPUs as
(GPUs, count) pairs and the units still to fill it may use (bits as in :attr:`UnitsLeft.may`)."""
FLUID = -1
"""The unit of the entry, among a search's units, that holds the nodes of the pods :meth:`ExactRepack._fluid_keys`
left out (leaf group and node, in place of leaf group and domain)."""


@dataclasses.dataclass(frozen=True)
class UnitsLeft:
    """The units still to fill, as :meth:`ExactRepack._sums_fit` reads them: their free GPUs (in order), and per
    domain finer than the region that holds some, their free GPUs in all and which of them it holds (bit i for
    ``units[i]``)."""

    units: list[int]
    free: list[int]
    rem: dict[int, int]
    held: dict[int, int]
    may: dict[int, int] = dataclasses.field(default_factory=dict)
    """Per domain a group is confined to, the units it may use (bit i for ``units[i]``), as they are asked."""
    most: dict[int, int] = dataclasses.field(default_factory=dict)
    """Per set of units (bits as in ``may``), the most free GPUs of one, as they are asked."""


def _tolerated_by(gangs: Sequence[CompiledGang]) -> frozenset[int]:
    """The tainted nodes some group of ``gangs`` tolerates (a gang's root group holds its groups' union)."""
    return frozenset().union(*(x.groups[0].tol_any for x in gangs))


def _shape_of(x: CompiledGang, reqs: Sequence[int]) -> tuple[object, ...]:
    """What makes two gangs (or parts of gangs) interchangeable in a search: their groups' structure, required
    levels (``reqs``, one per group), pod sizes and tolerated tainted nodes."""
    return tuple((g.parent, r, tuple(x.pod_gpus[p] for p in g.pods), g.tol)
                 for g, r in zip(x.groups, reqs, strict=True))


def _up_to(sums: int, n: int, count: int) -> int:
    """The sums (bit s for sum s) with 0 to ``count`` items of ``n`` added: the counts in powers of two, so that
    every count up to ``count`` is some choice of them, at a shift each."""
    part = 1
    while count > 0:
        take = min(part, count)
        sums |= sums << n * take
        count -= take
        part *= 2
    return sums


def _mixed(seed: int, x: int) -> int:
    """A 64-bit mix of ``seed`` and ``x`` (SplitMix64's finaliser): an order that looks random, the same on
    every machine and in every process."""
    h = (seed * 0x9E3779B97F4A7C15 + x * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return h ^ (h >> 31)


class OutOfSteps(Exception):
    """The step budget ran out."""


class ExactRepack:
    """One exact search over ``gangs`` inside ``region``, on the tree's current free GPUs."""

    def __init__(self, tree: Tree, region: int, gangs: Sequence[CompiledGang], budget: int,
                 preferred: bool = False, before: Mapping[int, Mapping[int, int]] | None = None,
                 most_free_first: bool = False, wide: bool = False, fluid: bool = False,
                 refuted: set[tuple[int, frozenset[int]]] | None = None, shuffle: int = 0,
                 only_first: bool = False, no_hole: int = 0):
        self.tree = tree
        self.no_hole = no_hole
        """GPUs below which a unit may not be left with free GPUs, unless it had fewer to begin with (0: any): a
        search for an arrangement that leaves no new hole."""
        self.only_first = only_first
        """Whether the units that are the only ones with room for some group (:meth:`_only_units`) come first,
        before the order by free GPUs: an order of its own, for a search the plain one has already run short in."""
        self.shuffle = shuffle
        """A restart's seed, or 0: units, and the domains whole gangs are given first, in an order mixed from it
        (:func:`_mixed`) instead of by free GPUs."""
        self.refuted = set() if refuted is None else refuted
        """Domains with sets of gangs (by index) that do not pack there, as the domain's own search proved: shared
        by searches over the same gangs and the same tree that differ only in their order, which would prove
        them again."""
        self.wide = wide
        """Whether more parts are allowed (counted by the ways to split them, ``EXACT_MAX_SPLITS``, not by
        ``EXACT_MAX_PARTS``) and alike ones are given domains in one order: a search of its own, for a pool the
        plain one could not decide."""
        self.fluid = fluid
        """Whether one-GPU pods that bind nothing are left out of the units and given nodes after them, by a
        maximum flow over what the units leave free (:meth:`_fluid_keys`): a try that may miss an arrangement,
        so a search with it that finds none proves nothing. False when the region has no such pods."""
        self.apart: set[LeafKey] = set()
        """The groups of one pod :meth:`_pods_apart` made."""
        self.most_free_first = most_free_first
        """Units in order of free GPUs, most first: the second order, for a search the first one ran out in."""
        self.before = before or {}
        """Where the moved gangs were (``gang -> pod -> node``): a gang given a whole domain tries its old one
        first."""
        self.whole_of: dict[int, int] = {}
        """Gang index of each part of a gang bound to no domain (see :meth:`_parts`)."""
        if not preferred:
            gangs = self._parts(tree, region, gangs)
        # required level of every group; with ``preferred`` a gang's preferred level counts as required, so
        # the search keeps each gang inside one domain of it (one block, say) when it can
        self.req: dict[LeafKey, int] = {}
        for x in gangs:
            for gi, grp in enumerate(x.groups):
                r = grp.req
                a = gi
                while preferred and a >= 0:
                    pref = x.groups[a].pref
                    if pref is not None:
                        r = max(r, pref)
                    a = x.groups[a].parent
                self.req[(x.idx, gi)] = r
        self.region = region
        self.gangs = {g.idx: g for g in gangs}
        self.usable = _tolerated_by(gangs)
        """Tainted nodes some group of the search tolerates; their GPUs count in every capacity bound, and a
        group's pods go only to those its own pods all tolerate."""
        self.extra: dict[int, int] = {}
        for n in self.usable:
            for d in tree.node_path[n]:
                self.extra[d] = self.extra.get(d, 0) + tree.node_free[n]
        self._pods_apart()
        self.chain_memo: dict[LeafKey, tuple[int, ...]] = {}
        self.doms_memo: dict[tuple[int, int], list[int]] = {}
        self.unit_nodes_memo: dict[int, tuple[list[int], dict[int, int], tuple[int, ...], list[int],
                                              list[tuple[str, ...]], list[bool]]] = {}
        self.allowed_memo: dict[tuple[int, int, frozenset[int]], tuple[int, ...]] = {}
        self.sig_memo: dict[int, tuple[object, ...]] = {}
        self.strict_memo: dict[LeafKey, bool] = {}
        """Per leaf group, :meth:`_strict`: filled for every leaf below (``size_load``), so hot loops index it."""
        self.bound_at_memo: dict[tuple[LeafKey, int], tuple[tuple[LeafKey, int], ...]] = {}
        self.bound_memo: dict[tuple[LeafKey, int], tuple[tuple[LeafKey, int], ...]] = {}
        self.budget = budget
        self.steps = 0
        self.leaves: list[LeafKey] = [(g.idx, gi) for g in self.gangs.values() for gi, grp in enumerate(g.groups)
                                      if grp.pods]
        rlvl = tree.dom_level[region]
        self.rlvl = rlvl
        self.level = {k: max(self.req[k], rlvl) for k in self.leaves}
        self.unit_level = min(self.level.values(), default=rlvl)
        self.load: dict[int, int] = {}
        # GPUs per domain of the groups that may use no tainted node (only when some group may): they must fit
        # the domain's untainted free GPUs
        self.strict_load: dict[int, int] = {}
        self.fixed: dict[LeafKey, int] = {}
        self.members: dict[int, list[tuple[LeafKey, int]]] = {}
        self.unit_memo: dict[UnitKey, dict[LeafKey, list[int]] | None] = {}
        self.shape_memo: dict[int, tuple[object, ...]] = {}
        self.caps_memo: dict[tuple[int, bool], dict[int, int]] = {}
        self.unit_caps_memo: dict[int, tuple[int, ...]] = {}
        self.below_memo: dict[LeafKey, tuple[LeafKey, ...]] = {}
        self.nodes_memo: dict[int, list[int]] = {}
        every = sorted({g for x in gangs for g in x.pod_gpus if g}, reverse=True)
        self.sizes = [s for s in every if all(b % s == 0 for b in every if b > s)]
        # per leaf group: the GPUs and sizes of its own pods (a group with subgroups, such as a gang's pods outside
        # every subgroup, has a ``need`` and ``sizes`` that count theirs too), and per size of ``sizes`` the GPUs
        # of its pods of at least that size
        self.need: dict[LeafKey, int] = {}
        self.own_sizes: dict[LeafKey, tuple[tuple[int, int], ...]] = {}
        self.ge: dict[LeafKey, list[int]] = {}
        for gang, gi in self.leaves:
            gpus = [self.gangs[gang].pod_gpus[p] for p in self.gangs[gang].groups[gi].pods]
            self.need[(gang, gi)] = sum(gpus)
            self.own_sizes[(gang, gi)] = size_counts(gpus)
            self.ge[(gang, gi)] = [sum(g for g in gpus if g >= s) for s in self.sizes]
        none = [0] * len(self.sizes)
        self.size_load = {k: (*ge, *(ge if self._strict(k) else none)) for k, ge in self.ge.items()}
        """Per leaf group, ``ge`` and then ``ge`` again if the group may use no tainted node (else zeros): what it
        takes of :meth:`_unit_caps`."""
        self.fluid = fluid and bool(self._fluid_keys(self.leaves))

    def _pods_apart(self) -> None:
        """Give each pod of a group that is bound to no finer domain than its parent group its own group, bound to
        the level of the units.

        Such a group (a gang's pods outside its subgroups, a gang without subgroups, a subgroup without a level)
        would make units of its own coarse level, or the whole region one unit, and the node search of a unit that
        large does not end within its steps. A pod lies in one domain of every level, and its group's level stays
        with the group (its pods' parent now), so binding each pod to a domain of the units' level rules out no
        arrangement: the search stays exact. Not done when some node of the region has no domain of that level."""
        tree = self.tree
        gangs = list(self.gangs.values())
        rlvl = tree.dom_level[self.region]
        top = max(rlvl, min((self.req[(x.idx, 0)] for x in gangs), default=rlvl))
        loose: list[LeafKey] = []
        bound: list[int] = []
        for x in gangs:
            for gi, g in enumerate(x.groups):
                if not g.pods:
                    continue
                r = self.req[(x.idx, gi)]
                if r <= top or g.children or (g.parent >= 0 and r <= self.req[(x.idx, g.parent)]):
                    loose.append((x.idx, gi))
                else:
                    bound.append(r)
        unit = min(bound, default=top + 1)
        if not loose or unit >= len(tree.levels):
            return
        below = tree.index.get((self.region, unit), [])
        if sum(len(tree.nodes_below(tree.dom_of(k))) for k in below) != len(tree.nodes_below(self.region)):
            return
        for gang, gi in loose:
            x = self.gangs[gang]
            groups = list(x.groups)
            g = groups[gi]
            level = max(unit, self.req[(gang, gi)])
            demands = {p.name: p for p in x.demand.pods}
            for p in g.pods:
                self.req[(gang, len(groups))] = level
                self.apart.add((gang, len(groups)))
                groups.append(Group(f"{g.name}#{p}", gi, level, None, pods=[p], need=x.pod_gpus[p],
                                    sizes=((x.pod_gpus[p], 1),), tol=tolerated(tree, [demands[x.pod_names[p]]])))
            groups[gi] = dataclasses.replace(g, pods=[], children=[*g.children, *range(len(x.groups), len(groups))])
            self.gangs[gang] = dataclasses.replace(x, groups=groups)

    def _parts(self, tree: Tree, region: int, gangs: Sequence[CompiledGang]) -> list[CompiledGang]:
        """The gangs with each gang bound to no domain of the region split into parts that are: each subgroup
        bound to a domain at least as fine as every other gang's (with its subgroups), and each pod outside
        those.

        A gang bound to nothing keeps the whole search from first giving every gang a domain of the gangs'
        common level (and then searching each domain on its own): a free gang of a few pods made a pool of
        forty nodes one search that ran out of steps, where the other gangs alone were placed zone by zone in
        12,000. The parts are what the gang's constraints bind together, and a pod lies in one domain of every
        level, so the split rules out no arrangement. Kept as they are when some group of a free gang is bound
        to a level between the region's and that common one (its parts would need a coarser domain), or when the
        parts would be more than ``EXACT_MAX_PARTS`` (for a ``wide`` search: could be given domains in more than
        ``EXACT_MAX_SPLITS`` ways)."""
        rlvl = tree.dom_level[region]
        bound = [x.groups[0].req for x in gangs if x.groups[0].req > rlvl]
        free = [x for x in gangs if x.groups[0].req <= rlvl]
        if not bound or not free:
            return list(gangs)
        split = min(bound)
        out = [x for x in gangs if x.groups[0].req > rlvl]
        fresh = max(x.idx for x in gangs) + 1
        for x in free:
            # (required level, groups whose pods the part holds, or one group and one pod)
            pieces: list[tuple[int, list[int], int]] = []
            todo = [0]
            while todo:
                gi = todo.pop(0)
                g = x.groups[gi]
                if g.req >= split:
                    below, stack = [], [gi]
                    while stack:
                        b = stack.pop()
                        below.append(b)
                        stack.extend(x.groups[b].children)
                    pieces.append((g.req, sorted(below), -1))
                elif g.req <= rlvl:
                    pieces.extend((split, [gi], p) for p in g.pods)
                    todo.extend(g.children)
                else:
                    self.whole_of = {}
                    return list(gangs)
            if not self.wide and len(out) - len(bound) + len(pieces) > EXACT_MAX_PARTS:
                self.whole_of = {}
                return list(gangs)
            for req, members, pod in pieces:
                groups = []
                for gi, g in enumerate(x.groups):
                    pods = ([pod] if pod >= 0 else g.pods) if gi in members else []
                    groups.append(dataclasses.replace(g, pods=list(pods), req=req if gi == 0 else g.req))
                held = {p for g in groups for p in g.pods}
                gpus = [n if p in held else 0 for p, n in enumerate(x.pod_gpus)]
                out.append(dataclasses.replace(x, idx=fresh, groups=groups, pod_gpus=gpus, need=sum(gpus)))
                self.whole_of[fresh] = x.idx
                fresh += 1
        if self.wide:
            kinds: dict[tuple[object, ...], int] = {}
            for part in out[len(bound):]:
                kind = _shape_of(part, [g.req for g in part.groups])
                kinds[kind] = kinds.get(kind, 0) + 1
            doms = len(tree.index.get((region, split), []))
            if math.prod(math.comb(n + doms - 1, doms - 1) for n in kinds.values()) > EXACT_MAX_SPLITS:
                self.whole_of = {}
                return list(gangs)
        return out

    @property
    def steers(self) -> bool:
        """Whether ``before`` orders any choice: only whole gangs given domains of their common level first try
        their old ones (without that step, the search is the same with or without ``before``)."""
        split = min((self.req[(x.idx, 0)] for x in self.gangs.values()), default=-1)
        return bool(self.before) and split > self.rlvl

    @staticmethod
    def applies(tree: Tree, region: int, gangs: Sequence[CompiledGang]) -> bool:
        """Small enough, and nothing the search does not model (excluded nodes)."""
        if any(x.excluded for x in gangs) or sum(len(x.pod_gpus) for x in gangs) > EXACT_MAX_PODS:
            return False
        usable = _tolerated_by(gangs)
        nodes = sum(1 for n in tree.nodes_below(region) if tree.node_clean[n] or n in usable)
        return nodes <= EXACT_MAX_NODES

    # ---- the outer search: leaf groups unit by unit ----------------------------------------------------------
    def solve(self) -> dict[int, dict[int, int]] | None:
        """``gang -> pod -> node`` for every gang, or None (no arrangement, or out of steps)."""
        gangs = list(self.gangs.values())
        split = min((self.req[(x.idx, 0)] for x in gangs), default=-1)
        try:
            found = self._split(gangs, split) if split > self.rlvl else self._leaves_in(self.region, gangs)
        except OutOfSteps:
            return None
        if found is None:
            return None
        result: dict[LeafKey, list[int]] = {}
        for members in found:
            if members[0] == FLUID:
                result.update((k, [n]) for k, n in members[1])
                continue
            fitted = self.unit_memo[members]
            assert fitted is not None
            result.update(fitted)
        out: dict[int, dict[int, int]] = {}
        for (gang, gi), nodes in sorted(result.items()):
            pods = self.gangs[gang].groups[gi].pods
            out.setdefault(self.whole_of.get(gang, gang), {}).update(zip(pods, nodes, strict=True))
        return out

    # ---- whole gangs to domains of the gangs' common required level first --------------------------------------
    def _split(self, gangs: list[CompiledGang], split: int) -> list[UnitKey] | None:
        """Give every gang a domain of level ``split`` (their required level or finer), bounded by whole-pod
        capacity, where the domain's gangs so far still pack on their own (domains share no node)."""
        tree = self.tree
        rank = tree.rank
        doms = sorted((tree.dom_of(k) for k in tree.index.get((self.region, split), [])), key=lambda d: rank[d])
        order = sorted(gangs, key=lambda x: (-x.need, -max(x.pod_gpus, default=0), x.idx))
        # in a wide search, a gang of the same shape as an earlier one in the order goes to a domain no earlier in
        # path order: the two are interchangeable, so the swapped choice is the same arrangement
        alike = [-1] * len(order)
        if self.wide:
            last: dict[tuple[object, ...], int] = {}
            for i, x in enumerate(order):
                sig = _shape_of(x, [self.req[(x.idx, gi)] for gi in range(len(x.groups))])
                alike[i] = last.get(sig, -1)
                last[sig] = i
        where = [0] * len(order)
        members: dict[int, list[CompiledGang]] = {d: [] for d in doms}
        failed: dict[int, list[frozenset[int]]] = {d: [] for d in doms}
        solved: dict[tuple[int, frozenset[int]], list[UnitKey] | None] = {}
        chosen: list[UnitKey] = []

        refuted = self.refuted
        for d, idxs in refuted:
            if d in failed:
                failed[d].append(idxs)

        def doomed(d: int, idxs: frozenset[int]) -> bool:
            return any(f <= idxs for f in failed[d])

        def packs(d: int, idxs: frozenset[int]) -> bool:
            key = (d, idxs)
            if key not in solved:
                solved[key] = self._leaves_in(d, members[d])
                if solved[key] is None:
                    failed[d].append(idxs)
                    refuted.add(key)
            return solved[key] is not None

        def assign(i: int) -> bool:
            if i == len(order):
                for d in doms:
                    if members[d]:
                        chosen.extend(solved[(d, frozenset(x.idx for x in members[d]))] or ())
                return True
            x = order[i]
            seen: set[tuple[object, ...]] = set()
            cands = [d for d in doms if self._room(d, [*members[d], x])]
            was = self._was(x.idx, split)
            if self.shuffle:
                cands.sort(key=lambda d: _mixed(self.shuffle, rank[d]))
            else:
                cands.sort(key=lambda d: (d != was, self._slack(d, members[d]) - x.need, rank[d]))
            floor = rank[where[alike[i]]] if alike[i] >= 0 else -1
            for d in cands:
                if rank[d] < floor:
                    continue
                if not members[d]:
                    sig = (tree.dom_parent[d], self._shape(d))
                    if sig in seen:
                        continue
                    seen.add(sig)
                self._step()
                members[d].append(x)
                where[i] = d
                idxs = frozenset(m.idx for m in members[d])
                if not doomed(d, idxs) and packs(d, idxs) and assign(i + 1):
                    return True
                members[d].pop()
            return False

        try:
            return chosen if assign(0) else None
        finally:
            assign = search_over

    def _slack(self, d: int, gangs: list[CompiledGang]) -> int:
        return self.tree.dom_free[d] + self.extra.get(d, 0) - sum(x.need for x in gangs)

    def _caps(self, d: int, clean: bool = False) -> dict[int, int]:
        """Per pod size s: the GPUs pods of at least s GPUs can take in ``d`` (whole multiples of s per node), on
        its usable nodes or, with ``clean``, on its untainted ones."""
        got = self.caps_memo.get((d, clean))
        if got is None:
            tree = self.tree
            frees = [tree.node_free[n] for n in tree.nodes_below(d)
                     if tree.node_clean[n] or (n in self.usable and not clean)]
            got = self.caps_memo[(d, clean)] = {s: sum(f // s * s for f in frees) for s in self.sizes}
        return got

    def _unit_caps(self, d: int) -> tuple[int, ...]:
        """:meth:`_caps` per size of ``sizes``, on the usable nodes and then on the untainted ones."""
        got = self.unit_caps_memo.get(d)
        if got is None:
            got = self.unit_caps_memo[d] = (*(self._caps(d)[s] for s in self.sizes),
                                            *(self._caps(d, clean=True)[s] for s in self.sizes))
        return got

    def _room(self, d: int, gangs: list[CompiledGang]) -> bool:
        """Necessary: the gangs' GPUs fit ``d``, and for each pod size s whose larger sizes are multiples of it,
        the GPUs of pods of at least s fit the whole multiples of s the nodes offer (a dual-feasible bound)."""
        if self._slack(d, gangs) < 0:
            return False
        caps = self._caps(d)
        for s in self.sizes:
            if sum(g for x in gangs for g in x.pod_gpus if g >= s) > caps[s]:
                return False
        return True

    def _leaves_in(self, region: int, gangs: list[CompiledGang]) -> list[UnitKey] | None:
        """The leaf search inside one region, for these gangs only, on a fresh state: the units' member lists
        it ends with (keys of ``unit_memo``), or None."""
        keys = sorted((x.idx, gi) for x in gangs for gi, grp in enumerate(x.groups) if grp.pods)
        saved = self.region, self.rlvl
        self.region, self.rlvl = region, self.tree.dom_level[region]
        level = {k: max(self.req[k], self.rlvl) for k in keys}
        self.level.update(level)
        unit_level = min(level.values(), default=self.rlvl)
        prev_unit = self.unit_level
        self.unit_level = unit_level
        state = self.load, self.strict_load, self.fixed, self.members
        self.load, self.strict_load, self.fixed, self.members = {}, {}, {}, {}
        try:
            if not self._fill_units(keys):
                return None
            return [(unit, tuple(sorted(m))) for unit, m in sorted(self.members.items()) if m]
        finally:
            self.load, self.strict_load, self.fixed, self.members = state
            self.region, self.rlvl = saved
            self.unit_level = prev_unit

    def _step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.budget:
            raise OutOfSteps

    def _chain(self, key: LeafKey) -> tuple[int, ...]:
        """The group and its ancestors (indices), leaf first."""
        got = self.chain_memo.get(key)
        if got is None:
            groups = self.gangs[key[0]].groups
            out = []
            gi = key[1]
            while gi >= 0:
                out.append(gi)
                gi = groups[gi].parent
            got = self.chain_memo[key] = tuple(out)
        return got

    def _bound_above(self, key: LeafKey) -> tuple[tuple[LeafKey, int], ...]:
        """The leaf group's ancestors bound finer than the region, with their levels."""
        got = self.bound_memo.get((key, self.rlvl))
        if got is None:
            got = self.bound_memo[(key, self.rlvl)] = tuple(
                (g, r) for g, r in self._bound_at(key) if g != key and r > self.rlvl)
        return got

    def _within(self, key: LeafKey) -> int:
        """The finest domain the leaf group is already confined to: its ancestors' fixed domains, or the region."""
        level = self.tree.dom_level
        fixed = self.fixed
        w = self.region
        top = level[w]
        # ``fixed`` holds only groups that placements in this region bind (:meth:`_bound_at`; it starts empty
        # for each region searched), so the chain's other groups are never in it
        for g, _ in self._bound_at(key):
            d = fixed.get(g)
            if d is not None and level[d] > top:
                w = d
                top = level[d]
        return w

    def _free(self, d: int) -> int:
        return self.tree.dom_free[d] + self.extra.get(d, 0) - self.load.get(d, 0)

    def _clean_free(self, d: int) -> int:
        """Untainted free GPUs of ``d`` not yet taken by groups kept off tainted nodes: what those may use."""
        return self.tree.dom_free[d] - self.strict_load.get(d, 0)

    def _fill_units(self, leaves: list[LeafKey]) -> bool:
        """Give every leaf group a domain, one unit at a time (see the module docstring); on success the units'
        members are in ``members``."""
        tree = self.tree
        rank = tree.rank
        units = self._units()
        if self.only_first:
            first = self._only_units(units, leaves)
            units.sort(key=lambda u: u not in first)
        if self.shuffle:
            units.sort(key=lambda u: _mixed(self.shuffle, rank[u]))
        need = self.need
        slack = sum(self._free(u) for u in units) - sum(need[k] for k in leaves)
        if slack < 0:
            return False
        # per unit, :meth:`_unit_caps` summed over it and the units after it (what _may_fit bounds with)
        caps_from = [(0,) * (2 * len(self.sizes))]
        for u in reversed(units):
            caps_from.append(tuple(map(operator.add, self._unit_caps(u), caps_from[-1])))
        caps_from.reverse()
        fluid_keys = self._fluid_keys(leaves) if self.fluid else []
        fluid: list[list[LeafKey]] = []
        if fluid_keys:
            aside = set(fluid_keys)
            leaves = [k for k in leaves if k not in aside]
            slack += sum(need[k] for k in fluid_keys)
            alike: dict[tuple[int, int, frozenset[int]], list[LeafKey]] = {}
            for k in fluid_keys:
                g = self.gangs[k[0]].groups[k[1]]
                alike.setdefault((k[0], g.parent, g.tol), []).append(k)
            fluid = list(alike.values())
        found_fluid: list[tuple[LeafKey, int]] = []
        shape = {k: self._leaf_shape(k) for k in leaves}
        order = tuple(sorted(leaves, key=lambda k: (shape[k], k)))
        # groups of one pod whose ancestors are bound to nothing finer than the region: where one goes binds no
        # other group, so a unit's choice among them is only how many of each shape it takes
        singles = {k for k in leaves if len(self.gangs[k[0]].groups[k[1]].pods) == 1
                   and all(self.req[(k[0], gi)] <= self.rlvl for gi in self._chain(k)[1:])}
        failed: set[tuple[object, ...]] = set()
        chosen: list[tuple[int, list[tuple[LeafKey, int]]]] = []
        no_hole = self.no_hole

        layouts: dict[int, UnitsLeft] = {}
        rooms: dict[int, tuple[int, dict[int, int], dict[int, int], dict[tuple[int, bool], int]]] = {}
        # bound once: the closures below run for every step, and ``load`` and ``fixed`` stay the same objects
        # while the units are filled
        step, domains_in, siblings_fit = self._step, self._domains_in, self._siblings_fit
        anc, level, region = tree.dom_anc, tree.dom_level, self.region
        load, strict_load, fixed = self.load, self.strict_load, self.fixed
        load_get, strict_get, fixed_get = load.get, strict_load.get, fixed.get
        # per leaf group: the groups a placement of it fixes (:meth:`_bound_at`), the only ones ``fixed`` holds
        bound = {k: self._bound_at(k) for k in leaves}
        confining = {k: tuple(g for g, _ in got) for k, got in bound.items()}
        strict_of = self.strict_memo

        def layout(ui: int) -> UnitsLeft:
            got = layouts.get(ui)
            if got is None:
                got = layouts[ui] = self._units_left(units[ui:])
            return got

        def sums(ui: int, left: tuple[LeafKey, ...], spare: int) -> bool:
            """The subset-sum bound on the units from ``ui`` on, where the slack is small enough to check it."""
            return spare >= SUMS_SLACK or self._sums_fit(layout(ui), left, spare)

        def fill(ui: int, left: tuple[LeafKey, ...], spare: int, checked: bool = False,
                 left_load: tuple[int, ...] | None = None) -> bool:
            """Fill unit ``ui`` with some of the groups ``left``, then the units after it with the rest; ``spare``
            is the slack not lost yet; ``checked``: the subset-sum bound already holds; ``left_load``: the size
            vectors of ``left`` summed, when the unit before already summed them."""
            if not left:
                return not fluid or self._fluid_fit(fluid, chosen, found_fluid)
            if ui == len(units):
                return False
            gangs_left = {k[0] for k in left}
            memo = (ui, left, tuple(sorted((k, d) for k, d in fixed.items() if k[0] in gangs_left)))
            room = rooms.get(ui)
            if room is None:
                room = rooms[ui] = self._units_room(units[ui:])
            if (memo in failed or not self._may_fit(units[ui:], left, caps_from[ui], room, left_load)
                    or not (checked or sums(ui, left, spare))):
                failed.add(memo)
                return False
            u = units[ui]
            free = self._free(u)
            later = units[ui + 1:]
            # per choice of the unit's other groups, the counts of singles (per shape) it was filled with before
            # the units after it failed
            beaten: dict[tuple[tuple[LeafKey, int], ...], list[dict[tuple[object, ...], int]]] = {}
            # per pod size, the GPUs of the members' pods of at least that size against what the unit's nodes
            # offer in whole multiples of it (all usable nodes; untainted ones for groups kept off tainted nodes);
            # the same for the groups the unit leaves out (those it may not take, then those left out while it
            # is filled) against the units after it
            vec = self.size_load
            caps = self._unit_caps(u)
            caps_later = caps_from[ui + 1]
            cands: list[LeafKey] = []
            out_first = (0,) * len(caps)
            for k in left:
                if self._allowed(k, u):
                    cands.append(k)
                else:
                    out_first = tuple(map(operator.add, out_first, vec[k]))
            rest = [0] * (len(cands) + 1)
            for j in range(len(cands) - 1, -1, -1):
                rest[j] = rest[j + 1] + need[cands[j]]
            members: list[tuple[LeafKey, int]] = []
            left_set = frozenset(left)
            n_cands = len(cands)
            # the subset-sum bound, checked as each group is taken: what the unit takes only shrinks what the
            # units after it can be filled with, so a taking that leaves one of their domains a sum it cannot
            # make is refused before the rest of the unit is filled in every way it can be
            bound_takes = bool(later) and spare < SUMS_SLACK
            at = {k: j for j, k in enumerate(cands)}
            gang_leaves: dict[int, list[LeafKey]] = {}
            for k in left:
                gang_leaves.setdefault(k[0], []).append(k)
            # per groups taken (in order): the bound's answer; per gang and its groups taken, its clusters with
            # the last place in ``cands`` of their groups. Neither depends on where in the unit the groups taken
            # lie: a group fixed finer than the unit binds its cluster to it, and no unit after it may take that
            bounded: dict[tuple[LeafKey, ...], bool] = {}
            clustered: dict[tuple[int, tuple[LeafKey, ...]], list[tuple[Item, int]]] = {}

            def takes_fit(j: int, k: LeafKey) -> bool:
                """The bound once ``k`` (``cands[j]``) is taken with the members: the groups not taken go to the
                units after this one, but those not decided yet (``cands[j + 1:]``) may still go to this one."""
                order = (*(m for m, _ in members), k)
                known = bounded.get(order)
                if known is not None:
                    return known
                ul = layout(ui + 1)
                held: dict[int, tuple[LeafKey, ...]] = {}
                for q in order:
                    held[q[0]] = (*held.get(q[0], ()), q)
                items: dict[tuple[Item, bool], int] = {}
                for x, keys in gang_leaves.items():
                    mine = held.get(x, ())
                    got = clustered.get((x, mine))
                    if got is None:
                        got = clustered[(x, mine)] = [
                            (item, max(at.get(q, -1) for q in qs))
                            for item, qs in self._clusters(ul, [q for q in keys if q not in mine]) if item[3]]
                    for item, last in got:
                        key = (item, last > j)
                        items[key] = items.get(key, 0) + 1
                known = bounded[order] = not items or self._reach(ul, items, spare, u)
                return known
            # whether a later unit may take a group of so many GPUs confined to a domain: the units after this one
            # hold no group while it is filled, so their free GPUs stay the same
            reach: dict[tuple[int, int], bool] = {}

            def choose(j: int, used: int, taken: tuple[int, ...], out: tuple[int, ...]) -> bool:
                """Add groups from ``cands[j:]`` to the unit; a group left out goes to a later unit (``out``: the
                size vector of those left out so far)."""
                while True:
                    step()
                    if free - used - rest[j] > spare:
                        return False  # the unit would leave more GPUs unused than the slack allows
                    if j == n_cands:
                        return close(used, out)
                    k = cands[j]
                    n = need[k]
                    # the finest domain k's ancestors are fixed to: :meth:`_within`'s walk, written out here
                    # because it runs for every step
                    w = region
                    top = level[w]
                    for g in confining[k]:
                        there = fixed_get(g)
                        if there is not None and level[there] > top:
                            w = there
                            top = level[there]
                    if used + n <= free:
                        more = tuple(map(operator.add, taken, vec[k]))
                        for t, c in zip(more, caps):
                            if t > c:
                                break
                        else:
                            # a group of the same shape as the one just taken goes to a domain no earlier in path
                            # order: the two are interchangeable, so the swapped choice is the same arrangement
                            last = members[-1] if members else None
                            floor = rank[last[1]] if last and shape[last[0]] == shape[k] else -1
                            strict = strict_of[k]
                            for d in domains_in(k, u, w):
                                if rank[d] < floor:
                                    continue
                                # put k in d: fix the domains of its ancestor groups not fixed yet
                                path = anc[d]
                                at = level[d]
                                fixes = []
                                for g, r in bound[k]:
                                    if g not in fixed:
                                        fixed[g] = path[(r if r < at else at) + 1]
                                        fixes.append(g)
                                for a in path:
                                    load[a] = load_get(a, 0) + n
                                if strict:
                                    for a in path:
                                        strict_load[a] = strict_get(a, 0) + n
                                ok = not fixes or siblings_fit(fixes, u, left_set, members, k)
                                if ok and bound_takes:
                                    ok = takes_fit(j, k)
                                if ok:
                                    members.append((k, d))
                                    ok = choose(j + 1, used + n, more, out)
                                    members.pop()
                                for a in path:
                                    load[a] -= n
                                if strict:
                                    for a in path:
                                        strict_load[a] -= n
                                for g in fixes:
                                    del fixed[g]
                                if ok:
                                    return True
                    # no later unit may take k (k's confining domain worked out once, not per unit)
                    may = reach.get((w, n))
                    if may is None:
                        may = reach[(w, n)] = any(self._free(v) >= n and self._nests(w, v) for v in later)
                    if not may:
                        return False
                    # leave out k and every group of its shape after it: taking the first few is enough; the
                    # groups left out must fit, size by size, the whole pods the units after this one can take
                    out = tuple(map(operator.add, out, vec[k]))
                    j += 1
                    while j < n_cands and shape[cands[j]] == shape[k]:
                        out = tuple(map(operator.add, out, vec[cands[j]]))
                        j += 1
                    for t, c in zip(out, caps_later):
                        if t > c:
                            return False

            def close(used: int, out: tuple[int, ...]) -> bool:
                if 0 < free - used < no_hole <= free:
                    return False
                counts: dict[tuple[object, ...], int] = {}
                for k, _ in members:
                    if k in singles:
                        counts[shape[k]] = counts.get(shape[k], 0) + 1
                others = tuple(sorted(m for m in members if m[0] not in singles)) if counts else ()
                if counts and any(all(n <= r.get(s, 0) for s, n in counts.items()) for r in beaten.get(others, ())):
                    return False  # no more singles than a filling that failed further on: fails as it did
                taken = {k for k, _ in members}
                rest_left = tuple([k for k in left if k not in taken])
                # in a tight region the units after this one are bounded by subset sums before its node search,
                # the costliest step
                checked = bool(rest_left and later) and spare - (free - used) < SUMS_SLACK
                if checked and not sums(ui + 1, rest_left, spare - (free - used)):
                    if counts:
                        beaten.setdefault(others, []).append(counts)
                    return False
                if self._unit_fit(u, members) is None:
                    return False
                chosen.append((u, list(members)))
                if fluid and rest_left and not self._fluid_fit(fluid, chosen, [], rest_left, later):
                    chosen.pop()
                    return False
                if fill(ui + 1, rest_left, spare - (free - used), checked, out):
                    return True
                chosen.pop()
                if counts:
                    beaten.setdefault(others, []).append(counts)
                return False

            try:
                if choose(0, 0, (0,) * len(caps), out_first):
                    return True
            finally:
                choose = close = search_over
            failed.add(memo)
            return False

        try:
            if not fill(0, order, slack):
                return False
        finally:
            fill = search_over
        for u, m in chosen:
            self.members[u] = m
        if found_fluid:
            self.members[FLUID] = found_fluid
        return True

    def _units(self) -> list[int]:
        """The region's units with free GPUs, fewest free first (most free first where asked): the order
        :meth:`_fill_units` starts from."""
        tree = self.tree
        if self.unit_level > self.rlvl:
            units = [tree.dom_of(k) for k in tree.index.get((self.region, self.unit_level), [])]
        else:
            units = [self.region]
        return sorted((u for u in units if self._free(u) > 0), key=lambda u: (self._free(u), tree.rank[u]),
                      reverse=self.most_free_first)

    def _only_units(self, units: list[int], leaves: list[LeafKey]) -> set[int]:
        """The units that are the only ones with room for some group bound finer than the region, by its GPUs
        against the free GPUs of the domain of its level that holds the unit (the unit itself for a group bound
        to the units' level or finer). Worked out as a domain's search starts, when no group is fixed yet."""
        anc = self.tree.dom_anc
        groups: dict[LeafKey, list[int]] = {}
        for k in leaves:
            for g, r in ((k, self.level[k]), *self._bound_above(k)):
                if r > self.rlvl:
                    groups.setdefault(g, [min(r, self.unit_level), 0])[1] += self.need[k]
        only: set[int] = set()
        for lvl, n in groups.values():
            fits = [u for u in units if self._free(anc[u][lvl + 1]) >= n]
            if len(fits) == 1:
                only.add(fits[0])
        return only

    def _fluid_keys(self, leaves: list[LeafKey]) -> list[LeafKey]:
        """The leaf groups :attr:`fluid` leaves out of the units: one pod of one GPU, made by :meth:`_pods_apart`,
        whose ancestors bound finer than the region are also another leaf's (so the other leaf's place fixes
        them). A one-GPU pod fits any free GPU of the nodes it may use, so where the others leave room matters
        only through those nodes: a flow decides it."""
        cands = [k for k in leaves if k in self.apart and self.need[k] == 1]
        if not cands:
            return []
        taken = set(cands)
        held: dict[int, set[int]] = {}
        for k in leaves:
            if k not in taken:
                held.setdefault(k[0], set()).update(self._chain(k))
        out = []
        for k in cands:
            chain = self._chain(k)
            own = held.get(k[0], set())
            req = [self.req[(k[0], gi)] for gi in chain]
            # an ancestor no coarser than a held one above it lies in the same domain as that one
            if all(r <= self.rlvl or chain[i] in own
                   or any(chain[a] in own and req[a] >= r for a in range(i + 1, len(chain)))
                   for i, r in enumerate(req) if i):
                out.append(k)
        return out

    def _fluid_fit(self, fluid: list[list[LeafKey]], chosen: list[tuple[int, list[tuple[LeafKey, int]]]],
                   found: list[tuple[LeafKey, int]], left: Sequence[LeafKey] = (), units: Sequence[int] = ()
                   ) -> bool:
        """Give the ``fluid`` groups' pods (in lists of groups of one parent that tolerate the same taints) nodes
        where the units ``chosen`` leave GPUs free; the pairs go to ``found``. With groups ``left`` for the
        ``units`` not filled yet, only whether the fluid pods and those groups' GPUs (as one-GPU pods, in those
        units) may fit: necessary, not sufficient."""
        tree = self.tree
        used: dict[int, int] = {}
        for u, members in chosen:
            fitted = self.unit_memo[(u, tuple(sorted(members)))]
            assert fitted is not None
            for key, nodes in fitted.items():
                gang = self.gangs[key[0]]
                for p, n in zip(gang.groups[key[1]].pods, nodes, strict=True):
                    used[n] = used.get(n, 0) + gang.pod_gpus[p]
        nodes = [n for n in self._nodes_below(self.region) if tree.node_clean[n] or n in self.usable]
        pos = {n: i for i, n in enumerate(nodes)}
        free = [tree.node_free[n] - used.get(n, 0) for n in nodes]
        inside = {n for u in units for n in self._nodes_below(u)}
        # the nodes a group's pods may use depend only on where its ancestors are and on the taints it tolerates
        cache: dict[tuple[int, frozenset[int], bool], tuple[int, ...]] = {}

        def allowed(k: LeafKey, within: int, later: bool) -> tuple[int, ...]:
            tol = self.gangs[k[0]].groups[k[1]].tol
            got = cache.get((within, tol, later))
            if got is None:
                got = cache[(within, tol, later)] = tuple(
                    pos[n] for n in self._nodes_below(within) if n in pos and free[pos[n]] > 0
                    and (tree.node_clean[n] or n in tol) and (not later or n in inside))
            return got

        sets: dict[tuple[int, ...], list[LeafKey]] = {}
        for ks in fluid:
            # a fluid group is never fixed itself, so its place is its parent's
            sets.setdefault(allowed(ks[0], self._within(ks[0]), False), []).extend(ks)
        if left:
            asked: dict[tuple[int, ...], int] = {}
            for k in left:
                a = allowed(k, self._within(k), True)
                asked[a] = asked.get(a, 0) + self.need[k]
            return _flow([*((a, len(ks)) for a, ks in sets.items()), *asked.items()], 1, free) is not None
        want = sorted(sets.items())
        flow = _flow([(a, len(ks)) for a, ks in want], 1, free)
        if flow is None:
            return False
        found.clear()
        for (_, ks), got in zip(want, flow, strict=True):
            it = iter(ks)
            for j, n in sorted(got.items()):
                found.extend((next(it), nodes[j]) for _ in range(n))
        return True

    def _nodes_below(self, d: int) -> list[int]:
        got = self.nodes_memo.get(d)
        if got is None:
            got = self.nodes_memo[d] = self.tree.nodes_below(d)
        return got

    def _siblings_fit(self, fixes: list[LeafKey], u: int, left: frozenset[LeafKey],
                      members: list[tuple[LeafKey, int]], key: LeafKey) -> bool:
        """Necessary, once ``key`` has fixed groups to domains inside unit ``u``: the leaf groups left under each
        of them fit that domain's free GPUs (untainted ones for groups kept off tainted nodes)."""
        tree = self.tree
        anc = tree.dom_anc
        fixed = self.fixed
        need = self.need
        taken: set[LeafKey] | None = None
        for group in fixes:
            below = self._below(group)
            d = fixed[group]
            if not below or u not in anc[d]:
                continue
            if taken is None:
                taken = {m for m, _ in members}
                taken.add(key)
            asked = 0
            strict_asked = 0
            for c in below:
                if c in left and c not in taken:
                    asked += need[c]
                    if self.strict_memo[c]:
                        strict_asked += need[c]
            if asked > self._free(d):
                return False
            if self.usable and strict_asked > self._clean_free(d):
                return False
        return True

    def _below(self, group: LeafKey) -> tuple[LeafKey, ...]:
        """The leaf groups strictly below ``group`` (a gang index and a group index)."""
        got = self.below_memo.get(group)
        if got is None:
            gang, gi = group
            got = self.below_memo[group] = tuple(k for k in self.leaves if k[0] == gang and gi in self._chain(k)[1:])
        return got

    def _leaf_shape(self, key: LeafKey) -> tuple[object, ...]:
        """Sort key of a leaf group, largest first; groups of equal shape (the same pods, level and tolerated
        tainted nodes) are interchangeable. When an ancestor group must lie in one domain finer than the region,
        only its other children of that shape are (the gang and parent end the shape; () ends the others', which
        sorts first and compares with them)."""
        chain = self._chain(key)
        coupled = any(self.req[(key[0], gi)] > self.rlvl for gi in chain[1:])
        tol = tuple(sorted(self.gangs[key[0]].groups[key[1]].tol)) if self.usable else ()
        return (-self.need[key], -self.level[key], self.own_sizes[key], tol, (key[0], chain[1]) if coupled else ())

    def _units_room(self, units: list[int]) -> tuple[int, dict[int, int], dict[int, int], dict[tuple[int, bool], int]]:
        """What :meth:`_may_fit` bounds with, of the units still to fill: the most free GPUs of one, per domain
        that holds some their free GPUs (and untainted ones) in all, and per level (and strictness) the most of
        one domain. Their free GPUs do not change while the units before them are filled."""
        level = self.tree.dom_level
        anc = self.tree.dom_anc
        rem: dict[int, int] = {}
        rem_strict: dict[int, int] = {}
        most = 0
        for u in units:
            f = self._free(u)
            most = max(most, f)
            g = self._clean_free(u) if self.usable else f
            for d in anc[u]:
                rem[d] = rem.get(d, 0) + f
                rem_strict[d] = rem_strict.get(d, 0) + g
        most_at: dict[tuple[int, bool], int] = {}
        for d, f in rem.items():
            for strict, got in ((False, f), (True, rem_strict[d])):
                if got > most_at.get((level[d], strict), 0):
                    most_at[(level[d], strict)] = got
        return most, rem, rem_strict, most_at

    def _may_fit(self, units: list[int], left: tuple[LeafKey, ...], caps: Sequence[int],
                 room: tuple[int, dict[int, int], dict[int, int], dict[tuple[int, bool], int]],
                 left_load: Sequence[int] | None = None) -> bool:
        """Necessary: every group fits some unit, and for each pod size s the groups' pods of at least s GPUs fit
        the whole multiples of s that the units' nodes offer (and those of the groups that may use no tainted
        node, the multiples their untainted nodes offer); the same for the groups of every coarser group.
        ``caps``: :meth:`_unit_caps` summed over ``units``; ``room``: :meth:`_units_room` of them;
        ``left_load``: the groups' size vectors summed, if known."""
        most, rem, rem_strict, most_at = room
        need = self.need
        if any(need[k] > most for k in left):
            return False
        # the load and capacity vectors a unit's filling is checked with: all usable nodes, then (where some
        # group may use tainted nodes and others not) the untainted ones
        size_load = self.size_load
        width = len(self.sizes) * (2 if self.usable else 1)
        if left_load is None:
            left_load = tuple(map(sum, zip(*(size_load[k] for k in left))))
        if any(t > c for t, c in zip(left_load, caps[:width])):
            return False
        # the same for every group bound to a domain coarser than a leaf's: the leaves left of one that an earlier
        # choice fixed to a domain (a gang bound to the rack its first subgroup went to) must fit that domain's
        # units still to fill, and those of one not fixed yet must fit some domain of its level; groups that may
        # use no tainted node (when others may) count only untainted GPUs
        anc = self.tree.dom_anc
        level = self.tree.dom_level
        strict_of = self.strict_memo
        fixed = self.fixed
        unit_level = self.unit_level
        most_strict = most_at.get((unit_level, True), 0)
        fixed_in: dict[int, set[LeafKey]] = {}
        loose: dict[LeafKey, tuple[int, bool]] = {}
        for k in left:
            strict = strict_of[k]
            # (every group against the most free GPUs of a unit is tested above)
            if strict and need[k] > most_strict:
                return False
            for grp, r in self._bound_above(k):
                dom = fixed.get(grp)
                if dom is None:
                    n, all_strict = loose.get(grp, (0, True))
                    n, all_strict = n + need[k], all_strict and strict
                    loose[grp] = n, all_strict
                    if n > most_at.get((min(r, unit_level), all_strict), 0):
                        return False
                elif level[dom] <= unit_level:
                    fixed_in.setdefault(dom, set()).add(k)
        for d, keys in fixed_in.items():
            if sum(self.need[k] for k in keys) > rem.get(d, 0):
                return False
            if self.usable and sum(self.need[k] for k in keys if self._strict(k)) > rem_strict.get(d, 0):
                return False
            inside = [u for u in units if d in anc[u]]
            for i, s in enumerate(self.sizes):
                if sum(self.ge[k][i] for k in keys) > sum(self._caps(u)[s] for u in inside):
                    return False
        return True

    def _units_left(self, units: list[int]) -> UnitsLeft:
        """What :meth:`_sums_fit` needs of the units still to fill; their free GPUs do not change while the units
        before them are filled."""
        anc = self.tree.dom_anc
        level = self.tree.dom_level
        free = [self._free(u) for u in units]
        rem: dict[int, int] = {}
        held: dict[int, int] = {}
        for i, u in enumerate(units):
            for d in anc[u]:
                if self.rlvl < level[d] <= self.unit_level:
                    rem[d] = rem.get(d, 0) + free[i]
                    held[d] = held.get(d, 0) | 1 << i
        # of domains that hold the same units only the coarsest: what lies in a finer one whole lies whole in it
        coarsest: dict[int, int] = {}
        for d in sorted(held, key=lambda d: level[d], reverse=True):
            coarsest[held[d]] = d
        keep = set(coarsest.values())
        return UnitsLeft(units, free, {d: f for d, f in rem.items() if d in keep}, held)

    def _sums_fit(self, units_left: UnitsLeft, left: tuple[LeafKey, ...], spare: int) -> bool:
        """Necessary: every domain finer than the region that holds units still to fill can be filled, to within
        ``spare`` free GPUs, by sums of what may still go there.

        The groups left come as clusters that lie in one domain each (:meth:`_clusters`). A cluster bound no
        coarser than the domain lies in it whole or not at all; a coarser one may split, one leaf group at a
        time; either must go there when every unit it may use lies there. The size bounds hold where the last
        rack of a zone must take the zone-bound groups left and make up the rest in 4-GPU pods, a sum they cannot
        make: the search then filled the racks before it in thousands of ways, each found wanting one unit later.
        A zone with no GPU to spare that ran out of 300,000 steps so is proven full in 9,034."""
        items: dict[tuple[Item, bool], int] = {}
        for item, _ in self._clusters(units_left, left):
            items[(item, False)] = items.get((item, False), 0) + 1
        return self._reach(units_left, items, spare)

    def _clusters(self, units_left: UnitsLeft, left: Sequence[LeafKey]) -> list[tuple[Item, list[LeafKey]]]:
        """The groups ``left`` as clusters that lie in one domain each, with their leaf groups: under the outermost
        group not yet fixed that is bound finer than where its ancestors are fixed (a zone-bound gang's subgroups,
        say), or alone."""
        level = self.tree.dom_level
        units = units_left.units
        found: dict[tuple[int, int, int], list[LeafKey]] = {}
        above: dict[LeafKey, tuple[int, int]] = {}  # per parent group, where its chain confines and binds a leaf
        req, fixed, gangs, need = self.req, self.fixed, self.gangs, self.need
        for k in left:
            x, gi = k
            parent = gangs[x].groups[gi].parent
            got = above.get((x, parent))
            if got is None:
                w = self._within(k)  # a leaf left is not fixed: its ancestors' domains decide
                top = -1
                for a in self._chain(k)[1:]:
                    if req[(x, a)] > level[w] and (x, a) not in fixed:
                        top = a
                got = above[(x, parent)] = (w, top)
            w, top = got
            if top < 0 and req[k] > level[w]:
                top = gi
            found.setdefault((x, top, w) if top >= 0 else (x, -2 - gi, w), []).append(k)
        may = units_left.may
        out: list[tuple[Item, list[LeafKey]]] = []
        for (x, top, w), keys in found.items():
            if w not in may:
                may[w] = sum(1 << i for i, u in enumerate(units) if self._nests(w, u))
            needs = [need[k] for k in keys]
            counts = ((needs[0], 1),) if len(needs) == 1 else size_counts(needs)
            out.append(((req[(x, top)] if top >= 0 else self.unit_level, sum(needs), counts, may[w]), keys))
        return out

    def _reach(self, units_left: UnitsLeft, items: Mapping[tuple[Item, bool], int], spare: int,
               unit: int = -1) -> bool:
        """Whether every domain of ``units_left`` can be filled to within ``spare`` free GPUs by the clusters
        ``items`` (each with whether it may still go to ``unit``, the unit being filled, instead: then it
        need not go anywhere, and in a domain that holds ``unit`` any of its leaf groups may be left out)."""
        level = self.tree.dom_level
        ul = self.unit_level
        free, rem, held, most = units_left.free, units_left.rem, units_left.held, units_left.most
        around = self.tree.dom_anc[unit] if unit >= 0 else ()
        for d, cap in rem.items():
            mine = held[d]
            sums = 1  # bit s: some choice puts s GPUs in d
            mask = (1 << (cap + 1)) - 1
            split_here = d in around
            for ((lvl, total, gpus, allowed), loose), alike in items.items():
                inside = allowed & mine
                if not inside:
                    continue
                forced = not loose and not allowed & ~mine
                if lvl >= level[d] and not (loose and split_here):
                    room = cap
                    if lvl >= ul:
                        room = most.get(inside, -1)
                        if room < 0:
                            room = most[inside] = max(f for i, f in enumerate(free) if inside >> i & 1)
                    if total > room:
                        if forced:
                            return False
                        continue
                    if forced:
                        sums <<= total * alike
                    else:
                        sums = sums | sums << total if alike == 1 else _up_to(sums, total, alike)
                elif forced:
                    sums <<= total * alike
                else:
                    for n, count in gpus:
                        count *= alike
                        sums = sums | sums << n if count == 1 else _up_to(sums, n, count)
                sums &= mask
                if not sums:
                    return False
            if not sums >> max(0, cap - spare):
                return False
        return True

    def _allowed(self, key: LeafKey, u: int) -> bool:
        """Whether the group may lie in unit ``u``, given where its ancestor groups are fixed."""
        return self._nests(self._within(key), u)

    def _nests(self, w: int, u: int) -> bool:
        """Whether domains ``w`` and ``u`` nest (one holds the other): a group confined to ``w`` may lie in unit
        ``u`` only then."""
        anc = self.tree.dom_anc
        return w in anc[u] or u in anc[w]

    def _domains_in(self, key: LeafKey, u: int, w: int | None = None) -> list[int]:
        """The domains of the group's level in unit ``u`` with room for it, best fit first; of empty siblings
        of the same shape only the first. ``w``: :meth:`_within` of the group, if known.

        Domains are sorted by one number, ``(free GPUs left after the group) * stride + rank``: the index keys'
        order (:meth:`Tree.key`), which a tuple key would give too, at a fraction of the cost."""
        tree = self.tree
        need = self.need[key]
        strict = self.strict_memo[key]
        dom_free = tree.dom_free
        strict_get = self.strict_load.get
        if strict and self._clean_free(u) < need:
            return []
        extra_get = self.extra.get
        load_get = self.load.get
        level = tree.dom_level
        if w is None:
            w = self._within(key)
        base = w if level[w] > level[u] else u
        lvl = self.level[key]
        if lvl <= level[base]:
            if self._free(base) >= need and (not strict or self._clean_free(base) >= need):
                return [base]
            return []
        doms = self.doms_memo.get((base, lvl))
        if doms is None:
            doms = self.doms_memo[(base, lvl)] = [tree.dom_of(x) for x in tree.index.get((base, lvl), [])]
        rank = tree.rank
        stride = tree.stride
        fits = []
        for d in doms:
            left = dom_free[d] + extra_get(d, 0) - load_get(d, 0) - need
            if left >= 0 and (not strict or dom_free[d] - strict_get(d, 0) >= need):
                fits.append(left * stride + rank[d])
        fits.sort()
        by_rank = tree.dom_rank
        out = []
        seen: set[tuple[object, ...]] = set()
        for x in fits:
            d = by_rank[x % stride]
            if not load_get(d):
                sig = self.sig_memo.get(d)
                if sig is None:
                    sig = self.sig_memo[d] = (tree.dom_parent[d], self._shape(d))
                if sig in seen:
                    continue
                seen.add(sig)
            out.append(d)
        return out

    def _bound_at(self, key: LeafKey) -> tuple[tuple[LeafKey, int], ...]:
        """The leaf group and its ancestors bound to a level no coarser than the region's, with their levels,
        leaf first: the groups a placement of the leaf fixes."""
        got = self.bound_at_memo.get((key, self.rlvl))
        if got is None:
            got = self.bound_at_memo[(key, self.rlvl)] = tuple(
                ((key[0], gi), r) for gi in self._chain(key) if (r := self.req[(key[0], gi)]) >= 0 and r >= self.rlvl)
        return got

    def _strict(self, key: LeafKey) -> bool:
        """Whether the group may use no tainted node while another group of the search may."""
        got = self.strict_memo.get(key)
        if got is None:
            got = self.strict_memo[key] = bool(self.usable) and not self.gangs[key[0]].groups[key[1]].tol
        return got

    def _was(self, gang: int, lvl: int) -> int:
        """The level-``lvl`` domain of the gang's first pod before the search, or -1.

        The neighbourhood held an arrangement of every moved gang a moment ago, so one close to it is the likely
        answer."""
        pods = self.before.get(self.whole_of.get(gang, gang))
        held = [p for g in self.gangs[gang].groups for p in g.pods if pods and p in pods]
        if not pods or not held:
            return -1
        level = self.tree.dom_level
        return next((d for d in self.tree.node_path[pods[min(held)]] if level[d] == lvl), -1)

    def _node_kind(self, n: int) -> int | tuple[int, tuple[str, ...]]:
        """What tells a node from another of the same finest domain for the search: its free GPUs when no group
        may use a tainted node, else also the taints of one some group may use (0 free: a node of no use)."""
        tree = self.tree
        if not self.usable:
            return tree.node_free[n] if tree.node_clean[n] else 0
        if tree.node_clean[n]:
            return (tree.node_free[n], ())
        if n in self.usable:
            return (tree.node_free[n], self._taints(n))
        return (0, ())

    def _taints(self, n: int) -> tuple[str, ...]:
        """A node's taints as text: nodes with the same free GPUs and taints are interchangeable."""
        tree = self.tree
        return () if tree.node_clean[n] else tuple(map(str, tree.node_taints[n]))

    def _shape(self, d: int) -> tuple[object, ...]:
        """What makes two empty sibling domains interchangeable: free GPUs per node, per sub-domain."""
        got = self.shape_memo.get(d)
        if got is None:
            tree = self.tree
            children = tree.dom_children[d]
            if children:
                got = tuple(sorted((self._shape(c) for c in children), key=repr))
            else:
                got = tuple(sorted(self._node_kind(n) for n in tree.dom_nodes[d]))
            self.shape_memo[d] = got
        return got

    # ---- the inner search: pods of one unit onto its nodes -------------------------------------------------------
    def _unit_nodes(self, unit: int) -> tuple[list[int], dict[int, int], tuple[int, ...], list[int],
                                              list[tuple[str, ...]], list[bool]]:
        """The unit's nodes a pod of the search may use, their positions, free GPUs, finest domains, taints and
        whether they are untainted: the same for every node search of the unit."""
        tree = self.tree
        nodes = [n for n in self._nodes_below(unit) if (tree.node_clean[n] or n in self.usable) and tree.node_free[n]]
        pos = {n: i for i, n in enumerate(nodes)}
        free = tuple(tree.node_free[n] for n in nodes)
        cls = [tree.node_path[n][0] for n in nodes]
        taints = [self._taints(n) for n in nodes]
        clean = [tree.node_clean[n] for n in nodes]
        return nodes, pos, free, cls, taints, clean

    def _unit_fit(self, unit: int, members: list[tuple[LeafKey, int]]) -> dict[LeafKey, list[int]] | None:
        memo_key = (unit, tuple(sorted(members)))
        if memo_key in self.unit_memo:
            return self.unit_memo[memo_key]
        tree = self.tree
        at = self.unit_nodes_memo.get(unit)
        if at is None:
            at = self.unit_nodes_memo[unit] = self._unit_nodes(unit)
        nodes, pos, start, cls, taints, clean = at
        free = list(start)
        # one entry per pod: (GPUs, allowed node positions, the leaf it belongs to)
        pods: list[tuple[int, int, tuple[int, ...], LeafKey]] = []
        # per node, the GCD of the sizes of the pods that may go there: it can use only multiples of that
        step = [0] * len(nodes)
        for key, d in sorted(members):
            gpus = self.gangs[key[0]].pod_gpus
            group = self.gangs[key[0]].groups[key[1]]
            allowed = self.allowed_memo.get((unit, d, group.tol))
            if allowed is None:
                allowed = self.allowed_memo[(unit, d, group.tol)] = tuple(
                    pos[n] for n in self._nodes_below(d) if n in pos and (tree.node_clean[n] or n in group.tol))
            unit_of = math.gcd(*(size for size, _ in self.own_sizes[key]))
            for j in allowed:
                step[j] = math.gcd(step[j], unit_of)
            for p in group.pods:
                pods.append((gpus[p], len(allowed), allowed, key))
        pods.sort(key=lambda p: (-p[0], p[1], p[3]))
        placed: list[int] = [0] * len(pods)
        dead: set[tuple[int, int, tuple[int, ...]]] = set()
        # the counts of the pods left, kept only once a state has failed: most units fit at the first try
        pods_left: list[_PodsLeft | None] = [None]
        n_pods = len(pods)
        count_step = self._step
        # nodes are tried in the order of one number per node: (free GPUs, position), and in a fluid search
        # untainted nodes after tainted ones (see ``place``)
        width = len(nodes)
        dirty = 0
        if self.fluid:
            dirty = (max(free, default=0) + 1) * width

        def place(i: int) -> bool:
            if i == n_pods:
                return True
            size, _, allowed, key = pods[i]
            low = placed[i - 1] if i and pods[i - 1][3] == key and pods[i - 1][0] == size else -1
            state = (i, low, tuple(free))
            if state in dead:
                return False
            left = pods_left[0]
            if left and not left.fit(i, low, free):
                dead.add(state)
                return False
            tried: set[tuple[int, int, tuple[str, ...]]] = set()
            # tightest node first: pack-to-empty inside the unit (in a fluid search tainted nodes first, so that
            # untainted GPUs are left to the pods given nodes after the units)
            order = [free[j] * width + j + (dirty if clean[j] else 0) for j in allowed if j >= low and free[j] >= size]
            order.sort()
            for x in order:
                j = x % width
                sig = (cls[j], free[j], taints[j])
                if sig in tried:
                    continue
                tried.add(sig)
                count_step()
                free[j] -= size
                placed[i] = j
                if left := pods_left[0]:
                    left.take(i)
                if place(i + 1):
                    return True
                # counted as placed also when the counts began deeper down
                if left := pods_left[0]:
                    left.put_back(i)
                free[j] += size
            dead.add(state)
            if not pods_left[0] and len(dead) >= NODE_DEAD_ENDS:
                # a search that backs up this often is a hard one: from here on it also prunes by what the pods
                # left ask (counting them costs more than most units' whole search)
                pods_left[0] = _PodsLeft(pods, self.sizes, i)
            return False

        out: dict[LeafKey, list[int]] | None = None
        usable = sum(f - f % k for f, k in zip(free, step, strict=True) if k)
        try:
            fits = sum(p[0] for p in pods) <= usable and place(0)
        finally:
            place = search_over
        if fits:
            got: dict[LeafKey, list[tuple[int, int]]] = {}
            for (size, _, _, key), j in zip(pods, placed, strict=True):
                got.setdefault(key, []).append((-size, nodes[j]))
            out = {}
            for key, pairs in got.items():
                # the group's pods are largest first, as the compiled gang lists them
                pairs.sort()
                out[key] = [n for _, n in pairs]
        self.unit_memo[memo_key] = out
        return out


def _flows(want: Sequence[tuple[tuple[int, ...], int]], size: int, free: Sequence[int]) -> bool:
    """Whether pods of ``size`` GPUs, ``want`` of them per set of nodes they may use, fit the nodes' free GPUs:
    a maximum flow from the sets to the nodes, exact where the search's bounds are not."""
    return _flow(want, size, free) is not None


def _flow(want: Sequence[tuple[tuple[int, ...], int]], size: int, free: Sequence[int]
          ) -> list[dict[int, int]] | None:
    """The pods of each entry of ``want`` per node (see :func:`_flows`), or None. Filling the smallest sets first
    settles most cases; augmenting paths decide the rest."""
    cap = [f // size for f in free]
    total = sum(n for _, n in want)
    if total > sum(cap):
        return None
    order = sorted(range(len(want)), key=lambda a: (len(want[a][0]), want[a][0]))
    sets = [want[a] for a in order]
    # flow[a][j]: pods of set a on node j
    flow: list[dict[int, int]] = [{} for _ in sets]
    short = [0] * len(sets)
    for a, (nodes, n) in enumerate(sets):
        for j in nodes:
            if not n:
                break
            take = min(n, cap[j])
            if take:
                cap[j] -= take
                n -= take
                flow[a][j] = take
        short[a] = n
    while any(short):
        # a path from a set with pods left, through nodes and the sets using them, to a node with room
        prev: dict[tuple[bool, int], tuple[bool, int] | None] = {(False, a): None for a, n in enumerate(short) if n}
        queue = list(prev)
        end = None
        q = 0
        while q < len(queue) and end is None:
            is_node, x = queue[q]
            q += 1
            if not is_node:
                for j in sets[x][0]:
                    if (True, j) not in prev:
                        prev[(True, j)] = (False, x)
                        if cap[j]:
                            end = (True, j)
                            break
                        queue.append((True, j))
            else:
                for a in range(len(sets)):
                    if (False, a) not in prev and flow[a].get(x):
                        prev[(False, a)] = (True, x)
                        queue.append((False, a))
        if end is None:
            return None
        cap[end[1]] -= 1
        step: tuple[bool, int] | None = end
        while step is not None:
            back = prev[step]
            if back is None:
                short[step[1]] -= 1
            elif step[0]:
                flow[back[1]][step[1]] = flow[back[1]].get(step[1], 0) + 1
            else:
                flow[step[1]][back[1]] -= 1
            step = back
    out: list[dict[int, int]] = [{} for _ in want]
    for a, got in zip(order, flow, strict=True):
        out[a] = {j: n for j, n in got.items() if n}
    return out


class _PodsLeft:
    """What the pods not placed yet ask of each set of nodes some of them may use (a clique, the untainted nodes
    of a rack), size by size; kept up to date as the node search places and takes back pods.

    :meth:`fit` is Hall's condition for those sets: the pods allowed only on nodes of a set fit them, pods of at
    least s GPUs in whole multiples of s per node. Without it a unit with many one-GPU pods and a few nodes
    closed to some of them spends its whole budget proving what a sum shows. Once the pods left are all of one
    size, a maximum flow decides exactly (:func:`_flows`)."""

    def __init__(self, pods: Sequence[tuple[int, int, tuple[int, ...], LeafKey]], sizes: Sequence[int],
                 placed: int):
        """The counts with the first ``placed`` pods placed (``pods`` largest first)."""
        self.sets = sorted({p[2] for p in pods})
        where = {a: i for i, a in enumerate(self.sets)}
        nodes = [frozenset(a) for a in self.sets]
        self.subs = [[b for b, other in enumerate(nodes) if other <= a] for a in nodes]
        self.sizes = [s for s in sizes if s <= pods[0][0]] or [1]
        counted = {size: [k for k, s in enumerate(self.sizes) if size >= s] for size in {p[0] for p in pods}}
        # per pod: its set, its GPUs and the sizes it counts for
        self.pods = [(where[allowed], size, counted[size]) for size, _, allowed, _ in pods]
        self.want = [[0] * len(self.sizes) for _ in self.sets]
        for i in range(placed, len(pods)):
            self.put_back(i)
        # from pod ``even`` on all pods have one size; per pod from there, the pods of each set left from it on
        # and how many of its own group follow it (a group's pods are next to each other)
        self.even = len(pods)
        while self.even > 0 and pods[self.even - 1][0] == pods[-1][0]:
            self.even -= 1
        self.group = [p[3] for p in pods]
        self.allowed = [p[2] for p in pods]
        self.size = pods[-1][0]
        self.tail_sets = sorted(set(self.allowed[self.even:]))
        at = {a: k for k, a in enumerate(self.tail_sets)}
        self.tail_left = [[0] * len(self.tail_sets) for _ in range(len(pods) + 1)]
        self.run = [0] * (len(pods) + 1)
        for i in range(len(pods) - 1, self.even - 1, -1):
            self.tail_left[i] = list(self.tail_left[i + 1])
            self.tail_left[i][at[self.allowed[i]]] += 1
            self.run[i] = self.run[i + 1] + 1 if i + 1 < len(pods) and self.group[i + 1] == self.group[i] else 1

    def take(self, i: int) -> None:
        a, size, ks = self.pods[i]
        for k in ks:
            self.want[a][k] -= size

    def put_back(self, i: int) -> None:
        a, size, ks = self.pods[i]
        for k in ks:
            self.want[a][k] += size

    def fit(self, i: int, low: int, free: Sequence[int]) -> bool:
        """Whether the pods from ``i`` on may fit; pods of pod ``i - 1``'s group go to nodes from ``low`` on (the
        search puts them in node order)."""
        want = self.want
        sizes = list(enumerate(self.sizes))
        for nodes, subs in zip(self.sets, self.subs):
            for k, s in sizes:
                asked = 0
                for b in subs:
                    asked += want[b][k]
                if asked and asked > sum([free[j] // s * s for j in nodes]):
                    return False
        return i < self.even or _flows(self._tail(i, low), self.size, free)

    def _tail(self, i: int, low: int) -> list[tuple[tuple[int, ...], int]]:
        """The pods from ``i`` on (all of one size) per set of nodes they may use."""
        row = self.tail_left[i]
        if low < 0:
            return [(a, n) for a, n in zip(self.tail_sets, row, strict=True) if n]
        own = self.allowed[i]
        out = [(a, n - self.run[i] if a == own else n) for a, n in zip(self.tail_sets, row, strict=True)]
        out.append((tuple(j for j in own if j >= low), self.run[i]))
        return [(a, n) for a, n in out if n]
