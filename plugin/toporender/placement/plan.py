"""The placement plan: where each gang's pods go, per-domain usage, fragmentation and a reproducible hash.

Everything here is plain data built once after packing (each gang's part as the gang is placed, when a pool is
packed while its demands arrive); reports and the renderer read it, nothing mutates it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from itertools import compress
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toporender.placement.compiled import CompiledGang
    from toporender.placement.fit import Fitter
    from toporender.placement.tree import Tree


Domain = tuple[tuple[str, str], ...]
"""A topology domain as (level label, value) pairs, coarsest first: ``(("zone", "za"), ("rack", "r7"))``."""


def domain_text(domain: Domain) -> str:
    """``label=value`` of the finest level: how a domain is written on objects and in reports ('' for none)."""
    return f"{domain[-1][0]}={domain[-1][1]}" if domain else ""


@dataclass(frozen=True, slots=True)
class GangPlacement:
    """The outcome for one gang."""

    key: str
    display: str
    gpus: int
    placed: bool
    reason: str | None = None
    subgroup_domains: dict[str, dict[str, str]] = field(default_factory=dict)
    pod_nodes: dict[str, str] = field(default_factory=dict)
    pod_domain: dict[str, Domain] = field(default_factory=dict)
    span: dict[str, int] = field(default_factory=dict)
    cuts: dict[str, int] = field(default_factory=dict)
    moved: bool = False
    domain_gpus: dict[tuple[str, ...], int] = field(default_factory=dict)
    """GPUs the gang takes in each domain its nodes belong to (by domain path), for pictures of the plan."""


@dataclass(frozen=True, slots=True)
class DomainUsage:
    """GPU accounting of one domain after the plan."""

    level: str
    path: tuple[str, ...]
    total: int
    preused: int
    planned: int
    unavailable: int
    free: int

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def used(self) -> int:
        """GPUs taken: already used before the plan plus planned."""
        return self.preused + self.planned


@dataclass(frozen=True)
class LevelStats:
    """Fragmentation of one level after the plan."""

    level: str
    domains: int
    empty: int
    partly_used: int
    full: int
    largest_free: int


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One node after the plan, for pictures of small pools: its domain, GPUs, and what each gang takes."""

    name: str
    path: tuple[str, ...]
    total: int
    preused: int
    unavailable: bool
    gangs: tuple[tuple[str, int], ...]


MAX_PICTURED_NODES = 2_000
"""Pools up to this many nodes keep :class:`NodeUsage` in their plan; larger ones are pictured by domain."""


@dataclass(frozen=True)
class PlacementPlan:
    """All gangs' placements plus pool-wide metrics."""

    levels: tuple[str, ...]
    gangs: dict[str, GangPlacement]
    domains: tuple[DomainUsage, ...]
    level_stats: tuple[LevelStats, ...]
    smallest_unit: int
    stranded_gpus: int
    requested_gpus: int
    placed_gpus: int
    free_gpus: int
    hash: str
    nodes: tuple[NodeUsage, ...] = ()

    def domains_at(self, level: str) -> list[DomainUsage]:
        return [d for d in self.domains if d.level == level]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (stable key order) used by ``toporender plan --format json``."""
        return {
            "hash": self.hash,
            "levels": list(self.levels),
            "summary": {
                "gangs": len(self.gangs),
                "placed": sum(1 for g in self.gangs.values() if g.placed),
                "requestedGPUs": self.requested_gpus,
                "placedGPUs": self.placed_gpus,
                "freeGPUs": self.free_gpus,
                "moved": sorted(k for k, g in self.gangs.items() if g.moved),
            },
            "gangs": [
                {
                    "key": g.key,
                    "display": g.display,
                    "gpus": g.gpus,
                    "placed": g.placed,
                    **({"reason": g.reason} if g.reason else {}),
                    "domains": g.subgroup_domains,
                    "span": g.span,
                    "cuts": g.cuts,
                    "pods": [
                        {"name": p, "node": n, "domain": domain_text(g.pod_domain.get(p, ()))}
                        for p, n in g.pod_nodes.items()
                    ],
                }
                for g in self.gangs.values()
            ],
            "domains": [
                {"level": d.level, "domain": "/".join(d.path), "total": d.total, "preused": d.preused,
                 "planned": d.planned, "unavailable": d.unavailable, "free": d.free}
                for d in self.domains
            ],
            "fragmentation": {
                "smallestUnitGPUs": self.smallest_unit,
                "strandedGPUs": self.stranded_gpus,
                "levels": [
                    {"level": s.level, "domains": s.domains, "empty": s.empty, "partlyUsed": s.partly_used,
                     "full": s.full, "largestFree": s.largest_free}
                    for s in self.level_stats
                ],
            },
        }


def orjson_is_standard(raw: bytes) -> bool:
    """Whether what orjson wrote for strings, ints, lists, mappings and null is what ``json.dumps`` writes for
    them by default (ASCII only): it is whenever it is ASCII without DEL. The escapes of the two are the same;
    DEL orjson leaves as it is and ``json.dumps`` escapes, and text beyond ASCII orjson writes as UTF-8."""
    return raw.isascii() and b"\x7f" not in raw


def sorted_json(value: Any) -> bytes:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))`` as bytes: orjson's where
    :func:`orjson_is_standard` holds (three times faster), else the standard encoder's (orjson refuses a lone
    surrogate, which ``json.dumps`` escapes)."""
    import orjson

    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        if orjson_is_standard(text):
            return text
    except TypeError:
        pass
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def plan_hash(levels: tuple[str, ...], gangs: dict[str, GangPlacement]) -> str:
    """sha256 of the canonical JSON of the assignment (levels, and per gang the pod -> node map).

    The JSON is ``json.dumps({"gangs": {key: sorted pod -> node pairs or null}, "levels": [...]}, sort_keys=True,
    separators=(",", ":"))``, fed to the hash gang by gang (:func:`sorted_json`): at a million GPUs the whole text
    is tens of megabytes.
    """
    digest = hashlib.sha256(b'{"gangs":{')
    comma = b""
    for key in sorted(gangs):
        g = gangs[key]
        digest.update(comma + sorted_json(key) + b":" + sorted_json(sorted(g.pod_nodes.items()) if g.placed else None))
        comma = b","
    digest.update(b'},"levels":' + sorted_json(list(levels)) + b"}")
    return digest.hexdigest()


def gang_hash(levels: tuple[str, ...], gang: GangPlacement) -> str:
    """sha256 of one gang's own plan: the levels, its key and GPUs, and its pod -> node map (or, unplaced, its
    reason). A gang's annotation changes only when its own placement or demand does, so appending a workflow
    that moves nothing leaves every other object's bytes alone.

    The text is :func:`sorted_json` of ``{"gang": key, "gpus": n, "levels": [...], "nodes": sorted pod -> node
    pairs or null, "reason": reason or null}`` (a render hashes every gang while its workers wait)."""
    doc = {"gang": gang.key, "gpus": gang.gpus, "levels": list(levels),
           "nodes": sorted(gang.pod_nodes.items()) if gang.placed else None,
           "reason": None if gang.placed else gang.reason}
    return hashlib.sha256(sorted_json(doc)).hexdigest()


def _lca_path(tree: Tree, owns: set[int]) -> list[int]:
    """Real domains (coarsest first) that contain all of the domains ``owns``."""
    if not owns:
        return []
    chains = [tree.dom_anc[o] for o in owns]
    first = chains[0]
    out = []
    for depth in range(1, len(first)):
        d = first[depth]
        if all(len(c) > depth and c[depth] == d for c in chains) and tree.dom_real[d]:
            out.append(d)
        else:
            break
    return out


def _finest_levels(gang: CompiledGang, finest: int) -> list[int]:
    """Per group, the finest level it or a group above it asks for (``finest`` where none asks for any); parents
    come before their children, so one pass does."""
    out: list[int] = []
    for g in gang.groups:
        lvl = max(g.req, g.pref if g.pref is not None else -1, out[g.parent] if g.parent >= 0 else -1)
        out.append(lvl)
    return [lvl if lvl >= 0 else finest for lvl in out]


_Parts = tuple[dict[int, int], dict[tuple[str, ...], int], dict[str, dict[str, str]], dict[str, str],
               dict[str, Domain], dict[str, int], dict[str, int]]
"""A placed gang's GPUs per node domain, and its GangPlacement's domain GPUs, subgroup domains, pod nodes, pod
domains, span and cuts."""


class PlanParts:
    """What :func:`build_plan` works out for each placed gang of one tree, kept from one call to the next.

    Packing a large pool while the demands still arrive (:class:`~toporender.placement.stage.PackAhead`) leaves
    the plan to be built at the end, on one core, after everything else: at 1M GPUs the gangs' parts were most
    of its half second. :meth:`note` works them out as gangs are placed; a gang placed elsewhere since (a repair
    moved it) is worked out again, since each part is kept with the pod -> node map it was worked out from.
    Nodes of one domain share their ancestors, so everything derived from a node's position is computed once
    per node domain (the node's own, finest domain) and cached."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.views: dict[int, list[int]] = {}
        self.names: dict[tuple[int, int], Domain] = {}
        self.single: dict[int, dict[str, str]] = {}
        self.kept: dict[int, tuple[CompiledGang, dict[int, int], _Parts]] = {}

    def note(self, packer: Fitter, start: int) -> None:
        """Work out the parts of the gangs from ``start`` on that ``packer`` (on this tree) placed."""
        for gang in packer.gangs[start:]:
            if gang.idx in packer.placed:
                self.parts(gang, packer.assign.get(gang.idx, {}))

    def parts(self, gang: CompiledGang, asg: dict[int, int]) -> _Parts:
        """The parts of ``gang`` placed as ``asg`` (pod -> node): kept ones when worked out from the same map."""
        got = self.kept.get(gang.idx)
        if got is not None and got[0] is gang and got[1] == asg:
            return got[2]
        parts = self._work_out(gang, asg)
        self.kept[gang.idx] = (gang, dict(asg), parts)
        return parts

    def _by_level(self, own: int) -> list[int]:
        """The real domain at every level (-1 where there is none) of the nodes whose own domain is ``own``."""
        got = self.views.get(own)
        if got is None:
            tree = self.tree
            got = [-1] * len(tree.levels)
            for d in tree.dom_anc[own]:
                if tree.dom_real[d] and tree.dom_level[d] >= 0:
                    got[tree.dom_level[d]] = d
            self.views[own] = got
        return got

    def _domain_of(self, own: int, finest: int) -> Domain:
        """The real domains at or above level ``finest`` of the nodes whose own domain is ``own``, coarsest first."""
        got = self.names.get((own, finest))
        if got is None:
            tree, levels = self.tree, self.tree.levels
            view = self._by_level(own)
            got = tuple((levels[li], tree.dom_path[view[li]][-1])
                        for li in range(min(finest, len(levels) - 1) + 1) if view[li] >= 0)
            self.names[(own, finest)] = got
        return got

    def _domains_named(self, path: list[int]) -> dict[str, str]:
        tree = self.tree
        return {tree.levels[tree.dom_level[d]]: tree.dom_path[d][-1] for d in path}

    def _work_out(self, gang: CompiledGang, asg: dict[int, int]) -> _Parts:
        tree, levels = self.tree, self.tree.levels
        node_path = tree.node_path
        own_of = {pod: node_path[node][0] for pod, node in asg.items()}
        per_own = Counter(own_of.values())
        gpus_of = dict.fromkeys(per_own, 0)
        pod_gpus = gang.pod_gpus
        for pod, own in own_of.items():
            gpus_of[own] += pod_gpus[pod]
        domain_gpus = {tree.dom_path[own]: gpus for own, gpus in gpus_of.items()}
        # Subgroup and pod domains depend only on a group and the node domains its pods landed in, so they are
        # worked out once per (group, node domain) rather than once per pod.
        groups = gang.groups
        below: list[set[int]] = []  # per group, the node domains of its pods, then of its whole subtree's
        where_of: dict[int, Domain] = {}
        for g, lvl in zip(groups, _finest_levels(gang, len(levels) - 1)):
            here: dict[int, Domain] = {}
            for p in g.pods:
                at = own_of.get(p)
                if at is not None:
                    dom = here.get(at)
                    if dom is None:
                        dom = here[at] = self._domain_of(at, lvl)
                    if dom:
                        where_of[p] = dom
            below.append(set(here))
        # a child group comes after its parent, so one backward pass gives every group its whole subtree's domains
        for gi in range(len(groups) - 1, 0, -1):
            below[groups[gi].parent] |= below[gi]
        sub_domains: dict[str, dict[str, str]] = {}
        for gi, g in enumerate(groups):
            if len(below[gi]) == 1:  # most groups: all pods in one node domain, whose answer is worked out once
                (own,) = below[gi]
                common = self.single.get(own)
                if common is None:
                    common = self.single[own] = self._domains_named(_lca_path(tree, below[gi]))
                sub_domains[g.name] = dict(common)
            else:
                sub_domains[g.name] = self._domains_named(_lca_path(tree, below[gi]))
        names_of = gang.pod_names
        node_names = tree.node_names
        in_order = sorted(asg, key=names_of.__getitem__)
        pod_nodes = {names_of[p]: node_names[asg[p]] for p in in_order}
        pod_domain = {names_of[p]: where_of[p] for p in in_order if p in where_of}
        span: dict[str, int] = {}
        cuts: dict[str, int] = {}
        for li, level_label in enumerate(levels):
            counts: dict[int, int] = {}
            for own, k in per_own.items():
                d = self._by_level(own)[li]
                counts[d] = counts.get(d, 0) + k
            k = sum(counts.values())
            span[level_label] = len(counts)
            cuts[level_label] = (k * k - sum(c * c for c in counts.values())) // 2
        return gpus_of, domain_gpus, sub_domains, pod_nodes, pod_domain, span, cuts


def build_plan(tree: Tree, packer: Fitter, parts: PlanParts | None = None) -> PlacementPlan:
    """Collect the packer's state into a :class:`PlacementPlan`; ``parts``: the gangs' parts worked out so far
    on this tree (:class:`PlanParts`)."""
    levels = tree.levels
    if parts is None or parts.tree is not tree:
        parts = PlanParts(tree)
    gangs: dict[str, GangPlacement] = {}
    planned_own: dict[int, int] = {}  # GPUs planned per node domain
    unit = 0
    requested = placed_gpus = 0
    for gang in packer.gangs:
        if gang.need:
            leaf_needs = [g.need for g in gang.groups if g.pods]
            u = min(leaf_needs) if leaf_needs else gang.need
            unit = u if not unit else min(unit, u)
        requested += gang.need
        ok = gang.idx in packer.placed
        if not ok:
            gangs[gang.demand.key] = GangPlacement(
                gang.demand.key, gang.demand.display, gang.need, False,
                packer.reasons.get(gang.idx, f"{gang.demand.display} does not fit"),
                moved=gang.idx in packer.moved,
            )
            continue
        placed_gpus += gang.need
        gpus_of, domain_gpus, sub_domains, pod_nodes, pod_domain, span, cuts = \
            parts.parts(gang, packer.assign.get(gang.idx, {}))
        for own, gpus in gpus_of.items():
            planned_own[own] = planned_own.get(own, 0) + gpus
        gangs[gang.demand.key] = GangPlacement(
            gang.demand.key, gang.demand.display, gang.need, True, None, sub_domains, pod_nodes, pod_domain,
            span, cuts, gang.idx in packer.moved, domain_gpus,
        )

    planned = [0] * len(tree.dom_path)
    for own, gpus in planned_own.items():
        for d in tree.dom_anc[own]:
            planned[d] += gpus
    domains: list[DomainUsage] = []
    stats: list[LevelStats] = []
    stranded = 0
    for li, label in enumerate(levels):
        empty = partly = full = 0
        largest = 0
        for d in tree.level_domains[li]:
            total = tree.dom_total[d]
            unavailable = tree.dom_unavail[d]
            used = tree.dom_used0[d] + planned[d]
            free = max(0, total - used - unavailable)
            domains.append(DomainUsage(label, tree.dom_path[d], total, tree.dom_used0[d], planned[d],
                                       unavailable, free))
            largest = max(largest, tree.dom_free[d])
            if used == 0:
                empty += 1
            elif free == 0:
                full += 1
            else:
                partly += 1
            if li == len(levels) - 1 and 0 < tree.dom_free[d] < unit:
                stranded += tree.dom_free[d]
        stats.append(LevelStats(label, len(tree.level_domains[li]), empty, partly, full, largest))
    return PlacementPlan(
        levels, gangs, tuple(domains), tuple(stats), unit, stranded, requested, placed_gpus,
        sum(compress(tree.node_free, tree.node_ok)),
        plan_hash(levels, gangs), _node_usage(tree, packer),
    )


def _node_usage(tree: Tree, packer: Fitter) -> tuple[NodeUsage, ...]:
    if len(tree.node_names) > MAX_PICTURED_NODES:
        return ()
    taken: dict[int, dict[str, int]] = {}
    for gang in packer.gangs:
        for pod, node in packer.assign.get(gang.idx, {}).items():
            per = taken.setdefault(node, {})
            per[gang.demand.key] = per.get(gang.demand.key, 0) + gang.pod_gpus[pod]
    return tuple(
        NodeUsage(name, tree.dom_path[tree.node_path[n][0]], tree.node_cap[n], tree.node_used0[n],
                  not tree.node_ok[n] or bool(tree.node_taints[n]), tuple(sorted(taken.get(n, {}).items())))
        for n, name in enumerate(tree.node_names))
