"""Run specs: total GPU demand of one flavor, split into fast-fabric groups, planned pack-to-empty.

A ``kind: Run`` asks for ``spec.resources.totalGPUs`` GPUs of ``spec.resources.gpuType``. Nodes are grouped into
fast-fabric domains by ``(region, cluster, fabric.domain)``; only schedulable, untainted nodes whose
``gpu.flavor`` (or ``nvidia.com/gpu.product``) equals the Run's flavor and that carry all three labels take part.

* ``locality.groupGPUs`` set: fixed-size groups (a smaller last group when the total is not a multiple), each in one
  domain. A group stays in the domain this Run is filling while it fits; otherwise it prefers a domain the Run
  already uses, then the domain that holds all remaining groups with the least residual free GPUs, and failing
  that the domain with the most free GPUs (fill it to empty, then move on). Ties break on the domain name.
* ``groupGPUs`` omitted: chunks are formed while walking domains by free GPUs (descending, ties by name); each
  domain is filled to empty before the next one is touched, which minimises cross-domain cuts.
* ``allowCrossGroupSpread: false``: every group in one domain (the tightest that holds the whole Run); if none
  does, the Run fails at once and nothing is placed.
* Inside a domain, GPUs come from nodes sorted by free GPUs (descending) then name, largest node consumed first.
* ``spares: N``: N spare GPUs per group (shadow slots: a group's domain is chosen to hold group + spares when one
  can), placed after all active groups, in the group's domain if it has room, else in the nearest domain: same
  region and cluster first, then the one whose racks are
  closest in rack order, then most free, then name.

Runs in one input are planned in document order against the same inventory (earlier Runs first).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from toporender.errors import Diagnostic, UserError
from toporender.load.yaml_source import Document
from toporender.placement.inventory import HARD_EFFECTS, Inventory

DOMAIN_LABELS = ("region", "cluster", "fabric.domain")
RACK_LABEL = "rack"


@dataclass(frozen=True)
class RunSpec:
    name: str
    gpu_type: str
    total_gpus: int
    group_gpus: int | None = None
    allow_spread: bool = True
    spares: int = 0


@dataclass
class RunGroup:
    index: int
    gpus: int
    domain: str
    nodes: dict[str, int]
    spare_domain: str | None = None
    spare_nodes: dict[str, int] = field(default_factory=dict)
    spare_missing: int = 0


@dataclass
class RunPlan:
    name: str
    requested: int
    placed: bool
    reason: str | None
    groups: list[RunGroup]


@dataclass
class RunsPlan:
    runs: list[RunPlan]
    residual: dict[str, int]
    total: dict[str, int]
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "hash": self.hash,
            "runs": [
                {
                    "name": r.name, "requestedGPUs": r.requested, "placed": r.placed,
                    **({"reason": r.reason} if r.reason else {}),
                    "groups": [
                        {"index": g.index, "gpus": g.gpus, "domain": g.domain, "nodes": g.nodes,
                         **({"spares": {"domain": g.spare_domain, "nodes": g.spare_nodes,
                                        **({"missing": g.spare_missing} if g.spare_missing else {})}}
                            if g.spare_domain or g.spare_missing else {})}
                        for g in r.groups
                    ],
                }
                for r in self.runs
            ],
            "domains": [
                {"domain": d, "total": self.total[d], "free": self.residual[d]} for d in sorted(self.total)
            ],
        }


SPEC_FIELDS = frozenset({"resources", "locality", "spares"})
RESOURCE_FIELDS = frozenset({"gpuType", "totalGPUs"})
UNSUPPORTED_RUN_FIELDS = {
    "priority": "Runs are planned in the order their documents are read; order them instead",
    "selector": "the planner sees only the committed inventory; leave out the nodes a Run may not use",
    "malleability": "a Run's size is fixed by totalGPUs; malleable Runs are not planned",
    "elastic": "a Run's size is fixed by totalGPUs; elastic Runs are not planned",
    "labels": "groups carry no labels in the plan; put labels in metadata.labels of your own objects",
}
"""Run-spec fields of the packing design that the planner does not implement, with what to do instead."""


def parse_runs(documents: Sequence[Document]) -> list[RunSpec]:
    """Read every ``kind: Run`` document; report all problems at their positions."""
    diags: list[Diagnostic] = []
    out: list[RunSpec] = []
    for doc in documents:
        data = doc.data
        if not isinstance(data, dict) or data.get("kind") != "Run":
            continue
        meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            diags.append(Diagnostic("Run needs metadata.name", doc.pos(("metadata",))))
            name = f"run-{doc.index}"
        spec = data.get("spec")
        if not isinstance(spec, dict):
            diags.append(Diagnostic("Run needs a spec mapping", doc.pos(("spec",))))
            continue
        res = spec.get("resources")
        if not isinstance(res, dict):
            diags.append(Diagnostic("spec.resources must be a mapping with gpuType and totalGPUs",
                                    doc.pos(("spec", "resources"))))
            continue
        gpu_type = res.get("gpuType")
        if not isinstance(gpu_type, str) or not gpu_type:
            diags.append(Diagnostic("spec.resources.gpuType must be a non-empty string",
                                    doc.pos(("spec", "resources", "gpuType"))))
        total = res.get("totalGPUs")
        if isinstance(total, bool) or not isinstance(total, int) or total <= 0:
            diags.append(Diagnostic(f"spec.resources.totalGPUs must be a positive integer, got {total!r}",
                                    doc.pos(("spec", "resources", "totalGPUs"))))
        loc = spec.get("locality") or {}
        if not isinstance(loc, dict):
            diags.append(Diagnostic("spec.locality must be a mapping", doc.pos(("spec", "locality"))))
            loc = {}
        group = loc.get("groupGPUs")
        if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group <= 0):
            diags.append(Diagnostic(f"spec.locality.groupGPUs must be a positive integer, got {group!r}",
                                    doc.pos(("spec", "locality", "groupGPUs"))))
        spread = loc.get("allowCrossGroupSpread", True)
        if not isinstance(spread, bool):
            diags.append(Diagnostic("spec.locality.allowCrossGroupSpread must be true or false",
                                    doc.pos(("spec", "locality", "allowCrossGroupSpread"))))
        spares = spec.get("spares", 0)
        if isinstance(spares, bool) or not isinstance(spares, int) or spares < 0:
            diags.append(Diagnostic(f"spec.spares must be a non-negative integer, got {spares!r}",
                                    doc.pos(("spec", "spares"))))
        for key in sorted(set(loc) - {"groupGPUs", "allowCrossGroupSpread"}):
            diags.append(Diagnostic(f"unknown field spec.locality.{key}", doc.pos(("spec", "locality", key))))
        for where, fields, allowed in (((), spec, SPEC_FIELDS), (("resources",), res, RESOURCE_FIELDS)):
            for key in sorted(set(map(str, fields)) - allowed):
                path = ("spec", *where, key)
                reason = UNSUPPORTED_RUN_FIELDS.get(key)
                text = f"spec.{'.'.join(map(str, path[1:]))}"
                diags.append(Diagnostic(
                    f"{text} is not supported: {reason}" if reason else
                    f"unknown field {text}; allowed here: {', '.join(sorted(allowed))}", doc.pos(path)))
        if not diags:
            out.append(RunSpec(name, str(gpu_type), cast(int, total), group, spread, spares))
    if diags:
        raise UserError(diags)
    return out


class _Domains:
    """Fast-fabric domains of one flavor with per-node free GPUs (the mutable planning state)."""

    def __init__(self, inventory: Inventory):
        self.free: dict[str, int] = {}
        self.nodes: dict[str, list[str]] = {}
        self.node_flavor: dict[str, str | None] = {}
        self.rack: dict[str, str] = {}
        self.region: dict[str, tuple[str, str]] = {}
        self.total: dict[str, int] = {}
        for n in inventory.nodes:
            if n.unschedulable or any(t.effect in HARD_EFFECTS for t in n.taints):
                continue
            keys = [n.labels.get(k) for k in DOMAIN_LABELS]
            if any(not k for k in keys):
                continue
            dom = "/".join(k for k in keys if k)
            self.nodes.setdefault(dom, []).append(n.name)
            self.free[n.name] = n.free_gpus
            self.node_flavor[n.name] = n.flavor
            self.rack[n.name] = n.labels.get(RACK_LABEL, "")
            self.region[dom] = (keys[0] or "", keys[1] or "")
            self.total[dom] = self.total.get(dom, 0) + n.gpus
        for lst in self.nodes.values():
            lst.sort()

    def domain_free(self, dom: str, flavor: str) -> int:
        return sum(self.free[n] for n in self.nodes[dom] if self.node_flavor[n] == flavor)

    def take(self, dom: str, flavor: str, gpus: int) -> dict[str, int]:
        """Consume ``gpus`` from the domain's nodes, largest free first, then by name."""
        out: dict[str, int] = {}
        order = sorted((n for n in self.nodes[dom] if self.node_flavor[n] == flavor and self.free[n]),
                       key=lambda n: (-self.free[n], n))
        for n in order:
            if not gpus:
                break
            k = min(gpus, self.free[n])
            self.free[n] -= k
            out[n] = k
            gpus -= k
        return out

    def racks(self, dom: str) -> list[str]:
        return sorted({self.rack[n] for n in self.nodes[dom]})


def plan_runs(inventory: Inventory, runs: Sequence[RunSpec]) -> RunsPlan:
    """Plan Runs in order on one inventory (pure: the inventory is not modified)."""
    st = _Domains(inventory)
    plans = [_plan_one(st, r) for r in runs]
    residual = {d: sum(st.free[n] for n in ns) for d, ns in st.nodes.items()}
    canon = json.dumps([[r.name, r.placed, [[g.domain, sorted(g.nodes.items()), g.spare_domain,
                                             sorted(g.spare_nodes.items())] for g in r.groups]] for r in plans],
                       sort_keys=True, separators=(",", ":"))
    return RunsPlan(plans, residual, dict(st.total), hashlib.sha256(canon.encode()).hexdigest())


def group_sizes(total: int, group: int | None) -> list[int]:
    """Fixed-size groups with a smaller final group (``groupGPUs``); one group when no size is given."""
    if group is None:
        return [total]
    sizes = [group] * (total // group)
    if total % group:
        sizes.append(total % group)
    return sizes


def _plan_one(st: _Domains, run: RunSpec) -> RunPlan:
    flavor = run.gpu_type
    free = {d: st.domain_free(d, flavor) for d in st.nodes}
    doms = [d for d in sorted(free) if free[d] > 0]
    total_free = sum(free.values())
    groups: list[RunGroup] = []
    if not run.allow_spread:
        fitting = [d for d in doms if free[d] >= run.total_gpus]
        if not fitting:
            best = min(doms, key=lambda d: (-free[d], d)) if doms else None
            where = f"; the largest has {free[best]} ({best})" if best else "; no domain offers that flavor"
            return RunPlan(run.name, run.total_gpus, False,
                           f"run {run.name} needs {run.total_gpus} {flavor} GPUs in one fabric domain "
                           f"(allowCrossGroupSpread=false){where}", [])
        dom = min(fitting, key=lambda d: (free[d] - run.total_gpus, d))
        for i, size in enumerate(group_sizes(run.total_gpus, run.group_gpus)):
            groups.append(RunGroup(i, size, dom, st.take(dom, flavor, size)))
    elif run.group_gpus is None:
        if total_free < run.total_gpus:
            return RunPlan(run.name, run.total_gpus, False,
                           f"run {run.name} needs {run.total_gpus} {flavor} GPUs; only {total_free} are free", [])
        left = run.total_gpus
        for dom in sorted(doms, key=lambda d: (-free[d], d)):
            if not left:
                break
            chunk = min(left, free[dom])
            groups.append(RunGroup(len(groups), chunk, dom, st.take(dom, flavor, chunk)))
            left -= chunk
    else:
        sizes = group_sizes(run.total_gpus, run.group_gpus)
        current: str | None = None
        chosen: list[str] = []
        sim = dict(free)
        spare = run.spares
        for i, size in enumerate(sizes):
            if current is not None and sim[current] >= size + spare:
                dom = current
            else:
                rest = sum(sizes[i:]) + spare * (len(sizes) - i)
                fitting = [d for d in doms if sim[d] >= size + spare] or [d for d in doms if sim[d] >= size]
                if not fitting:
                    best = min(doms, key=lambda d: (-sim[d], d)) if doms else None
                    where = f"; the largest has {sim[best]} free ({best})" if best else ""
                    return RunPlan(run.name, run.total_gpus, False,
                                   f"run {run.name} needs groups of {size} {flavor} GPUs in one fabric domain"
                                   f"{where}", [])
                used = [d for d in fitting if d in chosen]
                whole = [d for d in fitting if sim[d] >= rest]
                if current is not None and current in fitting:
                    dom = current
                elif used:
                    dom = min(used, key=lambda d: (sim[d] - size, d))
                elif whole:
                    dom = min(whole, key=lambda d: (sim[d] - rest, d))
                else:
                    dom = min(fitting, key=lambda d: (-sim[d], d))
            sim[dom] -= min(sim[dom], size + spare)
            chosen.append(dom)
            current = dom
        for i, (size, dom) in enumerate(zip(sizes, chosen, strict=True)):
            groups.append(RunGroup(i, size, dom, st.take(dom, flavor, size)))
    if run.spares:
        for g in groups:
            _place_spares(st, flavor, g, run.spares)
    return RunPlan(run.name, run.total_gpus, True, None, groups)


def _place_spares(st: _Domains, flavor: str, group: RunGroup, spares: int) -> None:
    """Spares in the group's domain, else the nearest domain (same region/cluster, then rack order)."""
    if st.domain_free(group.domain, flavor) >= spares:
        group.spare_domain = group.domain
        group.spare_nodes = st.take(group.domain, flavor, spares)
        return
    all_racks = sorted({st.rack[n] for ns in st.nodes.values() for n in ns})
    pos = {r: i for i, r in enumerate(all_racks)}
    mine = [pos[st.rack[n]] for n in group.nodes] or [0]

    def distance(dom: str) -> int:
        return min(abs(pos[r] - m) for r in st.racks(dom) for m in mine)

    cands = [d for d in sorted(st.nodes) if d != group.domain and st.domain_free(d, flavor) >= spares]
    if not cands:
        group.spare_missing = spares
        return
    region = st.region[group.domain]
    best = min(cands, key=lambda d: (st.region[d] != region, distance(d), -st.domain_free(d, flavor), d))
    group.spare_domain = best
    group.spare_nodes = st.take(best, flavor, spares)
