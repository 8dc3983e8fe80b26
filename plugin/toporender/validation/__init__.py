"""Validate rendered objects against the real upstream schemas and the admission rules no schema states.

Users sync toporender's output into clusters with prune enabled, so an object the API server rejects, or
silently changes, costs running jobs. Every rendered object is checked for:

* CRD kinds (KAI PodGroup/Topology/Queue, ComputeDomain, Koordinator PodGroup/ClusterNetworkTopology, Kueue
  Topology/ResourceFlavor/LocalQueue, Volcano PodGroup/HyperNode): the
  vendored upstream ``openAPIV3Schema`` of the served version, strict about unknown fields, int32/int64
  ranges, scope, and the non-transition CEL rules (hand-written equivalents);
* built-in kinds (``v1`` and ``*.k8s.io`` groups): the Kubernetes OpenAPI schema via kubernetes-validate when
  it is installed and ``core=True``, else a built-in schema of the Pod and Service fields we emit;
* metadata of every object: name syntax per kind, namespace, label and annotation keys and values, the
  256 KiB annotation limit;
* KAI PodGroup webhook rules, Koordinator gang annotation formats, Kueue's pod webhook (pod groups and
  topology annotations) and Volcano's PodGroup and HyperNode webhooks; with :func:`validate_objects`, also the
  rules that span objects (pod -> PodGroup -> leaf subgroup, gang sizes, Koordinator bundles, Kueue pod group
  counts, Volcano sub-groups and HyperNode members, levels against Topology objects, duplicates).

Each problem is one line ``Kind/namespace/name: json.path: message``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from ._builtin_kinds import DEFAULT_K8S_MINOR, core_backend, core_scope, is_core_group, validate_core
from ._common import identity, split_api_version
from ._crd import known_groups, select, validate_crd
from ._cross_object import cross_object
from ._kai import KAI_GROUP, kai_podgroup, kai_schema_variant
from ._koordinator import KOORD_PG_GROUP, koordinator_annotations
from ._kueue import kueue_pod
from ._meta import TOTAL_ANNOTATION_SIZE_LIMIT, check_metadata
from ._output import pods_metadata_ok
from ._pod_columns import pod_columns
from ._volcano import HYPERNODE_GROUP, VOLCANO_PG_GROUP, volcano_hypernode, volcano_podgroup

__all__ = [
    "DEFAULT_K8S_MINOR",
    "annotations_fit",
    "core_backend",
    "object_problems",
    "output_problems",
    "validate_object",
    "validate_objects",
]


@lru_cache(maxsize=16)
def _variants(kai_version: str, dra_version: str) -> dict[str, str]:
    """Which schema variant each versioned kind is checked against (looked up once per pair of versions; the
    result is only read)."""
    kai = kai_schema_variant(kai_version)
    return {
        "scheduling.run.ai/PodGroup": kai,
        "kai.scheduler/Topology": kai,
        "resource.nvidia.com/ComputeDomain": dra_version,
    }


def _problems(
    obj: Any, *, kai_version: str, dra_version: str, core: bool, k8s_minor: str, require_namespace: bool
) -> list[tuple[str, str]]:
    if not isinstance(obj, dict):
        return [("(root)", f"a Kubernetes object must be a mapping, not {type(obj).__name__}")]
    gv = split_api_version(obj.get("apiVersion"))
    kind = obj.get("kind")
    if gv is None:
        return [("apiVersion", f"{obj.get('apiVersion')!r} is not a valid apiVersion (group/version or v1)")]
    if not isinstance(kind, str) or not kind:
        return [("kind", "required field is missing")]
    group, version = gv
    doc = select(group, kind, _variants(kai_version, dra_version))
    out: list[tuple[str, str]] = []
    if doc is not None:
        if version not in doc.schemas:
            served = ", ".join(f"{group}/{v}" for v in sorted(doc.schemas))
            return [("apiVersion", f"{group}/{version} is not served for {kind} (served: {served})")]
        out.extend(check_metadata(obj, group, kind, doc.scope, require_namespace))
        out.extend(validate_crd(obj, doc, version))
        if (group, kind) == (KAI_GROUP, "PodGroup"):
            out.extend(kai_podgroup(obj, kai_version))
        elif (group, kind) == (KOORD_PG_GROUP, "PodGroup"):
            out.extend(koordinator_annotations(obj, is_pod=False))
        elif (group, kind) == (VOLCANO_PG_GROUP, "PodGroup"):
            out.extend(volcano_podgroup(obj))
        elif (group, kind) == (HYPERNODE_GROUP, "HyperNode"):
            out.extend(volcano_hypernode(obj))
    elif group in known_groups():
        return [
            (
                "kind",
                f"{group} has no kind {kind!r} we hold a schema for ({', '.join(known_groups()[group])})",
            )
        ]
    elif is_core_group(group):
        out.extend(check_metadata(obj, group, kind, core_scope(kind), require_namespace))
        out.extend(validate_core(obj, group, version, kind, core=core, k8s_minor=k8s_minor))
        if (group, kind) == ("", "Pod"):
            out.extend(koordinator_annotations(obj, is_pod=True))
            out.extend(kueue_pod(obj))
    else:
        return [
            (
                "apiVersion",
                f"no vendored schema for {kind} in API group {group!r}; "
                f"known CRD groups: {', '.join(sorted(known_groups()))}",
            )
        ]
    return sorted(set(out))


def validate_object(
    obj: dict[str, Any],
    *,
    kai_version: str = "main",
    dra_version: str = "main",
    core: bool = True,
    k8s_minor: str = DEFAULT_K8S_MINOR,
    require_namespace: bool = False,
) -> list[str]:
    """Problems of one object, each ``Kind/ns/name: path: message``; an empty list means valid.

    ``kai_version`` picks the KAI schema and webhook rules ('main' = v0.15 and later, or e.g. 'v0.14.0');
    ``dra_version`` the ComputeDomain CRD ('main' or 'v25.12.0'). ``core=False`` skips kubernetes-validate
    for built-in kinds and uses the fast built-in Pod/Service check (see :func:`core_backend`). A namespaced
    object may omit ``metadata.namespace`` (Argo CD and ``kubectl -n`` fill it in) unless
    ``require_namespace``.
    """
    found = _problems(obj, kai_version=kai_version, dra_version=dra_version, core=core, k8s_minor=k8s_minor,
                      require_namespace=require_namespace)
    if not found:
        return []
    who = identity(obj)
    return [f"{who}: {path}: {msg}" for path, msg in found]


def object_problems(
    objs: Iterable[dict[str, Any]],
    *,
    kai_version: str = "main",
    dra_version: str = "main",
    core: bool = True,
    k8s_minor: str = DEFAULT_K8S_MINOR,
    require_namespace: bool = False,
) -> list[tuple[int, str]]:
    """Problems of a whole rendered stream as (index of the object to change, problem): every object on its own,
    then the rules that span objects, attributed to the object that must change (e.g. the Pod whose subgroup
    label names a mid-level subgroup)."""
    items = list(objs)
    out: list[tuple[int, str]] = []
    for i, obj in enumerate(items):
        out.extend((i, p) for p in validate_object(obj, kai_version=kai_version, dra_version=dra_version, core=core,
                                                   k8s_minor=k8s_minor, require_namespace=require_namespace))
    index = {id(o): i for i, o in enumerate(items)}
    dicts = [o for o in items if isinstance(o, dict)]
    linked = cross_object(dicts, kai_version)
    out.extend((index[id(obj)], f"{identity(obj)}: {path}: {msg}") for obj, path, msg in linked)
    return out


def validate_objects(
    objs: Iterable[dict[str, Any]],
    *,
    kai_version: str = "main",
    dra_version: str = "main",
    core: bool = True,
    k8s_minor: str = DEFAULT_K8S_MINOR,
    require_namespace: bool = False,
) -> list[str]:
    """Problems of a whole rendered stream (:func:`object_problems` without the indexes): per-object problems
    in stream order, then the cross-object ones."""
    return [p for _, p in object_problems(objs, kai_version=kai_version, dra_version=dra_version, core=core,
                                          k8s_minor=k8s_minor, require_namespace=require_namespace)]


def output_problems(
    objs: Sequence[dict[str, Any]], *, kai_version: str = "main", dra_version: str = "main"
) -> list[tuple[int, str]]:
    """What a host checks before it writes a byte: (index of the object to change, problem) pairs.

    Every custom resource and other non-Pod object is held to its full schema and admission rules, every
    object to a unique identity, and every Pod to its metadata rules (Koordinator gang annotations included)
    and to its link to a leaf subgroup of its PodGroup, with the gang sizes that follow. Pod bodies come from
    templates checked against the Pod schema when the config is loaded; :func:`validate_objects` checks each
    Pod body too. Thousands of Pods share their label keys and most values, so Pod metadata is first tested
    in bulk, once per distinct key and value, and only when that finds something does each Pod go through
    the full rules, which word the messages. Costs a few percent of a render (``benchmarks/render/bench.py``).
    """
    out: list[tuple[int, str]] = []
    dicts: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    for i, obj in enumerate(objs):
        if obj.__class__ is dict and obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1":
            pods.append(obj)
            continue
        if isinstance(obj, dict):
            dicts.append(obj)
        out.extend((i, p) for p in validate_object(obj, kai_version=kai_version, dra_version=dra_version,
                                                   core=False))
    columns = pod_columns(pods)
    linked = cross_object(dicts if columns is not None else dicts + pods, kai_version, columns)
    metadata_ok = columns is not None and pods_metadata_ok(columns)
    index = {id(obj): i for i, obj in enumerate(objs)} if linked or not metadata_ok else {}
    if not metadata_ok:
        for pod in pods:
            found = (check_metadata(pod, "", "Pod", "Namespaced", False) + koordinator_annotations(pod, is_pod=True)
                     + kueue_pod(pod))
            out.extend((index[id(pod)], f"{identity(pod)}: {path}: {msg}") for path, msg in sorted(set(found)))
    out.extend((index[id(obj)], f"{identity(obj)}: {path}: {msg}") for obj, path, msg in linked)
    out.sort(key=lambda item: item[0])
    return out


def annotations_fit(written: int) -> bool:
    """Whether an object written in ``written`` bytes of a stream (JSON or YAML, as
    :mod:`toporender.emit.stream` writes them) surely keeps its annotations within their size limit, which
    counts the UTF-8 bytes of every key and value: the text holds each of them, and an escape never takes
    fewer bytes than the character it stands for (``\\u2028`` for three bytes, ``\\0`` for one)."""
    return written <= TOTAL_ANNOTATION_SIZE_LIMIT
