"""The topology tree: domains built from node labels, with per-domain aggregates the packer keeps current.

A domain is identified by the full path of label values from the coarsest level down (``zone=a/block=b``), as
Kueue does. The tree validates that the labels form a hierarchy in the declared order: a finer value that appears
under two coarser values is a contradiction the user must fix, and the error names nodes from both sides.

Hot state is plain lists indexed by integer ids so the packer's inner loops stay cheap: per-domain free GPUs, a
histogram of free GPUs per node (what decides whether pods of a given size fit), and, for every
(ancestor, level) pair, a list of descendant domains sorted by free GPUs (as one int key each) so a best-fit
candidate is found by bisection instead of a scan.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from operator import attrgetter

from toporender.errors import Diagnostic, Position, UserError
from toporender.placement.inventory import HARD_EFFECTS, Inventory, Taint

ROOT = 0


class Tree:
    """Mutable packing state over an immutable domain structure."""

    def __init__(self, inventory: Inventory, levels: Sequence[str], node_selector: Mapping[str, str]):
        self.levels = tuple(levels)
        selected = inventory.nodes
        if node_selector:
            wanted = node_selector.items()
            selected = tuple(n for n in selected if wanted <= n.labels.items())
        nodes = sorted(selected, key=attrgetter("name"))
        paths = [self._path(n.labels) for n in nodes]
        first: dict[tuple[str, ...], str] = {}
        for n, path in zip(nodes, paths, strict=True):
            first.setdefault(path, n.name)
        _check_hierarchy(inventory, self.levels, first)
        self.node_names = [n.name for n in nodes]
        self.node_labels = [n.labels for n in nodes]
        self.node_cap = [n.gpus for n in nodes]
        self.node_used0 = [min(n.used_gpus, n.gpus) for n in nodes]
        self.node_ok = [not n.unschedulable for n in nodes]
        hard = [tuple(t for t in n.taints if t.effect in HARD_EFFECTS) for n in nodes]
        self.pool_taints = pool_taints([t for t, ok in zip(hard, self.node_ok, strict=True) if ok])
        self.node_taints: list[tuple[Taint, ...]] = (
            [tuple(t for t in ts if t not in self.pool_taints) for ts in hard] if self.pool_taints else hard)
        self.node_free = [
            (c - u) if ok else 0 for c, u, ok in zip(self.node_cap, self.node_used0, self.node_ok, strict=True)
        ]
        self.maxcap = max(self.node_cap, default=0)
        width = self.maxcap + 1

        # Domain structure. Id 0 is the pool root (level -1).
        self.dom_level: list[int] = [-1]
        self.dom_path: list[tuple[str, ...]] = [()]
        self.dom_parent: list[int] = [-1]
        self.dom_children: list[list[int]] = [[]]
        self.dom_nodes: list[list[int]] = [[]]
        self.dom_real: list[bool] = [True]
        ids: dict[tuple[str, ...], int] = {(): ROOT}
        for path in sorted(first):
            for depth in range(1, len(path) + 1):
                prefix = path[:depth]
                if prefix not in ids:
                    ids[prefix] = self._new_domain(prefix, depth - 1, ids[prefix[:-1]], True)
        node_dom: list[int] = []
        loose: dict[int, int] = {}
        for i, path in enumerate(paths):
            d = ids[path]
            if self.dom_children[d] and len(self.dom_path[d]) < len(self.levels):
                # Nodes missing a finer label hang below their deepest domain in a pseudo-domain that is never a
                # candidate for a constraint at the finer level.
                if d not in loose:
                    loose[d] = self._new_domain(self.dom_path[d] + ("",), self.dom_level[d] + 1, d, False)
                d = loose[d]
            self.dom_nodes[d].append(i)
            node_dom.append(d)
        n_dom = len(self.dom_path)
        self.dom_rank = sorted(range(n_dom), key=lambda d: self.dom_path[d])
        rank = [0] * n_dom
        for r, d in enumerate(self.dom_rank):
            rank[d] = r
        self.rank = rank
        for d in range(n_dom):
            self.dom_children[d].sort(key=lambda c: rank[c])
        # ancestor of each domain at every coarser level (index = level + 1; 0 is the root); a domain's id is
        # larger than its parent's, so each chain extends its parent's, already built
        self.dom_anc: list[tuple[int, ...]] = [(ROOT,)]
        for d in range(1, n_dom):
            self.dom_anc.append(self.dom_anc[self.dom_parent[d]] + (d,))
        chains = {d: self.dom_anc[d][::-1] for d in set(node_dom)}
        self.node_path: list[tuple[int, ...]] = [chains[d] for d in node_dom]

        self.dom_total = [0] * n_dom
        self.dom_unavail = [0] * n_dom
        self.dom_used0 = [0] * n_dom
        self.dom_free = [0] * n_dom
        self.dom_hist = [[0] * width for _ in range(n_dom)]
        self.dom_tainted: list[list[int]] = [[] for _ in range(n_dom)]
        # Each node counts in its own domain; a child's id is larger than its parent's, so one pass from the
        # last id down then carries every domain's totals into its parent.
        for i, d in enumerate(node_dom):
            self.dom_total[d] += self.node_cap[i]
            self.dom_used0[d] += self.node_used0[i]
            if not self.node_ok[i]:
                self.dom_unavail[d] += self.node_cap[i] - self.node_used0[i]
            elif not self.node_taints[i]:
                self.dom_free[d] += self.node_free[i]
                self.dom_hist[d][self.node_free[i]] += 1
            else:
                for a in self.node_path[i]:
                    self.dom_tainted[a].append(i)
        for d in range(n_dom - 1, ROOT, -1):
            parent = self.dom_parent[d]
            self.dom_total[parent] += self.dom_total[d]
            self.dom_used0[parent] += self.dom_used0[d]
            self.dom_unavail[parent] += self.dom_unavail[d]
            self.dom_free[parent] += self.dom_free[d]
            self.dom_hist[parent] = [a + b for a, b in zip(self.dom_hist[parent], self.dom_hist[d], strict=True)]
        self.cordoned = sum(1 for ok in self.node_ok if not ok)
        pairs = enumerate(zip(self.node_ok, self.node_taints, strict=True))
        self.tainted_nodes = [i for i, (ok, t) in pairs if ok and t]
        self.tainted = len(self.tainted_nodes)
        self.node_clean = [ok and not t for ok, t in zip(self.node_ok, self.node_taints, strict=True)]
        # index[(ancestor, level)] = sorted keys of the real descendants at that level. A key is one int,
        # ``free * stride + rank`` (see :meth:`key`), so the lists order by free GPUs then path and bisection and
        # updates compare plain ints; :meth:`dom_of` and :meth:`free_of` decode a key.
        self.stride = n_dom
        self.index: dict[tuple[int, int], list[int]] = {}
        for d in self.dom_rank:
            if d == ROOT or not self.dom_real[d]:
                continue
            lvl = self.dom_level[d]
            for a in self.dom_anc[d][:-1]:
                self.index.setdefault((a, lvl), []).append(self.key(d))
        for lst in self.index.values():
            lst.sort()
        # the index lists each domain appears in, so an update does not rebuild (ancestor, level) keys
        self.dom_lists: list[list[list[int]]] = [
            [self.index[(a, self.dom_level[d])] for a in self.dom_anc[d][:-1]]
            if d != ROOT and self.dom_real[d] else []
            for d in range(n_dom)
        ]
        self._below: dict[int, list[list[int] | None]] = {}
        # Filled on demand by child_table(); see there.
        self.by_child: dict[tuple[int, int], dict[int, list[int]]] = {}
        self.dom_child_max = [-1] * n_dom
        self.dom_child_list: list[list[int] | None] = [None] * n_dom
        self.dom_by_child: list[list[dict[int, list[int]]]] = [[] for _ in range(n_dom)]
        self.level_domains: list[list[int]] = [[] for _ in self.levels]
        for d in self.dom_rank:
            if d != ROOT and self.dom_real[d]:
                self.level_domains[self.dom_level[d]].append(d)

    def below(self, lvl: int) -> list[list[int] | None]:
        """``below(lvl)[d]`` is ``index[(d, lvl)]`` (the same list object, kept current) or None.

        The candidate scan asks this of thousands of domains per gang; a list lookup by domain id is cheaper than
        building a tuple key for the dict each time.
        """
        lists = self._below.get(lvl)
        if lists is None:
            lists = self._below[lvl] = [self.index.get((d, lvl)) for d in range(len(self.dom_level))]
        return lists

    def child_table(self, region: int, lvl: int) -> dict[int, list[int]]:
        """``m -> sorted index keys`` of the real level-``lvl`` domains in ``region`` whose largest child (at the
        next level) has ``m`` free GPUs.

        The candidate scan uses it to jump over domains whose children are all too full for a gang's largest
        subgroup. A table is built the first time a scan asks for it and then kept current by :meth:`change`, so
        runs that never need one (most small pools) pay nothing for it.
        """
        table = self.by_child.get((region, lvl))
        if table is not None:
            return table
        table = self.by_child[(region, lvl)] = {}
        for k in self.index.get((region, lvl), []):
            d = self.dom_of(k)
            if not self.dom_children[d]:
                continue
            if self.dom_child_max[d] < 0:
                children = self.dom_child_list[d] = self.index.get((d, lvl + 1))
                self.dom_child_max[d] = children[-1] // self.stride if children else 0
            table.setdefault(self.dom_child_max[d], []).append(k)
            self.dom_by_child[d].append(table)
        return table

    def _path(self, labels: Mapping[str, str]) -> tuple[str, ...]:
        out = []
        for key in self.levels:
            v = labels.get(key)
            if not v:
                break
            out.append(v)
        return tuple(out)

    def _new_domain(self, path: tuple[str, ...], level: int, parent: int, real: bool) -> int:
        d = len(self.dom_path)
        self.dom_level.append(level)
        self.dom_path.append(path)
        self.dom_parent.append(parent)
        self.dom_children.append([])
        self.dom_nodes.append([])
        self.dom_real.append(real)
        self.dom_children[parent].append(d)
        return d

    def name(self, d: int) -> str:
        """Human name of a domain: its own label value (unique within its level once the tree validated)."""
        if d == ROOT:
            return "pool"
        return self.dom_path[d][-1] or f"{self.dom_path[d][-2] if len(self.dom_path[d]) > 1 else 'pool'}/-"

    def where(self, d: int) -> str:
        """A domain as reasons name it: its level and name ("zone z0"), or "the pool"."""
        lvl = self.dom_level[d]
        return f"{self.levels[lvl]} {self.name(d)}" if lvl >= 0 else "the pool"

    def change(self, deltas: Mapping[int, int]) -> None:
        """Apply ``node -> GPUs taken (negative: released)``, keeping every aggregate and index current.

        This runs for every tentative placement and every rollback of the packer's searches, so it is written for
        the common call (about ten nodes of one rack). Nodes of one leaf domain share their ancestor chain, so the
        histogram moves are summed per chain first, in a list indexed by free GPUs (cheaper than a dict), and each
        ancestor is updated once per call rather than once per node. The GPUs a chain takes follow from its
        histogram moves (each node moves from bucket ``old`` to ``new``), so they are not summed per node.
        """
        free = self.node_free
        clean = self.node_clean
        node_path = self.node_path
        width = self.maxcap + 1
        moves: dict[tuple[int, ...], list[int]] = {}
        last: tuple[int, ...] | None = None
        m: list[int] = []
        for n, delta in deltas.items():
            if not delta:
                continue
            old = free[n]
            new = old - delta
            free[n] = new
            if not clean[n]:
                continue
            path = node_path[n]
            if path is not last:
                last = path
                got = moves.get(path)
                if got is None:
                    got = moves[path] = [0] * width
                m = got
            m[old] -= 1
            m[new] += 1
        if not moves:
            return
        hist = self.dom_hist
        dom_delta: dict[int, int] = {}
        for path, m in moves.items():
            buckets = [(b, c) for b, c in enumerate(m) if c]
            # GPUs taken = free GPUs before - after = -(sum of bucket * count moved)
            t = -sum(b * c for b, c in buckets)
            for d in path:
                h = hist[d]
                for bucket, count in buckets:
                    h[bucket] += count
                dom_delta[d] = dom_delta.get(d, 0) + t
        dom_free = self.dom_free
        rank = self.rank
        stride = self.stride
        lists = self.dom_lists
        by_child = self.dom_by_child
        refile: list[tuple[int, int]] = []
        for d, delta in dom_delta.items():
            before = dom_free[d]
            if by_child[d]:
                refile.append((d, before))
            if not delta:
                continue
            after = dom_free[d] = before - delta
            if lists[d]:
                old_key = before * stride + rank[d]
                new_key = after * stride + rank[d]
                for lst in lists[d]:
                    del lst[bisect_left(lst, old_key)]
                    insort(lst, new_key)
        for d, before in refile:
            self._move_by_child(d, before, by_child[d])

    def _move_by_child(self, d: int, before: int, tables: list[dict[int, list[int]]]) -> None:
        """Re-file domain ``d`` in its child tables after its free GPUs (was ``before``) or its largest child changed.

        :meth:`change` calls this after updating every index list, so the child list is current.
        """
        children = self.dom_child_list[d]
        m = children[-1] // self.stride if children else 0
        old_m = self.dom_child_max[d]
        after = self.dom_free[d]
        if m == old_m and after == before:
            return
        old_key = before * self.stride + self.rank[d]
        new_key = after * self.stride + self.rank[d]
        self.dom_child_max[d] = m
        for buckets in tables:
            keys = buckets[old_m]
            del keys[bisect_left(keys, old_key)]
            if not keys:
                del buckets[old_m]
            got = buckets.get(m)
            if got is None:
                buckets[m] = [new_key]
            else:
                insort(got, new_key)

    def key(self, d: int) -> int:
        """Domain ``d``'s position in the index: by free GPUs, then by path."""
        return self.dom_free[d] * self.stride + self.rank[d]

    def dom_of(self, key: int) -> int:
        """The domain of an index key."""
        return self.dom_rank[key % self.stride]

    def free_of(self, key: int) -> int:
        """The free GPUs recorded in an index key."""
        return key // self.stride

    def nodes_below(self, d: int) -> list[int]:
        """Every node of domain ``d`` (its own and its descendants'), by name."""
        out: list[int] = []
        stack = [d]
        while stack:
            x = stack.pop()
            out.extend(self.dom_nodes[x])
            stack.extend(self.dom_children[x])
        out.sort()
        return out

    def inside_node(self, n: int, d: int) -> bool:
        """Whether node ``n`` lies in domain ``d``."""
        return d in self.node_path[n]

    def inside(self, d: int, region: int) -> bool:
        """Whether domain ``d`` lies in ``region`` (or is it)."""
        lvl = self.dom_level[region] + 1
        anc = self.dom_anc[d]
        return len(anc) > lvl and anc[lvl] == region


def pool_taints(taints: Sequence[tuple[Taint, ...]]) -> tuple[Taint, ...]:
    """The hard taints every one of ``taints`` (each schedulable node's) carries, in a fixed order.

    GPU nodes are often all tainted (``nvidia.com/gpu:NoSchedule``) so that only pods asking for GPUs, which
    tolerate it, land there. Such a taint tells no node from another: a pod that tolerates it may use every node,
    one that does not none. The tree leaves it out of the nodes' taints, so tolerating gangs are searched and
    re-arranged as on untainted nodes, and the gangs compiled against it check it once (``pool_taints``)."""
    common = set(taints[0]) if taints else set()
    for node in taints:
        if not common:
            return ()
        common.intersection_update(node)
    return tuple(sorted(common, key=lambda t: (t.key, t.value or "", t.effect)))


def _check_hierarchy(inventory: Inventory, levels: tuple[str, ...], first: Mapping[tuple[str, ...], str]) -> None:
    """Each value at a finer level must sit under exactly one coarser path; report every contradiction.

    ``first`` maps every distinct label path to the first node (by name) that has it.
    """
    seen: dict[tuple[int, str], tuple[tuple[str, ...], str]] = {}
    diags: list[Diagnostic] = []
    reported: set[tuple[int, str]] = set()
    for full, name in sorted(first.items(), key=lambda kv: kv[1]):
        path: list[str] = []
        for i, v in enumerate(full):
            key = levels[i]
            if i > 0:
                prev = seen.get((i, v))
                if prev is None:
                    seen[(i, v)] = (tuple(path), name)
                elif prev[0] != tuple(path) and (i, v) not in reported:
                    reported.add((i, v))
                    where = inventory.positions.get(name)
                    diags.append(Diagnostic(
                        f"{key}={v} appears under two different {levels[i - 1]} domains: node {prev[1]} has "
                        f"{_fmt_path(levels, prev[0])} but node {name} has {_fmt_path(levels, tuple(path))}; "
                        "each finer domain must sit inside exactly one coarser domain" + _inverted(levels, i, first),
                        where if isinstance(where, Position) else Position(inventory.source or "inventory"),
                    ))
            path.append(v)
    if diags:
        raise UserError(diags)


def _inverted(levels: tuple[str, ...], i: int, paths: Mapping[tuple[str, ...], str]) -> str:
    """'' or the fix when the inventory nests level ``i - 1`` inside level ``i``: the pool lists them the wrong
    way round (topology_keys are coarsest first)."""
    outer: dict[str, set[str]] = {}
    for full in paths:
        if len(full) > i:
            outer.setdefault(full[i - 1], set()).add(full[i])
    if not outer or any(len(values) != 1 for values in outer.values()):
        return ""
    fixed = list(levels)
    fixed[i - 1], fixed[i] = fixed[i], fixed[i - 1]
    return (f"; here every {levels[i - 1]} sits inside one {levels[i]}, so the pool's topology_keys are not "
            f"coarsest first: did you mean the levels [{', '.join(fixed)}]?")


def _fmt_path(levels: Sequence[str], path: tuple[str, ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(levels, path, strict=False)) or "no topology labels"
