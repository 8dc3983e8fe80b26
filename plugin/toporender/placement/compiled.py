"""Gangs as the packer's search sees them: groups of pod indices, levels as indices, GPU histograms.

:func:`compile_gang` is the one boundary where a gang's :class:`~toporender.expand.levels.LevelConstraint`
(node-label keys) becomes level indices into the pool's levels, coarsest first; the search's hot loops work on
those ints only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from toporender.errors import fail
from toporender.expand.levels import LevelConstraint
from toporender.placement.demand import GangDemand, PodDemand
from toporender.placement.inventory import tolerates
from toporender.placement.tree import Tree

# Most groups tolerate no tainted node; they share one empty set (each ``frozenset()`` call makes a new one).
NO_NODES: frozenset[int] = frozenset()


def search_over(*args: object, **kwargs: object) -> NoReturn:
    """Stands in for a recursive closure once its search (or walk) is over.

    A closure that calls itself is a reference cycle, so its state (memos, dead ends, the unit being filled)
    waits for the cyclic collector, which :func:`~toporender.placement.packer.pack` pauses and the CLI turns
    off: a small, tight pool's exact searches then kept 1.4 GB alive until the pack ended. Rebinding the
    closure's name to this breaks the cycle, and reference counting frees the state at once."""
    raise AssertionError("a closure was called after its search")


@dataclass(slots=True)
class Group:
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
class CompiledGang:
    idx: int
    demand: GangDemand
    groups: list[Group]
    pod_names: list[str]
    pod_gpus: list[int]
    need: int
    max_leaf: int
    excluded: frozenset[int] = frozenset()
    """Nodes (ids) no pod of the gang may use: the union of its pods' excluded nodes."""
    untolerated: str = ""
    """Which pod does not tolerate which taint every node of the pool has ('' when all do): no node takes it."""


LeafShape = tuple[int, int, tuple[tuple[int, int], ...], frozenset[int]]
"""(required level, GPUs, GPUs in pods of at least each size, tainted nodes tolerated) of a group's own pods."""


@dataclass(frozen=True, slots=True)
class GangShape:
    """What a gang asks, as far as telling that one asks no less than another goes (see
    :func:`toporender.placement.packer.no_easier`)."""

    req: int
    """The gang's required level."""
    need: int
    max_leaf: int
    """GPUs of its largest group that has pods of its own (with its subgroups' GPUs)."""
    pods: tuple[tuple[int, int], ...]
    """GPUs in pods of at least each size, largest size first."""
    tol: frozenset[int]
    """Tainted nodes some pod of it tolerates."""
    leaves: tuple[LeafShape, ...]
    """Its groups' own pods (not their subgroups'), per group that has some."""
    nested: bool
    """Whether a subgroup of it has subgroups."""


# A leaf group as the forward check sees it: (GPUs, required level, its own and its ancestors' keys in ``fixed``).
LeafCheck = tuple[int, int, tuple[tuple[int, int], ...]]


@dataclass(slots=True)
class SearchContext:
    gang: int
    limit: int
    steps: int = 0
    used: dict[int, int] = field(default_factory=dict)


def size_counts(gpus: Sequence[int]) -> tuple[tuple[int, int], ...]:
    counts: dict[int, int] = {}
    for g in gpus:
        counts[g] = counts.get(g, 0) + 1
    return tuple(sorted(counts.items(), reverse=True))


def level_index(levels: Sequence[str], gang: GangDemand, label: str | None, what: str) -> int | None:
    """The index of a level label among the pool's levels (coarsest first); None for no level."""
    if label is None:
        return None
    try:
        return levels.index(label)
    except ValueError:
        raise fail(
            f"{gang.display}: {what} topology level {label!r} is not one of the pool's levels "
            f"({', '.join(levels) or 'none'})"
        ) from None

def compile_gang(tree: Tree, idx: int, gang: GangDemand) -> CompiledGang:
    """A gang's demand as the search works on it: groups by index, parents before children, pods largest first,
    levels as indices into the pool's levels, and each group's GPUs, pod sizes and tolerated tainted nodes."""
    pods = sorted((p for p in gang.pods if p.gpus > 0), key=lambda p: (-p.gpus, p.name))
    pod_index = {p.name: i for i, p in enumerate(pods)}

    def group(name: str, parent: int, c: LevelConstraint, inherited: int) -> Group:
        req = level_index(tree.levels, gang, c.required, "required")
        pref = level_index(tree.levels, gang, c.preferred, "preferred")
        r = max(inherited, req if req is not None else -1)
        return Group(name, parent, r, pref)

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

    try:
        for name in sorted(subs):
            visit(name)
    finally:
        visit = search_over
    leaf_of = dict(gang.pod_subgroup)
    for s in gang.subgroups:
        for p in s.pods:
            leaf_of.setdefault(p.name, s.name)
    for p in pods:
        gi = by_name.get(leaf_of.get(p.name, ""), 0)
        groups[gi].pods.append(pod_index[p.name])
    gpus = [p.gpus for p in pods]
    for gi in range(len(groups) - 1, -1, -1):
        g = groups[gi]
        g.tol = tolerated(tree, [pods[i] for i in g.pods])
        sub_pods = list(g.pods)
        tol_any = set(g.tol)
        for c in g.children:
            sub_pods.extend(subtree_pods(groups, c))
            tol_any |= groups[c].tol_any
        g.tol_any = frozenset(tol_any) if tol_any else NO_NODES
        g.need = sum(gpus[i] for i in sub_pods)
        g.sizes = size_counts([gpus[i] for i in sub_pods])
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
    names = {name for p in pods for name in p.excluded}
    excluded = frozenset(i for i, name in enumerate(tree.node_names) if name in names) if names else frozenset()
    return CompiledGang(idx, gang, groups, [p.name for p in pods], gpus, groups[0].need, max(leaves, default=0),
                        excluded, _untolerated(tree, pods))


def _untolerated(tree: Tree, pods: list[PodDemand]) -> str:
    """'' when every pod tolerates the taints every node of the pool has, else which pod does not, and which."""
    if not tree.pool_taints:
        return ""
    seen: set[tuple[tuple[str, str | None, str | None], ...]] = set()
    for p in pods:
        if p.tolerations in seen:
            continue
        seen.add(p.tolerations)
        for t in tree.pool_taints:
            if not tolerates(p.tolerations, t):
                return f"pod {p.name} does not tolerate the taint {t}"
    return ""


def tolerated(tree: Tree, pods: Sequence[PodDemand]) -> frozenset[int]:
    """The tainted nodes (ids) whose every hard taint each of ``pods`` tolerates."""
    tainted = tree.tainted_nodes
    if not tainted or not pods or not all(p.tolerations for p in pods):
        return NO_NODES
    return frozenset(n for n in tainted
                     if all(all(tolerates(p.tolerations, t) for t in tree.node_taints[n]) for p in pods))


def subtree_pods(groups: list[Group], gi: int) -> list[int]:
    out = list(groups[gi].pods)
    for c in groups[gi].children:
        out.extend(subtree_pods(groups, c))
    return out
