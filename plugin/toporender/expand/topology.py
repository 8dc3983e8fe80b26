"""Topology expansion: per task group, the tree of topology requirements -> gang structure.

This follows OSMO's tree algorithm (``src/utils/job/topology.py``, ``PodGroupTopologyBuilder``) and fixes its
known defects. As in OSMO, a ``group`` names a domain inside its parent: rack group ``r1`` under zone ``za``
and rack group ``r1`` under zone ``zb`` are two racks (two tree nodes, ``za/r1`` and ``zb/r1``).

* a chain of single-child levels is merged into one constraint instead of dropping levels: the
  finest *required* level becomes ``requiredTopologyLevel`` and a finer *preferred* level becomes
  ``preferredTopologyLevel`` (OSMO kept only the finest level, losing a coarser requirement);
* mid-level subgroups never carry ``minMember`` (KAI >= v0.15 rejects it on create);
* subgroup names are unique, stable DNS labels;
* every task lands in a leaf subgroup whenever subgroups exist.

The result is backend-neutral: KAI and Koordinator render the same :class:`GroupTopology`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from toporender.errors import DiagnosticSink
from toporender.expand.levels import LevelConstraint
from toporender.expand.naming import unique_names
from toporender.load.models import PoolConfig, ResourceSpec, TopologyKey
from toporender.load.repo import WorkflowFile, WorkflowGroup
from toporender.load.yaml_source import Loc


@dataclass(frozen=True)
class Subgroup:
    name: str
    parent: str | None
    constraint: LevelConstraint
    tasks: tuple[str, ...]
    children: tuple[str, ...]
    path: tuple[str, ...]
    """User group names from the top of the tree; also what the subgroup is named after."""

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def size(self, by_name: dict[str, Subgroup]) -> int:
        return len(self.tasks) + sum(by_name[c].size(by_name) for c in self.children)


@dataclass(frozen=True)
class GroupTopology:
    """Gang structure of one task group: a top-level constraint and hierarchical subgroups."""

    constraint: LevelConstraint
    subgroups: tuple[Subgroup, ...] = ()
    task_subgroup: dict[str, str] = field(default_factory=dict)

    @property
    def by_name(self) -> dict[str, Subgroup]:
        return {s.name: s for s in self.subgroups}

    def top_children(self) -> list[Subgroup]:
        return [s for s in self.subgroups if s.parent is None]


@dataclass
class _RawSubgroup:
    path: tuple[str, ...]
    parent: tuple[str, ...] | None
    constraint: LevelConstraint
    tasks: tuple[str, ...]
    kids: list[tuple[str, ...]]


@dataclass
class _Node:
    level: int
    label: str
    required: bool
    group: str
    path: tuple[str, ...]
    children: dict[str, _Node] = field(default_factory=dict)
    tasks: list[str] = field(default_factory=list)


def _merge(c: LevelConstraint, node: _Node) -> LevelConstraint:
    """Add a finer level to a constraint: a finer requirement implies every coarser one."""
    if node.required:
        return LevelConstraint(node.label, None)
    return LevelConstraint(c.required, node.label)


def _requirements(wf: WorkflowFile, resource: str, res: ResourceSpec, pool_name: str, levels: list[TopologyKey],
                  index: dict[str, int], sink: DiagnosticSink) -> list[tuple[int, str, bool, Loc]]:
    """(level index, group, required, location) of one resource's requirements, coarsest first.

    Worked out once per resource: every task naming the resource shares the result.
    """
    res_loc = wf.resources_loc
    reqs: list[tuple[int, str, bool, Loc]] = []
    seen: dict[str, Loc] = {}
    for i, req in enumerate(res.topology):
        rloc = res_loc + (resource, "topology", i)
        if not levels:
            sink.error(
                f"resource '{resource}' asks for topology key '{req.key}' but pool '{pool_name}' has no "
                "topology_keys; add topology_keys to the pool in toporender.yaml or remove the requirement",
                wf.pos(rloc))
            continue
        if req.key not in index:
            valid = ", ".join(k.key for k in levels)
            sink.error(f"topology key '{req.key}' is not defined in pool '{pool_name}'; valid keys: {valid}",
                       wf.pos(rloc + ("key",)))
            continue
        if req.key in seen:
            sink.error(f"topology key '{req.key}' appears twice in resource '{resource}'; keep one entry",
                       wf.pos(rloc + ("key",)))
            continue
        seen[req.key] = rloc
        reqs.append((index[req.key], req.group, req.requirementType == "required", rloc))
    reqs.sort(key=lambda r: r[0])
    return reqs


def _collapse(start: _Node, parent: tuple[str, ...] | None, raw: list[_RawSubgroup]) -> tuple[str, ...]:
    """Append ``start``'s subgroup, its chain of only children merged into it, then its children's, to ``raw``.

    A module function rather than a closure over ``raw``: a closure that calls itself is a reference cycle,
    and the CLI renders with the cyclic collector off."""
    c = _merge(LevelConstraint(), start)
    cur = start
    while len(cur.children) == 1:
        cur = next(iter(cur.children.values()))
        c = _merge(c, cur)
    entry = _RawSubgroup(cur.path, parent, c, tuple(cur.tasks), [])
    raw.append(entry)
    entry.kids.extend(_collapse(child, cur.path, raw) for child in cur.children.values())
    return cur.path


def expand_group(wf: WorkflowFile, group: WorkflowGroup, pool_name: str, pool: PoolConfig,
                 sink: DiagnosticSink) -> GroupTopology:
    """Validate the group's topology requirements and build its gang structure."""
    levels = pool.topology_keys
    index = {k.key: i for i, k in enumerate(levels)}
    resources = wf.resources
    errors_before = len(sink.errors)

    per_task: list[tuple[str, list[tuple[int, str, bool, Loc]]]] = []
    by_resource: dict[str, list[tuple[int, str, bool, Loc]]] = {}
    for task in group.spec.tasks:
        res = resources.get(task.resource)
        if res is None:
            continue  # reported by the workflow checks
        reqs = by_resource.get(task.resource)
        if reqs is None:
            reqs = by_resource[task.resource] = _requirements(wf, task.resource, res, pool_name, levels, index, sink)
        per_task.append((task.name, reqs))
    if len(sink.errors) > errors_before:
        return GroupTopology(LevelConstraint())

    key_sets = {tuple(r[0] for r in reqs) for reqs in by_resource.values()}
    if not any(by_resource.values()):
        return GroupTopology(LevelConstraint())
    if len(key_sets) > 1:
        first_name, first = per_task[0]
        first_keys = [levels[r[0]].key for r in first]
        for (name, reqs), tloc in zip(per_task, group.task_locs):
            keys = [levels[r[0]].key for r in reqs]
            if keys != first_keys:
                what = "no topology" if not keys else f"topology keys {keys}"
                base = "no topology" if not first_keys else f"keys {first_keys}"
                sink.error(
                    f"task '{name}' in group '{group.spec.name}' has {what} but task '{first_name}' has {base}; "
                    "all tasks of a group must use the same topology keys (give every task's resource the same "
                    "keys, or split the group)",
                    wf.pos(tloc + ("resource",)))
        return GroupTopology(LevelConstraint())

    root = _Node(-1, "", True, "", ())
    leaf_of: dict[int, _Node] = {}
    for name, reqs in per_task:
        node = leaf_of.get(id(reqs))  # tasks of one resource walk one path: it is checked once
        if node is not None:
            node.tasks.append(name)
            continue
        node = root
        for lvl, grp, required, rloc in reqs:
            child = node.children.get(grp)
            if child is None:
                child = _Node(lvl, levels[lvl].label, required, grp, node.path + (grp,))
                node.children[grp] = child
            elif child.required != required:
                sink.error(
                    f"topology group '{grp}' at level '{levels[lvl].key}' is both required and preferred; "
                    "use the same requirementType in every resource that names it",
                    wf.pos(rloc + ("requirementType",)))
                return GroupTopology(LevelConstraint())
            node = child
        leaf_of[id(reqs)] = node
        node.tasks.append(name)

    top = LevelConstraint()
    node = root
    while len(node.children) == 1:
        node = next(iter(node.children.values()))
        top = _merge(top, node)
    if not node.children:
        return GroupTopology(top)

    raw: list[_RawSubgroup] = []
    for child in node.children.values():
        _collapse(child, None, raw)

    names = unique_names(["-".join(r.path) for r in raw], lambda: [json.dumps(r.path) for r in raw])
    by_path = {r.path: name for r, name in zip(raw, names)}
    subgroups = tuple(
        Subgroup(by_path[r.path], by_path[r.parent] if r.parent else None, r.constraint, r.tasks,
                 tuple(by_path[k] for k in r.kids), r.path)
        for r in raw
    )
    task_subgroup = {t: sg.name for sg in subgroups for t in sg.tasks}
    return GroupTopology(top, subgroups, task_subgroup)
