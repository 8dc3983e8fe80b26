"""Koordinator gang annotations that koord-scheduler silently replaces with defaults when they are malformed
(``apis/extension/coscheduling.go``, ``apis/extension/network_topology.go``).

Each rule returns (path, message) pairs for one Pod or PodGroup.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._common import Problem, as_dict, as_int, dns_label_problem, dns_subdomain_problem

KOORD_PG_GROUP = "scheduling.sigs.k8s.io"
KOORD_CNT_GROUP = "scheduling.koordinator.sh"
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


def groups_value(value: str) -> tuple[list[str] | None, list[str]]:
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


def spec_value(value: str) -> tuple[list[dict[str, Any]] | None, list[str]]:
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
        if pcm is not None and (as_int(pcm) is None or pcm < 0 or pcm >= 2**31):
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
            out.extend((at(key), m) for m in groups_value(value)[1])
        elif key == GANG_SPEC:
            out.extend((at(key), m) for m in spec_value(value)[1])
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
