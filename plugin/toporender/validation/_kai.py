"""KAI scheduler admission rules no CRD schema states: the PodGroup webhook (``podgroup_webhook.go`` in
``pkg/apis/scheduling/v2alpha2``) and the scheduler's subgroup contracts, for v0.14 and main.

Each rule returns (path, message) pairs for one PodGroup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ._common import Problem, as_dict, as_int, dns_label_problem

KAI_GROUP = "scheduling.run.ai"
KAI_TOPOLOGY_GROUP = "kai.scheduler"
POD_GROUP_ANNOTATION = "pod-group-name"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"


def kai_is_main(kai_version: str) -> bool:
    """True when the webhook rules of KAI >= v0.15 (main) apply, False for v0.14.x."""
    return kai_schema_variant(kai_version) == "main"


def kai_schema_variant(kai_version: str) -> str:
    """Map a KAI version string to the vendored schema variant ('main' or 'v0.14.0')."""
    if kai_version == "main":
        return "main"
    m = re.match(r"^v?(\d+)\.(\d+)(\.\d+)?$", kai_version)
    if not m:
        raise ValueError(f"KAI version must be 'main' or like 'v0.14.0', not {kai_version!r}")
    major, minor = int(m.group(1)), int(m.group(2))
    if (major, minor) < (0, 14):
        raise ValueError(f"no vendored KAI schema older than v0.14.0 (asked for {kai_version})")
    return "v0.14.0" if (major, minor) == (0, 14) else "main"


def _constraint(tc: Any, path: str) -> list[Problem]:
    if not isinstance(tc, dict):
        return []
    levels = [k for k in ("requiredTopologyLevel", "preferredTopologyLevel") if tc.get(k)]
    if levels and not tc.get("topology"):
        return [
            (
                f"{path}.topology",
                f"must be set when {' and '.join(levels)} is set (KAI v0.14 ignores a "
                "constraint without it, and the level has no Topology to resolve in)",
            )
        ]
    return []


def kai_podgroup(obj: dict[str, Any], kai_version: str) -> list[Problem]:
    """The PodGroup webhook (``podgroup_webhook.go``) plus our stricter subgroup-name rule."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    main = kai_is_main(kai_version)
    out: list[Problem] = []
    out.extend(_constraint(spec.get("topologyConstraint"), "spec.topologyConstraint"))
    raw = spec.get("subGroups")
    subgroups = [sg for sg in raw if isinstance(sg, dict)] if isinstance(raw, list) else []
    names: dict[str, int] = {}
    for i, sg in enumerate(subgroups):
        name = sg.get("name")
        if not isinstance(name, str):
            continue
        # KAI main's CRD already enforces the label pattern, but not the 63-character limit.
        msg = dns_label_problem(name) if not main or len(name) > 63 else None
        if msg:
            out.append((f"spec.subGroups[{i}].name",
                        msg + " (it becomes the pod label value kai.scheduler/subgroup-name)"))
        if name in names:
            out.append((f"spec.subGroups[{i}].name",
                        f"duplicate subgroup name {name!r} (also spec.subGroups[{names[name]}])"))
        else:
            names[name] = i
        tc = sg.get("topologyConstraint")
        if tc is not None:
            out.extend(_constraint(tc, f"spec.subGroups[{i}].topologyConstraint"))
    children: dict[str | None, list[str]] = {}
    for i, sg in enumerate(subgroups):
        parent = sg.get("parent")
        if parent is not None and (not isinstance(parent, str) or parent not in names):
            out.append((f"spec.subGroups[{i}].parent", f"parent {parent!r} of {sg.get('name')!r} was not found"))
        children.setdefault(parent if isinstance(parent, str) else None, []).append(str(sg.get("name")))
    cycle = _find_cycle(subgroups)
    if cycle:
        out.append(("spec.subGroups", "cycle detected in subgroups: " + " -> ".join(cycle)))
    if main:
        out.extend(_min_fields(spec, None, children.get(None, [])))
        for i, sg in enumerate(subgroups):
            name = sg.get("name")
            out.extend(_min_fields(sg, i, children.get(name, []) if isinstance(name, str) else []))
    return out


def _min_fields(node: dict[str, Any], index: int | None, kids: Sequence[str]) -> list[Problem]:
    """The minMember / minSubGroup rules of the PodGroup's spec (``index`` None) or of its subgroup ``index``;
    paths and names are written only for a problem (every PodGroup of a render passes through here)."""
    min_member, min_sub = node.get("minMember"), node.get("minSubGroup")
    is_root = index is None
    found: list[tuple[str, str]] = []  # (field, rule), worded below
    mm = as_int(min_member)
    if mm is not None and mm > 0 and min_sub is not None:
        found.append(("", "minMember and minSubGroup are mutually exclusive"))
    if not is_root:
        if not kids:
            if min_member is None:
                found.append((".minMember", "minMember is required on a leaf subgroup"))
            if min_sub is not None:
                found.append((".minSubGroup", "minSubGroup cannot be set on a leaf SubGroup"))
        elif mm is not None and mm > 0:
            found.append((".minMember", "minMember cannot be set on a mid-level SubGroup (has child SubGroups); "
                                        "use minSubGroup instead (KAI >= v0.15 rejects it on create)"))
    ms = as_int(min_sub)
    if min_sub is not None and ms is not None and (is_root or kids):
        if ms <= 0:
            found.append((".minSubGroup", "minSubGroup must be greater than 0"))
        elif ms > len(kids):
            found.append((".minSubGroup",
                          f"minSubGroup ({ms}) exceeds the number of direct child SubGroups ({len(kids)})"))
    if not found:
        return []
    path = "spec" if is_root else f"spec.subGroups[{index}]"
    who = "the PodGroup" if is_root else f"subgroup {node.get('name')!r}"
    return [(path + field, f"{who}: {rule}") for field, rule in found]


def _find_cycle(subgroups: list[dict[str, Any]]) -> list[str] | None:
    parent_of = {
        sg["name"]: sg.get("parent")
        for sg in subgroups
        if isinstance(sg.get("name"), str) and isinstance(sg.get("parent"), (str, type(None)))
    }
    for start in parent_of:
        seen: list[Any] = []
        node: Any = start
        while node in parent_of and node not in seen:
            seen.append(node)
            node = parent_of[node]
        if node in seen:
            loop = seen[seen.index(node) :] + [node]
            return [str(x) for x in loop]
    return None


def kai_leaves(pg: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(all subgroup names, leaf subgroup names) of a KAI PodGroup."""
    spec = as_dict(pg.get("spec"))
    raw = spec.get("subGroups") if isinstance(spec, dict) else None
    subgroups = [sg for sg in raw if isinstance(sg, dict)] if isinstance(raw, list) else []
    names = {sg["name"] for sg in subgroups if isinstance(sg.get("name"), str)}
    parents = {sg.get("parent") for sg in subgroups if isinstance(sg.get("parent"), str)}
    return names, names - parents


# ---- Koordinator -------------------------------------------------------------------------------------------
