"""An exact re-packing of a small neighbourhood: every gang of one region plus the gang that did not fit.

The bounded repair search is greedy where it puts pods onto nodes, so on small, tight pools it can miss an
arrangement that exists (a rack-bound subgroup spread over the cliques a later clique-bound one needed). When
the region is small, this search decides it exactly, up to a fixed step budget:

* an outer depth-first search gives each leaf group a domain of its required level, largest groups first and
  best fit first; the domains of its ancestor groups follow from the first leaf placed;
* the pods of the groups that land in one *unit* (a domain of the coarsest level any leaf group is bound to)
  are fitted onto the unit's nodes by an inner depth-first search over pods, largest first, that remembers the
  states it has proven infeasible. Units share no node, so a unit's answer depends only on the groups in it
  and is remembered too;
* symmetric choices are tried once: sibling domains that are still empty and have the same shape (the same
  free GPUs per node in the same sub-domains), nodes of one finest domain with the same free GPUs, and pods of
  one group (taken in node order);
* a moved gang tries the domains it was in first (the region held an arrangement of every moved gang a moment
  ago, so the answer is usually close to it), and after each choice the groups still to place must fit, level
  by level, the free GPUs of the domains with room for the smallest of them;
* ``shuffle`` > 0 gives a restart: domains in a fixed pseudo-random order (from their paths), fewest domains
  still first, for when the first order leads the search into a large subtree without an answer.

Steps (candidate domains and node choices tried) are counted, never seconds, so the outcome is the same on
every machine; a search that runs out of steps simply reports no arrangement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toporender.placement.compiled import CompiledGang
from toporender.placement.tree import Tree

EXACT_MAX_NODES = 128
"""Regions with more schedulable nodes than this are not searched exactly."""
EXACT_MAX_PODS = 256
"""Neighbourhoods with more pods than this are not searched exactly."""

LeafKey = tuple[int, int]
"""(gang index, group index) of a leaf group."""
UnitKey = tuple[int, tuple[tuple[LeafKey, int], ...]]
"""A unit and the leaf groups in it with their domains (sorted): the key of a unit's remembered answer."""


class OutOfSteps(Exception):
    """The step budget ran out."""


class ExactRepack:
    """One exact search over ``gangs`` inside ``region``, on the tree's current free GPUs."""

    def __init__(self, tree: Tree, region: int, gangs: Sequence[CompiledGang], budget: int,
                 preferred: bool = False, before: Mapping[int, Mapping[int, int]] | None = None, shuffle: int = 0):
        self.tree = tree
        self.shuffle = shuffle
        self.before = before or {}
        """Where the moved gangs were (``gang -> pod -> node``): each choice tries their old domain first."""
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
        self.budget = budget
        self.steps = 0
        self.leaves: list[LeafKey] = [(g.idx, gi) for g in gangs for gi, grp in enumerate(g.groups) if grp.pods]
        rlvl = tree.dom_level[region]
        self.rlvl = rlvl
        self.level = {k: max(self.req[k], rlvl) for k in self.leaves}
        self.unit_level = min(self.level.values(), default=rlvl)
        self.load: dict[int, int] = {}
        self.fixed: dict[LeafKey, int] = {}
        self.members: dict[int, list[tuple[LeafKey, int]]] = {}
        self.near: dict[int, dict[int, int]] = {}
        """Per gang, how many of its placed leaf groups lie in each domain."""
        self.unit_memo: dict[UnitKey, dict[LeafKey, list[int]] | None] = {}
        self.shape_memo: dict[int, tuple[object, ...]] = {}
        self.caps_memo: dict[int, dict[int, int]] = {}
        self.doms_memo: dict[tuple[int, int], list[int]] = {}
        every = sorted({g for x in gangs for g in x.pod_gpus}, reverse=True)
        self.sizes = [s for s in every if all(b % s == 0 for b in every if b > s)]
        # per leaf group, per size of ``sizes``: GPUs of its pods of at least that size
        self.ge: dict[LeafKey, list[int]] = {}
        for gang, gi in self.leaves:
            gpus = [self.gangs[gang].pod_gpus[p] for p in self.gangs[gang].groups[gi].pods]
            self.ge[(gang, gi)] = [sum(g for g in gpus if g >= s) for s in self.sizes]
        self.load_ge: dict[int, list[int]] = {}
        """Per domain, per size of ``sizes``: GPUs of pods of at least that size placed in it."""

    @staticmethod
    def applies(tree: Tree, region: int, gangs: Sequence[CompiledGang]) -> bool:
        """Small enough, and nothing the search does not model (tolerated taints, excluded nodes)."""
        if any(g.tol_any for x in gangs for g in x.groups) or any(x.excluded for x in gangs):
            return False
        if sum(len(x.pod_gpus) for x in gangs) > EXACT_MAX_PODS:
            return False
        nodes = sum(1 for n in tree.nodes_below(region) if tree.node_clean[n])
        return nodes <= EXACT_MAX_NODES

    # ---- the outer search: a domain for every leaf group ----------------------------------------------------
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
            fitted = self.unit_memo[members]
            assert fitted is not None
            result.update(fitted)
        out: dict[int, dict[int, int]] = {}
        for (gang, gi), nodes in sorted(result.items()):
            pods = self.gangs[gang].groups[gi].pods
            out.setdefault(gang, {}).update(zip(pods, nodes, strict=True))
        return out

    # ---- whole gangs to domains of the gangs' common required level first --------------------------------------
    def _split(self, gangs: list[CompiledGang], split: int) -> list[UnitKey] | None:
        """Give every gang a domain of level ``split`` (their required level or finer), bounded by whole-pod
        capacity; then each domain's gangs are packed on their own (domains share no node)."""
        tree = self.tree
        rank = tree.rank
        doms = sorted((tree.dom_of(k) for k in tree.index.get((self.region, split), [])), key=lambda d: rank[d])
        order = sorted(gangs, key=lambda x: (-x.need, -max(x.pod_gpus, default=0), x.idx))
        members: dict[int, list[CompiledGang]] = {d: [] for d in doms}
        failed: dict[int, list[frozenset[int]]] = {d: [] for d in doms}
        solved: dict[tuple[int, frozenset[int]], list[UnitKey] | None] = {}
        chosen: list[UnitKey] = []

        def doomed(d: int, idxs: frozenset[int]) -> bool:
            return any(f <= idxs for f in failed[d])

        def pack_all() -> bool:
            chosen.clear()
            for d in doms:
                if not members[d]:
                    continue
                idxs = frozenset(x.idx for x in members[d])
                key = (d, idxs)
                if key not in solved:
                    solved[key] = self._leaves_in(d, members[d])
                    if solved[key] is None:
                        failed[d].append(idxs)
                got = solved[key]
                if got is None:
                    return False
                chosen.extend(got)
            return True

        def assign(i: int) -> bool:
            if i == len(order):
                return pack_all()
            x = order[i]
            seen: set[tuple[object, ...]] = set()
            cands = [d for d in doms if self._room(d, [*members[d], x])]
            was = self._was(x.idx, None, split)
            if self.shuffle:
                cands.sort(key=lambda d: self._mix(d))
            else:
                cands.sort(key=lambda d: (d != was, self._slack(d, members[d]) - x.need, rank[d]))
            for d in cands:
                if not members[d]:
                    sig = (tree.dom_parent[d], self._shape(d))
                    if sig in seen:
                        continue
                    seen.add(sig)
                self._step()
                members[d].append(x)
                if not doomed(d, frozenset(m.idx for m in members[d])) and assign(i + 1):
                    return True
                members[d].pop()
            return False

        return chosen if assign(0) else None

    def _slack(self, d: int, gangs: list[CompiledGang]) -> int:
        return self.tree.dom_free[d] - sum(x.need for x in gangs)

    def _caps(self, d: int) -> dict[int, int]:
        """Per pod size s: the GPUs pods of at least s GPUs can take in ``d`` (whole multiples of s per node)."""
        got = self.caps_memo.get(d)
        if got is None:
            tree = self.tree
            frees = [tree.node_free[n] for n in tree.nodes_below(d) if tree.node_clean[n]]
            got = self.caps_memo[d] = {s: sum(f // s * s for f in frees) for s in self.sizes}
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
        gs = self.gangs
        order = sorted(keys, key=lambda k: (-gs[k[0]].groups[k[1]].need, -gs[k[0]].groups[k[1]].sizes[0][0], k))
        state = self.load, self.fixed, self.members, self.near, self.load_ge
        self.load, self.fixed, self.members, self.near, self.load_ge = {}, {}, {}, {}, {}
        try:
            if not self._assign(order, 0):
                return None
            return [(unit, tuple(sorted(m))) for unit, m in sorted(self.members.items()) if m]
        finally:
            self.load, self.fixed, self.members, self.near, self.load_ge = state
            self.region, self.rlvl = saved
            self.unit_level = prev_unit

    def _step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.budget:
            raise OutOfSteps

    def _chain(self, key: LeafKey) -> list[int]:
        """The group and its ancestors (indices), leaf first."""
        groups = self.gangs[key[0]].groups
        out = []
        gi = key[1]
        while gi >= 0:
            out.append(gi)
            gi = groups[gi].parent
        return out

    def _within(self, key: LeafKey) -> int:
        """The finest domain the leaf group is already confined to: its ancestors' fixed domains, or the region."""
        tree = self.tree
        w = self.region
        for gi in self._chain(key):
            d = self.fixed.get((key[0], gi))
            if d is not None and tree.dom_level[d] > tree.dom_level[w]:
                w = d
        return w

    def _free(self, d: int) -> int:
        return self.tree.dom_free[d] - self.load.get(d, 0)

    def _candidates(self, key: LeafKey) -> list[int]:
        tree = self.tree
        g = self.gangs[key[0]].groups[key[1]]
        w = self._within(key)
        lvl = self.level[key]
        if lvl <= tree.dom_level[w]:
            return [w] if self._free(w) >= g.need else []
        doms = [tree.dom_of(k) for k in tree.index.get((w, lvl), [])]
        rank = tree.rank
        near = self.near.get(key[0], {})
        anc = tree.dom_anc
        # fewest domains first (the deepest domain shared with the gang's groups placed so far), then the domain
        # the group was in before the search, then best fit; a restart keeps the first and shuffles the rest
        was = self._was(key[0], key[1], lvl)
        if self.shuffle:
            fits = sorted((d for d in doms if self._free(d) >= g.need),
                          key=lambda d: (-max((len(anc[a]) for a in anc[d] if near.get(a)), default=0), self._mix(d)))
        else:
            fits = sorted((d for d in doms if self._free(d) >= g.need),
                          key=lambda d: (-max((len(anc[a]) for a in anc[d] if near.get(a)), default=0), d != was,
                                         self._free(d) - g.need, rank[d]))
        out = []
        seen: set[tuple[object, ...]] = set()
        for d in fits:
            if not self.load.get(d):
                sig = (tree.dom_parent[d], self._shape(d))
                if sig in seen:
                    continue
                seen.add(sig)
            out.append(d)
        return out

    def _mix(self, d: int) -> int:
        """A fixed pseudo-random position of domain ``d`` for restart ``shuffle`` (from its path rank only)."""
        x = (self.tree.rank[d] + 1) * 0x9E3779B1 ^ self.shuffle * 0x85EBCA77
        x = (x ^ (x >> 15)) * 0x2C1B3C6D & 0xFFFFFFFF
        return x ^ (x >> 12)

    def _was(self, gang: int, gi: int | None, lvl: int) -> int:
        """The level-``lvl`` domain of the gang's (or its group ``gi``'s) first pod before the search, or -1.

        The neighbourhood held an arrangement of every moved gang a moment ago, so one close to it is the likely
        answer: trying old domains first finds it within fewer steps than best fit alone."""
        pods = self.before.get(gang)
        if not pods:
            return -1
        if gi is not None:
            group = self.gangs[gang].groups[gi].pods
            node = pods.get(group[0]) if group else None
        else:
            node = pods[min(pods)]
        if node is None:
            return -1
        level = self.tree.dom_level
        return next((d for d in self.tree.node_path[node] if level[d] == lvl), -1)

    def _shape(self, d: int) -> tuple[object, ...]:
        """What makes two empty sibling domains interchangeable: free GPUs per node, per sub-domain."""
        got = self.shape_memo.get(d)
        if got is None:
            tree = self.tree
            children = tree.dom_children[d]
            if children:
                got = tuple(sorted((self._shape(c) for c in children), key=repr))
            else:
                got = tuple(sorted(tree.node_free[n] if tree.node_clean[n] else 0 for n in tree.dom_nodes[d]))
            self.shape_memo[d] = got
        return got

    def _assign(self, order: list[LeafKey], i: int) -> bool:
        if i == len(order):
            return True
        tree = self.tree
        key = order[i]
        gang, _ = key
        need = self.gangs[gang].groups[key[1]].need
        for d in self._candidates(key):
            self._step()
            fixes = []
            for gi in self._chain(key):
                r = self.req[(gang, gi)]
                if r >= 0 and (gang, gi) not in self.fixed and r >= self.rlvl:
                    self.fixed[(gang, gi)] = tree.dom_anc[d][min(r, tree.dom_level[d]) + 1]
                    fixes.append((gang, gi))
            anc = tree.dom_anc[d]
            near = self.near.setdefault(gang, {})
            ge = self.ge[key]
            for a in anc:
                self.load[a] = self.load.get(a, 0) + need
                near[a] = near.get(a, 0) + 1
                placed = self.load_ge.get(a)
                if placed is None:
                    placed = self.load_ge[a] = [0] * len(ge)
                for j, v in enumerate(ge):
                    placed[j] += v
            unit = anc[self.unit_level + 1] if self.unit_level >= 0 else anc[0]
            members = self.members.setdefault(unit, [])
            members.append((key, d))
            fitted = self._unit_fit(unit, members)
            if fitted is not None and self._still_possible(order, i + 1) and self._assign(order, i + 1):
                return True
            members.pop()
            for a in anc:
                self.load[a] -= need
                near[a] -= 1
                placed = self.load_ge[a]
                for j, v in enumerate(ge):
                    placed[j] -= v
            for k in fixes:
                del self.fixed[k]
        return False

    def _still_possible(self, order: list[LeafKey], start: int) -> bool:
        """Necessary for the remaining leaf groups: in every domain that confines some of them (and its ancestors
        inside the region), their GPUs fit the free GPUs left, and for each pod size s, their pods of at least s
        GPUs plus those already placed there fit the whole multiples of s the nodes offer."""
        tree = self.tree
        anc = tree.dom_anc
        rdepth = len(anc[self.region]) - 1
        asked: dict[int, list[int]] = {}
        width = len(self.sizes)
        for key in order[start:]:
            w = self._within(key)
            ge = self.ge[key]
            for a in anc[w][rdepth:]:
                got = asked.get(a)
                if got is None:
                    got = asked[a] = [0] * (width + 1)
                got[0] += self.gangs[key[0]].groups[key[1]].need
                for i in range(width):
                    got[i + 1] += ge[i]
        for w, got in asked.items():
            if self._free(w) < got[0]:
                return False
            caps = self._caps(w)
            placed = self.load_ge.get(w)
            for i, size in enumerate(self.sizes):
                if got[i + 1] + (placed[i] if placed else 0) > caps[size]:
                    return False
        return self._no_waste(order, start)

    def _no_waste(self, order: list[LeafKey], start: int) -> bool:
        """Necessary: for each level L, the remaining leaf groups bound to L or finer each need one domain of
        level L, so a domain of L with fewer free GPUs than the smallest of them is lost to them; their GPUs must
        fit what the other domains of L in the region have free.

        Without this test a tight neighbourhood (free GPUs just enough) is searched through every way of leaving
        small holes, each failing only once the last groups find no room."""
        need: dict[int, int] = {}
        least: dict[int, int] = {}
        gangs = self.gangs
        for key in order[start:]:
            lvl = self.level[key]
            n = gangs[key[0]].groups[key[1]].need
            need[lvl] = need.get(lvl, 0) + n
            if n < least.get(lvl, 1 << 60):
                least[lvl] = n
        total = 0
        smallest = 1 << 60
        for lvl in sorted(need, reverse=True):
            total += need[lvl]
            smallest = min(smallest, least[lvl])
            if lvl <= self.rlvl:
                break
            usable = 0
            for d in self._level_domains(lvl):
                f = self._free(d)
                if f >= smallest:
                    usable += f
            if usable < total:
                return False
        return True

    def _level_domains(self, lvl: int) -> list[int]:
        """The real domains of level ``lvl`` inside the region being searched."""
        key = (self.region, lvl)
        got = self.doms_memo.get(key)
        if got is None:
            tree = self.tree
            got = self.doms_memo[key] = [tree.dom_of(k) for k in tree.index.get(key, [])]
        return got

    # ---- the inner search: pods of one unit onto its nodes -------------------------------------------------------
    def _unit_fit(self, unit: int, members: list[tuple[LeafKey, int]]) -> dict[LeafKey, list[int]] | None:
        memo_key = (unit, tuple(sorted(members)))
        if memo_key in self.unit_memo:
            return self.unit_memo[memo_key]
        tree = self.tree
        nodes = [n for n in tree.nodes_below(unit) if tree.node_clean[n] and tree.node_free[n]]
        pos = {n: i for i, n in enumerate(nodes)}
        free = [tree.node_free[n] for n in nodes]
        cls = [tree.node_path[n][0] for n in nodes]
        # one entry per pod: (GPUs, allowed node positions, the leaf it belongs to)
        pods: list[tuple[int, int, tuple[int, ...], LeafKey]] = []
        for key, d in sorted(members):
            allowed = tuple(pos[n] for n in tree.nodes_below(d) if n in pos)
            gpus = self.gangs[key[0]].pod_gpus
            for p in self.gangs[key[0]].groups[key[1]].pods:
                pods.append((gpus[p], len(allowed), allowed, key))
        pods.sort(key=lambda p: (-p[0], p[1], p[3]))
        placed: list[int] = [0] * len(pods)
        dead: set[tuple[int, int, tuple[int, ...]]] = set()

        def place(i: int) -> bool:
            if i == len(pods):
                return True
            size, _, allowed, key = pods[i]
            low = placed[i - 1] if i and pods[i - 1][3] == key and pods[i - 1][0] == size else -1
            state = (i, low, tuple(free))
            if state in dead:
                return False
            tried: set[tuple[int, int]] = set()
            # tightest node first: pack-to-empty inside the unit
            for j in sorted((j for j in allowed if j >= low and free[j] >= size), key=lambda j: (free[j], j)):
                sig = (cls[j], free[j])
                if sig in tried:
                    continue
                tried.add(sig)
                self._step()
                free[j] -= size
                placed[i] = j
                if place(i + 1):
                    return True
                free[j] += size
            dead.add(state)
            return False

        out: dict[LeafKey, list[int]] | None = None
        if sum(p[0] for p in pods) <= sum(free) and place(0):
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
