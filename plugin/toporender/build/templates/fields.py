"""Templates checked against the schema of the object they become, before anything renders.

A template's keys are never rendered, so a misspelt field (``nodeSelectr``, ``volumeMount``,
``allocationMod``) is known to be wrong from the template alone, and can be reported once, at its place in the
config, instead of once per rendered object. So is a plain value of the wrong type or outside its enum,
pattern or bounds (``numNodes: four``, ``nodeSelector: {gpu: yes}``, which YAML reads as a boolean). A value
that is still a ``{{ }}`` template stands for whatever the schema wants there, so it is never reported here:
what it renders to is checked with the rendered objects.
"""

from __future__ import annotations

import difflib
import json
import re
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


_JSON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "object": (dict,),
               "array": (list,)}


def _templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _types(schema: dict[str, Any]) -> list[str]:
    """The JSON types a schema node allows ([] for any), reading Kubernetes' int-or-string and nullable."""
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else list(declared) if isinstance(declared, list) else []
    for option in schema.get("anyOf", ()):
        if isinstance(option, dict) and isinstance(option.get("type"), str):
            names.append(option["type"])
    return names


def _is(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    return name == "null" and value is None or isinstance(value, _JSON_TYPES.get(name, ()))


def _what(value: Any) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()} is a boolean (YAML reads unquoted yes, no, on, off as booleans)"
    if isinstance(value, (int, float)):
        return f"{value} is a number"
    if isinstance(value, str):
        return f"'{value}' is a string"
    return f"{type(value).__name__.replace('dict', 'a mapping').replace('list', 'a list')} is given"


def value_problems(value: Any, schema: dict[str, Any], path: tuple[Any, ...] = ()) -> list[FieldProblem]:
    """Plain values of ``value`` that ``schema`` rejects: type, enum, pattern, bounds. Templated strings and
    unknown fields are not judged (:func:`unknown_fields` reports the latter), nor is null, which deletes a field
    when templates merge."""
    if not isinstance(schema, dict) or _templated(value) or value is None:  # null deletes the field in a merge
        return []
    names = _types(schema)
    if names and not any(_is(value, n) for n in names):
        hint = "; quote it" if "string" in names and isinstance(value, (bool, int, float)) else ""
        return [(path, f"{_what(value)}, but the field wants {' or '.join(names)}{hint}")]
    out: list[FieldProblem] = []
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        out.append((path, f"{value!r} is not one of {', '.join(map(repr, enum))}"))
    if isinstance(value, str):
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not re.search(pattern, value):
            out.append((path, f"'{value}' does not match the pattern {pattern}"))
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            out.append((path, f"'{value}' is longer than {schema['maxLength']} characters"))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        for key, bad in (("minimum", lambda b: value < b), ("maximum", lambda b: value > b)):
            if isinstance(schema.get(key), (int, float)) and bad(schema[key]):
                out.append((path, f"{value} is {'below the minimum' if key == 'minimum' else 'above the maximum'} "
                                  f"{schema[key]}"))
    elif isinstance(value, dict):
        declared = schema.get("properties")
        props: dict[str, Any] = declared if isinstance(declared, dict) else {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if isinstance(sub, dict):
                out += value_problems(item, sub, path + (key,))
            if len(out) >= _MAX_PROBLEMS:
                break
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out += value_problems(item, schema["items"], path + (i,))
    return out


def pod_template_fields(template: dict[str, Any]) -> list[FieldProblem]:
    """Unknown fields and plain values of the wrong type in a partial Pod's ``spec``, by the Pod fields this
    package knows."""
    spec = {k: v for k, v in template.items() if k == "spec"}
    return unknown_fields(spec, BUILTIN["Pod"]) + value_problems(spec, BUILTIN["Pod"])


_NEWEST = {"scheduling.run.ai/PodGroup": "main", "kai.scheduler/Topology": "main",
           "resource.nvidia.com/ComputeDomain": "main"}


def group_template_fields(template: dict[str, Any], variants: dict[str, str] = _NEWEST) -> list[FieldProblem]:
    """Unknown fields and plain values of the wrong type in a whole object whose kind has a vendored CRD schema
    (others are not checked here)."""
    api_version, kind = template.get("apiVersion"), template.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return []
    group, _, version = api_version.rpartition("/")
    gv = (group, version)
    schema = crd_schema(gv[0], kind, gv[1], variants.get(f"{gv[0]}/{kind}"))
    if schema is None:
        return []
    body = {k: v for k, v in template.items() if k not in ("apiVersion", "kind", "metadata")}
    return unknown_fields(body, schema) + value_problems(body, schema)
