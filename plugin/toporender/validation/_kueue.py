"""Kueue admission rules for plain Pods in a pod group with topology-aware scheduling (Kueue v0.19.2).

From ``pkg/controller/jobs/pod/pod_webhook.go`` (``validatePodGroupMetadata``, ``validatePodGroupName``),
``pkg/controller/jobframework/validation.go`` (``ValidateQueueName``, ``ValidateLabelAsCRDName``) and
``pkg/controller/jobframework/tas_validation.go`` (``ValidateTASPodSetRequest``): the webhook rejects a Pod that
breaks one of them. The rules over a whole group (every Pod present, one queue, ranks) are in
:func:`kueue_groups`, from ``pkg/controller/jobs/pod/pod_controller.go``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ._common import Problem, as_dict, dns_subdomain_problem, qualified_name_problem

PREFIX = "kueue.x-k8s.io/"
QUEUE_LABEL = PREFIX + "queue-name"
GROUP_LABEL = PREFIX + "pod-group-name"
INDEX_LABEL = PREFIX + "pod-group-pod-index"
TOTAL = PREFIX + "pod-group-total-count"
REQUIRED = PREFIX + "podset-required-topology"
PREFERRED = PREFIX + "podset-preferred-topology"
UNCONSTRAINED = PREFIX + "podset-unconstrained-topology"
SLICE_REQUIRED = PREFIX + "podset-slice-required-topology"
SLICE_SIZE = PREFIX + "podset-slice-size"
SLICE_CONSTRAINTS = PREFIX + "podset-slice-required-topology-constraints"
GROUP_NAME = PREFIX + "podset-group-name"
_BOOLS = {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}
_DECIMAL = re.compile(r"^[+-]?[0-9]+$")


def _label(key: str) -> str:
    return f"metadata.labels[{key!r}]"


def _ann(key: str) -> str:
    return f"metadata.annotations[{key!r}]"


def _int(value: str) -> int | None:
    """Go's ``strconv.ParseInt(value, 10, 32)``."""
    if not _DECIMAL.match(value):
        return None
    n = int(value)
    return n if -(2**31) <= n < 2**31 else None


def _constraints(value: str) -> list[str]:
    """``podset-slice-required-topology-constraints``: 1 to 3 ``{"topology", "size"}``, unique, sizes nesting."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        return [f"must be a valid JSON array ({exc.msg})"]
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        return ["must be a valid JSON array of {\"topology\": <node label>, \"size\": <pods>} objects"]
    if not 1 <= len(data) <= 3:
        return ["topology constraints must contain between 1 and 3 entries"]
    out: list[str] = []
    seen: dict[str, int] = {}
    sizes: list[int] = []
    for i, c in enumerate(data):
        topo, size = c.get("topology"), c.get("size")
        if not isinstance(topo, str) or qualified_name_problem(topo):
            out.append(f"[{i}].topology must be a node label key")
        elif topo in seen:
            out.append(f"[{i}].topology {topo} is also at index {seen[topo]}")
        else:
            seen[topo] = i
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            out.append(f"[{i}].size must be greater than or equal to 1")
            size = 0
        sizes.append(size)
    for i in range(len(sizes) - 1):
        if sizes[i + 1] > 0 and sizes[i] % sizes[i + 1]:
            out.append(f"[{i + 1}].size must evenly divide the parent layer size {sizes[i]}")
    return out


def kueue_pod(obj: dict[str, Any]) -> list[Problem]:
    """The pod webhook's rules for one Pod's Kueue labels and annotations (empty when it has none)."""
    meta = as_dict(obj.get("metadata"))
    labels, ann = as_dict(meta.get("labels")), as_dict(meta.get("annotations"))
    if not any(isinstance(k, str) and k.startswith(PREFIX) for k in (*labels, *ann)):
        return []
    out: list[Problem] = []
    for key in (QUEUE_LABEL, GROUP_LABEL):
        value = labels.get(key)
        if isinstance(value, str):
            msg = dns_subdomain_problem(value)
            if msg:
                out.append((_label(key), msg))
    group, total = labels.get(GROUP_LABEL), ann.get(TOTAL)
    if group is None and total is not None:
        out.append((_label(GROUP_LABEL), f"is required: the Pod has the {TOTAL} annotation"))
    if group is not None and total is None:
        out.append((_ann(TOTAL), f"is required: the Pod has the {GROUP_LABEL} label"))
    count = _int(total) if isinstance(total, str) else None
    if total is not None and (count is None or count < 1):
        out.append((_ann(TOTAL), f"{total!r}: group total count should be a number greater than zero"))
    index = labels.get(INDEX_LABEL)
    if index is not None:
        rank = _int(index) if isinstance(index, str) else None
        if rank is None or rank < 0 or (count is not None and count >= 1 and rank >= count):
            out.append((_label(INDEX_LABEL), f"{index!r} must be a pod index from 0 below the group's total count"))
    found = [k for k in (REQUIRED, PREFERRED, UNCONSTRAINED) if k in ann]
    if len(found) > 1:
        out.append(("metadata.annotations", f"must not contain more than one topology annotation: {found}"))
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        value = ann.get(key)
        if isinstance(value, str) and qualified_name_problem(value):
            out.append((_ann(key), f"{value!r} is not a node label key"))
    if UNCONSTRAINED in ann and ann[UNCONSTRAINED] not in _BOOLS:
        out.append((_ann(UNCONSTRAINED), "must be a boolean value"))
    if GROUP_NAME in ann:
        name = ann[GROUP_NAME]
        if isinstance(name, str) and name.isdigit():
            out.append((_ann(GROUP_NAME), "must not be a number"))
        for other in (SLICE_SIZE, SLICE_REQUIRED, SLICE_CONSTRAINTS):
            if other in ann:
                out.append((_ann(GROUP_NAME), f"may not be set when '{other}' is specified"))
        if REQUIRED not in ann and PREFERRED not in ann:
            out.append((_ann(GROUP_NAME), f"may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is specified"))
    size = ann.get(SLICE_SIZE)
    if size is not None:
        n = _int(size) if isinstance(size, str) else None
        if n is None:
            out.append((_ann(SLICE_SIZE), "must be a numeric value"))
        elif n < 1:
            out.append((_ann(SLICE_SIZE), "must be greater than or equal to 1"))
        elif count is not None and n > count:
            out.append((_ann(SLICE_SIZE), f"must not be greater than pod set count {count}"))
    if SLICE_REQUIRED in ann and size is None:
        out.append((_ann(SLICE_SIZE), f"must be set when '{SLICE_REQUIRED}' is specified"))
    if size is not None and SLICE_REQUIRED not in ann:
        out.append((_ann(SLICE_SIZE), f"may not be set when '{SLICE_REQUIRED}' is not specified"))
    layers = ann.get(SLICE_CONSTRAINTS)
    if layers is not None:
        for other in (SLICE_REQUIRED, SLICE_SIZE):
            if other in ann:
                out.append((_ann(SLICE_CONSTRAINTS), f"may not be set when '{other}' is specified"))
        out.extend((_ann(SLICE_CONSTRAINTS), m) for m in (_constraints(layers) if isinstance(layers, str) else
                                                           ["must be a string"]))
    return out


def kueue_groups(pods: Iterable[tuple[Any, str | None, dict[str, Any], dict[str, Any]]]
                 ) -> list[tuple[Any, str, str]]:
    """Rules over each pod group in the output: (pod, path, message) triples.

    A group is admitted only once as many Pods as its total count exist (``validatePodGroupMetadata`` in the
    controller: "group has fewer runnable pods than expected"), its Pods must name one queue and one total
    count. Ranks may repeat: they restart for each PodSet (pod shape) of the group.
    """
    groups: dict[tuple[str | None, str], list[tuple[Any, dict[str, Any], dict[str, Any]]]] = {}
    for pod, ns, labels, ann in pods:
        name = labels.get(GROUP_LABEL)
        if isinstance(name, str):
            groups.setdefault((ns, name), []).append((pod, labels, ann))
    out: list[tuple[Any, str, str]] = []
    for (_, name), members in groups.items():
        first, first_labels, first_ann = members[0]
        total = first_ann.get(TOTAL)
        for pod, labels, ann in members[1:]:
            if ann.get(TOTAL) != total:
                out.append((pod, _ann(TOTAL), f"differs from other Pods of pod group {name!r} ({total!r})"))
            if labels.get(QUEUE_LABEL) != first_labels.get(QUEUE_LABEL):
                out.append((pod, _label(QUEUE_LABEL), f"differs from other Pods of pod group {name!r}; Kueue "
                                                      "refuses a group with different queue names"))
        count = _int(total) if isinstance(total, str) else None
        if count is not None and count != len(members):
            what = ("it is never admitted" if count > len(members) else "Kueue removes the excess Pods")
            out.append((first, _ann(TOTAL), f"pod group {name!r} has total count {count} but {len(members)} Pods "
                                            f"in this output; {what}"))
    return out
