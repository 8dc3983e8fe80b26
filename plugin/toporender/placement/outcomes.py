"""A gang's packing outcome as plain data, and how it is written onto the gang's objects.

Apart from :mod:`toporender.placement.stage` because the render cache re-annotates stored objects, and works
out arrival order and the plan memo's key, without the workflow models (and so without importing pydantic):
everything here takes names, keys and plain JSON, never a ``Gang``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toporender.errors import Position, fail
from toporender.load.walk import inside
from toporender.load.yaml_source import load_file

if TYPE_CHECKING:
    from toporender.placement.demand import GangDemand
    from toporender.placement.plan import GangPlacement

LOCK_FILE = "toporender.lock"
PLACEMENT = "toporender.dev/placement"
PLAN_HASH = "toporender.dev/plan-hash"
REASON = "toporender.dev/unplaceable-reason"
INTENDED_DOMAIN = "toporender.dev/intended-domain"
INTENDED_NODE = "toporender.dev/intended-node"


@dataclass(frozen=True)
class GangOutcome:
    placement: GangPlacement
    plan_hash: str


def load_order(root: Path | None) -> list[str]:
    """Gang keys in arrival order from ``toporender.lock`` (empty when there is none)."""
    if root is None or not (root / LOCK_FILE).exists():
        return []
    path = root / LOCK_FILE
    if not inside(root, path) or not path.is_file():
        raise fail(f"{LOCK_FILE} must be a regular file inside the repo", Position(LOCK_FILE))
    docs = [d for d in load_file(path, LOCK_FILE) if d.data is not None]
    if not docs:
        return []
    data = docs[0].data
    order = data.get("order") if isinstance(data, dict) else None
    if not isinstance(order, list) or not all(isinstance(k, str) for k in order):
        raise fail("expected 'order:' with a list of gang keys ('<workflow file>#<group>')", docs[0].pos())
    return list(dict.fromkeys(order))


def arrival_keys(keys: Sequence[str], order: Sequence[str]) -> list[int]:
    """Indexes of ``keys`` in arrival order: keys listed in the lock first (in its order), then the rest in
    stream order (a stable sort, as :func:`toporender.placement.stage.arrival` sorts gangs)."""
    rank = {key: i for i, key in enumerate(order)}
    return sorted(range(len(keys)), key=lambda i: rank.get(keys[i], len(rank)))


def lock_lines(keys: Sequence[str]) -> str:
    """The lock file listing gang ``keys`` in this order."""
    lines = ["# Arrival order of gangs for placement (earlier keeps priority). Maintained by",
             "# 'toporender golden'; edit only to change priorities.", "version: 1", "order:"]
    lines += [f"- {json.dumps(k)}" for k in keys]
    return "\n".join(lines) + "\n"


def memo_key(inventory: bytes, path: str, levels: list[str], demands: bytes, node_selector: Any) -> str:
    """The plan memo's key: the inventory file's bytes, its path, the levels, the node selector and every
    demand in arrival order. ``demands`` is the JSON list of the demands as :func:`demand_json` writes them (see
    :func:`demands_json`), so a caller holding demands as JSON need not rebuild them."""
    import orjson

    h = hashlib.sha256(inventory)
    head = orjson.dumps([path, levels, sorted(dict(node_selector or {}).items())])
    h.update(head[:-1] + b"," + demands + b"]")
    return h.hexdigest()


def demand_json(demand: GangDemand) -> bytes:
    """A demand as compact JSON, fields by position and each subgroup's pods by their index among the gang's:
    ``[key, display, [required, preferred], [[name, gpus, tolerations, excluded], ...], [[name, parent,
    [required, preferred], [pod index, ...]], ...], pod_subgroup]``. The render cache keeps every gang's demand
    this way, and its worker processes send them so; naming every field and writing each pod twice made the
    text 2.5 times longer (6.9 KB a gang) and writing and reading it a tenth of a 1M-GPU render's CPU time.

    Raises ValueError for a subgroup pod that is not one of the gang's own (``gang_demand`` shares them), and
    TypeError for what JSON cannot hold."""
    import orjson

    return orjson.dumps(demand_rows(demand))


def demand_rows(demand: GangDemand) -> list[Any]:
    """What :func:`demand_json` writes, as lists: JSON text that reads back equal to these rows reads back as
    ``demand`` (see :func:`checked_demand_json`)."""
    index = {id(p): i for i, p in enumerate(demand.pods)}
    try:
        subgroups = [[s.name, s.parent, [s.constraint.required, s.constraint.preferred], [index[id(p)] for p in s.pods]]
                     for s in demand.subgroups]
    except KeyError:
        raise ValueError("a subgroup pod that is not one of the gang's") from None
    c = demand.constraint
    return [demand.key, demand.display, [c.required, c.preferred],
            [[p.name, p.gpus, list(map(list, p.tolerations)), list(p.excluded)] for p in demand.pods], subgroups,
            list(map(list, demand.pod_subgroup))]


def checked_demand_json(demand: GangDemand) -> tuple[bytes, bool]:
    """:func:`demand_json` of ``demand``, and whether :func:`demand_from_json` reads it back as ``demand``;
    raises what :func:`demand_json` raises.

    Compares the text read back with :func:`demand_rows` rather than rebuilding the demand from it: the rows
    are what :func:`demand_from_json` is given, so equal rows give an equal demand, and the comparison stays in
    C (rebuilding and comparing took 60 us of a 24-pod gang's 200). What it answers is whether the values
    survive JSON (a float NaN, a toleration's value that is no string); the containers are the tuples the
    dataclasses declare, as :func:`~toporender.placement.stage.gang_demand` builds them. Pod names must be
    distinct, as :func:`demand_from_json` requires."""
    import orjson

    rows = demand_rows(demand)
    text = orjson.dumps(rows)
    return text, orjson.loads(text) == rows and len({p.name for p in demand.pods}) == len(demand.pods)


def demands_json(demands: Sequence[GangDemand]) -> bytes:
    """The JSON list of ``demands`` as :func:`demand_json` writes each (what :func:`memo_key` is given)."""
    return b"[" + b",".join(map(demand_json, demands)) + b"]"


def demand_from_json(data: Any) -> GangDemand:
    """The ``GangDemand`` whose :func:`demand_json` text ``data`` was read from (pods shared between the gang and
    its subgroups, as :func:`toporender.placement.stage.gang_demand` builds them); raises IndexError,
    KeyError, TypeError or ValueError on data of another shape. A repack rebuilds every stored demand, so this
    stays lean: the render cache writes demands itself and checks that they read back equal before it stores
    them."""
    from toporender.expand.levels import LevelConstraint
    from toporender.placement.demand import GangDemand, PodDemand, SubgroupDemand

    def constraint(c: list[Any]) -> LevelConstraint:
        if type(c) is not list:
            raise TypeError("bad constraint")
        required, preferred = c
        return LevelConstraint(required, preferred)

    def members_of(members: list[int]) -> tuple[PodDemand, ...]:
        if members and min(members) < 0:
            raise ValueError("bad pod index")
        return tuple(pods[i] for i in members)

    if type(data) is not list:
        raise TypeError("a demand is a list")
    key, display, gang_constraint, pod_rows, subgroup_rows, pod_subgroup = data
    pods = tuple(PodDemand(name, gpus, tuple(map(tuple, tolerations)), tuple(excluded))
                 for name, gpus, tolerations, excluded in pod_rows)
    if len({p.name for p in pods}) != len(pods):
        raise ValueError("pods share a name")
    subgroups = tuple(SubgroupDemand(name, parent, constraint(c), members_of(members))
                      for name, parent, c, members in subgroup_rows)
    return GangDemand(key, display, constraint(gang_constraint), subgroups, pods, tuple(map(tuple, pod_subgroup)))


def outcomes_json(outcomes: dict[str, GangOutcome]) -> list[Any]:
    return [[key, o.plan_hash, o.placement.key, o.placement.display, o.placement.gpus, o.placement.placed,
             o.placement.reason, o.placement.subgroup_domains, o.placement.pod_nodes,
             [[pod, [list(level) for level in domain]] for pod, domain in o.placement.pod_domain.items()]]
            for key, o in outcomes.items()]


def outcomes_from_json(data: Any) -> dict[str, GangOutcome] | None:
    """What :func:`outcomes_json` wrote, with only the fields annotating reads; None for anything else."""
    from toporender.placement.plan import GangPlacement

    try:
        out = {}
        for key, plan_hash, gp_key, display, gpus, placed, reason, domains, nodes, pod_domain in data:
            gp = GangPlacement(str(gp_key), str(display), int(gpus), bool(placed),
                               None if reason is None else str(reason),
                               {str(k): {str(a): str(b) for a, b in v.items()} for k, v in domains.items()},
                               {str(k): str(v) for k, v in nodes.items()},
                               {str(pod): tuple((str(a), str(b)) for a, b in domain) for pod, domain in pod_domain})
            out[str(key)] = GangOutcome(gp, str(plan_hash))
        return out
    except (TypeError, ValueError, AttributeError):
        return None


def same(a: GangOutcome, b: GangOutcome) -> bool:
    x, y = a.placement, b.placement
    return (a.plan_hash, x.key, x.display, x.gpus, x.placed, x.reason, x.subgroup_domains, x.pod_nodes,
            list(x.pod_domain.items())) == (b.plan_hash, y.key, y.display, y.gpus, y.placed, y.reason,
                                             y.subgroup_domains, y.pod_nodes, list(y.pod_domain.items()))


PLACEMENT_NOTES = (PLAN_HASH, PLACEMENT, REASON, INTENDED_DOMAIN, INTENDED_NODE)
"""Every annotation key :func:`placement_notes` writes."""


def placement_notes(tasks: Sequence[str], outcome: GangOutcome) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The annotations a gang's placement adds: to each of its PodGroups, and to each pod (``tasks``: the task
    name of each pod, in order; an empty mapping for a pod that gets none). Every value is a string and every
    key one of :data:`PLACEMENT_NOTES`."""
    from toporender.placement.plan import domain_text, sorted_json

    gp = outcome.placement
    gang_notes: dict[str, str] = {PLAN_HASH: outcome.plan_hash}
    if not gp.placed:
        gang_notes[PLACEMENT] = "unplaceable"
        gang_notes[REASON] = gp.reason or "no domain fits"
        return gang_notes, [{} for _ in tasks]
    gang_notes[PLACEMENT] = sorted_json(gp.subgroup_domains).decode()
    pod_domain = gp.pod_domain
    pod_nodes = gp.pod_nodes
    pod_notes: list[dict[str, str]] = []
    for name in tasks:
        notes = {}
        domain = pod_domain.get(name)
        if domain is not None:
            notes[INTENDED_DOMAIN] = domain_text(domain)
        node = pod_nodes.get(name)
        if node is not None:
            notes[INTENDED_NODE] = node
        pod_notes.append(notes)
    return gang_notes, pod_notes


def annotate_objects(tasks: Sequence[str], pin: str, group_objects: list[dict[str, Any]],
                     pods: list[dict[str, Any]], outcome: GangOutcome) -> None:
    """Write the intended placement onto a gang's scheduler objects and pods (``tasks``: the task name of each
    pod, in order; :func:`placement_notes`), and pin the pods when the pool says so (``pin``: none, soft or
    hard)."""
    gang_notes, pod_notes = placement_notes(tasks, outcome)
    for obj in group_objects:
        if obj.get("kind") == "PodGroup":
            meta = obj["metadata"]
            meta["annotations"] = {**meta.get("annotations", {}), **gang_notes}
    if not outcome.placement.placed:
        return
    pod_domain = outcome.placement.pod_domain
    for name, pod, notes in zip(tasks, pods, pod_notes):
        if notes:
            # one fresh mapping per pod (never shared with the template the pod came from)
            meta = pod["metadata"]
            meta["annotations"] = {**meta.get("annotations", {}), **notes}
        domain = pod_domain.get(name)
        if pin != "none" and domain is not None:
            _pin(pod, domain[-1], hard=pin == "hard")


def _pin(pod: dict[str, Any], level: tuple[str, str], *, hard: bool) -> None:
    """Node affinity to the finest level of the intended domain: required (hard) or preferred with top weight
    (soft)."""
    key, value = level
    expr = {"key": key, "operator": "In", "values": [value]}
    spec = pod["spec"]
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    if hard:
        required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        terms = required.setdefault("nodeSelectorTerms", [])
        if not terms:
            terms.append({"matchExpressions": []})
        for term in terms:
            term.setdefault("matchExpressions", []).append(dict(expr))
    else:
        preferred = node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        preferred.append({"weight": 100, "preference": {"matchExpressions": [expr]}})
