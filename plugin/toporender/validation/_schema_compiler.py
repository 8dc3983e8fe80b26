"""A small JSON-Schema compiler for the Kubernetes schemas of built-in kinds.

jsonschema spends 0.5-1.5 ms on a typical rendered Pod (it evolves a validator per keyword and resolves
``$ref`` through the registry every time), which dominates a 10,000-pod render. The schemas we run here, the
built-in Pod/Service fallback and kubernetes-validate's strict Kubernetes schemas, use a handful of keywords,
so each is compiled once into nested closures that make the same checks with jsonschema's messages. Keywords
outside that set raise at compile time instead of being skipped; a test compares the results with jsonschema.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ._common import format_path

Problem = tuple[str, str]
Check = Callable[[Any, tuple[Any, ...], list[Problem]], None]

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}
SUPPORTED = frozenset(
    {
        "type",
        "properties",
        "additionalProperties",
        "required",
        "items",
        "enum",
        "const",
        "minimum",
        "maximum",
        "minItems",
        "anyOf",
        "oneOf",
        "pattern",
        "$ref",
    }
)
# Keywords the vendored CRD schemas add; compiled only when a compiler is given ``formats`` and ``extensions``.
CRD_KEYWORDS = frozenset({"minLength", "maxLength", "maxItems", "maxProperties", "format"})
# Annotations that never constrain an instance (kubernetes-validate runs without a format checker).
IGNORED = frozenset(
    {"description", "title", "default", "format", "$schema", "$id", "discriminator", "fields-to-discriminateBy"}
)


def _noop(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
    return None


class FastCompiler:
    """Compiles schemas; ``resolve`` maps a ``$ref`` to its schema, ``what`` names the schema in messages."""

    def __init__(
        self,
        what: str,
        resolve: Callable[[str], dict[str, Any]] | None = None,
        *,
        formats: dict[str, Callable[[Any], bool]] | None = None,
        extensions: dict[str, Callable[[Any, dict[str, Any]], Check]] | None = None,
    ) -> None:
        """``formats`` (name -> predicate) turns on ``format`` and the other CRD keywords; ``extensions`` compiles
        the named ``x-`` keywords (``(value, schema) -> Check``). Without them, both are ignored as annotations."""
        self.what = what
        self.resolve = resolve
        self.formats = formats
        self.extensions = extensions or {}
        self._refs: dict[str, Check] = {}

    def compile(self, schema: Any) -> Check:
        if schema is True or schema == {}:
            return _noop
        if not isinstance(schema, dict):
            raise ValueError(f"fast schema cannot compile {schema!r}")
        crd = self.formats is not None
        unknown = {
            k
            for k in schema
            if k not in SUPPORTED
            and (k not in IGNORED or (crd and k == "format"))
            and not k.startswith("x-")
            and not (crd and k in CRD_KEYWORDS)
        }
        if unknown:
            raise ValueError(f"fast schema does not support {sorted(unknown)}")
        checks: list[Check] = []
        if crd:
            checks.extend(self._crd_keywords(schema))
        for key, value in schema.items():
            if key in self.extensions:
                checks.append(self.extensions[key](value, schema))
        if "$ref" in schema:
            checks.append(self._ref(schema["$ref"]))
        if "type" in schema:
            checks.append(self._type(schema["type"]))
        if "const" in schema:
            const = schema["const"]
            checks.append(lambda v, p, o: None if v == const else o.append((format_path(p), f"{const!r} was expected")))
        if "enum" in schema:
            enum = list(schema["enum"])
            checks.append(
                lambda v, p, o: None if v in enum else o.append((format_path(p), f"{v!r} is not one of {enum!r}"))
            )
        if "pattern" in schema:
            checks.append(self._pattern(schema["pattern"]))
        for key in ("minimum", "maximum"):
            if key in schema:
                checks.append(self._bound(key, schema[key]))
        if "minItems" in schema:
            low = schema["minItems"]
            checks.append(
                lambda v, p, o: (
                    None
                    if not isinstance(v, list) or len(v) >= low
                    else o.append((format_path(p), f"{v!r} should be non-empty" if low == 1 else f"{v!r} is too short"))
                )
            )
        if "anyOf" in schema or "oneOf" in schema:
            checks.append(self._alternatives(schema.get("anyOf") or schema["oneOf"], exactly_one="oneOf" in schema))
        if "required" in schema:
            checks.append(self._required(list(schema["required"])))
        if "properties" in schema or schema.get("additionalProperties", True) is not True:
            checks.append(self._properties(schema.get("properties", {}), schema.get("additionalProperties", True)))
        if "items" in schema:
            checks.append(self._items(self.compile(schema["items"])))
        if not checks:
            return _noop
        if len(checks) == 1:
            return checks[0]

        def run(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            for check in checks:
                check(v, p, o)

        return run

    def _crd_keywords(self, schema: dict[str, Any]) -> list[Check]:
        checks: list[Check] = []
        fmt = schema.get("format")
        test = (self.formats or {}).get(fmt) if isinstance(fmt, str) else None
        if test is not None:
            checks.append(lambda v, p, o: None if test(v) else o.append((format_path(p), f"{v!r} is not a {fmt!r}")))
        bounds: tuple[tuple[str, type[str] | type[list[Any]] | type[dict[str, Any]], str], ...] = (
            ("minLength", str, "short"), ("maxLength", str, "long"), ("maxItems", list, "long"),
            ("maxProperties", dict, "long"))
        for key, sized, word in bounds:
            if key in schema:
                checks.append(self._size(sized, schema[key], key.startswith("min"), word))
        return checks

    @staticmethod
    def _size(sized: type[str] | type[list[Any]] | type[dict[str, Any]], bound: int, low: bool, word: str) -> Check:
        def check(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            if isinstance(v, sized) and (len(v) < bound if low else len(v) > bound):
                o.append((format_path(p), f"{v!r} is too {word}"))

        return check

    def _ref(self, ref: str) -> Check:
        if self.resolve is None:
            raise ValueError(f"no resolver for $ref {ref}")
        if ref not in self._refs:
            cell: list[Check] = []
            self._refs[ref] = lambda v, p, o: cell[0](v, p, o)
            cell.append(self.compile(self.resolve(ref)))
            self._refs[ref] = cell[0]
        return self._refs[ref]

    @staticmethod
    def _type(types: str | list[str]) -> Check:
        names = [types] if isinstance(types, str) else list(types)
        tests = [_TYPES[n] for n in names]
        shown = ", ".join(repr(n) for n in names)

        def check(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            for test in tests:
                if test(v):
                    return
            o.append((format_path(p), f"{v!r} is not of type {shown}"))

        return check

    @staticmethod
    def _pattern(pattern: str) -> Check:
        rx = re.compile(pattern)

        def check(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            if isinstance(v, str) and not rx.search(v):
                o.append((format_path(p), f"{v!r} does not match {pattern!r}"))

        return check

    @staticmethod
    def _bound(key: str, bound: Any) -> Check:
        low = key == "minimum"
        word = "less than the minimum" if low else "greater than the maximum"

        def check(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            if _TYPES["number"](v) and (v < bound if low else v > bound):
                o.append((format_path(p), f"{v!r} is {word} of {bound!r}"))

        return check

    def _alternatives(self, schemas: list[Any], exactly_one: bool) -> Check:
        options = [(s, self.compile(s)) for s in schemas]

        def check(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            valid = []
            for raw, option in options:
                trial: list[Problem] = []
                option(v, p, trial)
                if not trial:
                    if not exactly_one:
                        return
                    valid.append(raw)
            if not valid:
                o.append((format_path(p), f"{v!r} is not valid under any of the given schemas"))
            elif len(valid) > 1:
                shown = ", ".join(repr(s) for s in [*valid[1:], valid[0]])
                o.append((format_path(p), f"{v!r} is valid under each of {shown}"))

        return check

    @staticmethod
    def _required(names: list[str]) -> Check:
        def check(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            if isinstance(v, dict):
                for name in names:
                    if name not in v:
                        o.append((format_path(p), f"{name!r} is a required property"))

        return check

    def _properties(self, properties: dict[str, Any], extra: Any) -> Check:
        props = {k: self.compile(s) for k, s in properties.items()}
        extra_check = self.compile(extra) if isinstance(extra, dict) else None
        unknown = f"unknown field (not in the {self.what} schema; the API server would drop or reject it)"

        def check(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            if not isinstance(v, dict):
                return
            for key, value in v.items():
                sub = props.get(key)
                if sub is not None:
                    sub(value, (*p, key), o)
                elif extra is False:
                    o.append((format_path((*p, key)), unknown))
                elif extra_check is not None:
                    extra_check(value, (*p, key), o)

        return check

    @staticmethod
    def _items(item: Check) -> Check:
        def check(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            if isinstance(v, list):
                for i, value in enumerate(v):
                    item(value, (*p, i), o)

        return check


def compile_schema(schema: dict[str, Any], what: str = "built-in Pod/Service") -> Check:
    """Compile a self-contained schema (no ``$ref``)."""
    return FastCompiler(what).compile(schema)
