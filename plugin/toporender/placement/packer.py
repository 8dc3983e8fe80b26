"""Deterministic topology-aware gang packer ("pack to empty").

Gangs are placed one by one in arrival order. For each gang a depth-first search with backtracking (as KAI does
across subgroups) chooses, level by level, a domain for the gang and then for each subgroup, largest first:

* candidates are the domains of the group's level inside its parent's domain that can hold all its pods, taken
  from a per-(ancestor, level) list sorted by free GPUs, so the first candidate is the best fit (least residual);
  domains the same gang already uses come first; ties break on the domain path;
* a preferred level is tried first and relaxed one level at a time up to the required level;
* inside the chosen domain, pods go to the single child that fits tightest, else to the largest children first
  with the tightest child for the remainder (Kueue's descent), and finally to nodes sorted by free GPUs
  (largest first) and name, filling a node before the next (seed 001).

When a gang does not fit, earlier gangs may be re-arranged (never dropped): the gangs lying inside one region (a
domain of the new gang's required level, then coarser ones up to the pool) are lifted, assigned whole to domains
of their required level (a search of its own), and each domain is re-packed by a depth-first search over leaf
groups, largest pods first, with forward checking. Earlier gangs never move when the new gang fits as they are,
which is what makes plans stable under appended gangs.

Work is bounded by step budgets that depend only on the gangs seen so far, so the result for a prefix of the
arrival order never depends on what comes after it and the worst-case time stays bounded.
"""

from __future__ import annotations

import gc
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from toporender.errors import fail
from toporender.placement.demand import GangDemand, LevelConstraint, PodDemand
from toporender.placement.inventory import Inventory, tolerates
from toporender.placement.plan import PlacementPlan, build_plan
from toporender.placement.tree import ROOT, Tree

# Search budgets in steps (a step = one candidate domain tried or one fit test). They bound the worst case.
GANG_STEPS = 1_000
REPAIR_BASE_STEPS = 20_000
REPAIR_STEPS_PER_TRY = 2_000
REPAIR_STEPS_PER_DOMAIN = 1_500
REPAIR_STEPS_PER_GANG = 10
MAX_MOVABLE = 300
REPAIR_REGIONS = 3


# Most groups tolerate no tainted node; they share one empty set (each ``frozenset()`` call makes a new one).
_NO_NODES: frozenset[int] = frozenset()


@dataclass(slots=True)
class _Group:
    name: str
    parent: int
    req: int
    pref: int | None
    children: list[int] = field(default_factory=list)
    pods: list[int] = field(default_factory=list)
    need: int = 0
    sizes: tuple[tuple[int, int], ...] = ()
    tol: frozenset[int] = frozenset()
    tol_any: frozenset[int] = frozenset()
    deep: tuple[tuple[int, int], ...] = ()


@dataclass(slots=True)
class _Gang:
    idx: int
    demand: GangDemand
    groups: list[_Group]
    pod_names: list[str]
    pod_gpus: list[int]
    need: int
    max_leaf: int


# A leaf group as the forward check sees it: (GPUs, required level, its own and its ancestors' keys in ``fixed``).
_Check = tuple[int, int, tuple[tuple[int, int], ...]]


@dataclass(slots=True)
class _Ctx:
    gang: int
    limit: int
    steps: int = 0
    used: dict[int, int] = field(default_factory=dict)


def _item_order(item: tuple[_Gang, int]) -> tuple[int, int, int, int]:
    """Largest pods first, then largest groups: for divisible pod sizes this makes first-fit node packing exact."""
    gang, gi = item
    g = gang.groups[gi]
    return (-g.sizes[0][0] if g.sizes else 0, -g.need, gang.idx, gi)


def _sizes(gpus: Sequence[int]) -> tuple[tuple[int, int], ...]:
    counts: dict[int, int] = {}
    for g in gpus:
        counts[g] = counts.get(g, 0) + 1
    return tuple(sorted(counts.items(), reverse=True))


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


class Packer:
    """One packing run: the tree state, the undo log and the assignments."""

    def __init__(self, tree: Tree, gangs: Sequence[GangDemand]):
        self.tree = tree
        self.log: list[tuple[int, tuple[tuple[int, int], ...], int]] = []
        self.assign: dict[int, dict[int, int]] = {}
        self.gangs = [self._compile(i, g) for i, g in enumerate(gangs)]
        self.lca: dict[int, int] = {}
        self.spent = 0
        self.moved: set[int] = set()
        self.placed: set[int] = set()
        self.reasons: dict[int, str] = {}
        self.active: dict[int, _Ctx] = {}
        # (required level, GPUs, largest leaf) of gangs re-arranging could not admit; free GPUs only shrink, so a
        # gang at least as large in both is not worth another search
        self.failed: list[tuple[int, int, int]] = []

    # ---- demand compilation -------------------------------------------------------------------------------
    def _level(self, gang: GangDemand, label: str | None, what: str) -> int | None:
        if label is None:
            return None
        try:
            return self.tree.levels.index(label)
        except ValueError:
            raise fail(
                f"{gang.display}: {what} topology level {label!r} is not one of the pool's levels "
                f"({', '.join(self.tree.levels) or 'none'})"
            ) from None

    def _compile(self, idx: int, gang: GangDemand) -> _Gang:
        pods = sorted((p for p in gang.pods if p.gpus > 0), key=lambda p: (-p.gpus, p.name))
        pod_index = {p.name: i for i, p in enumerate(pods)}

        def group(name: str, parent: int, c: LevelConstraint, inherited: int) -> _Group:
            req = self._level(gang, c.required, "required")
            pref = self._level(gang, c.preferred, "preferred")
            r = max(inherited, req if req is not None else -1)
            return _Group(name, parent, r, pref)

        groups = [group("", -1, gang.constraint, -1)]
        by_name: dict[str, int] = {}
        subs = {s.name: s for s in gang.subgroups}
        order: list[str] = []
        visiting: set[str] = set()

        def visit(name: str) -> None:
            if name in by_name or name in visiting:
                return
            visiting.add(name)
            s = subs[name]
            if s.parent is not None and s.parent in subs:
                visit(s.parent)
            parent = by_name.get(s.parent, 0) if s.parent is not None else 0
            groups.append(group(name, parent, s.constraint, groups[parent].req))
            by_name[name] = len(groups) - 1
            groups[parent].children.append(len(groups) - 1)
            order.append(name)

        for name in sorted(subs):
            visit(name)
        leaf_of = dict(gang.pod_subgroup)
        for s in gang.subgroups:
            for p in s.pods:
                leaf_of.setdefault(p.name, s.name)
        for p in pods:
            gi = by_name.get(leaf_of.get(p.name, ""), 0)
            groups[gi].pods.append(pod_index[p.name])
        gpus = [p.gpus for p in pods]
        tree = self.tree
        tainted = tree.tainted_nodes

        def tolerated(plist: list[PodDemand]) -> frozenset[int]:
            if not tainted or not plist or not all(p.tolerations for p in plist):
                return _NO_NODES
            return frozenset(
                n for n in tainted
                if all(all(tolerates(p.tolerations, t) for t in tree.node_taints[n]) for p in plist)
            )

        for gi in range(len(groups) - 1, -1, -1):
            g = groups[gi]
            g.tol = tolerated([pods[i] for i in g.pods])
            sub_pods = list(g.pods)
            tol_any = set(g.tol)
            for c in g.children:
                sub_pods.extend(self._subtree_pods(groups, c))
                tol_any |= groups[c].tol_any
            g.tol_any = frozenset(tol_any) if tol_any else _NO_NODES
            g.need = sum(gpus[i] for i in sub_pods)
            g.sizes = _sizes([gpus[i] for i in sub_pods])
        for g in groups:
            g.children.sort(key=lambda c: (-groups[c].need, groups[c].name))
        for gi in range(len(groups) - 1, -1, -1):
            g = groups[gi]
            deep: dict[int, int] = {}
            for c in g.children:
                child = groups[c]
                for lvl, need in ((child.req, child.need), *child.deep):
                    if lvl > g.req and not child.tol_any:
                        deep[lvl] = max(deep.get(lvl, 0), need)
            g.deep = tuple(sorted(deep.items()))
        leaves = [g.need for g in groups if g.pods]
        return _Gang(idx, gang, groups, [p.name for p in pods], gpus, groups[0].need, max(leaves, default=0))

    @staticmethod
    def _subtree_pods(groups: list[_Group], gi: int) -> list[int]:
        out = list(groups[gi].pods)
        for c in groups[gi].children:
            out.extend(Packer._subtree_pods(groups, c))
        return out

    # ---- state changes -------------------------------------------------------------------------------------
    # The undo log holds one entry per batch of pods taken (+1) or released (-1) together, so a rollback costs one
    # tree update per call instead of per pod.
    def _take(self, ctx: _Ctx | None, gang: int, pairs: Sequence[tuple[int, int]], deltas: dict[int, int]) -> None:
        """Assign ``pairs`` (pod, node) taking ``deltas`` (GPUs per node); the caller already knows the per-node
        totals, so they are not summed again per pod."""
        self.assign.setdefault(gang, {}).update(pairs)
        self.log.append((gang, tuple(pairs), 1))
        if ctx is not None:
            self._count_used(ctx.used, [node for _, node in pairs], 1)
        self.tree.change(deltas)

    def _release(self, gang: int) -> None:
        asg = self.assign.pop(gang, {})
        gpus = self.gangs[gang].pod_gpus
        deltas: dict[int, int] = {}
        pairs = tuple(sorted(asg.items()))
        for pod, node in pairs:
            deltas[node] = deltas.get(node, 0) - gpus[pod]
        self.log.append((gang, pairs, -1))
        self.tree.change(deltas)

    def _rollback(self, mark: int, ctx: _Ctx | None) -> None:
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

    # ---- pods into a fixed domain ------------------------------------------------------------------------------
    def _distribute(self, ctx: _Ctx, d: int, pods: list[int], tol: frozenset[int]) -> bool:
        tree = self.tree
        children = tree.dom_children[d]
        if not children:
            return self._to_nodes(ctx, d, pods, tol)
        gpus = self.gangs[ctx.gang].pod_gpus
        remaining = pods
        pool = list(children)
        used = ctx.used
        while remaining:
            sizes = _sizes([gpus[p] for p in remaining])
            need = sum(gpus[p] for p in remaining)
            best: tuple[int, int, int] | None = None
            for c in pool:
                if self._free(c, tol) >= need and _fits(self._hist(c, tol), sizes, need):
                    key = (0 if c in used else 1, self._free(c, tol) - need, tree.rank[c])
                    if best is None or key < best:
                        best = key
            if best is not None:
                c = tree.dom_rank[best[2]]
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

    def _to_nodes(self, ctx: _Ctx, d: int, pods: list[int], tol: frozenset[int]) -> bool:
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
    def _candidates(self, ctx: _Ctx, g: _Group, w: int, lvl: int) -> Iterator[int]:
        tree = self.tree
        tol = g.tol_any
        if lvl <= tree.dom_level[w]:
            ctx.steps += 1
            if self._free(w, tol) >= g.need and _fits(self._hist(w, tol), g.sizes, g.need):
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
            if self._free(d, tol) >= need and _fits(self._hist(d, tol), g.sizes, need):
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
                if self._free(d, tol) >= need and _fits(self._hist(d, tol), g.sizes, need):
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

    def _gen_group(self, ctx: _Ctx, gang: _Gang, gi: int, w: int) -> Generator[None, None, None]:
        g = gang.groups[gi]
        lo = max(g.req, self.tree.dom_level[w])
        hi = g.pref if g.pref is not None and g.pref > lo else lo
        for lvl in range(hi, lo - 1, -1):
            for d in self._candidates(ctx, g, w, lvl):
                if ctx.steps >= ctx.limit:
                    return
                yield from self._gen_items(ctx, gang, gi, d, 0)

    def _gen_items(self, ctx: _Ctx, gang: _Gang, gi: int, d: int, i: int) -> Generator[None, None, None]:
        g = gang.groups[gi]
        if i < len(g.children):
            for _ in self._gen_group(ctx, gang, g.children[i], d):
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

    def place(self, gang: _Gang, region: int, limit: int) -> tuple[bool, int]:
        """Place one gang inside ``region``; returns (placed, steps spent)."""
        ctx = _Ctx(gang.idx, limit)
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

    # ---- re-arranging earlier gangs ------------------------------------------------------------------------------
    def _inside(self, region: int) -> list[int]:
        tree = self.tree
        self.spent += len(self.lca) // 64 + 1
        if region == ROOT:
            return sorted(self.lca)
        # Tree.inside inlined: this scans every placed gang for each region a repair tries
        lvl = tree.dom_level[region] + 1
        anc = tree.dom_anc
        return sorted(g for g, d in self.lca.items() if len(anc[d]) > lvl and anc[d][lvl] == region)

    def repair(self, gang: _Gang) -> bool:
        """Re-pack the gangs of one region together with ``gang``; earlier gangs move only if this succeeds."""
        tree = self.tree
        allowance = min(REPAIR_BASE_STEPS + REPAIR_STEPS_PER_GANG * (gang.idx + 1), self.spent + REPAIR_STEPS_PER_TRY)
        r = gang.groups[0].req
        regions: list[int] = []
        for lvl in range(r, -1, -1):
            lst = tree.index.get((ROOT, lvl), [])
            regions.extend([tree.dom_of(k) for k in reversed(lst) if tree.free_of(k) >= gang.need][:REPAIR_REGIONS])
        if tree.dom_free[ROOT] >= gang.need:
            regions.append(ROOT)
        tried: set[tuple[int, ...]] = set()
        for region in regions:
            if self.spent >= allowance:
                return False
            movable = tuple(self._inside(region))
            if movable in tried:
                continue
            tried.add(movable)
            if self._repack(gang, region, list(movable), allowance):
                return True
        return False

    def _repack(self, gang: _Gang, region: int, movable: list[int], allowance: int) -> bool:
        if not movable or len(movable) > MAX_MOVABLE:
            return False
        if self.tree.dom_free[region] < gang.need:
            return False
        saved = {m: self.lca[m] for m in movable}
        before = {m: dict(self.assign.get(m, {})) for m in movable}
        mark = len(self.log)
        for m in movable:
            self._release(m)
            del self.lca[m]
            self.placed.discard(m)
        alone = len(self.log)
        fits_alone, steps = self.place(gang, region, GANG_STEPS)
        self.spent += steps
        if fits_alone:
            self.lca.pop(gang.idx, None)
            self.placed.discard(gang.idx)
        self._rollback(alone, None)
        if not fits_alone:
            self._rollback(mark, None)
            self.lca.update(saved)
            self.placed.update(saved)
            return False
        gs = [self.gangs[m] for m in movable] + [gang]
        items = [(x, gi) for x in gs for gi, g in enumerate(x.groups) if g.pods]
        split = min(x.groups[0].req for x in gs)
        attempts: list[Callable[[], bool]] = []
        if split > self.tree.dom_level[region]:
            attempts.append(lambda: self._decomposed(gs, region, split, allowance))
        attempts.append(lambda: self._search_items(
            sorted(items, key=_item_order), region, allowance))
        for attempt in attempts:
            if attempt():
                for x in gs:
                    self.lca[x.idx] = self._lca(x.idx)
                    self.placed.add(x.idx)
                self.moved.update(m for m in movable if self.assign.get(m, {}) != before[m])
                return True
            if self.spent >= allowance:
                break
        self._rollback(mark, None)
        self.lca.update(saved)
        self.placed.update(saved)
        return False

    def _decomposed(self, gs: list[_Gang], region: int, split: int, allowance: int) -> bool:
        """Assign whole gangs to domains of level ``split`` first (free GPUs permitting), then pack each domain
        on its own; a domain that cannot hold its gangs sends the search back to the gang-to-domain choice."""
        tree = self.tree
        doms = [tree.dom_of(k) for k in tree.index.get((region, split), [])]
        cap = {d: tree.dom_free[d] for d in doms}
        members: dict[int, list[_Gang]] = {d: [] for d in doms}
        order = sorted(gs, key=lambda x: (-x.need, -x.max_leaf, x.idx))
        failed: set[tuple[int, frozenset[int]]] = set()
        rank = tree.rank

        def pack_domains() -> bool:
            mark = len(self.log)
            for d in doms:
                if not members[d]:
                    continue
                key = (d, frozenset(x.idx for x in members[d]))
                if key in failed:
                    self._rollback(mark, None)
                    return False
                items = [(x, gi) for x in members[d] for gi, g in enumerate(x.groups) if g.pods]
                items.sort(key=_item_order)
                if not self._search_items(items, d, min(allowance, self.spent + REPAIR_STEPS_PER_DOMAIN)):
                    failed.add(key)
                    self._rollback(mark, None)
                    return False
            return True

        def assign(i: int) -> bool:
            if self.spent >= allowance:
                return False
            if i == len(order):
                return pack_domains()
            x = order[i]
            for d in sorted((d for d in doms if cap[d] >= x.need), key=lambda d: (cap[d] - x.need, rank[d])):
                self.spent += 1
                members[d].append(x)
                cap[d] -= x.need
                if (d, frozenset(m.idx for m in members[d])) not in failed and assign(i + 1):
                    return True
                members[d].pop()
                cap[d] += x.need
            return False

        return assign(0)

    def _search_items(self, items: list[tuple[_Gang, int]], region: int, allowance: int) -> bool:
        """Iterative depth-first search placing leaf groups of many gangs, largest first (bin-packing order).

        A gang's group domains are fixed by the first of its leaves placed, so later leaves of the same gang only
        see domains inside them.
        """
        tree = self.tree
        self.active = {x.idx: _Ctx(x.idx, 0) for x, _ in items}
        fixed: dict[tuple[int, int], int] = {}
        stack: list[tuple[Iterator[int], int, list[tuple[int, int]]]] = []
        i = 0
        it = self._item_candidates(items[0], region, fixed)
        base = len(self.log)
        checks = [self._check(gang, gi) for gang, gi in items]
        try:
            while True:
                if self.spent >= allowance:
                    self._rollback(base, None)
                    return False
                self.spent += 1
                d = next(it, -1)
                if d < 0:
                    if not stack:
                        return False
                    i -= 1
                    it, mark, fixes = stack.pop()
                    self._rollback(mark, None)
                    for key in fixes:
                        del fixed[key]
                    continue
                gang, gi = items[i]
                ctx = self.active[gang.idx]
                mark = len(self.log)
                g = gang.groups[gi]
                if not self._distribute(ctx, d, g.pods, g.tol):
                    self._rollback(mark, None)
                    continue
                fixes = []
                a = gi
                while a >= 0:
                    grp = gang.groups[a]
                    if grp.req >= 0 and (gang.idx, a) not in fixed:
                        fixed[(gang.idx, a)] = tree.dom_anc[d][grp.req + 1]
                        fixes.append((gang.idx, a))
                    a = grp.parent
                if i + 1 < len(items) and not self._still_possible(checks, i + 1, region, fixed):
                    self._rollback(mark, None)
                    for key in fixes:
                        del fixed[key]
                    continue
                stack.append((it, mark, fixes))
                i += 1
                if i == len(items):
                    return True
                it = self._item_candidates(items[i], region, fixed)
        finally:
            self.active = {}

    @staticmethod
    def _check(gang: _Gang, gi: int) -> _Check | None:
        """What the forward check needs of one leaf group (None: it may use tainted nodes, so it is not checked)."""
        g = gang.groups[gi]
        if g.tol_any:
            return None
        keys = []
        a = gi
        while a >= 0:
            keys.append((gang.idx, a))
            a = gang.groups[a].parent
        return g.need, g.req, tuple(keys)

    def _still_possible(self, checks: list[_Check | None], start: int, region: int,
                        fixed: dict[tuple[int, int], int]) -> bool:
        """Forward check: every remaining leaf still has a domain with enough free GPUs, and no fixed domain or
        the region is asked for more than it has free."""
        tree = self.tree
        free = tree.dom_free
        level = tree.dom_level
        index = tree.index
        stride = tree.stride
        left: dict[int, int] = {}
        total = 0
        for check in checks[start:]:
            if check is None:
                continue
            need, req, keys = check
            total += need
            w = region
            for key in keys:
                d = fixed.get(key)
                if d is not None:
                    left[d] = left.get(d, 0) + need
                    if level[d] > level[w]:
                        w = d
            if req > level[w]:
                lst = index.get((w, req))
                if not lst or lst[-1] < need * stride:
                    return False
            elif free[w] < need:
                return False
        if total > free[region]:
            return False
        return all(free[d] >= n for d, n in left.items())

    def _item_candidates(self, item: tuple[_Gang, int], region: int, fixed: dict[tuple[int, int], int]
                         ) -> Iterator[int]:
        """Domains for one leaf group inside its gang's already fixed domains, best fit first."""
        tree = self.tree
        gang, gi = item
        g = gang.groups[gi]
        w = region
        a = gi
        while a >= 0:
            d = fixed.get((gang.idx, a))
            if d is not None and tree.dom_level[d] > tree.dom_level[w]:
                w = d
            a = gang.groups[a].parent
        lvl = max(g.req, tree.dom_level[w])
        ctx = self.active[gang.idx]
        ctx.limit = 1 << 60
        seen: set[tuple[int, ...]] = set()
        tried: set[int] = set()
        pref = gang.groups[0].pref
        scopes: list[int] = []
        if pref is not None and tree.dom_level[w] < pref < lvl:
            # keep the gang inside the preferred-level domains it already uses before spreading further
            scopes = sorted((d for d in ctx.used if tree.dom_level[d] == pref and tree.dom_real[d]
                             and tree.inside(d, w)), key=lambda d: tree.rank[d])
        for scope in [*scopes, w]:
            for d in self._candidates(ctx, g, scope, lvl):
                if d in tried:
                    continue
                tried.add(d)
                if not tree.dom_children[d] and d not in ctx.used:
                    sig = (tree.dom_parent[d], *tree.dom_hist[d])
                    if sig in seen:
                        continue
                    seen.add(sig)
                yield d

    def run(self) -> None:
        for gang in self.gangs:
            ok = False
            if not self._hopeless(gang):
                ok, _ = self.place(gang, ROOT, GANG_STEPS)
            if not ok:
                reason = self.reason(gang)
                shape = (gang.groups[0].req, gang.need, gang.max_leaf)
                dominated = any(r == shape[0] and n <= shape[1] and m <= shape[2] for r, n, m in self.failed)
                if dominated or not self.repair(gang):
                    self.reasons[gang.idx] = reason
                    if not dominated:
                        self.failed.append(shape)
            self.log.clear()

    def _largest(self, lvl: int, tol: frozenset[int]) -> int:
        """The domain of a level with the most free GPUs (first by path among equals)."""
        tree = self.tree
        if tol:
            return min(tree.level_domains[lvl], key=lambda d: (-self._free(d, tol), tree.rank[d]))
        lst = tree.index[(ROOT, lvl)]
        return tree.dom_of(lst[bisect_left(lst, tree.free_of(lst[-1]) * tree.stride)])

    def _hopeless(self, gang: _Gang) -> bool:
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

    def reason(self, gang: _Gang) -> str:
        """Why ``gang`` does not fit now: the binding level, the demand and the best domain's free capacity."""
        tree = self.tree
        excluded = tree.cordoned
        tainted = tree.tainted
        notes = []
        if excluded:
            notes.append(f"{excluded} cordoned node{'s' if excluded != 1 else ''}")
        if tainted:
            notes.append(f"{tainted} tainted node{'s' if tainted != 1 else ''} not tolerated")
        suffix = f" ({', '.join(notes)} excluded)" if notes else ""
        groups = sorted(range(len(gang.groups)), key=lambda gi: (gi != 0, -gang.groups[gi].need, gi))
        for gi in groups:
            g = gang.groups[gi]
            who = gang.demand.display if gi == 0 else f"{gang.demand.display}/{g.name}"
            if g.req < 0:
                free = self._free(ROOT, g.tol_any)
                if free < g.need:
                    return f"{who} needs {g.need} GPUs; the pool has {free} free{suffix}"
                continue
            label = tree.levels[g.req]
            if not tree.level_domains[g.req]:
                return f"{who} needs {g.need} GPUs in one {label}; no node has the label {label}{suffix}"
            best = self._largest(g.req, g.tol_any)
            free = self._free(best, g.tol_any)
            if free < g.need:
                return f"{who} needs {g.need} GPUs in one {label}; the largest has {free} ({tree.name(best)}){suffix}"
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
        )


def pack(
    inventory: Inventory,
    levels: Sequence[str],
    gangs: Sequence[GangDemand],
    *,
    node_selector: Mapping[str, str] | None = None,
) -> PlacementPlan:
    """Place ``gangs`` (arrival order, earlier = higher priority) on ``inventory``.

    ``levels`` are the pool's topology label keys, coarsest first. Pure and deterministic: the plan depends only
    on the node set (not its order) and on the gang sequence.
    """
    keys = [g.key for g in gangs]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise fail(f"gang keys must be unique; repeated: {', '.join(dup)}")
    with _cyclic_gc_paused():
        tree = Tree(inventory, levels, node_selector or {})
        packer = Packer(tree, gangs)
        packer.run()
        return build_plan(tree, packer)


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while packing.

    Packing allocates millions of small lists, dicts and tuples and keeps many of them (the tree, compiled gangs,
    the plan), which makes the collector re-scan the growing heap again and again: at 100k GPUs that was about a
    fifth of the run time. Reference counting still frees nearly everything at once; the few small cycles
    (the re-arranging search's recursive closures) wait for the collector, which is switched back on afterwards
    if it was on.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
