"""Admission rules that no CRD schema states: KAI's PodGroup webhook and scheduler contracts, and the
Koordinator gang annotations that koord-scheduler silently replaces with defaults when they are malformed.

Single-object rules return (path, message) pairs; :func:`cross_object` checks one rendered bundle as a whole
(pods against their PodGroups, Koordinator gang bundles, levels against Topology objects) and returns
(object, path, message) triples.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ._common import as_dict, dns_label_problem, dns_subdomain_problem, split_api_version

Problem = tuple[str, str]

KAI_GROUP = "scheduling.run.ai"
KAI_TOPOLOGY_GROUP = "kai.scheduler"
KOORD_PG_GROUP = "scheduling.sigs.k8s.io"
KOORD_CNT_GROUP = "scheduling.koordinator.sh"

POD_GROUP_ANNOTATION = "pod-group-name"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
KOORD_POD_LABEL = "pod-group.scheduling.sigs.k8s.io"

GANG = "gang.scheduling.koordinator.sh/"
GANG_GROUPS = GANG + "groups"
GANG_SPEC = GANG + "network-topology-spec"
GANG_INDEX = GANG + "network-topology-index"
GANG_MODE = GANG + "mode"
GANG_MATCH = GANG + "match-policy"
GANG_MATCH_ALIAS = "pod-group.scheduling.sigs.k8s.io/match-policy"
GANG_WAIT = GANG + "waiting-time"
GANG_MIN = GANG + "min-available"
GANG_TOTAL = GANG + "total-number"
GANG_TIMEOUT = GANG + "timeout"

MATCH_POLICIES = ("only-waiting", "waiting-and-running", "once-satisfied")
GATHER_STRATEGIES = ("MustGather", "PreferGather")
_DECIMAL = re.compile(r"^(0|[1-9][0-9]*)$")
_GO_DURATION = re.compile(r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$")
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


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


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
        path = f"spec.subGroups[{i}]"
        name = sg.get("name")
        if not isinstance(name, str):
            continue
        # KAI main's CRD already enforces the label pattern, but not the 63-character limit.
        msg = dns_label_problem(name) if not main or len(name) > 63 else None
        if msg:
            out.append((f"{path}.name", msg + " (it becomes the pod label value kai.scheduler/subgroup-name)"))
        if name in names:
            out.append((f"{path}.name", f"duplicate subgroup name {name!r} (also spec.subGroups[{names[name]}])"))
        else:
            names[name] = i
        out.extend(_constraint(sg.get("topologyConstraint"), f"{path}.topologyConstraint"))
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
        out.extend(_min_fields(spec, "spec", children.get(None, []), is_root=True))
        for i, sg in enumerate(subgroups):
            name = sg.get("name")
            out.extend(
                _min_fields(
                    sg,
                    f"spec.subGroups[{i}]",
                    children.get(name, []) if isinstance(name, str) else [],
                    is_root=False,
                )
            )
    return out


def _min_fields(node: dict[str, Any], path: str, kids: Sequence[str], is_root: bool) -> list[Problem]:
    out: list[Problem] = []
    min_member, min_sub = node.get("minMember"), node.get("minSubGroup")
    mm = _int(min_member)
    who = "the PodGroup" if is_root else f"subgroup {node.get('name')!r}"
    if mm is not None and mm > 0 and min_sub is not None:
        out.append((path, f"{who}: minMember and minSubGroup are mutually exclusive"))
    if not is_root:
        if not kids:
            if min_member is None:
                out.append((f"{path}.minMember", f"{who}: minMember is required on a leaf subgroup"))
            if min_sub is not None:
                out.append((f"{path}.minSubGroup", f"{who}: minSubGroup cannot be set on a leaf SubGroup"))
        elif mm is not None and mm > 0:
            out.append(
                (
                    f"{path}.minMember",
                    f"{who}: minMember cannot be set on a mid-level SubGroup (has child "
                    "SubGroups); use minSubGroup instead (KAI >= v0.15 rejects it on "
                    "create)",
                )
            )
    ms = _int(min_sub)
    if min_sub is not None and ms is not None and (is_root or kids):
        if ms <= 0:
            out.append((f"{path}.minSubGroup", f"{who}: minSubGroup must be greater than 0"))
        elif ms > len(kids):
            out.append(
                (
                    f"{path}.minSubGroup",
                    f"{who}: minSubGroup ({ms}) exceeds the number of direct child SubGroups ({len(kids)})",
                )
            )
    return out


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


def parse_go_duration(text: str) -> float | None:
    """Seconds in a Go ``time.ParseDuration`` string, or None when Go would reject it."""
    if text == "0":
        return 0.0
    if not _GO_DURATION.match(text):
        return None
    sign = -1.0 if text.startswith("-") else 1.0
    total = 0.0
    for number, _frac, unit in re.findall(r"(\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", text):
        total += float(number) * _DURATION_UNITS[unit]
    return sign * total


def _groups_value(value: str) -> tuple[list[str] | None, list[str]]:
    """Parse ``gang.../groups``: a JSON array of distinct "namespace/name" strings."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        return None, [f"not valid JSON ({exc.msg})"]
    if not isinstance(data, list) or not data or not all(isinstance(x, str) for x in data):
        return None, ['must be a non-empty JSON array of "namespace/name" strings']
    problems: list[str] = []
    for entry in data:
        ns, slash, name = entry.partition("/")
        if not slash or "/" in name:
            problems.append(f'{entry!r} is not "namespace/name"')
            continue
        msg = dns_label_problem(ns) or dns_subdomain_problem(name)
        if msg:
            problems.append(f"{entry!r}: {msg}")
    if len(set(data)) != len(data):
        problems.append("lists a gang more than once")
    return data, problems


def _spec_value(value: str) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """Parse ``network-topology-spec`` against the Go type NetworkTopologySpec (unknown keys rejected)."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        return None, [f"not valid JSON ({exc.msg})"]
    if not isinstance(data, dict):
        return None, ['must be a JSON object {"gatherStrategy": [...]}']
    problems = [f"unknown key {k!r} (Koordinator ignores it)" for k in sorted(data) if k != "gatherStrategy"]
    rules = data.get("gatherStrategy", [])
    if not isinstance(rules, list):
        return None, problems + ["gatherStrategy must be a JSON array"]
    layers: list[str] = []
    for i, rule in enumerate(rules):
        where = f"gatherStrategy[{i}]"
        if not isinstance(rule, dict):
            problems.append(f"{where} must be an object")
            continue
        for key in sorted(set(rule) - {"layer", "strategy", "podCountMultiple"}):
            problems.append(f"{where}: unknown key {key!r}")
        layer = rule.get("layer")
        if not isinstance(layer, str) or not layer:
            problems.append(f"{where}.layer must be a non-empty string")
        elif layer in layers:
            problems.append(f"{where}.layer {layer!r} appears twice")
        else:
            layers.append(layer)
        if rule.get("strategy") not in GATHER_STRATEGIES:
            problems.append(f"{where}.strategy must be one of {list(GATHER_STRATEGIES)}, not {rule.get('strategy')!r}")
        pcm = rule.get("podCountMultiple")
        if pcm is not None and (_int(pcm) is None or pcm < 0 or pcm >= 2**31):
            problems.append(f"{where}.podCountMultiple must be a non-negative integer")
    return [r for r in rules if isinstance(r, dict)], problems


def koordinator_annotations(obj: dict[str, Any], is_pod: bool) -> list[Problem]:
    """Formats of the gang annotations on a Koordinator PodGroup or Pod."""
    meta = as_dict(obj.get("metadata"))
    ann = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(ann, dict):
        return []
    out: list[Problem] = []

    def at(key: str) -> str:
        return f"metadata.annotations[{key!r}]"

    for key, value in ann.items():
        if not isinstance(key, str) or not isinstance(value, str):
            continue
        if key == GANG_GROUPS:
            out.extend((at(key), m) for m in _groups_value(value)[1])
        elif key == GANG_SPEC:
            out.extend((at(key), m) for m in _spec_value(value)[1])
        elif key in (GANG_INDEX, GANG_MIN, GANG_TOTAL):
            if not _DECIMAL.match(value) or int(value) >= 2**31:
                out.append((at(key), f"{value!r} must be a non-negative decimal integer string"))
            elif key == GANG_MIN and int(value) < 1:
                out.append((at(key), "must be at least 1"))
        elif key == GANG_MODE:
            if value not in ("Strict", "NonStrict"):
                out.append((at(key), f"{value!r} must be Strict or NonStrict (anything else silently means Strict)"))
        elif key in (GANG_MATCH, GANG_MATCH_ALIAS):
            if value not in MATCH_POLICIES:
                out.append((at(key), f"{value!r} must be one of {list(MATCH_POLICIES)}"))
        elif key == GANG_WAIT:
            seconds = parse_go_duration(value)
            if seconds is None:
                out.append((at(key), f"{value!r} is not a Go duration such as '600s' or '10m'"))
            elif seconds <= 0:
                out.append((at(key), f"{value!r} must be positive"))
        elif key == GANG_TIMEOUT:
            out.append((at(key), "is set by koord-scheduler and must not be rendered"))
        elif key.startswith(GANG) and key not in (GANG + "name",):
            out.append((at(key), "unknown Koordinator gang annotation"))
    if not is_pod and GANG_INDEX in ann:
        out.append((at(GANG_INDEX), "belongs on Pods, not on the PodGroup"))
    return out


# ---- cross-object checks -----------------------------------------------------------------------------------

Triple = tuple[dict[str, Any], str, str]


def _gvk(obj: dict[str, Any]) -> tuple[str, str]:
    gv = split_api_version(obj.get("apiVersion"))
    return (gv[0] if gv else "?"), str(obj.get("kind"))


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _ns(obj: dict[str, Any]) -> str | None:
    ns = _meta(obj).get("namespace")
    return ns if isinstance(ns, str) and ns else None


def _name(obj: dict[str, Any]) -> str | None:
    name = _meta(obj).get("name")
    return name if isinstance(name, str) else None


def _mapping(obj: dict[str, Any], field: str) -> dict[str, Any]:
    value = _meta(obj).get(field)
    return value if isinstance(value, dict) else {}


def cross_object(objs: Sequence[dict[str, Any]], kai_version: str) -> list[Triple]:
    """Rules over a whole rendered bundle; each problem is attributed to the object that must change."""
    out: list[Triple] = []
    kai_pgs: dict[tuple[str | None, str], dict[str, Any]] = {}
    koord_pgs: dict[tuple[str | None, str], dict[str, Any]] = {}
    kai_topologies: dict[str, dict[str, Any]] = {}
    cnt_layers: set[str] | None = None
    seen: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
    for obj in objs:
        group, kind = _gvk(obj)
        name = _name(obj)
        if name is None:
            continue
        ident = (group, kind, _ns(obj), name)
        if ident in seen:
            out.append(
                (
                    obj,
                    "metadata.name",
                    f"duplicate object: another {kind} named {name!r} in the same namespace is in this output",
                )
            )
        seen[ident] = obj
        if (group, kind) == (KAI_GROUP, "PodGroup"):
            kai_pgs[(_ns(obj), name)] = obj
        elif (group, kind) == (KOORD_PG_GROUP, "PodGroup"):
            koord_pgs[(_ns(obj), name)] = obj
        elif (group, kind) == (KAI_TOPOLOGY_GROUP, "Topology"):
            kai_topologies[name] = obj
        elif (group, kind) == (KOORD_CNT_GROUP, "ClusterNetworkTopology") and name == "default":
            spec = as_dict(obj.get("spec"))
            items = spec.get("networkTopologySpec") if isinstance(spec, dict) else None
            cnt_layers = {str(x.get("topologyLayer")) for x in _list(items) if isinstance(x, dict)}
            cnt_layers.add("ClusterTopologyLayer")

    kai_members: dict[tuple[str | None, str], list[dict[str, Any]]] = {k: [] for k in kai_pgs}
    koord_members: dict[tuple[str | None, str], list[dict[str, Any]]] = {k: [] for k in koord_pgs}
    for obj in objs:
        if _gvk(obj) != ("", "Pod"):
            continue
        out.extend(_kai_pod(obj, kai_pgs, kai_members))
        out.extend(_koord_pod(obj, koord_pgs, koord_members))

    for key, pg in kai_pgs.items():
        # A PodGroup that no Pod in this output names may gang Pods created elsewhere (e.g. by a Job).
        if kai_members[key]:
            out.extend(_kai_gang_size(pg, kai_members[key]))
        out.extend(_kai_levels(pg, kai_topologies, kai_is_main(kai_version)))
    for key, pg in koord_pgs.items():
        spec = as_dict(pg.get("spec"))
        mm = _int(spec.get("minMember")) if isinstance(spec, dict) else None
        if koord_members[key] and mm is not None and mm > len(koord_members[key]):
            out.append(
                (
                    pg,
                    "spec.minMember",
                    f"minMember {mm} exceeds the {len(koord_members[key])} Pods that "
                    "join this gang; it can never be scheduled",
                )
            )
    out.extend(_koord_bundles(koord_pgs, cnt_layers))
    return out


def _kai_pod(
    pod: dict[str, Any],
    pgs: dict[tuple[str | None, str], dict[str, Any]],
    members: dict[tuple[str | None, str], list[dict[str, Any]]],
) -> list[Triple]:
    pg_name = _mapping(pod, "annotations").get(POD_GROUP_ANNOTATION)
    label = _mapping(pod, "labels").get(SUBGROUP_LABEL)
    if not isinstance(pg_name, str):
        if label is not None:
            return [
                (
                    pod,
                    f"metadata.labels[{SUBGROUP_LABEL!r}]",
                    f"is set but the Pod has no {POD_GROUP_ANNOTATION!r} annotation",
                )
            ]
        return []
    out: list[Triple] = []
    spec = as_dict(pod.get("spec"))
    if not isinstance(spec, dict) or spec.get("schedulerName") in (None, "", "default-scheduler"):
        out.append(
            (
                pod,
                "spec.schedulerName",
                "a Pod of a KAI PodGroup must name the KAI scheduler "
                "(e.g. kai-scheduler); the default scheduler ignores gangs",
            )
        )
    pg = pgs.get((_ns(pod), pg_name))
    if pg is None:
        out.append(
            (
                pod,
                f"metadata.annotations[{POD_GROUP_ANNOTATION!r}]",
                f"names PodGroup {pg_name!r}, which is not in this output (the pod would never be scheduled)",
            )
        )
        return out
    names, leaves = kai_leaves(pg)
    at = f"metadata.labels[{SUBGROUP_LABEL!r}]"
    if names:
        if label is None:
            out.append(
                (
                    pod,
                    at,
                    f"is required: PodGroup {pg_name!r} has subGroups, and KAI drops a pod without "
                    "a leaf subgroup label as an invalid-subgroup task",
                )
            )
        elif not isinstance(label, str) or label not in names:
            out.append(
                (
                    pod,
                    at,
                    f"{label!r} is not a subgroup of PodGroup {pg_name!r} (leaves: {', '.join(sorted(leaves))})",
                )
            )
        elif label not in leaves:
            out.append(
                (
                    pod,
                    at,
                    f"{label!r} is a mid-level subgroup of PodGroup {pg_name!r}; pods must name a "
                    f"leaf ({', '.join(sorted(leaves))})",
                )
            )
    elif label is not None:
        out.append((pod, at, f"{label!r} names a subgroup, but PodGroup {pg_name!r} has no subGroups"))
    members[(_ns(pod), pg_name)].append(pod)
    return out


def _kai_gang_size(pg: dict[str, Any], pods: list[dict[str, Any]]) -> list[Triple]:
    spec = as_dict(pg.get("spec"))
    if not isinstance(spec, dict):
        return []
    out: list[Triple] = []
    names, leaves = kai_leaves(pg)
    if not names:
        mm = _int(spec.get("minMember"))
        if mm is not None and mm > len(pods):
            out.append(
                (
                    pg,
                    "spec.minMember",
                    f"minMember {mm} exceeds the {len(pods)} Pods that name this PodGroup; it can never be scheduled",
                )
            )
        return out
    per_leaf: dict[str, int] = {}
    for pod in pods:
        label = _mapping(pod, "labels").get(SUBGROUP_LABEL)
        if isinstance(label, str):
            per_leaf[label] = per_leaf.get(label, 0) + 1
    for i, sg in enumerate(_list(spec.get("subGroups"))):
        if not isinstance(sg, dict) or not isinstance(sg.get("name"), str) or sg["name"] not in leaves:
            continue
        mm = _int(sg.get("minMember"))
        have = per_leaf.get(sg["name"], 0)
        if mm is not None and mm > have:
            out.append(
                (
                    pg,
                    f"spec.subGroups[{i}].minMember",
                    f"minMember {mm} exceeds the {have} Pods labelled with subgroup {sg['name']!r}",
                )
            )
        if have == 0:
            out.append((pg, f"spec.subGroups[{i}]", f"leaf subgroup {sg['name']!r} has no Pods"))
    return out


def _kai_levels(pg: dict[str, Any], topologies: dict[str, dict[str, Any]], main: bool) -> list[Triple]:
    spec = as_dict(pg.get("spec"))
    if not isinstance(spec, dict):
        return []
    places: list[tuple[str, Any]] = [("spec.topologyConstraint", spec.get("topologyConstraint"))]
    places += [
        (f"spec.subGroups[{i}].topologyConstraint", sg.get("topologyConstraint"))
        for i, sg in enumerate(_list(spec.get("subGroups")))
        if isinstance(sg, dict)
    ]
    out: list[Triple] = []
    for path, tc in places:
        if not isinstance(tc, dict) or not isinstance(tc.get("topology"), str) or tc["topology"] not in topologies:
            continue
        topo = topologies[tc["topology"]]
        tspec = as_dict(topo.get("spec"))
        levels = [lv for lv in _list(tspec.get("levels")) if isinstance(lv, dict)]
        allowed = {lv.get("nodeLabel") for lv in levels if isinstance(lv.get("nodeLabel"), str)}
        if main:
            allowed |= {lv["alias"] for lv in levels if isinstance(lv.get("alias"), str)}
        for field in ("requiredTopologyLevel", "preferredTopologyLevel"):
            value = tc.get(field)
            if isinstance(value, str) and value and value not in allowed:
                out.append(
                    (
                        pg,
                        f"{path}.{field}",
                        f"{value!r} is not a level of Topology {tc['topology']!r} "
                        f"({', '.join(sorted(str(a) for a in allowed))})",
                    )
                )
    return out


def _koord_pod(
    pod: dict[str, Any],
    pgs: dict[tuple[str | None, str], dict[str, Any]],
    members: dict[tuple[str | None, str], list[dict[str, Any]]],
) -> list[Triple]:
    pg_name = _mapping(pod, "labels").get(KOORD_POD_LABEL)
    if not isinstance(pg_name, str):
        return []
    out: list[Triple] = []
    spec = as_dict(pod.get("spec"))
    if not isinstance(spec, dict) or spec.get("schedulerName") in (None, "", "default-scheduler"):
        out.append(
            (
                pod,
                "spec.schedulerName",
                "a Pod of a Koordinator gang must name koord-scheduler; the default scheduler ignores gangs",
            )
        )
    if (_ns(pod), pg_name) not in pgs:
        out.append(
            (
                pod,
                f"metadata.labels[{KOORD_POD_LABEL!r}]",
                f"names PodGroup {pg_name!r}, which is not in this output",
            )
        )
        return out
    members[(_ns(pod), pg_name)].append(pod)
    return out


def _koord_bundles(pgs: dict[tuple[str | None, str], dict[str, Any]], cnt_layers: set[str] | None) -> list[Triple]:
    out: list[Triple] = []
    for (ns, name), pg in pgs.items():
        ann = _mapping(pg, "annotations")
        raw = ann.get(GANG_GROUPS)
        if isinstance(raw, str):
            members, problems = _groups_value(raw)
            if members is not None and not problems:
                at = f"metadata.annotations[{GANG_GROUPS!r}]"
                own_ns = {m.partition("/")[0] for m in members}
                if ns is not None and own_ns != {ns}:
                    out.append(
                        (
                            pg,
                            at,
                            f"every member must be in namespace {ns!r} (a gang's PodGroup lives in "
                            "its pods' namespace)",
                        )
                    )
                elif ns is None and len(own_ns) > 1:
                    out.append((pg, at, "members are in different namespaces"))
                member_names = [m.partition("/")[2] for m in members]
                if name not in member_names:
                    out.append((pg, at, f"does not list this PodGroup itself ({name!r})"))
                for member in member_names:
                    other = pgs.get((ns, member))
                    if other is None:
                        out.append((pg, at, f"member {member!r} is not a PodGroup in this output"))
                        continue
                    other_raw = _mapping(other, "annotations").get(GANG_GROUPS)
                    if other_raw is None or _groups_value(str(other_raw))[0] != members:
                        out.append(
                            (
                                pg,
                                at,
                                f"member {member!r} carries a different {GANG_GROUPS} value; it "
                                "must be identical on every member",
                            )
                        )
                    elif (
                        _mapping(other, "annotations").get(GANG_SPEC) is not None
                        and ann.get(GANG_SPEC) is not None
                        and _canon(_mapping(other, "annotations").get(GANG_SPEC)) != _canon(ann.get(GANG_SPEC))
                    ):
                        out.append(
                            (
                                pg,
                                f"metadata.annotations[{GANG_SPEC!r}]",
                                f"differs from member {member!r}; every member must carry the same spec",
                            )
                        )
        spec_raw = ann.get(GANG_SPEC)
        if cnt_layers is not None and isinstance(spec_raw, str):
            rules, _ = _spec_value(spec_raw)
            for i, rule in enumerate(rules or []):
                layer = rule.get("layer")
                if isinstance(layer, str) and layer not in cnt_layers:
                    out.append(
                        (
                            pg,
                            f"metadata.annotations[{GANG_SPEC!r}]",
                            f"gatherStrategy[{i}].layer {layer!r} is not a topologyLayer of "
                            f"ClusterNetworkTopology 'default' ({', '.join(sorted(cnt_layers))})",
                        )
                    )
    return out


def _canon(value: Any) -> Any:
    try:
        return json.dumps(json.loads(str(value)), sort_keys=True)
    except ValueError:
        return value
