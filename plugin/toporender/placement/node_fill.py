"""An exact search for tight regions that fills one node at a time: the node with the fewest choices next.

:class:`~toporender.placement.exact.ExactRepack` fills a unit (a rack, say) at a time and chooses, per unit,
which leaf groups it holds; its bounds count GPUs per domain and per pod size. When a region's free GPUs are
(nearly) all asked for, the only arrangements left fill nearly every node exactly, and that search spends its
steps on fillings of the last units whose counts fit and whose nodes do not (a one-GPU hole on each of several
nodes, where the pods left are two-GPU ones). Here every node is decided in turn, so a hole is seen when it is
made: the node with the fewest groups that may still put a pod on it is filled next (a variable ordering
known from constraint programming as "minimum remaining values"), each of its fillings tried once (pods of one
group are interchangeable, and a node's pods are chosen in group order), groups that already have pods fixed
near it first; the GPUs a node leaves free are lost, at most the slack (free GPUs minus GPUs asked) in all.

Bounds after each choice: per pod size, the GPUs of the pods left of at least that size must fit the
whole pods of that size the open nodes can take; every group fixed to a domain (a clique, a rack) must fit
its free GPUs; once a node is closed, every group not yet fixed must fit some domain of its level. A state
(free GPUs per node, pods left per group, fixed domains) that failed is not searched again. Steps count the pods
tried, never seconds, so the outcome is the same on every machine.

It proves nothing when it runs out of steps, and is used only to admit: after the other searches of a tight
region found no arrangement, so no plan they already admit changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toporender.placement.compiled import CompiledGang
from toporender.placement.tree import Tree

LeafKey = tuple[int, int]
"""(gang index, group index)."""


class _OutOfSteps(Exception):
    pass


class _Leaf:
    """A group with pods of its own, as the search fills it."""

    __slots__ = ("chain", "gang", "gpus", "key", "left", "pods", "usable")

    def __init__(self, key: LeafKey, gang: CompiledGang, chain: list[LeafKey], usable: frozenset[int]) -> None:
        self.key = key
        self.gang = gang.idx
        self.pods = list(gang.groups[key[1]].pods)
        self.gpus = gang.pod_gpus
        self.left = sorted((gang.pod_gpus[p] for p in self.pods), reverse=True)
        """GPUs of the pods not placed yet, largest first (the next one placed is the first)."""
        self.chain = chain
        """Its own key and its ancestors' that bind their pods to a domain finer than the region, finest first."""
        self.usable = usable


class NodeFill:
    """One search over ``gangs`` (all lifted) inside ``region``, on the tree's current free GPUs."""

    def __init__(self, tree: Tree, region: int, gangs: Sequence[CompiledGang], budget: int) -> None:
        self.tree = tree
        self.budget = budget
        self.steps = 0
        rlvl = tree.dom_level[region]
        below = [n for n in tree.nodes_below(region) if tree.node_ok[n] and tree.node_free[n] > 0]
        self.level: dict[LeafKey, int] = {(x.idx, gi): g.req for x in gangs for gi, g in enumerate(x.groups)
                                          if g.req > rlvl}
        self.fixed: dict[LeafKey, int | None] = dict.fromkeys(self.level)
        self.rem: dict[LeafKey, int] = dict.fromkeys(self.level, 0)
        """GPUs left to place under each group bound to a domain."""
        leaves: list[_Leaf] = []
        for x in gangs:
            for gi, g in enumerate(x.groups):
                if not g.pods:
                    continue
                chain = []
                a = gi
                while a >= 0:
                    if (x.idx, a) in self.level:
                        chain.append((x.idx, a))
                    a = x.groups[a].parent
                chain.sort(key=lambda k: -self.level[k])
                usable = frozenset(n for n in below if not tree.node_taints[n] or n in g.tol)
                leaf = _Leaf((x.idx, gi), x, chain, usable)
                leaves.append(leaf)
                for key in chain:
                    self.rem[key] += sum(leaf.left)
        # most constrained first: fewest nodes, then largest pods
        leaves.sort(key=lambda f: (len(f.usable), -f.left[0], -len(f.left), f.key))
        self.leaves = leaves
        reachable = frozenset().union(*(f.usable for f in leaves))
        self.nodes = [n for n in below if n in reachable]
        self.free = {n: tree.node_free[n] for n in self.nodes}
        self.dom_at = {n: {tree.dom_level[d]: d for d in tree.node_path[n]} for n in self.nodes}
        self.dom_nodes: dict[int, list[int]] = {}
        for n in self.nodes:
            for d in tree.node_path[n]:
                self.dom_nodes.setdefault(d, []).append(n)
        self.avail = {d: sum(self.free[n] for n in ns) for d, ns in self.dom_nodes.items()}
        self.level_doms: dict[int, list[int]] = {}
        for d in sorted(self.dom_nodes):
            self.level_doms.setdefault(tree.dom_level[d], []).append(d)
        self.fixed_at: dict[int, list[LeafKey]] = {}
        self.need = sum(sum(f.left) for f in leaves)
        self.done = 0
        self.slack = sum(self.free.values()) - self.need
        sizes = sorted({s for f in leaves for s in f.left}, reverse=True)
        self.sizes = sizes[:-1]
        """Pod sizes with a bound of their own (the smallest one's is the slack)."""
        self.room = {s: sum(v // s * s for v in self.free.values()) for s in self.sizes}
        self.ge = {s: sum(v for f in leaves for v in f.left if v >= s) for s in self.sizes}
        self.placed: list[tuple[_Leaf, int, int]] = []
        self.dead: set[tuple[tuple[int, ...], tuple[int, ...], tuple[int | None, ...]]] = set()

    @staticmethod
    def applies(gangs: Sequence[CompiledGang]) -> bool:
        """Nothing the search does not model: excluded nodes, pods without GPUs."""
        return not any(x.excluded or 0 in x.pod_gpus for x in gangs)

    def solve(self) -> dict[int, dict[int, int]] | None:
        """``gang -> pod -> node`` for every gang, or None (no arrangement, or out of steps)."""
        if not self._counts_fit():
            return None
        try:
            if not self._search():
                return None
        except _OutOfSteps:
            return None
        out: dict[int, dict[int, int]] = {}
        free_pods: dict[LeafKey, list[int]] = {}
        for leaf, gpus, n in self.placed:
            pods = free_pods.setdefault(leaf.key, list(leaf.pods))
            p = next(p for p in pods if leaf.gpus[p] == gpus)
            pods.remove(p)
            out.setdefault(leaf.gang, {})[p] = n
        return out

    # ---- state ---------------------------------------------------------------------------------------------
    def _set_free(self, n: int, new: int) -> None:
        old = self.free[n]
        for s in self.sizes:
            self.room[s] += new // s * s - old // s * s
        for d in self.tree.node_path[n]:
            if d in self.avail:
                self.avail[d] += new - old
        self.free[n] = new

    def _place(self, leaf: _Leaf, n: int) -> tuple[int, list[LeafKey]]:
        gpus = leaf.left.pop(0)
        self._set_free(n, self.free[n] - gpus)
        for s in self.sizes:
            if gpus >= s:
                self.ge[s] -= gpus
        newly = []
        for a in leaf.chain:
            self.rem[a] -= gpus
            if self.fixed[a] is None:
                d = self.dom_at[n][self.level[a]]
                self.fixed[a] = d
                self.fixed_at.setdefault(d, []).append(a)
                newly.append(a)
        self.placed.append((leaf, gpus, n))
        self.done += gpus
        return gpus, newly

    def _unplace(self, leaf: _Leaf, n: int, gpus: int, newly: list[LeafKey]) -> None:
        leaf.left.insert(0, gpus)
        self._set_free(n, self.free[n] + gpus)
        for s in self.sizes:
            if gpus >= s:
                self.ge[s] += gpus
        for a in leaf.chain:
            self.rem[a] += gpus
        for a in reversed(newly):
            d = self.fixed[a]
            assert d is not None
            self.fixed_at[d].pop()
            self.fixed[a] = None
        self.placed.pop()
        self.done -= gpus

    # ---- bounds --------------------------------------------------------------------------------------------
    def _counts_fit(self) -> bool:
        """The GPUs lost are within the slack, and per pod size the pods left fit the whole pods the nodes take."""
        return self.slack >= 0 and all(self.ge[s] <= self.room[s] for s in self.sizes)

    def _fits(self, n: int) -> bool:
        """The bounds that a change on node ``n`` can break."""
        return self._counts_fit() and all(self.rem[a] <= self.avail[d] for d in self.tree.node_path[n]
                                          for a in self.fixed_at.get(d, ()))

    def _unfixed_fit(self) -> bool:
        """Every group with pods left and no domain yet still fits some domain of its level."""
        for a, d in self.fixed.items():
            if d is None and self.rem[a]:
                need = self.rem[a]
                if not any(self.avail[e] >= need for e in self.level_doms.get(self.level[a], ())):
                    return False
        return True

    # ---- choices -------------------------------------------------------------------------------------------
    def _finest_fixed(self, leaf: _Leaf) -> int:
        """The finest domain fixed for the leaf or an ancestor (it lies inside every coarser one fixed), or -1."""
        for a in leaf.chain:
            d = self.fixed[a]
            if d is not None:
                return d
        return -1

    def _takes(self, leaf: _Leaf, n: int) -> bool:
        d = self._finest_fixed(leaf)
        return n in leaf.usable and (d < 0 or self.dom_at[n][self.tree.dom_level[d]] == d)

    def _search(self) -> bool:
        if self.done == self.need:
            return True
        state = (tuple(self.free.values()), tuple(len(f.left) for f in self.leaves), tuple(self.fixed.values()))
        if state in self.dead:
            return False
        free = self.free
        open_nodes = [n for n in self.nodes if free[n]]
        choices = dict.fromkeys(open_nodes, 0)
        # leaves that may use the same nodes and whose next pod has the same size count together
        alike: dict[tuple[int, int, int], list[Any]] = {}
        for leaf in self.leaves:
            if leaf.left:
                d = self._finest_fixed(leaf)
                entry = alike.setdefault((d, id(leaf.usable), leaf.left[0]), [leaf, 0])
                entry[1] += 1
        for (d, _, head), (leaf, count) in alike.items():
            usable = leaf.usable
            for n in self.dom_nodes[d] if d >= 0 else open_nodes:
                if free[n] >= head and n in usable:
                    choices[n] += count
        if not choices:
            return False
        node = min(choices, key=lambda n: (choices[n], free[n], n))
        if self._fill(node, 0):
            return True
        self.dead.add(state)
        return False

    def _fill(self, n: int, start: int) -> bool:
        """Put pods of the leaves from index ``start`` on node ``n`` until it is full or closed, then go on."""
        order = [i for i in range(start, len(self.leaves))
                 if self.leaves[i].left and self.leaves[i].left[0] <= self.free[n] and self._takes(self.leaves[i], n)]
        order.sort(key=lambda i: (-sum(self.fixed[a] is not None for a in self.leaves[i].chain),
                                  -self.leaves[i].left[0], i))
        for i in order:
            self.steps += 1
            if self.steps > self.budget:
                raise _OutOfSteps
            leaf = self.leaves[i]
            gpus, newly = self._place(leaf, n)
            if self._fits(n) and (self._fill(n, i) if self.free[n] else self._unfixed_fit() and self._search()):
                return True
            self._unplace(leaf, n, gpus, newly)
        lost = self.free[n]
        if 0 < lost <= self.slack:
            self.slack -= lost
            self._set_free(n, 0)
            if self._fits(n) and self._unfixed_fit() and self._search():
                return True
            self._set_free(n, lost)
            self.slack += lost
        return False
