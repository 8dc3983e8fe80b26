"""Fitting one gang: a depth-first search over candidate domains, best fit first, then pods onto nodes.

Level by level the search chooses a domain for the gang and then for each subgroup, largest first; inside the
chosen domain pods go to the tightest child that holds them all, else largest children first, and finally to
nodes sorted by free GPUs and name. In pools of up to ``HOLE_MAX_NODES`` nodes, a choice that would leave a
hole (fewer free GPUs than any leaf group seen so far asks for) comes after those that leave none, unless that
spreads the gang over more domains, and the placed gang's leaf groups then move into holes where that spans
no more domains. Every change to the tree goes through an undo log so a failed branch rolls back exactly.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Generator, Iterator, Mapping, Sequence

from toporender.placement.compiled import (
    NO_NODES,
    CompiledGang,
    GangShape,
    Group,
    SearchContext,
    compile_gang,
    size_counts,
)
from toporender.placement.demand import GangDemand
from toporender.placement.tree import ROOT, Tree

# Search budgets in steps (a step = one candidate domain tried or one fit test). They bound the worst case.
GANG_STEPS = 1_000
DEFRAG_STEPS = 2_000
"""Leaf-group moves tried after placing one gang (see ``Fitter.defragment``)."""
HOLE_MAX_NODES = 128
"""Pools up to this many nodes are packed avoiding holes (see ``Fitter.hole``): there the free GPUs left at the
end are few and a hole is lost for good. In larger pools plain best fit placed more GPUs (the mixed family at
1,000-8,000 nodes: 0.1% fewer with holes avoided in every block), so their plans stay as they were."""


def hist_count(hist: Sequence[int], sizes: Sequence[tuple[int, int]]) -> int:
    """How many pods (sizes largest first) fit on nodes with this free-GPU histogram, filling nodes largest first.

    This is exactly what the node assignment does, so a domain that passes this test always receives its pods.
    """
    h = list(hist)
    top = len(h) - 1
    placed = 0
    for g, k in sizes:
        left = k
        f = top
        while left and f >= g:
            c = h[f]
            if c:
                per = f // g
                full = min(c, left // per)
                if full:
                    h[f] -= full
                    h[f - per * g] += full
                    left -= full * per
                if left and h[f] and left < per:
                    h[f] -= 1
                    h[f - left * g] += 1
                    left = 0
            f -= 1
        placed += k - left
        if left:
            break
    return placed


# Domains in a row failing the candidate tests after which the candidate scan starts jumping (see _candidates).
_MISSES_BEFORE_JUMPING = 16


def _next_with_child(by_child: Mapping[int, list[int]], need: int, low: int) -> int | None:
    """The smallest key from ``low`` on of a domain whose largest child has at least ``need`` free GPUs."""
    best = None
    for m, keys in by_child.items():
        if m >= need:
            i = bisect_left(keys, low)
            if i < len(keys) and (best is None or keys[i] < best):
                best = keys[i]
    return best


def _deep_ok(deep: list[tuple[list[list[int] | None], int]], d: int) -> bool:
    """Necessary test: the largest descendant leaf at each finer level fits the largest domain there.

    ``deep`` pairs :meth:`Tree.below` of each level finer than ``d``'s with GPUs x index stride.
    """
    for below, need in deep:
        lst = below[d]
        if not lst or lst[-1] < need:
            return False
    return True


def _fits(hist: Sequence[int], sizes: Sequence[tuple[int, int]], need: int) -> bool:
    return hist_count(hist, sizes) == sum(k for _, k in sizes) if need else True


def _compiled(tree: Tree, idx: int, gang: GangDemand, ahead: Mapping[str, CompiledGang] | None) -> CompiledGang:
    made = ahead.get(gang.key) if ahead else None
    if made is None or made.demand is not gang:
        return compile_gang(tree, idx, gang)
    made.idx = idx
    return made


class Fitter:
    """The state of one packing run (tree, undo log, assignments) and the search that fits one gang."""

    def __init__(self, tree: Tree, gangs: Sequence[GangDemand],
                 compiled: Mapping[str, CompiledGang] | None = None):
        """``compiled``: gangs compiled against ``tree`` ahead (:func:`compile_gang`, any index), by key; the
        others are compiled here."""
        self.tree = tree
        self.log: list[tuple[int, tuple[tuple[int, int], ...], int]] = []
        self.assign: dict[int, dict[int, int]] = {}
        self.gangs: list[CompiledGang] = []
        # per gang: the fewest GPUs a leaf group of it or of an earlier gang asks for; a domain left with fewer
        # free GPUs is a hole no gang seen so far could use (only earlier gangs count: a prefix's plan stays)
        self.hole: list[int] = []
        # per gang: the tainted nodes it or an earlier gang tolerates, which re-arranging may fill to free others
        self.tolerated: list[frozenset[int]] = []
        # how many of the first gangs a run has packed (gangs may be added after a run: :meth:`add`)
        self.packed = 0
        self.small_pool = sum(tree.dom_hist[ROOT]) <= HOLE_MAX_NODES
        self.avoid_holes = self.small_pool
        # whether a hole changed a choice of the current search (then plain best fit is tried too)
        self.held_any = False
        # whether sibling groups go first into the domains that hold most of them (:meth:`_concentrated`)
        self.concentrate = False
        self.lca: dict[int, int] = {}
        self.spent = 0
        self.exact_spent = 0
        self.side_spent = {"fluid": 0, "short": 0, "keep": 0, "node": 0, "tight": 0, "hole": 0, "pool": 0,
                           "tight-pool": 0}
        """Steps of the run's undecided searches charged to a side budget (``SIDE_RUN_STEPS`` in repair)."""
        self.late_spent = 0
        self.gang_exact_spent = 0
        """Steps of the current gang's exact searches charged to the run's (``EXACT_GANG_STEPS`` in repair)."""
        self.eject_spent = 0
        self.eject_exact_spent = 0
        self.exact_notes: dict[int, str] = {}
        """Per gang the exact search could not admit, what it found (see ``Repairer._exact_note``)."""
        self.moved: set[int] = set()
        self.placed: set[int] = set()
        self.reasons: dict[int, str] = {}
        self.active: dict[int, SearchContext] = {}
        # shapes of gangs re-arranging could not admit; free GPUs only shrink, so a gang that asks no less
        # (``packer.no_easier``) is not worth another search
        self.failed: list[GangShape] = []
        # gangs that are never re-arranged (their placement excludes nodes)
        self.fixed: set[int] = set()
        self.add(gangs, compiled)

    def add(self, gangs: Sequence[GangDemand], compiled: Mapping[str, CompiledGang] | None = None) -> None:
        """Append ``gangs`` to the arrival order, for the next run to pack; ``compiled`` as for the constructor.

        Nothing about a gang depends on the gangs after it, so gangs added one batch at a time, each batch packed
        before the next is added, are packed as if all had been given at once: a plan can be packed while the
        demands still arrive. Nothing is appended when a gang cannot be compiled."""
        start = len(self.gangs)
        new = [_compiled(self.tree, start + i, g, compiled) for i, g in enumerate(gangs)]
        least = self.hole[-1] if self.hole else 1 << 60
        tolerated = self.tolerated[-1] if self.tolerated else NO_NODES
        for x in new:
            least = min([least, *(g.need for g in x.groups if g.pods and g.need)])
            self.hole.append(least)
            if not x.groups[0].tol_any <= tolerated:
                tolerated = tolerated | x.groups[0].tol_any
            self.tolerated.append(tolerated)
        self.gangs.extend(new)

    # ---- state changes -------------------------------------------------------------------------------------
    # The undo log holds one entry per batch of pods taken (+1) or released (-1) together, so a rollback costs one
    # tree update per call instead of per pod.
    def _take(self, ctx: SearchContext | None, gang: int, pairs: Sequence[tuple[int, int]],
              deltas: dict[int, int]) -> None:
        """Assign ``pairs`` (pod, node) taking ``deltas`` (GPUs per node); the caller already knows the per-node
        totals, so they are not summed again per pod."""
        self.assign.setdefault(gang, {}).update(pairs)
        self.log.append((gang, tuple(pairs), 1))
        if ctx is not None:
            self._count_used(ctx.used, [node for _, node in pairs], 1)
        self.tree.change(deltas)

    def _take_pairs(self, gang: int, pairs: Sequence[tuple[int, int]]) -> None:
        """Assign a gang's (pod, node) pairs found by a search that did not change the tree."""
        deltas: dict[int, int] = {}
        gpus = self.gangs[gang].pod_gpus
        for pod, node in pairs:
            deltas[node] = deltas.get(node, 0) + gpus[pod]
        self._take(None, gang, pairs, deltas)

    def _release(self, gang: int) -> None:
        asg = self.assign.pop(gang, {})
        gpus = self.gangs[gang].pod_gpus
        deltas: dict[int, int] = {}
        pairs = tuple(sorted(asg.items()))
        for pod, node in pairs:
            deltas[node] = deltas.get(node, 0) - gpus[pod]
        self.log.append((gang, pairs, -1))
        self.tree.change(deltas)

    def _rollback(self, mark: int, ctx: SearchContext | None) -> None:
        deltas: dict[int, int] = {}
        log = self.log
        while len(log) > mark:
            gang, pairs, sign = log.pop()
            gpus = self.gangs[gang].pod_gpus
            if sign > 0:
                asg = self.assign[gang]
                for pod, node in reversed(pairs):
                    del asg[pod]
                    deltas[node] = deltas.get(node, 0) - gpus[pod]
                active = self.active.get(gang) if ctx is None else (ctx if gang == ctx.gang else None)
                if active is not None:
                    self._count_used(active.used, [node for _, node in pairs], -1)
            else:
                asg = self.assign.setdefault(gang, {})
                for pod, node in reversed(pairs):
                    asg[pod] = node
                    deltas[node] = deltas.get(node, 0) + gpus[pod]
        self.tree.change(deltas)

    def _count_used(self, used: dict[int, int], nodes: list[int], sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) one pod per listed node from a gang's pod count per domain; domains
        whose count drops to zero are removed, so ``d in used`` means the gang has pods in ``d``."""
        node_path = self.tree.node_path
        per_path: dict[tuple[int, ...], int] = {}
        # a batch is nearly always the nodes of one rack: count runs of one chain before touching the dict
        last: tuple[int, ...] | None = None
        run = 0
        for n in nodes:
            path = node_path[n]
            if path is last:
                run += 1
                continue
            if last is not None:
                per_path[last] = per_path.get(last, 0) + run
            last = path
            run = 1
        if last is not None:
            per_path[last] = per_path.get(last, 0) + run
        for path, k in per_path.items():
            for d in path:
                c = used.get(d, 0) + sign * k
                if c:
                    used[d] = c
                else:
                    del used[d]

    # ---- capacity views --------------------------------------------------------------------------------------
    def _hist(self, d: int, tol: frozenset[int]) -> list[int]:
        tree = self.tree
        if not tol:
            return tree.dom_hist[d]
        h = list(tree.dom_hist[d])
        for n in tree.dom_tainted[d]:
            if n in tol:
                h[tree.node_free[n]] += 1
        return h

    def _free(self, d: int, tol: frozenset[int]) -> int:
        tree = self.tree
        if not tol:
            return tree.dom_free[d]
        return tree.dom_free[d] + sum(tree.node_free[n] for n in tree.dom_tainted[d] if n in tol)

    def _holds(self, d: int, tol: frozenset[int], sizes: Sequence[tuple[int, int]], need: int) -> bool:
        """Whether domain ``d`` has room for pods of ``sizes`` (``need`` GPUs in all): the free-GPU total first, as
        it is cheap and rules out most domains, then the node histogram. The packer's hottest scan in
        :meth:`_candidates` runs the same two tests on its locals, with the histogram test memoised."""
        return self._free(d, tol) >= need and _fits(self._hist(d, tol), sizes, need)

    # ---- pods into a fixed domain ------------------------------------------------------------------------------
    def _distribute(self, ctx: SearchContext, d: int, pods: list[int], tol: frozenset[int]) -> bool:
        tree = self.tree
        children = tree.dom_children[d]
        if not children:
            return self._to_nodes(ctx, d, pods, tol)
        gpus = self.gangs[ctx.gang].pod_gpus
        remaining = pods
        pool = list(children)
        used = ctx.used
        hole = self.hole[ctx.gang] if self.avoid_holes else 0
        while remaining:
            sizes = size_counts([gpus[p] for p in remaining])
            need = sum(gpus[p] for p in remaining)
            best: tuple[int, int, int, int] | None = None
            for c in pool:
                if self._holds(c, tol, sizes, need):
                    left = self._free(c, tol) - need
                    holey = 1 if 0 < left < hole else 0
                    self.held_any |= bool(holey)
                    key = (0 if c in used else 1, holey, left, tree.rank[c])
                    if best is None or key < best:
                        best = key
            if best is not None:
                c = tree.dom_rank[best[3]]
                return self._distribute(ctx, c, remaining, tol)
            pool.sort(key=lambda c: (0 if c in used else 1, -self._free(c, tol), tree.rank[c]))
            taken = False
            while pool:
                c = pool.pop(0)
                k = hist_count(self._hist(c, tol), sizes)
                if k:
                    if not self._distribute(ctx, c, remaining[:k], tol):
                        return False
                    remaining = remaining[k:]
                    taken = True
                    break
            if not taken:
                return False
        return True

    def _to_nodes(self, ctx: SearchContext, d: int, pods: list[int], tol: frozenset[int]) -> bool:
        """Pods (largest first) onto the domain's nodes: for each pod size, nodes by free GPUs (largest first)
        and name, filling a node before moving to the next."""
        tree = self.tree
        free = tree.node_free
        clean = tree.node_clean
        local = {n: free[n] for n in tree.dom_nodes[d] if free[n] and (clean[n] or n in tol)}
        gpus = self.gangs[ctx.gang].pod_gpus
        pairs: list[tuple[int, int]] = []
        i = 0
        while i < len(pods):
            g = gpus[pods[i]]
            # node ids follow node names and the sort is stable, so equal free GPUs keep name order
            order = sorted(local, key=local.__getitem__, reverse=True)
            j = 0
            while i < len(pods) and gpus[pods[i]] == g:
                while j < len(order) and local[order[j]] < g:
                    j += 1
                if j == len(order):
                    return False
                n = order[j]
                local[n] -= g
                pairs.append((pods[i], n))
                i += 1
        self._take(ctx, ctx.gang, pairs, {n: free[n] - f for n, f in local.items() if f != free[n]})
        return True

    # ---- search over groups ----------------------------------------------------------------------------------
    def _candidates(self, ctx: SearchContext, g: Group, w: int, lvl: int) -> Iterator[int]:
        tree = self.tree
        tol = g.tol_any
        if lvl <= tree.dom_level[w]:
            ctx.steps += 1
            if self._holds(w, tol, g.sizes, g.need):
                yield w
            return
        need = g.need
        used = ctx.used
        rank = tree.rank
        first = sorted(
            (d for d in used if tree.dom_level[d] == lvl and tree.dom_real[d] and tree.inside(d, w)),
            key=lambda d: (self._free(d, tol), rank[d]),
        )
        for d in first:
            ctx.steps += 1
            if self._holds(d, tol, g.sizes, need):
                yield d
        seen: set[tuple[int, ...]] = set()
        if tol:
            pool = sorted(
                (d for d in tree.level_domains[lvl] if tree.inside(d, w) and d not in used),
                key=lambda d: (self._free(d, tol), rank[d]),
            )
            for d in pool:
                ctx.steps += 1
                if ctx.steps >= ctx.limit:
                    return
                if self._holds(d, tol, g.sizes, need):
                    yield d
            return
        lst = tree.index.get((w, lvl))
        if not lst:
            return
        # The scan below is the packer's hottest loop (most domains fail the fit tests), so it keeps its state in
        # locals: ``steps`` is written back to the context before each yield and re-read after it.
        stride = tree.stride
        dom_rank = tree.dom_rank
        hists = tree.dom_hist
        deep = [(tree.below(dl), dn * stride) for dl, dn in g.deep if dl > lvl]
        pos = bisect_left(lst, need * stride)
        fit_memo: dict[tuple[int, ...], bool] = {}
        npods = sum(k for _, k in g.sizes)
        sizes = g.sizes
        limit = ctx.limit
        steps = ctx.steps
        # After a run of domains whose children are all too small for the largest subgroup one level down, the scan
        # jumps to the next domain that has a large enough child (``tree.child_table``) until its next yield. A jump
        # charges the steps the scan would have spent on the domains it skips, so step budgets, and with them
        # plans, stay the same as visiting each domain; it keeps the scan from growing with the cluster size.
        child_need = next((dn for dl, dn in g.deep if dl == lvl + 1), 0)
        by_child: dict[int, list[int]] | None = None
        misses = 0
        # A domain the group would leave with a hole (fewer free GPUs than any leaf group seen so far needs, in
        # it or in one of its ancestors inside ``w``) waits until the scan finds one that leaves none, or ends.
        hole = self.hole[ctx.gang] if self.avoid_holes and g.pods else 0
        held: list[int] = []
        top = tree.dom_level[w] + 1
        free_of = tree.dom_free
        anc = tree.dom_anc
        while pos < len(lst):
            if steps >= limit:
                ctx.steps = steps
                return
            if misses >= _MISSES_BEFORE_JUMPING and child_need:
                if by_child is None:
                    by_child = tree.child_table(w, lvl)
                target = _next_with_child(by_child, child_need, lst[pos])
                if target is None:
                    ctx.steps = min(steps + len(lst) - pos, limit)
                    return
                skip = bisect_left(lst, target, pos) - pos
                if steps + skip >= limit:
                    ctx.steps = limit
                    return
                steps += skip
                pos += skip
            key = lst[pos]
            d = dom_rank[key % stride]
            steps += 1
            # Both tests are pure, so the cheap largest-subgroup test (an index lookup per finer level) runs
            # before the node fit test (a histogram walk), which most blocks fail at scale; same outcome.
            if d not in used and (not deep or _deep_ok(deep, d)):
                h = hists[d]
                th = tuple(h)
                fits = fit_memo.get(th)
                if fits is None:
                    fits = fit_memo[th] = hist_count(h, sizes) == npods
                if fits:
                    # Leaf domains in the same state are interchangeable: try one of them only.
                    sig = (tree.dom_parent[d], *h) if not tree.dom_children[d] else (-1 - d,)
                    if sig not in seen:
                        seen.add(sig)
                        if any(0 < free_of[a] - need < hole for a in anc[d][top:]):
                            self.held_any = True
                            held.append(d)
                            pos = bisect_right(lst, key)
                            misses = 0
                            continue
                        ctx.steps = steps
                        yield d
                        steps = ctx.steps
                        pos = bisect_right(lst, key)
                        misses = 0
                        continue
            else:
                misses += 1
            pos += 1
        ctx.steps = steps
        for d in held:
            if ctx.steps >= limit:
                return
            yield d

    def _gen_group(self, ctx: SearchContext, gang: CompiledGang, gi: int, w: int,
                   left: int = 1) -> Generator[None, None, None]:
        g = gang.groups[gi]
        lo = max(g.req, self.tree.dom_level[w])
        hi = g.pref if g.pref is not None and g.pref > lo else lo
        for lvl in range(hi, lo - 1, -1):
            if self.concentrate and lvl > self.tree.dom_level[w] + 1:
                found = self._concentrated(ctx, g, w, lvl, left)
            else:
                found = self._candidates(ctx, g, w, lvl)
            for d in found:
                if ctx.steps >= ctx.limit:
                    return
                yield from self._gen_items(ctx, gang, gi, d, 0)

    def _concentrated(self, ctx: SearchContext, g: Group, w: int, lvl: int, left: int) -> Iterator[int]:
        """The domains of level ``lvl`` inside ``w`` that hold group ``g``, those inside the domains the gang
        already uses first, then those inside the domains (finest level first) that hold the most of ``g`` and
        of the ``left - 1`` sibling groups after it, of those the ones that hold the fewest more, then the
        tightest.

        Kueue's topology-aware scheduling takes the fewest domains, largest first, then the tightest that
        suffices; best fit one group at a time instead spreads a gang whose preferred domain is full over a
        domain per group when the tightest domains lie in different racks."""
        tree = self.tree
        tol = g.tol_any
        need = g.need
        fits = []
        for d in tree.level_domains[lvl]:
            if ctx.steps >= ctx.limit:
                return
            if tree.inside(d, w):
                ctx.steps += 1
                if self._holds(d, tol, g.sizes, need):
                    fits.append(d)
        cut = tree.dom_level[w] + 2
        cap: dict[int, int] = {}
        for d in fits:
            for a in tree.dom_anc[d][cut:-1]:
                cap[a] = cap.get(a, 0) + 1
        used = ctx.used

        def order(d: int) -> tuple[tuple[tuple[bool, int, int], ...], int, int]:
            chain = tree.dom_anc[d][:cut - 1:-1]
            return (tuple((a not in used, -min(cap.get(a, 1), left), cap.get(a, 1)) for a in chain),
                    self._free(d, tol), tree.rank[d])

        yield from sorted(fits, key=order)

    def _gen_items(self, ctx: SearchContext, gang: CompiledGang, gi: int, d: int,
                   i: int) -> Generator[None, None, None]:
        g = gang.groups[gi]
        if i < len(g.children):
            for _ in self._gen_group(ctx, gang, g.children[i], d, len(g.children) - i):
                yield from self._gen_items(ctx, gang, gi, d, i + 1)
            return
        if not g.pods:
            yield
            return
        mark = len(self.log)
        ctx.steps += 1
        if self._distribute(ctx, d, g.pods, g.tol):
            yield
        self._rollback(mark, ctx)

    def place_fewest(self, gang: CompiledGang, region: int, limit: int) -> tuple[bool, int]:
        """:meth:`place`; when avoiding a hole changed a choice, also plain best fit; when the gang spreads over
        several domains of a level, also the search that keeps sibling groups together (:meth:`_concentrated`).
        The placement on fewer domains (coarsest level first), then with fewer GPUs left in holes, is kept (the
        first on ties).

        Avoiding a hole takes a looser domain for one group, which can leave the gang's later groups no room in
        the domains it already uses: on the first generator that spread gangs over more racks and made two
        appended gangs that used to fit need a re-arrangement. Every search depends only on the plan so far, so
        the choice keeps plans stable under appends."""
        self.held_any = False
        mark = len(self.log)
        ok, steps = self.place(gang, region, limit)
        tries = [1] if self.held_any else []
        if self.small_pool and any(len(g.children) > 1 for g in gang.groups):
            tries.append(2)
        if not tries:
            return ok, steps
        best = self._score(gang) if ok else None
        chosen = now = 0 if ok else -1
        for mode in tries:
            if mode == 2 and (best is None or max(best[0]) < 2):
                continue
            self._unplace(gang, mark)
            got, more = self._place_as(mode, gang, region, limit)
            steps += more
            now = mode if got else -1
            if got:
                score = self._score(gang)
                if best is None or score < best:
                    best, chosen = score, mode
        if now == chosen:
            return chosen >= 0, steps
        self._unplace(gang, mark)
        if chosen < 0:
            return False, steps
        ok, more = self._place_as(chosen, gang, region, limit)
        return ok, steps + more

    def _place_as(self, mode: int, gang: CompiledGang, region: int, limit: int) -> tuple[bool, int]:
        """:meth:`place` as try ``mode`` of :meth:`place_fewest` searches: 0 plain, 1 without avoiding holes,
        2 keeping sibling groups together."""
        self.avoid_holes = self.small_pool and mode != 1
        self.concentrate = mode == 2
        try:
            return self.place(gang, region, limit)
        finally:
            self.avoid_holes = self.small_pool
            self.concentrate = False

    def _unplace(self, gang: CompiledGang, mark: int) -> None:
        self._rollback(mark, None)
        self.lca.pop(gang.idx, None)
        self.placed.discard(gang.idx)

    def _score(self, gang: CompiledGang) -> tuple[tuple[int, ...], int]:
        """Domains the gang's pods lie in per level (coarsest first), then free GPUs in holes among them."""
        tree = self.tree
        doms = {d for n in set(self.assign.get(gang.idx, {}).values()) for d in tree.node_path[n]}
        per = [0] * len(tree.levels)
        for d in doms:
            if d != ROOT:
                per[tree.dom_level[d]] += 1
        hole = self.hole[gang.idx]
        free = tree.dom_free
        return tuple(per), sum(free[d] for d in doms if d != ROOT and 0 < free[d] < hole)

    def place(self, gang: CompiledGang, region: int, limit: int) -> tuple[bool, int]:
        """Place one gang inside ``region``; returns (placed, steps spent)."""
        ctx = SearchContext(gang.idx, limit)
        if gang.need == 0:
            self.placed.add(gang.idx)
            return True, 0
        gen = self._gen_group(ctx, gang, 0, region)
        ok = False
        for _ in gen:
            ok = True
            break
        gen.close()
        if ok:
            self.lca[gang.idx] = self._lca(gang.idx)
            self.placed.add(gang.idx)
        return ok, ctx.steps

    # ---- filling holes with the gang just placed -------------------------------------------------------------
    def defragment(self, gang: CompiledGang) -> None:
        """Move whole leaf groups of ``gang`` (just placed) to other domains of their required level when that
        leaves fewer free GPUs in holes (domains with fewer free GPUs than any leaf group seen so far asks for),
        the gang spans no more domains at any level, and the target has no more free GPUs than the group's
        domain would have without it.

        Best fit chooses one group at a time: a hole an earlier gang left stays open while a group of the gang
        takes a looser domain, and the gang's own choices leave holes another of its groups could have filled.
        Each group stays inside the domains its ancestor groups require (around their pods), and is placed by
        the search's own descent, so every constraint holds as after any placement. The last condition keeps
        the larger room of the two domains for later gangs: without it, two appended gangs of each stability
        set needed a re-arrangement. Only the gang just placed moves, so earlier placements, and with them plans
        of prefixes, stay as they were; each try is a step of a fixed budget. Small pools only, like holes."""
        tree = self.tree
        if not self.small_pool or gang.excluded or gang.idx not in self.lca or gang.idx in self.fixed:
            return
        hole = self.hole[gang.idx]
        asg = self.assign[gang.idx]
        leaves = [gi for gi, g in enumerate(gang.groups) if g.pods and not g.children and g.req >= 0
                  and not g.tol_any]
        budget = DEFRAG_STEPS
        better = True
        while better and budget > 0:
            better = False
            for gi in leaves:
                g = gang.groups[gi]
                top, a = -1, g.parent
                while a >= 0:
                    top = max(top, gang.groups[a].req)
                    a = gang.groups[a].parent
                path = tree.node_path[asg[g.pods[0]]]
                w = path[-top - 2] if top >= 0 else ROOT
                spans, holes = self._spans_and_holes(gang, hole)
                here = {tree.node_path[asg[p]][-g.req - 2] for p in g.pods}
                # the target may not have more free GPUs than the group's domain would without it: the larger
                # room of the two stays for later gangs
                room = tree.dom_free[min(here)] + g.need
                domains = sorted((d for d in tree.level_domains[g.req] if tree.dom_real[d] and d not in here
                                  and tree.inside(d, w) and g.need <= self._free(d, g.tol)
                                  and tree.dom_free[d] <= room),
                                 key=tree.rank.__getitem__)
                best: tuple[int, tuple[int, ...], int] | None = None
                for d in domains:
                    if budget <= 0:
                        break
                    budget -= 1
                    mark = len(self.log)
                    if self._move_group(gang, g.pods, d, g.tol):
                        got, left = self._spans_and_holes(gang, hole)
                        key = (left, got, tree.rank[d])
                        if left < holes and all(x <= y for x, y in zip(got, spans, strict=True)) and (
                                best is None or key < best):
                            best = key
                    self._rollback(mark, None)
                if best is not None:
                    self._move_group(gang, g.pods, tree.dom_rank[best[2]], g.tol)
                    better = True
        self.lca[gang.idx] = self._lca(gang.idx)

    def _move_group(self, gang: CompiledGang, pods: list[int], d: int, tol: frozenset[int]) -> bool:
        """Release ``pods`` of ``gang`` and place them inside ``d`` by the search's descent."""
        asg = self.assign[gang.idx]
        gpus = gang.pod_gpus
        pairs = tuple(sorted((p, asg.pop(p)) for p in pods))
        deltas: dict[int, int] = {}
        for pod, node in pairs:
            deltas[node] = deltas.get(node, 0) - gpus[pod]
        self.log.append((gang.idx, pairs, -1))
        self.tree.change(deltas)
        ctx = SearchContext(gang.idx, 0)
        self._count_used(ctx.used, list(asg.values()), 1)
        return self._distribute(ctx, d, pods, tol)

    def _spans_and_holes(self, gang: CompiledGang, hole: int) -> tuple[tuple[int, ...], int]:
        """The gang's domains per level (coarsest first), and free GPUs in holes over the pool."""
        tree = self.tree
        doms = {d for n in set(self.assign[gang.idx].values()) for d in tree.node_path[n]}
        per = [0] * len(tree.levels)
        for d in doms:
            if d != ROOT:
                per[tree.dom_level[d]] += 1
        free = tree.dom_free
        return tuple(per), sum(f for d in range(1, len(free)) if 0 < (f := free[d]) < hole)

    def _lca(self, gang: int) -> int:
        tree = self.tree
        nodes = set(self.assign.get(gang, {}).values())
        if not nodes:
            return ROOT
        # the gang's nodes share few chains; the common prefix only depends on the distinct ones
        paths = [tuple(reversed(p)) for p in {tree.node_path[n] for n in nodes}]
        depth = 0
        first = paths[0]
        while depth < len(first) and all(len(p) > depth and p[depth] == first[depth] for p in paths):
            depth += 1
        return first[depth - 1] if depth else ROOT

