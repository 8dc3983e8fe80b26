"""Object-metadata rules that the API server enforces for every kind but no CRD schema states.

CRD schemas declare ``metadata`` as a bare ``type: object``, and kubernetes-validate only checks ObjectMeta
types, so names, label and annotation syntax, and the annotation size limit are checked here for all kinds.
"""

from __future__ import annotations

from typing import Any

from ._common import (
    dns1035_problem,
    dns_label_problem,
    dns_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)

Problem = tuple[str, str]

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

ALLOWED_FIELDS = frozenset(
    {
        "name",
        "namespace",
        "labels",
        "annotations",
        "finalizers",
        "ownerReferences",
        "generateName",
        "creationTimestamp",
    }
)
_SERVER_SET = frozenset(
    {
        "uid",
        "resourceVersion",
        "generation",
        "managedFields",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)

# Kinds whose names the API server validates with something other than DNS-1123 subdomain.
_NAME_RULES = {
    ("", "Service"): dns1035_problem,
    ("", "Namespace"): dns_label_problem,
}


def check_metadata(
    obj: dict[str, Any], group: str, kind: str, scope: str | None, require_namespace: bool
) -> list[Problem]:
    """Check ``obj['metadata']``; ``scope`` is 'Namespaced', 'Cluster' or None when unknown."""
    meta = obj.get("metadata")
    if meta is None:
        return [("metadata", "required field is missing")]
    if not isinstance(meta, dict):
        return [("metadata", f"must be an object, not {type(meta).__name__}")]
    out: list[Problem] = []
    for key in meta:
        if key in _SERVER_SET:
            out.append((f"metadata.{key}", "is set by the API server and must not be rendered"))
        elif key not in ALLOWED_FIELDS:
            out.append((f"metadata.{key}", "unknown field (not in ObjectMeta)"))
    if meta.get("creationTimestamp") is not None:
        out.append(("metadata.creationTimestamp", "is set by the API server and must not be rendered"))

    name = meta.get("name")
    if name is None:
        out.append(("metadata.name", "required field is missing (generateName does not work with apply)"))
    elif not isinstance(name, str):
        out.append(("metadata.name", f"must be a string, not {type(name).__name__}"))
    else:
        rule = _NAME_RULES.get((group, kind), dns_subdomain_problem)
        msg = rule(name)
        if msg:
            out.append(("metadata.name", msg))

    ns = meta.get("namespace")
    if ns is not None:
        if not isinstance(ns, str):
            out.append(("metadata.namespace", f"must be a string, not {type(ns).__name__}"))
        elif scope == "Cluster":
            out.append(("metadata.namespace", f"{kind} is cluster-scoped and must not set a namespace"))
        else:
            msg = dns_label_problem(ns)
            if msg:
                out.append(("metadata.namespace", msg))
    elif require_namespace and scope == "Namespaced":
        out.append(("metadata.namespace", f"{kind} is namespaced and namespaces are required here"))

    out.extend(_check_map(meta, "labels", True))
    out.extend(_check_map(meta, "annotations", False))
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
        if size > TOTAL_ANNOTATION_SIZE_LIMIT:
            out.append(
                (
                    "metadata.annotations",
                    f"total size {size} bytes exceeds the limit of {TOTAL_ANNOTATION_SIZE_LIMIT} bytes",
                )
            )

    finalizers = meta.get("finalizers")
    if finalizers is not None:
        if not isinstance(finalizers, list):
            out.append(("metadata.finalizers", "must be a list of strings"))
        else:
            for i, fin in enumerate(finalizers):
                msg = qualified_name_problem(fin) if isinstance(fin, str) else "must be a string"
                if msg:
                    out.append((f"metadata.finalizers[{i}]", msg))
    return out


def _check_map(meta: dict[str, Any], field: str, is_label: bool) -> list[Problem]:
    value = meta.get(field)
    if value is None:
        return []
    if not isinstance(value, dict):
        return [(f"metadata.{field}", f"must be a map of strings, not {type(value).__name__}")]
    out: list[Problem] = []
    for key, val in value.items():
        if not isinstance(key, str):
            out.append((_map_path(field, key), "key must be a string"))
            continue
        # The API server lower-cases annotation keys before the qualified-name check, but not label keys.
        msg = qualified_name_problem(key if is_label else key.lower())
        if msg:
            out.append((_map_path(field, key), msg))
        if not isinstance(val, str):
            out.append((_map_path(field, key), f"value must be a string, not {type(val).__name__} (quote it in YAML)"))
        elif is_label:
            msg = label_value_problem(val)
            if msg:
                out.append((_map_path(field, key), msg))
    return out


def _map_path(field: str, key: Any) -> str:
    return f"metadata.{field}[{str(key)!r}]"
