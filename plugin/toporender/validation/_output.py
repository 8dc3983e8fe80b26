"""The check every host runs on a render before it writes a byte.

A host's output is applied by Argo CD, kustomize or kpt as it is, with prune, so an invalid object costs
running jobs. This check holds every custom resource (PodGroups, Topologies, ComputeDomains, ...) and every
other non-Pod object to its full schema and admission rules, every object to a unique identity, and every
Pod to its metadata rules and its link to a leaf subgroup of its PodGroup (with the gang sizes that follow).
Pod bodies are built from templates checked against the Pod schema when the config is loaded; ``toporender
validate --output`` checks each Pod body too.

Thousands of Pods share their label keys and most values, so Pod metadata is first tested in bulk, once per
distinct key and value; only when that finds something does each Pod go through the full rules, which word
the messages.
"""

from __future__ import annotations

import re
from itertools import chain

from ._common import dns_label_problem, label_value_problem, qualified_name_problem
from ._koordinator import GANG, koordinator_annotations
from ._kueue import PREFIX as KUEUE
from ._kueue import kueue_pod
from ._meta import ALLOWED_FIELDS, TOTAL_ANNOTATION_SIZE_LIMIT
from ._pod_columns import PodColumns

_MAX_UTF8 = 4
_NOT_IN_SUBDOMAINS = re.compile(r"[^-a-z0-9.\n]")
_LABEL_EDGES = ("-\n", ".\n", "\n-", "\n.", "-.", ".-", "..")


def _subdomains(names: list[str]) -> bool:
    """Whether every name (non-empty) is a DNS-1123 subdomain, judged on all names joined by newlines: no
    character outside the set, and no '-' or '.' at the edge of a label."""
    joined = "\n".join(names)
    return (
        not _NOT_IN_SUBDOMAINS.search(joined)
        and not any(edge in joined for edge in _LABEL_EDGES)
        and joined[:1] not in "-."
        and joined[-1:] not in "-."
    )
_FIELDS = ALLOWED_FIELDS - {"finalizers", "creationTimestamp"}


def pods_metadata_ok(columns: PodColumns) -> bool:
    """True when every Pod's metadata surely passes the metadata and Koordinator annotation rules; False means
    'ask them, Pod by Pod'.

    Pods share their label and annotation keys and most values, so the rules run once per distinct key and
    value, and the names are matched in one pass."""
    metas, names, labels, annotations = columns.metas, columns.names, columns.labels, columns.annotations
    if not _FIELDS.issuperset(set().union(*metas)):
        return False
    if not columns.names_are_strings:
        return False
    if not _subdomains(names):
        return False
    if any(ns is not None and dns_label_problem(ns) for ns in set(columns.namespaces)):
        return False
    try:
        values = set(chain.from_iterable(map(dict.values, labels)))
    except TypeError:  # an unhashable value
        return False
    if any(not isinstance(v, str) or label_value_problem(v) for v in values):
        return False
    if any(not isinstance(k, str) or qualified_name_problem(k) for k in columns.label_keys):
        return False
    keys = set().union(*annotations)
    if any(not isinstance(k, str) or qualified_name_problem(k.lower()) for k in keys):
        return False
    values_of = list(map(dict.values, annotations))
    try:
        distinct = set(chain.from_iterable(values_of))
    except TypeError:  # an unhashable value
        return False
    if not set(map(type, distinct)) <= {str}:
        return False
    longest = max(map(len, distinct), default=0) + max(map(len, keys), default=0)
    if max(map(len, annotations), default=0) * longest * _MAX_UTF8 > TOTAL_ANNOTATION_SIZE_LIMIT:
        sizes = map(len, map("".join, map(chain, annotations, values_of)))
        if max(sizes, default=0) * _MAX_UTF8 > TOTAL_ANNOTATION_SIZE_LIMIT:
            return False
    gang_keys = {k for k in keys if k.startswith(GANG)}
    gang = {(k, d[k]) for d in annotations for k in gang_keys.intersection(d)} if gang_keys else set()
    if any(koordinator_annotations({"metadata": {"annotations": {k: v}}}, is_pod=True) for k, v in gang):
        return False
    if not any(k.startswith(KUEUE) for k in chain(keys, columns.label_keys)):
        return True
    kueue = {(tuple(sorted((k, v) for k, v in lab.items() if k.startswith(KUEUE))),
              tuple(sorted((k, v) for k, v in ann.items() if k.startswith(KUEUE))))
             for lab, ann in zip(labels, annotations)}
    return not any(kueue_pod({"metadata": {"labels": dict(lab), "annotations": dict(ann)}}) for lab, ann in kueue)
