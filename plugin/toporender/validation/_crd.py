"""Custom-resource validation against the vendored upstream CRD schemas.

The vendored files (``toporender/schemas/*.json``, written by ``tools/vendor_schemas.py``) are indexed by
(group, kind) and variant. A schema is made strict before compiling: objects that declare ``properties``
reject unknown fields, because the API server would silently prune them and the user's intent would be
lost. CEL rules are evaluated by hand-written Python equivalents (no CEL runtime dependency); rules that
compare with ``oldSelf`` only apply to updates and are skipped.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache, lru_cache
from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._common import format_path
from ._schema_compiler import Check, FastCompiler

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

Problem = tuple[str, str]

HOSTNAME = "kubernetes.io/hostname"


def _unique_items(levels: Any) -> bool:
    return not isinstance(levels, list) or all(levels.count(x) == 1 for x in levels)


def _unique_node_labels(levels: Any) -> bool:
    if not isinstance(levels, list):
        return True
    labels = [json.dumps(lv.get("nodeLabel"), sort_keys=True) for lv in levels if isinstance(lv, dict)]
    return len(labels) == len(set(labels))


def _hostname_last(levels: Any) -> bool:
    if not isinstance(levels, list) or not levels:
        return True
    labels = [lv.get("nodeLabel") if isinstance(lv, dict) else None for lv in levels]
    return HOSTNAME not in labels or labels[-1] == HOSTNAME


def _items(value: Any) -> list[dict[str, Any]]:
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _flavor_topology_has_labels(spec: Any) -> bool:
    """Kueue ResourceFlavor: a TAS flavor (``topologyName``) needs at least one ``nodeLabels`` entry."""
    if not isinstance(spec, dict) or "topologyName" not in spec:
        return True
    labels = spec.get("nodeLabels")
    return isinstance(labels, dict) and len(labels) >= 1


def _one_selector(selector: Any) -> int:
    return sum(1 for k in ("exactMatch", "regexMatch", "labelMatch") if isinstance(selector, dict) and k in selector)


# Exact upstream rule text -> Python predicate over ``self``. Every non-transition rule in a vendored schema
# must be listed here; loading fails otherwise, so a re-vendored CRD cannot silently lose a check.
CEL_RULES: dict[str, Callable[[Any], bool]] = {
    "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0": _unique_items,
    "size(self.filter(i, size(self.filter(j, j.nodeLabel == i.nodeLabel)) > 1)) == 0": _unique_node_labels,
    "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0 || "
    "self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'": _hostname_last,
    # Kueue v0.19.2 ResourceFlavor (taints, tolerations, TAS flavor); an absent field a rule reads fails it,
    # as CEL's "no such key" error does.
    "!has(self.topologyName) || self.nodeLabels.size() >= 1": _flavor_topology_has_labels,
    "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])":
        lambda v: all(x.get("effect") in _EFFECTS for x in _items(v)),
    "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])":
        lambda v: all("effect" not in x or x["effect"] in _EFFECTS for x in _items(v)),
    "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)":
        lambda v: all("key" in x or x.get("operator") == "Exists" for x in _items(v)),
    "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])":
        lambda v: all("operator" not in x or x["operator"] in ("Equal", "Exists") for x in _items(v)),
    "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)":
        lambda v: all(x.get("operator") != "Exists" or "value" not in x for x in _items(v)),
    "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)":
        lambda v: all("tolerationSeconds" not in x or x.get("effect") == "NoExecute" for x in _items(v)),
    # Volcano v1.15.1 HyperNode member selector: exactly one of the three.
    "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)": lambda v: _one_selector(v) >= 1,
    "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + (has(self.labelMatch) ? 1 : 0) <= 1":
        lambda v: _one_selector(v) <= 1,
}


def is_transition_rule(rule: str) -> bool:
    """Rules that read ``oldSelf`` constrain updates only; a rendered object is always a create."""
    return "oldSelf" in rule


def _error(message: str) -> Any:
    from jsonschema import ValidationError

    return ValidationError(message)


def _cel_keyword(validator: Validator, rules: Any, instance: Any, schema: Any) -> Iterator[Any]:
    for rule in rules:
        text = rule.get("rule", "")
        if is_transition_rule(text):
            continue
        if not CEL_RULES[text](instance):
            yield _error(rule.get("message") or f"failed rule: {text}")


def _list_type_keyword(validator: Validator, list_type: Any, instance: Any, schema: Any) -> Iterator[Any]:
    for message in _repeats(list_type, instance, schema):
        yield _error(message)


def _repeats(list_type: Any, instance: Any, schema: Any) -> list[str]:
    """Items of a ``set`` or ``map`` list that repeat a value or key (the API server rejects them)."""
    if not isinstance(instance, list) or list_type not in ("set", "map"):
        return []
    if list_type == "set":
        keys: list[Any] = [json.dumps(x, sort_keys=True) for x in instance]
        what = "value"
    else:
        names = schema.get("x-kubernetes-list-map-keys", [])
        keys = [tuple(json.dumps(x.get(k)) for k in names) if isinstance(x, dict) else None for x in instance]
        what = "key " + "/".join(names)
    seen: set[Any] = set()
    out: list[str] = []
    for i, key in enumerate(keys):
        if key in seen:
            out.append(f"item [{i}] repeats a {what} (list-type {list_type})")
        seen.add(key)
    return out


def _int32(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or -(2**31) <= value < 2**31


def _int64(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or -(2**63) <= value < 2**63


def _date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in value or "t" in value


FORMATS: dict[str, Callable[[Any], bool]] = {"int32": _int32, "int64": _int64, "date-time": _date_time}


@cache
def strict_validator() -> Any:
    """jsonschema's 2020-12 validator with the two Kubernetes extensions that constrain a created object.

    Imported on first use: a render whose objects pass :func:`_fast_gate` never loads jsonschema."""
    import jsonschema
    from jsonschema import Draft202012Validator

    return jsonschema.validators.extend(
        Draft202012Validator,
        {"x-kubernetes-validations": _cel_keyword, "x-kubernetes-list-type": _list_type_keyword},
    )


@cache
def format_checker() -> Any:
    from jsonschema import FormatChecker

    checker = FormatChecker(formats=())
    for name, test in FORMATS.items():
        checker.checks(name)(test)
    return checker


def strictify(node: Any) -> Any:
    """Copy of a CRD schema with unknown fields rejected and ``nullable`` turned into a JSON-Schema type."""
    if isinstance(node, list):
        return [strictify(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: (v if k in ("enum", "default", "required", "properties") else strictify(v)) for k, v in node.items()}
    if "properties" in node:
        out["properties"] = {k: strictify(v) for k, v in node["properties"].items()}
        if (
            "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
            and not node.get("x-kubernetes-embedded-resource")
        ):
            out["additionalProperties"] = False
    if node.get("nullable") and isinstance(node.get("type"), str):
        out["type"] = [node["type"], "null"]
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in node and "type" not in node:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    return out


def _collect_rules(node: Any, found: list[str]) -> None:
    if isinstance(node, dict):
        for rule in node.get("x-kubernetes-validations", []):
            found.append(rule["rule"])
        for value in node.values():
            _collect_rules(value, found)
    elif isinstance(node, list):
        for value in node:
            _collect_rules(value, found)


@dataclass
class CrdDoc:
    """One vendored CRD file: identity, provenance, served versions."""

    file: str
    group: str
    kind: str
    scope: str
    variant: str
    source: dict[str, str]
    schemas: dict[str, dict[str, Any]] = field(repr=False)

    def skipped_rules(self) -> list[str]:
        found: list[str] = []
        for schema in self.schemas.values():
            _collect_rules(schema, found)
        return sorted({r for r in found if is_transition_rule(r)})


@lru_cache(maxsize=1)
def registry() -> dict[tuple[str, str], dict[str, CrdDoc]]:
    """All vendored CRDs, ``(group, kind) -> {variant: doc}``; loaded once per process."""
    out: dict[tuple[str, str], dict[str, CrdDoc]] = {}
    folder = resources.files("toporender").joinpath("schemas")
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".json"):
            continue
        raw = json.loads(entry.read_text(encoding="utf-8"))
        doc = CrdDoc(
            file=entry.name,
            group=raw["group"],
            kind=raw["kind"],
            scope=raw["scope"],
            variant=raw["variant"],
            source=raw["source"],
            schemas={v["name"]: v["schema"] for v in raw["versions"]},
        )
        rules: list[str] = []
        _collect_rules(doc.schemas, rules)
        missing = [r for r in rules if not is_transition_rule(r) and r not in CEL_RULES]
        if missing:
            raise RuntimeError(f"{entry.name}: CEL rules without a Python equivalent: {missing}")
        out.setdefault((doc.group, doc.kind), {})[doc.variant] = doc
    if not out:
        raise RuntimeError("no vendored CRD schemas found in toporender/schemas")
    return out


@lru_cache(maxsize=1)
def known_groups() -> Mapping[str, tuple[str, ...]]:
    """API group -> kinds we hold a schema for; used to tell a wrong kind from a foreign group. Worked out
    once per process (every object outside the CRD groups, a Service for each gang, asks)."""
    groups: dict[str, list[str]] = {}
    for group, kind in registry():
        groups.setdefault(group, []).append(kind)
    return MappingProxyType({g: tuple(sorted(k)) for g, k in groups.items()})


def select(group: str, kind: str, variants: dict[str, str]) -> CrdDoc | None:
    """The doc for (group, kind) in the requested variant; a single-variant CRD ignores the request."""
    docs = registry().get((group, kind))
    if not docs:
        return None
    if len(docs) == 1:
        return next(iter(docs.values()))
    wanted = variants.get(f"{group}/{kind}")
    if wanted is None or wanted not in docs:
        raise ValueError(f"no vendored {kind}.{group} schema for version {wanted!r}; have {sorted(docs)}")
    return docs[wanted]


@cache
def _compiled(file: str, group: str, kind: str, variant: str, version: str) -> Validator:
    doc = registry()[(group, kind)][variant]
    schema = strictify(copy.deepcopy(doc.schemas[version]))
    validator: Validator = strict_validator()(schema, format_checker=format_checker())
    return validator


def _fast_cel(rules: Any, schema: dict[str, Any]) -> Check:
    tests = [CEL_RULES[r["rule"]] for r in rules if not is_transition_rule(r.get("rule", ""))]

    def check(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
        if not all(test(v) for test in tests):
            o.append((format_path(p), "failed rule"))

    return check


def _fast_list_type(list_type: Any, schema: dict[str, Any]) -> Check:
    def check(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
        if _repeats(list_type, v, schema):
            o.append((format_path(p), "repeats"))

    return check


@cache
def _fast_gate(file: str, group: str, kind: str, variant: str, version: str) -> Check | None:
    """The same schema compiled to closures, or None where a keyword has no compiled equivalent.

    It only decides whether an object is valid: an object it passes is valid for jsonschema too (every keyword
    it meets is checked at least as strictly), and an object it fails is run through jsonschema for the
    messages. Most rendered objects are valid, so this skips jsonschema's per-keyword overhead for them."""
    doc = registry()[(group, kind)][variant]
    schema = strictify(copy.deepcopy(doc.schemas[version]))
    compiler = FastCompiler(
        "CRD",
        formats=FORMATS,
        extensions={"x-kubernetes-validations": _fast_cel, "x-kubernetes-list-type": _fast_list_type},
    )
    try:
        return compiler.compile(schema)
    except ValueError:
        return None


def validate_crd(obj: dict[str, Any], doc: CrdDoc, version: str) -> list[Problem]:
    """Schema, strictness, format and CEL problems of ``obj`` as (path, message) pairs, sorted."""
    gate = _fast_gate(doc.file, doc.group, doc.kind, doc.variant, version)
    if gate is not None:
        found: list[Problem] = []
        gate(obj, (), found)
        if not found:
            return []
    return errors_to_problems(_compiled(doc.file, doc.group, doc.kind, doc.variant, version), obj, "CRD")


def errors_to_problems(validator: Validator, obj: Any, what: str) -> list[Problem]:
    """Every jsonschema error as (path, message); a rejected unknown field is reported at its own path."""
    out: list[Problem] = []
    for err in validator.iter_errors(obj):
        path = list(err.absolute_path)
        if err.validator == "additionalProperties" and err.validator_value is False:
            declared = err.schema.get("properties", {}) if isinstance(err.schema, dict) else {}
            instance = err.instance if isinstance(err.instance, dict) else {}
            for key in sorted(str(k) for k in instance if k not in declared):
                out.append(
                    (
                        format_path([*path, key]),
                        f"unknown field (not in the {what} schema; the API server would drop or reject it)",
                    )
                )
            continue
        out.append((format_path(path), err.message))
    return sorted(set(out))
