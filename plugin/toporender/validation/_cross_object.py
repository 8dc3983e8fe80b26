"""Rules over a whole rendered bundle: pods against their PodGroups and leaf subgroups, gang sizes,
Koordinator gang bundles, levels against Topology objects.

:func:`cross_object` returns (object, path, message) triples, each attributed to the object that must change.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from itertools import repeat
from typing import Any

from ._common import as_dict, as_int, as_list, split_api_version
from ._kai import KAI_GROUP, KAI_TOPOLOGY_GROUP, POD_GROUP_ANNOTATION, SUBGROUP_LABEL, kai_is_main, kai_leaves
from ._koordinator import (
    GANG_GROUPS,
    GANG_SPEC,
    KOORD_CNT_GROUP,
    KOORD_PG_GROUP,
    KOORD_POD_LABEL,
    groups_value,
    spec_value,
)
from ._kueue import GROUP_LABEL as KUEUE_GROUP_LABEL
from ._kueue import kueue_groups
from ._pod_columns import PodColumns, pod_columns
from ._volcano import GROUP_ANNOTATION as VOLCANO_GROUP_ANNOTATION
from ._volcano import HYPERNODE_GROUP, VOLCANO_PG_GROUP, volcano_links

Triple = tuple[dict[str, Any], str, str]
_PodView = tuple[dict[str, Any], "str | None", dict[str, Any], dict[str, Any]]
"""A Pod with its namespace, labels and annotations, read once."""


def _gvk(obj: dict[str, Any]) -> tuple[str, str]:
    api = obj.get("apiVersion")
    gv = _split(api) if isinstance(api, str) else None
    return (gv[0] if gv else "?"), str(obj.get("kind"))


_split = lru_cache(maxsize=256)(split_api_version)


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


def cross_object(
    objs: Sequence[dict[str, Any]],
    kai_version: str,
    columns: PodColumns | None = None,
) -> list[Triple]:
    """Rules over a whole rendered bundle; each problem is attributed to the object that must change.

    ``columns`` are the bundle's Pods already read by the caller (:func:`pod_columns`); ``objs`` then need
    not hold them again."""
    out: list[Triple] = []
    kai_pgs: dict[tuple[str | None, str], dict[str, Any]] = {}
    koord_pgs: dict[tuple[str | None, str], dict[str, Any]] = {}
    kai_topologies: dict[str, dict[str, Any]] = {}
    volcano_pgs: dict[tuple[str | None, str], dict[str, Any]] = {}
    hypernodes: dict[str, dict[str, Any]] = {}
    cnt_layers: set[str] | None = None
    seen: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
    pods = columns.pods if columns is not None else [o for o in objs if _is_pod(o)]
    for obj in objs:
        if _is_pod(obj):
            continue
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name = meta.get("name")
        if not isinstance(name, str):
            continue
        ns = meta.get("namespace")
        ns = ns if ns.__class__ is str and ns else None
        group, kind = _gvk(obj)
        ident = (group, kind, ns, name)
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
            kai_pgs[(ns, name)] = obj
        elif (group, kind) == (KOORD_PG_GROUP, "PodGroup"):
            koord_pgs[(ns, name)] = obj
        elif (group, kind) == (KAI_TOPOLOGY_GROUP, "Topology"):
            kai_topologies[name] = obj
        elif (group, kind) == (VOLCANO_PG_GROUP, "PodGroup"):
            volcano_pgs[(ns, name)] = obj
        elif (group, kind) == (HYPERNODE_GROUP, "HyperNode"):
            hypernodes[name] = obj
        elif (group, kind) == (KOORD_CNT_GROUP, "ClusterNetworkTopology") and name == "default":
            spec = as_dict(obj.get("spec"))
            items = spec.get("networkTopologySpec") if isinstance(spec, dict) else None
            cnt_layers = {str(x.get("topologyLayer")) for x in as_list(items) if isinstance(x, dict)}
            cnt_layers.add("ClusterTopologyLayer")

    leaves_of = {k: kai_leaves(pg) for k, pg in kai_pgs.items()}
    if columns is None:
        columns = pod_columns(pods)
    members = _regular_pods(columns, leaves_of, koord_pgs, ("", "Pod") in {k[:2] for k in seen}) if columns else None
    if members is not None:
        kai_members, koord_members = members
    else:
        kai_members = {k: Counter() for k in kai_pgs}
        koord_members = {k: Counter() for k in koord_pgs}
        for pod in pods:
            meta = as_dict(pod.get("metadata"))
            ns = meta.get("namespace")
            ns = ns if ns.__class__ is str and ns else None
            name = meta.get("name")
            if isinstance(name, str):
                ident = ("", "Pod", ns, name)
                if ident in seen:
                    out.append((pod, "metadata.name", f"duplicate object: another Pod named {name!r} in the same "
                                                      "namespace is in this output"))
                seen[ident] = pod
            labels, annotations = meta.get("labels"), meta.get("annotations")
            view = (pod, ns, labels if isinstance(labels, dict) else {},
                    annotations if isinstance(annotations, dict) else {})
            out.extend(_kai_pod(view, kai_pgs, kai_members, leaves_of))
            out.extend(_koord_pod(view, koord_pgs, koord_members))

    for key, pg in kai_pgs.items():
        # A PodGroup that no Pod in this output names may gang Pods created elsewhere (e.g. by a Job).
        if kai_members[key]:
            out.extend(_kai_gang_size(pg, kai_members[key], leaves_of[key]))
        out.extend(_kai_levels(pg, kai_topologies, kai_is_main(kai_version)))
    for key, pg in koord_pgs.items():
        spec = as_dict(pg.get("spec"))
        mm = as_int(spec.get("minMember")) if isinstance(spec, dict) else None
        joined = koord_members[key].total()
        if joined and mm is not None and mm > joined:
            out.append(
                (
                    pg,
                    "spec.minMember",
                    f"minMember {mm} exceeds the {joined} Pods that "
                    "join this gang; it can never be scheduled",
                )
            )
    out.extend(_koord_bundles(koord_pgs, cnt_layers))
    out.extend(_kueue_and_volcano(pods, columns, volcano_pgs, hypernodes))
    return out


def _kueue_and_volcano(pods: list[dict[str, Any]], columns: PodColumns | None,
                       volcano_pgs: dict[tuple[str | None, str], dict[str, Any]],
                       hypernodes: dict[str, dict[str, Any]]) -> list[Triple]:
    """Kueue pod groups and Volcano links, read from the columns when the Pods are regular (skipped entirely
    when no Pod carries either backend's link and there is no Volcano object)."""
    if columns is not None:
        kueue = KUEUE_GROUP_LABEL in columns.label_keys
        volcano = bool(volcano_pgs or hypernodes) or any(VOLCANO_GROUP_ANNOTATION in a for a in columns.annotations)
        if not kueue and not volcano:
            return []
        views = list(zip(columns.pods, columns.namespaces, columns.labels, columns.annotations, columns.schedulers))
    else:
        views = []
        for pod in pods:
            meta = as_dict(pod.get("metadata"))
            ns = meta.get("namespace")
            views.append((pod, ns if isinstance(ns, str) and ns else None, as_dict(meta.get("labels")),
                          as_dict(meta.get("annotations")), as_dict(pod.get("spec")).get("schedulerName")))
        kueue = volcano = True
    out: list[Triple] = []
    if kueue:
        out.extend(kueue_groups((p, ns, lab, ann) for p, ns, lab, ann, _ in views))
    if volcano:
        out.extend(volcano_links(volcano_pgs, hypernodes, views))
    return out


def _is_pod(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1"


_DEFAULT_SCHEDULERS = (None, "", "default-scheduler")
Members = dict[tuple[str | None, str], Counter[str | None]]


def _regular_pods(
    columns: PodColumns,
    leaves_of: dict[tuple[str | None, str], tuple[set[str], set[str]]],
    koord_pgs: dict[tuple[str | None, str], dict[str, Any]],
    other_pods: bool,
) -> tuple[Members, Members] | None:
    """Pod counts per PodGroup and subgroup label when no Pod breaks a rule, else None (then every Pod is
    checked on its own, which words the messages).

    Runs once per distinct (namespace, PodGroup, subgroup) rather than once per Pod."""
    names, spaces = columns.names, columns.namespaces
    if other_pods or not columns.names_are_strings or len(set(zip(spaces, names))) != len(names):
        return None
    kai_groups = list(map(dict.get, columns.annotations, repeat(POD_GROUP_ANNOTATION)))
    kai_members: Members = {k: Counter() for k in leaves_of}
    koord_members: Members = {k: Counter() for k in koord_pgs}
    koord_groups: list[Any] = []
    try:
        links = Counter(zip(spaces, kai_groups, map(dict.get, columns.labels, repeat(SUBGROUP_LABEL))))
        if KOORD_POD_LABEL in columns.label_keys:
            koord_groups = list(map(dict.get, columns.labels, repeat(KOORD_POD_LABEL)))
            for (ns, pg), count in Counter(zip(spaces, koord_groups)).items():
                if isinstance(pg, str):
                    if (ns, pg) not in koord_pgs:
                        return None
                    koord_members[(ns, pg)][None] += count
    except TypeError:  # an unhashable value
        return None
    for (ns, pg, label), count in links.items():
        if pg is None:
            if label is not None:
                return None
            continue
        found = leaves_of.get((ns, pg)) if isinstance(pg, str) else None
        if found is None or not (label in found[1] if found[0] and isinstance(label, str) else not found[0]
                                 and label is None):
            return None
        kai_members[(ns, pg)][label] += count
    try:
        schedulers = set(columns.schedulers)
    except TypeError:  # an unhashable value: judge each Pod
        schedulers = set(_DEFAULT_SCHEDULERS)
    if not schedulers.isdisjoint(_DEFAULT_SCHEDULERS):
        ganged = zip(columns.schedulers, kai_groups, koord_groups or repeat(None))
        if any(s in _DEFAULT_SCHEDULERS for s, kai, koord in ganged if isinstance(kai, str) or isinstance(koord, str)):
            return None
    return kai_members, koord_members


def _kai_pod(
    view: _PodView,
    pgs: dict[tuple[str | None, str], dict[str, Any]],
    members: dict[tuple[str | None, str], Counter[str | None]],
    leaves_of: dict[tuple[str | None, str], tuple[set[str], set[str]]],
) -> list[Triple]:
    pod, ns, labels, annotations = view
    pg_name = annotations.get(POD_GROUP_ANNOTATION)
    label = labels.get(SUBGROUP_LABEL)
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
    if not isinstance(spec, dict) or spec.get("schedulerName") in _DEFAULT_SCHEDULERS:
        out.append(
            (
                pod,
                "spec.schedulerName",
                "a Pod of a KAI PodGroup must name the KAI scheduler "
                "(e.g. kai-scheduler); the default scheduler ignores gangs",
            )
        )
    pg = pgs.get((ns, pg_name))
    if pg is None:
        out.append(
            (
                pod,
                f"metadata.annotations[{POD_GROUP_ANNOTATION!r}]",
                f"names PodGroup {pg_name!r}, which is not in this output (the pod would never be scheduled)",
            )
        )
        return out
    names, leaves = leaves_of[(ns, pg_name)]
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
    members[(ns, pg_name)][label if isinstance(label, str) else None] += 1
    return out


def _kai_gang_size(pg: dict[str, Any], per_leaf: Counter[str | None],
                   names_leaves: tuple[set[str], set[str]]) -> list[Triple]:
    """Gang sizes against the Pods that name ``pg``, counted by their subgroup label (None: no label)."""
    spec = as_dict(pg.get("spec"))
    if not isinstance(spec, dict):
        return []
    out: list[Triple] = []
    names, leaves = names_leaves
    if not names:
        mm = as_int(spec.get("minMember"))
        total = per_leaf.total()
        if mm is not None and mm > total:
            out.append(
                (
                    pg,
                    "spec.minMember",
                    f"minMember {mm} exceeds the {total} Pods that name this PodGroup; it can never be scheduled",
                )
            )
        return out
    for i, sg in enumerate(as_list(spec.get("subGroups"))):
        if not isinstance(sg, dict) or not isinstance(sg.get("name"), str) or sg["name"] not in leaves:
            continue
        mm = as_int(sg.get("minMember"))
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
        for i, sg in enumerate(as_list(spec.get("subGroups")))
        if isinstance(sg, dict)
    ]
    out: list[Triple] = []
    for path, tc in places:
        if not isinstance(tc, dict) or not isinstance(tc.get("topology"), str) or tc["topology"] not in topologies:
            continue
        topo = topologies[tc["topology"]]
        tspec = as_dict(topo.get("spec"))
        levels = [lv for lv in as_list(tspec.get("levels")) if isinstance(lv, dict)]
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
    view: _PodView,
    pgs: dict[tuple[str | None, str], dict[str, Any]],
    members: Members,
) -> list[Triple]:
    pod, ns, labels, _ = view
    pg_name = labels.get(KOORD_POD_LABEL)
    if not isinstance(pg_name, str):
        return []
    out: list[Triple] = []
    spec = as_dict(pod.get("spec"))
    if not isinstance(spec, dict) or spec.get("schedulerName") in _DEFAULT_SCHEDULERS:
        out.append(
            (
                pod,
                "spec.schedulerName",
                "a Pod of a Koordinator gang must name koord-scheduler; the default scheduler ignores gangs",
            )
        )
    if (ns, pg_name) not in pgs:
        out.append(
            (
                pod,
                f"metadata.labels[{KOORD_POD_LABEL!r}]",
                f"names PodGroup {pg_name!r}, which is not in this output",
            )
        )
        return out
    members[(ns, pg_name)][None] += 1
    return out


def _koord_bundles(pgs: dict[tuple[str | None, str], dict[str, Any]], cnt_layers: set[str] | None) -> list[Triple]:
    out: list[Triple] = []
    for (ns, name), pg in pgs.items():
        ann = _mapping(pg, "annotations")
        raw = ann.get(GANG_GROUPS)
        if isinstance(raw, str):
            members, problems = groups_value(raw)
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
                    if other_raw is None or groups_value(str(other_raw))[0] != members:
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
            rules, _ = spec_value(spec_raw)
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
