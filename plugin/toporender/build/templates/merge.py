"""How templates merge: RFC 7386 JSON merge patch for group templates, a Kubernetes-aware rule for pod templates.

Group templates with the same identity (kind, metadata.name) are merged with
:func:`merge_patch`; pod templates, the pool's then the platform's, with :func:`merge_pod`.
"""

from __future__ import annotations

import copy
import json
from typing import Any

SET_LISTS = {"tolerations", "resourceClaims", "claims", "imagePullSecrets", "finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _named(items: list[Any]) -> bool:
    for item in items:
        if not isinstance(item, dict) or "name" not in item:
            return False
    return True


def merge_pod(base: Any, patch: Any, key: str | None = None) -> Any:
    """Pod-template merge: dicts deep-merge (``null`` deletes); lists of named objects merge by
    ``name`` (new names appended); set-like lists (tolerations, resourceClaims, claims,
    imagePullSecrets, finalizers) become de-duplicated unions; other lists are replaced.

    ``base`` is updated in place and returned, and parts of ``patch`` become parts of it: callers
    own both (a freshly built pod, a freshly rendered patch), so nothing is copied per pod."""
    if isinstance(patch, dict) and isinstance(base, dict):
        for k, v in patch.items():
            if v is None:
                base.pop(k, None)
            elif k in base and isinstance(v, (dict, list)):
                base[k] = merge_pod(base[k], v, k)
            else:
                base[k] = v
        return base
    if isinstance(patch, list) and isinstance(base, list):
        if base and patch and _named(base) and _named(patch):
            index = {item["name"]: i for i, item in enumerate(base)}
            for item in patch:
                at = index.get(item["name"])
                if at is not None:
                    base[at] = merge_pod(base[at], item)
                else:
                    index[item["name"]] = len(base)
                    base.append(item)
            return base
        if key in SET_LISTS:
            seen: set[str] = set()
            union: list[Any] = []
            for item in base + patch:
                ident = json.dumps(item, sort_keys=True)
                if ident not in seen:
                    seen.add(ident)
                    union.append(item)
            return union
    return patch

