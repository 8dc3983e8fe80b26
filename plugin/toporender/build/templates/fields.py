"""Field names of templates checked against the schema of the object they become, before anything renders.

A template's keys are never rendered, so a misspelt field (``nodeSelectr``, ``volumeMount``,
``allocationMod``) is known to be wrong from the template alone, and can be reported once, at its place in the
config, instead of once per rendered object. Values are left alone: they may still be ``{{ }}`` templates.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from importlib import resources
from typing import Any

from toporender.kube_schema import BUILTIN


@cache
def _crd_files() -> dict[tuple[str, str], dict[str, str]]:
    """(group, kind) -> {variant: file name} of the vendored CRDs, from their names alone."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    for entry in resources.files("toporender").joinpath("schemas").iterdir():
        if entry.name.endswith(".json"):
            raw = json.loads(entry.read_text(encoding="utf-8"))
            out.setdefault((raw["group"], raw["kind"]), {})[raw["variant"]] = entry.name
    return out


@cache
def crd_schema(group: str, kind: str, version: str, variant: str | None) -> dict[str, Any] | None:
    """The vendored structural schema of one served version of a CRD (any variant when ``variant`` is absent)."""
    files = _crd_files().get((group, kind))
    if not files:
        return None
    name = files.get(variant or "") or files[sorted(files)[-1]]
    raw = json.loads(resources.files("toporender").joinpath("schemas").joinpath(name).read_text(encoding="utf-8"))
    schemas = {v["name"]: v["schema"] for v in raw["versions"]}
    return schemas.get(version)


FieldProblem = tuple[tuple[Any, ...], str]
"""(path of keys and list positions inside the template, message)."""

_MAX_PROBLEMS = 20


def unknown_fields(value: Any, schema: dict[str, Any], path: tuple[Any, ...] = ()) -> list[FieldProblem]:
    """Every mapping key of ``value`` that ``schema`` does not allow, with the nearest known name."""
    out: list[FieldProblem] = []
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return out
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if isinstance(props, dict) and key in props:
                out += unknown_fields(item, props[key], path + (key,))
            elif isinstance(extra, dict):
                out += unknown_fields(item, extra, path + (key,))
            elif isinstance(props, dict) and extra is not True:
                near = difflib.get_close_matches(str(key), list(props), n=1)
                hint = f"; did you mean '{near[0]}'?" if near else f"; known here: {', '.join(sorted(props))}"
                out.append((path + (key,), f"unknown field '{key}'{hint}"))
            if len(out) >= _MAX_PROBLEMS:
                break
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out += unknown_fields(item, schema["items"], path + (i,))
    return out


def pod_template_fields(template: dict[str, Any]) -> list[FieldProblem]:
    """Unknown fields of a partial Pod (``metadata`` and ``spec``), by the Pod fields this package knows."""
    return unknown_fields({k: v for k, v in template.items() if k == "spec"}, BUILTIN["Pod"])


_NEWEST = {"scheduling.run.ai/PodGroup": "main", "kai.scheduler/Topology": "main",
           "resource.nvidia.com/ComputeDomain": "main"}


def group_template_fields(template: dict[str, Any], variants: dict[str, str] = _NEWEST) -> list[FieldProblem]:
    """Unknown fields of a whole object whose kind has a vendored CRD schema (others are not checked here)."""
    api_version, kind = template.get("apiVersion"), template.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return []
    group, _, version = api_version.rpartition("/")
    gv = (group, version)
    schema = crd_schema(gv[0], kind, gv[1], variants.get(f"{gv[0]}/{kind}"))
    if schema is None:
        return []
    body = {k: v for k, v in template.items() if k not in ("apiVersion", "kind", "metadata")}
    return unknown_fields(body, schema)
