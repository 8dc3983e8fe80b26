"""The fields of many Pods read as columns, so that rules over thousands of Pods run once per distinct value.

A render's Pods share their label keys, most label values, their PodGroups and their schedulers. Reading each
field of every Pod with ``map`` and checking the distinct values keeps the per-Pod cost to a few C-level
steps. Any Pod whose shape is not the regular one (metadata, labels, annotations or spec that are not
mappings, a namespace that is not a string) makes :func:`pod_columns` return None, and the callers fall back
to their Pod-by-Pod rules, which also word the messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Any

_EMPTY: dict[str, Any] = {}


@dataclass(frozen=True)
class PodColumns:
    """Parallel lists, one item per Pod; a missing mapping reads as an empty one, a missing namespace as None."""

    pods: list[dict[str, Any]]
    metas: list[dict[str, Any]]
    names: list[Any]
    namespaces: list[str | None]
    labels: list[dict[str, Any]]
    annotations: list[dict[str, Any]]
    schedulers: list[Any]
    label_keys: set[Any]
    """Every label key any Pod has."""
    names_are_strings: bool
    """Whether every Pod has a non-empty string name of at most 253 characters."""


def _all_dicts(values: list[Any]) -> bool:
    return set(map(type, values)) <= {dict}


def pod_columns(pods: list[dict[str, Any]]) -> PodColumns | None:
    """The columns of ``pods`` (all mappings), or None when one of them is irregular."""
    metas = list(map(dict.get, pods, repeat("metadata"), repeat(_EMPTY)))
    specs = list(map(dict.get, pods, repeat("spec"), repeat(_EMPTY)))
    if not _all_dicts(metas) or not _all_dicts(specs):
        return None
    labels = list(map(dict.get, metas, repeat("labels"), repeat(_EMPTY)))
    annotations = list(map(dict.get, metas, repeat("annotations"), repeat(_EMPTY)))
    namespaces = list(map(dict.get, metas, repeat("namespace")))
    if not _all_dicts(labels) or not _all_dicts(annotations) or not set(map(type, namespaces)) <= {str, type(None)}:
        return None
    if "" in namespaces:
        namespaces = [ns or None for ns in namespaces]
    names: list[Any] = list(map(dict.get, metas, repeat("name")))
    strings = set(map(type, names)) <= {str}
    sizes = list(map(len, names)) if strings else []
    return PodColumns(
        pods=pods,
        metas=metas,
        names=names,
        namespaces=namespaces,
        labels=labels,
        annotations=annotations,
        schedulers=list(map(dict.get, specs, repeat("schedulerName"))),
        label_keys=set().union(*labels),
        names_are_strings=strings and (not sizes or (min(sizes) > 0 and max(sizes) <= 253)),
    )
