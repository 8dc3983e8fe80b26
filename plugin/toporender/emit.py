"""Serialise rendered objects: a YAML stream or one JSON object per line, both deterministic."""

from __future__ import annotations

import json
from typing import Any

import yaml

_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_yaml(objects: list[dict[str, Any]]) -> str:
    if not objects:
        return ""
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=2**31 - 1, explicit_start=True)


def dump_json(objects: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(o, ensure_ascii=False, separators=(",", ":")) + "\n" for o in objects)


def dump(objects: list[dict[str, Any]], fmt: str) -> str:
    return dump_json(objects) if fmt == "json" else dump_yaml(objects)
