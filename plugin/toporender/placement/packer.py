"""Deterministic topology-aware gang packer ("pack to empty").

Gangs are placed one by one in arrival order. For each gang a depth-first search with backtracking (as KAI does
across subgroups) chooses, level by level, a domain for the gang and then for each subgroup, largest first:

* candidates are the domains of the group's level inside its parent's domain that can hold all its pods, taken
  from a per-(ancestor, level) list sorted by free GPUs, so the first candidate is the best fit (least residual);
  domains the same gang already uses come first; in small pools (``fit.HOLE_MAX_NODES``) a domain the group
  would leave with a hole smaller than any leaf group seen so far comes after those it would not, unless that
  spreads the gang over more domains than plain best fit; ties break on the domain path;
* a preferred level is tried first and relaxed one level at a time up to the required level;
* inside the chosen domain, pods go to the single child that fits tightest, else to the largest children first
  with the tightest child for the remainder (Kueue's descent), and finally to nodes sorted by free GPUs
  (largest first) and name, filling a node before the next, so the residual fragment is well defined;
* in small pools, the placed gang's leaf groups then move to other domains of their level where that leaves
  fewer free GPUs in holes and spans no more domains (``Fitter.defragment``).

When a gang does not fit, earlier gangs may be re-arranged (never dropped): the gangs lying inside one region (a
domain of the new gang's required level, then coarser ones up to the pool) are lifted, assigned whole to domains
of their required level (a search of its own), and each domain is re-packed by a depth-first search over leaf
groups, largest pods first, with forward checking; in small regions the moved gangs that span several domains of
their preferred level are then re-placed, alone or in pairs, where that spans fewer. Earlier gangs never move when
the new gang fits as they are, which is what makes plans stable under appended gangs.

Work is bounded by step budgets that depend only on the gangs seen so far, so the result for a prefix of the
arrival order never depends on what comes after it and the worst-case time stays bounded.
"""

from __future__ import annotations

import copy
import gc
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property

from toporender.errors import fail
from toporender.placement import fit
from toporender.placement.compiled import CompiledGang, GangShape, Group, search_over, size_counts
from toporender.placement.demand import GangDemand
from toporender.placement.inventory import Inventory
from toporender.placement.plan import PlacementPlan, PlanParts, build_plan
from toporender.placement.repair import RegionSearch, Repairer
from toporender.placement.tree import ROOT, Tree

NAMED_BLOCKERS = 50
"""How many unplaceable gangs of a run get the earlier gangs that block them named."""

GREEDY_MAX_NODES = 12_000
"""Pools up to this many nodes are also packed by the two greedy baselines (see :func:`pack`)."""

def pods_at_least(sizes: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """From ``(pod size, pods)`` largest first (a group's ``sizes``): per pod size, the GPUs of the pods of at
    least that size."""
    out: list[tuple[int, int]] = []
    total = 0
    for size, count in sizes:
        total += size * count
        out.append((size, total))
    return tuple(out)


def covers(sizes: tuple[tuple[int, int], ...], than: tuple[tuple[int, int], ...]) -> bool:
    """Whether pods of these ``sizes`` ask, for every pod size of ``than``, at least as many GPUs in pods of at
    least that size: a gang of smaller pods packs where a larger-podded one of the same GPUs could not."""
    i = 0
    got = 0
    for size, asked in than:
        while i < len(sizes) and sizes[i][0] >= size:
            got = sizes[i][1]
            i += 1
        if got < asked:
            return False
    return True


MATCH_MAX_LEAVES = 64
"""Groups with pods of a failed gang beyond which :func:`no_easier` does not match them (and claims nothing)."""
MATCH_STEPS = 4096
"""Group-to-group trials after which :func:`no_easier` gives up matching (and claims nothing)."""
ONE_NODE = 1 << 20
"""The level of a group of one pod: the pod lies on one node, so in one domain of every level."""


def gang_shape(gang: CompiledGang) -> GangShape:
    """What :func:`no_easier` compares of ``gang``."""
    root = gang.groups[0]
    gpus = gang.pod_gpus
    own = ((g, [gpus[i] for i in g.pods]) for g in gang.groups if g.pods)
    return GangShape(root.req, gang.need, gang.max_leaf, pods_at_least(root.sizes), root.tol_any,
                     tuple((g.req, sum(pods), pods_at_least(size_counts(pods)), g.tol) for g, pods in own),
                     any(g.children for g in gang.groups[1:]))


def merge_pods(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The :func:`pods_at_least` of two groups' pods together."""
    out: list[tuple[int, int]] = []
    i = j = 0
    got_a = got_b = 0
    while i < len(a) or j < len(b):
        size = max(a[i][0] if i < len(a) else 0, b[j][0] if j < len(b) else 0)
        if i < len(a) and a[i][0] == size:
            got_a = a[i][1]
            i += 1
        if j < len(b) and b[j][0] == size:
            got_b = b[j][1]
            j += 1
        out.append((size, got_a + got_b))
    return tuple(out)


def _one_pod(pods: tuple[tuple[int, int], ...]) -> bool:
    return len(pods) == 1 and pods[0][0] == pods[0][1]


def no_easier(shape: GangShape, than: GangShape, by_leaves: bool = True) -> bool:
    """Whether a gang of ``shape`` surely asks at least what one of shape ``than`` did, so that it need not be
    searched for once ``than`` was: the same required level, at least its GPUs in pods at least as large, no
    tainted node it did not tolerate, and the pods of each of its groups (subgroups' pods apart) held by one of
    ``shape``'s groups, bound to the same level or a finer one, with at least the GPUs it holds in pods at least
    as large and no tainted node they did not tolerate (seven 2-GPU pods bound to one rack do not ask what seven
    bound to one clique do; one group may hold several, since ``than``'s may share a domain). A group of one pod
    lies on one node: it asks nothing of its level, and holds groups of any level. A gang with nested subgroups
    is never ``than``: its failure may come from the nesting. The groups are matched by a search of at most
    ``MATCH_STEPS`` trials, which claims nothing when it runs out.

    ``by_leaves=False`` compares the largest leaf's GPUs instead of the leaves: cheaper, and not always right.
    Pools larger than ``fit.HOLE_MAX_NODES`` keep it: there, repairing the gangs it wrongly refuses costs more
    time than the cluster's size allows for (twice the cluster took 2.23 times as long)."""
    if than.req != shape.req or than.need > shape.need or not shape.tol <= than.tol or \
            not covers(shape.pods, than.pods):
        return False
    if not by_leaves:
        return than.max_leaf <= shape.max_leaf
    if than.nested or len(than.leaves) > MATCH_MAX_LEAVES:
        return False
    mine = [(ONE_NODE if _one_pod(pods) else lvl, pods, tol) for lvl, _, pods, tol in shape.leaves]
    leaves = sorted(((-1 if _one_pod(pods) else lvl, need, pods, tol) for lvl, need, pods, tol in than.leaves),
                    key=lambda leaf: (-leaf[1], -leaf[0]))
    held: list[tuple[tuple[int, int], ...]] = [() for _ in mine]
    steps = 0

    def hold(k: int) -> bool:
        """Give group ``k`` of ``than`` (and the ones after it) a group of ``shape``, depth first."""
        nonlocal steps
        if k == len(leaves):
            return True
        lvl, _, pods, tol = leaves[k]
        tried: set[tuple[int, tuple[tuple[int, int], ...], frozenset[int], tuple[tuple[int, int], ...]]] = set()
        for j, (mlvl, mpods, mtol) in enumerate(mine):
            steps += 1
            if steps > MATCH_STEPS:
                return False
            if mlvl < lvl or not mtol <= tol:
                continue
            merged = merge_pods(held[j], pods)
            if not covers(mpods, merged):
                continue
            same = (mlvl, mpods, mtol, held[j])  # groups alike holding alike: one trial stands for all
            if same in tried:
                continue
            tried.add(same)
            before, held[j] = held[j], merged
            if hold(k + 1):
                return True
            held[j] = before
        return False

    try:
        return hold(0)
    finally:
        hold = search_over


class Packer(Repairer):
    """One packing run: every gang in arrival order, repaired when it does not fit, or given a reason."""

    without_lifts: Packer | None = None
    """This run as it would go on without the first lift it made (:meth:`_before_lift`)."""
    forked = False
    """Whether this run is the copy another run kept at its first lift (:meth:`_before_lift`); it keeps none."""
    refusing: tuple[str, GangShape | None] = ("", None)
    """The reason and shape the gang being repaired gets if it is left out."""
    plan_parts: PlanParts | None = None
    """The plan's parts of the gangs placed so far, when worked out as they were placed (:class:`PackAhead`)."""

    def run(self) -> None:
        """Pack the gangs added since the last run (:meth:`~toporender.placement.fit.Fitter.add`)."""
        start, self.packed = self.packed, len(self.gangs)
        for gang in self.gangs[start:]:
            if gang.untolerated:
                self.reasons[gang.idx] = self.reason(gang)
                continue
            if gang.excluded:
                self._run_excluding(gang)
                continue
            ok = False
            if not self._hopeless(gang):
                ok, _ = self.place_fewest(gang, ROOT, fit.GANG_STEPS)
                if ok:
                    self.defragment(gang)
                    self._no_hole_place(gang)
            if not ok:
                reason = self.reason(gang)
                shape = gang_shape(gang)
                dominated = any(no_easier(shape, failed, self.small_pool) for failed in self.failed)
                self.refusing = (reason, shape)
                if dominated or not self.repair(gang):
                    self._refuse(gang, reason, None if dominated else shape)
                else:
                    self.tight_pool(gang)
                    self.no_hole_pool(gang)
            self.log.clear()

    def _refuse(self, gang: CompiledGang, reason: str, shape: GangShape | None) -> None:
        """Record a gang left out, and the shape later gangs are compared with (None: a failed one covers it)."""
        self.reasons[gang.idx] = reason + self.exact_notes.pop(gang.idx, "")
        if shape is not None:
            self.failed.append(shape)

    def _before_lift(self, gang: CompiledGang, then: tuple[RegionSearch, list[RegionSearch]] | None) -> None:
        """Keep, at the first lift, a copy of this run that admits ``gang`` without it: by the exact searches
        ``then`` that the lift came before (the pool's, then the long ones of the regions left undecided), going
        on as this run does (lifting too, keeping no copy of its own); else it refuses ``gang`` and goes on
        without lifts. A gang admitted by a lift can leave later, larger gangs less room than those searches'
        arrangement, or than none. :func:`pack` compares the runs, without
        packing the gangs before this one again (their exact searches are most of a small pool's time)."""
        if self.without_lifts is not None or self.forked:
            return
        parts, self.plan_parts = self.plan_parts, None  # the copy works its own out, if it is chosen
        try:
            fork = copy.deepcopy(self)
        finally:
            self.plan_parts = parts
        fork.forked = True
        if then is None or not fork._exact_after(fork.gangs[gang.idx], *copy.deepcopy(then)):
            fork.ejects = False
            fork._refuse(fork.gangs[gang.idx], *self.refusing)
        fork.log.clear()
        fork.packed = gang.idx + 1
        self.without_lifts = fork

    def _run_excluding(self, gang: CompiledGang) -> None:
        """Place a gang whose resources exclude nodes: those nodes' free GPUs are hidden while it is placed.

        Hiding them keeps every capacity view and index of the tree exact without a per-node filter in the
        search. Such a gang is placed first-fit only: it is never re-arranged, nor moves others (re-arranging
        re-fits several gangs at once, and the exclusion belongs to one of them), so its placement is never
        undone by a later gang."""
        tree = self.tree
        hidden = {n: tree.node_free[n] for n in gang.excluded if tree.node_free[n]}
        tree.change(hidden)
        try:
            ok = not self._hopeless(gang) and self.place(gang, ROOT, fit.GANG_STEPS)[0]
            if not ok:
                count = len(gang.excluded)
                self.reasons[gang.idx] = (f"{self.reason(gang)} ({count} node{'s' if count != 1 else ''} excluded "
                                          "by its resources' nodesExcluded)")
        finally:
            tree.change({n: -taken for n, taken in hidden.items()})
            self.log.clear()
        if gang.idx in self.lca:
            self.fixed.add(gang.idx)

    def _largest(self, lvl: int, tol: frozenset[int]) -> int:
        """The domain of a level with the most free GPUs (first by path among equals)."""
        tree = self.tree
        if tol:
            return min(tree.level_domains[lvl], key=lambda d: (-self._free(d, tol), tree.rank[d]))
        lst = tree.index[(ROOT, lvl)]
        return tree.dom_of(lst[bisect_left(lst, tree.free_of(lst[-1]) * tree.stride)])

    def _hopeless(self, gang: CompiledGang) -> bool:
        """Cheap necessary test: some group cannot fit even the largest domain of its level as things stand."""
        tree = self.tree
        for g in gang.groups:
            if g.tol_any:
                continue
            if g.req < 0:
                if tree.dom_free[ROOT] < g.need:
                    return True
                continue
            lst = tree.index.get((ROOT, g.req))
            if not lst or tree.free_of(lst[-1]) < g.need:
                return True
        return False

    def _blocked(self, lvl: int, group: Group) -> str:
        """'' or, when a domain of level ``lvl`` had room for ``group``'s GPUs before any gang was planned, which
        earlier gangs took it: a gang blocked only by earlier gangs must not read as infeasible. Room counts GPUs
        only, so it says "had room", not that the gang would fit.

        Only the first failures of a run are explained this way, since naming the gangs scans the placed ones.
        """
        if group.tol_any or len(self.reasons) >= NAMED_BLOCKERS:
            return ""
        tree = self.tree
        domains = tree.level_domains[lvl] if lvl >= 0 else [ROOT]
        room, best = max(((tree.dom_total[d] - tree.dom_used0[d] - tree.dom_unavail[d], -tree.rank[d], d)
                          for d in domains), default=(0, 0, ROOT))[0::2]
        if room < group.need:
            return ""
        depth = len(tree.dom_anc[best]) - 1
        anc = tree.dom_anc
        node_path = tree.node_path
        # gangs lying inside the domain, and gangs spread over it and others (their lowest common domain is one of
        # its ancestors) that have a pod in it
        inside = sorted(g for g, d in self.lca.items() if (len(anc[d]) > depth and anc[d][depth] == best) or (
            len(anc[d]) <= depth and anc[best][len(anc[d]) - 1] == d
            and any(best in node_path[n] for n in self.assign.get(g, {}).values())))
        if not inside:
            return ""
        names = ", ".join(self.gangs[g].demand.display for g in inside[:3])
        more = f" and {len(inside) - 3} more" if len(inside) > 3 else ""
        return (f"; {tree.where(best)} had room for it ({room} GPUs) before other gangs: blocked by earlier gangs "
                f"{names}{more}")

    @cached_property
    def largest_node(self) -> int:
        """GPUs of the largest schedulable node: no pod bigger than that ever fits."""
        tree = self.tree
        return max((c for c, ok in zip(tree.node_cap, tree.node_ok) if ok), default=0)

    def reason(self, gang: CompiledGang) -> str:
        """Why ``gang`` does not fit now: the binding level, the demand and the best domain's free capacity."""
        tree = self.tree
        if gang.untolerated:
            return (f"{gang.demand.display}: {gang.untolerated}, which every schedulable node of the pool has; add a "
                    "matching toleration to its pod template")
        excluded = tree.cordoned
        tainted = tree.tainted
        notes = []
        if excluded:
            notes.append(f"{excluded} cordoned node{'s' if excluded != 1 else ''}")
        if tainted:
            notes.append(f"{tainted} tainted node{'s' if tainted != 1 else ''} not tolerated")
        suffix = f" ({', '.join(notes)} excluded)" if notes else ""
        biggest = max(gang.pod_gpus, default=0)
        largest_node = self.largest_node
        if biggest > largest_node:
            pod = gang.pod_names[gang.pod_gpus.index(biggest)]
            return (f"{gang.demand.display}: pod {pod} needs {biggest} GPUs on one node, but the largest node of the "
                    f"pool has {largest_node}{suffix}; a pod's GPUs always come from a single node")
        groups = sorted(range(len(gang.groups)), key=lambda gi: (gi != 0, -gang.groups[gi].need, gi))
        for gi in groups:
            g = gang.groups[gi]
            who = gang.demand.display if gi == 0 else f"{gang.demand.display}/{g.name}"
            if g.req < 0:
                free = self._free(ROOT, g.tol_any)
                if free < g.need:
                    return f"{who} needs {g.need} GPUs; the pool has {free} free{suffix}{self._blocked(-1, g)}"
                continue
            label = tree.levels[g.req]
            if not tree.level_domains[g.req]:
                return f"{who} needs {g.need} GPUs in one {label}; no node has the label {label}{suffix}"
            best = self._largest(g.req, g.tol_any)
            free = self._free(best, g.tol_any)
            if free < g.need:
                return (f"{who} needs {g.need} GPUs in one {label}; the largest has {free} ({tree.name(best)}){suffix}"
                        f"{self._blocked(g.req, g)}")
        g = gang.groups[0]
        where = f" in one {tree.levels[g.req]}" if g.req >= 0 else ""
        best = ROOT
        if g.req >= 0:
            best = self._largest(g.req, g.tol_any)
        pods = ", ".join(f"{k} x {s} GPUs" for s, k in g.sizes)
        return (
            f"{gang.demand.display} needs {g.need} GPUs ({pods}){where} with every subgroup inside its required "
            f"domain; the largest{' ' + tree.levels[g.req] if g.req >= 0 else ' pool'} has "
            f"{self._free(best, g.tol_any)} free ({tree.name(best)}) but no arrangement of whole pods fits{suffix}"
            f"{self._blocked(g.req, g)}"
        )


class GreedyPacker(Packer):
    """A greedy baseline: every gang in arrival order, never re-arranging earlier ones, no backtracking.

    ``best_fit`` is Kueue's rule: the gang's tightest domain (fewest free GPUs that still hold it) at its
    preferred, else required level; inside it each subgroup in the tightest domain of its level whose nodes hold
    it, each pod on the node with the most free GPUs. Otherwise plain first-fit: the first domain in path order
    (preferred level first) where every subgroup fits the first domain of its level in path order, each pod on
    the first node by name with room. Either fails the gang at the first subgroup that does not fit.
    """

    def __init__(self, tree: Tree, gangs: Sequence[GangDemand], best_fit: bool):
        super().__init__(tree, gangs)
        self.best_fit = best_fit
        self.in_order: dict[tuple[int, int], list[int]] = {}

    def run(self) -> None:
        for gang in self.gangs:
            if gang.need == 0:
                self.placed.add(gang.idx)
            elif gang.excluded or gang.untolerated or not self._greedy(gang):
                self.reasons[gang.idx] = self.reason(gang)

    def _domains(self, w: int, lvl: int) -> list[int]:
        """Real domains of level ``lvl`` inside ``w`` (or ``w`` itself when it is that level or finer), by path."""
        tree = self.tree
        if lvl <= tree.dom_level[w]:
            return [w]
        got = self.in_order.get((w, lvl))
        if got is None:
            got = self.in_order[(w, lvl)] = sorted((tree.dom_of(k) for k in tree.index.get((w, lvl), [])),
                                                   key=tree.rank.__getitem__)
        return got

    def _greedy(self, gang: CompiledGang) -> bool:
        tree = self.tree
        root = gang.groups[0]
        regions: list[int] = []
        for lvl in dict.fromkeys(x for x in (root.pref, root.req) if x is not None and x >= 0):
            fits = [d for d in self._domains(ROOT, lvl) if self._free(d, root.tol_any) >= gang.need]
            if self.best_fit and fits:
                regions = [min(fits, key=lambda d: (self._free(d, root.tol_any), tree.rank[d]))]
                break
            regions.extend(fits)
        if root.req < 0 and not (self.best_fit and regions):
            regions.append(ROOT)
        # subgroups by name (the plan must not depend on the order the demand lists them in), then the pods in
        # no subgroup, which fit anywhere in the region: the constrained groups first
        leaves = sorted((g for g in gang.groups if g.pods), key=lambda g: (not g.name, g.name))
        for region in regions:
            if not all(self._room_for(region, g) for g in leaves):
                continue
            pairs = self._into(gang, region, leaves)
            if pairs is not None:
                self._take_pairs(gang.idx, sorted(pairs))
                self.placed.add(gang.idx)
                self.lca[gang.idx] = self._lca(gang.idx)
                return True
        return False

    def _room_for(self, region: int, g: Group) -> bool:
        """Necessary: some domain of the group's level in ``region`` has its GPUs free."""
        tree = self.tree
        if g.req <= tree.dom_level[region]:
            return self._free(region, g.tol_any) >= g.need
        if g.tol_any:
            return any(self._free(d, g.tol_any) >= g.need for d in self._domains(region, g.req))
        lst = tree.index.get((region, g.req))
        return lst is not None and bool(lst) and tree.free_of(lst[-1]) >= g.need

    def _into(self, gang: CompiledGang, region: int, leaves: list[Group]) -> list[tuple[int, int]] | None:
        tree = self.tree
        local: dict[int, int] = {}
        pairs: list[tuple[int, int]] = []
        for g in leaves:
            chosen: list[tuple[int, int]] | None = None
            best: tuple[int, int] | None = None
            own = sum(gang.pod_gpus[p] for p in g.pods)
            for d in self._domains(region, g.req):
                if self._free(d, g.tol) < own:
                    continue
                got = self._nodes(gang, g.pods, d, local, g.tol)
                if got is None:
                    continue
                if not self.best_fit:
                    chosen = got
                    break
                key = (self._left(d, local, g.tol), tree.rank[d])
                if best is None or key < best:
                    best, chosen = key, got
            if chosen is None:
                return None
            for pod, node in chosen:
                local[node] = local.get(node, tree.node_free[node]) - gang.pod_gpus[pod]
            pairs.extend(chosen)
        return pairs

    def _left(self, d: int, local: dict[int, int], tol: frozenset[int]) -> int:
        """Free GPUs of ``d`` (with the tainted nodes ``tol``) after this gang's pods placed so far."""
        tree = self.tree
        return self._free(d, tol) - sum(tree.node_free[n] - f for n, f in local.items() if tree.inside_node(n, d))

    def _nodes(self, gang: CompiledGang, pods: list[int], d: int, local: dict[int, int],
               tol: frozenset[int]) -> list[tuple[int, int]] | None:
        tree = self.tree
        clean = tree.node_clean
        room = {n: local.get(n, tree.node_free[n]) for n in tree.nodes_below(d) if clean[n] or n in tol}
        out = []
        for p in pods:
            size = gang.pod_gpus[p]
            if self.best_fit:
                node = min((n for n, f in room.items() if f >= size), key=lambda n: (-room[n], n), default=None)
            else:
                node = next((n for n, f in room.items() if f >= size), None)
            if node is None:
                return None
            room[node] -= size
            out.append((p, node))
        return out


def _outcome(packer: Packer, gangs: int) -> tuple[int, int]:
    """What plans are compared on: GPUs placed among the first ``gangs`` gangs, then gangs placed."""
    placed = [x for x in packer.gangs[:gangs] if x.idx in packer.placed]
    return sum(x.need for x in placed), len(placed)


def pack(
    inventory: Inventory,
    levels: Sequence[str],
    gangs: Sequence[GangDemand],
    *,
    node_selector: Mapping[str, str] | None = None,
    tree: Tree | None = None,
    compiled: Mapping[str, CompiledGang] | None = None,
    ahead: Packer | None = None,
) -> PlacementPlan:
    """Place ``gangs`` (arrival order, earlier = higher priority) on ``inventory``.

    ``levels`` are the pool's topology label keys, coarsest first. Pure and deterministic: the plan depends only
    on the node set (not its order) and on the gang sequence. ``tree``: ``Tree(inventory, levels, node_selector)``
    built ahead (while the demands were being made); packing changes it, so it serves one call. ``compiled``:
    gangs compiled against that ``tree`` ahead, by key (:class:`~toporender.placement.fit.Fitter`). ``ahead``: a
    :class:`Packer` on a fresh such tree that has packed the first of ``gangs`` already (the same demands, in
    order), while the others were being made; it packs the rest, which yields the plan packing all at once does.
    """
    keys = [g.key for g in gangs]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise fail(f"gang keys must be unique; repeated: {', '.join(dup)}")
    with cyclic_gc_paused():
        if ahead is not None:
            tree, packer = ahead.tree, ahead
            packer.add(gangs[len(packer.gangs):], compiled)
        else:
            tree = tree or Tree(inventory, levels, node_selector or {})
            packer = Packer(tree, gangs, compiled)
        packer.run()
        if len(tree.node_names) <= GREEDY_MAX_NODES and packer.reasons:
            # Never below a greedy baseline: on pools small enough to pack three times, plain first-fit and
            # Kueue's BestFit run too (and the packer without lifting gangs, when a lift admitted one: such a gang
            # can leave later, larger ones no room), and a plan that places more GPUs (then more gangs) replaces
            # the packer's.
            # Ties keep the packer's, and each run is stable under appends, so an appended gang that fits the
            # chosen plan adds the same GPUs to it as at most to any other: the choice, and every placement, stay.
            runs = [(tree, packer)]
            if packer.without_lifts is not None:
                fork = packer.without_lifts
                fork.add(gangs[len(fork.gangs):])
                fork.run()
                runs.append((fork.tree, fork))
            for best_fit in (False, True):
                other_tree = Tree(inventory, levels, node_selector or {})
                other = GreedyPacker(other_tree, gangs, best_fit)
                other.run()
                runs.append((other_tree, other))
            tree, packer = _choose(runs, len(gangs))
            before = _choose(runs, len(gangs) - 1)[1]
            if packer is not runs[0][1] or before is not packer:
                _explain_switch(runs[0][1], before, packer)
        return build_plan(tree, packer, packer.plan_parts)


def _choose(runs: list[tuple[Tree, Packer]], gangs: int) -> tuple[Tree, Packer]:
    """The run whose plan of the first ``gangs`` gangs places the most GPUs, then gangs; the first on ties.

    Every run is stable under appends (its plan of a prefix is its plan of the whole, restricted to the prefix,
    up to gangs the packer flags as moved), so this also tells which plan ``pack`` chose for a shorter prefix."""
    best = runs[0]
    for run in runs[1:]:
        if _outcome(run[1], gangs) > _outcome(best[1], gangs):
            best = run
    return best


def _explain_switch(main: Packer, before: Packer, chosen: Packer) -> None:
    """Flag as moved the gangs a greedy plan places elsewhere than the packer did, or than the plan chosen
    without the last gang did, or leaves out; tell the ones it leaves out that they were placeable and why they
    are not placed."""
    moved = set(main.moved) if chosen is main else set()
    for other in {id(main): main, id(before): before}.values():
        if other is not chosen:
            moved |= {i for i in other.placed if other.assign.get(i) != chosen.assign.get(i)}
    chosen.moved = moved
    ours = _outcome(main, len(main.gangs))
    theirs = _outcome(chosen, len(chosen.gangs))
    why = (f"more GPUs are placed in total ({theirs[0]} against {ours[0]} with it placed)" if theirs[0] > ours[0]
           else f"more gangs are placed ({theirs[1]} against {ours[1]} with it placed, {ours[0]} GPUs either way)")
    for i in sorted(main.placed - chosen.placed):
        gang = chosen.gangs[i]
        chosen.reasons[i] = (f"{gang.demand.display}: left out so that {why}; "
                             f"{chosen.reasons.get(i, 'it does not fit then')}")

@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while packing.

    Packing allocates millions of small lists, dicts and tuples and keeps many of them (the tree, compiled gangs,
    the plan), which makes the collector re-scan the growing heap again and again: at 100k GPUs that was about a
    fifth of the run time. Reference counting frees what packing drops; the cycles it used to leave, the
    searches' recursive closures, are broken once each search is over
    (:func:`~toporender.placement.compiled.search_over`). The collector is switched back on afterwards if it
    was on.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
