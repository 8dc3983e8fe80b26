"""A small schema compiler for the built-in Pod/Service fallback.

jsonschema spends ~0.5 ms on a typical rendered Pod (validator evolution per keyword), which dominates a
10,000-pod render. The fallback schema uses only a handful of keywords, so it is compiled once into nested
closures that do the same checks with the same messages in a few microseconds per field.
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
        "pattern",
    }
)


def compile_schema(schema: dict[str, Any]) -> Check:
    """Compile ``schema`` (only the keywords in SUPPORTED) into a checker appending (path, message) pairs."""
    unknown = set(schema) - SUPPORTED
    if unknown:
        raise ValueError(f"fast schema does not support {sorted(unknown)}")
    checks: list[Check] = []
    type_name = schema.get("type")
    if type_name is not None:
        is_type = _TYPES[type_name]

        def check_type(v: Any, path: tuple[Any, ...], out: list[Problem]) -> None:
            if not is_type(v):
                out.append((format_path(path), f"{v!r} is not of type {type_name!r}"))

        checks.append(check_type)
    if "const" in schema:
        const = schema["const"]
        checks.append(lambda v, p, o: None if v == const else o.append((format_path(p), f"{const!r} was expected")))
    if "enum" in schema:
        enum = list(schema["enum"])
        checks.append(
            lambda v, p, o: None if v in enum else o.append((format_path(p), f"{v!r} is not one of {enum!r}"))
        )
    if "pattern" in schema:
        rx = re.compile(schema["pattern"])
        pat = schema["pattern"]
        checks.append(
            lambda v, p, o: (
                None
                if not isinstance(v, str) or rx.search(v)
                else o.append((format_path(p), f"{v!r} does not match {pat!r}"))
            )
        )
    for key, cmp, word in (
        ("minimum", lambda a, b: a < b, "less than the minimum"),
        ("maximum", lambda a, b: a > b, "greater than the maximum"),
    ):
        if key in schema:
            bound = schema[key]

            def check_bound(
                v: Any, p: tuple[Any, ...], o: list[Problem], bound: Any = bound, cmp: Any = cmp, word: str = word
            ) -> None:
                if _TYPES["number"](v) and cmp(v, bound):
                    o.append((format_path(p), f"{v!r} is {word} of {bound!r}"))

            checks.append(check_bound)
    if "minItems" in schema:
        low = schema["minItems"]
        checks.append(
            lambda v, p, o: (
                None
                if not isinstance(v, list) or len(v) >= low
                else o.append((format_path(p), f"{v!r} should be non-empty" if low == 1 else f"{v!r} is too short"))
            )
        )
    if "anyOf" in schema:
        options = [compile_schema(s) for s in schema["anyOf"]]

        def check_any(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            for option in options:
                trial: list[Problem] = []
                option(v, p, trial)
                if not trial:
                    return
            o.append((format_path(p), f"{v!r} is not valid under any of the given schemas"))

        checks.append(check_any)
    if "required" in schema:
        required = list(schema["required"])

        def check_required(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            if isinstance(v, dict):
                for name in required:
                    if name not in v:
                        o.append((format_path(p), f"{name!r} is a required property"))

        checks.append(check_required)
    props = {k: compile_schema(s) for k, s in schema.get("properties", {}).items()}
    extra = schema.get("additionalProperties", True)
    extra_check = compile_schema(extra) if isinstance(extra, dict) else None
    if props or extra is not True:

        def check_props(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            if not isinstance(v, dict):
                return
            for key, value in v.items():
                sub = props.get(key)
                if sub is not None:
                    sub(value, (*p, key), o)
                elif extra is False:
                    o.append(
                        (
                            format_path((*p, key)),
                            "unknown field (not in the built-in Pod/Service schema; "
                            "the API server would drop or reject it)",
                        )
                    )
                elif extra_check is not None:
                    extra_check(value, (*p, key), o)

        checks.append(check_props)
    if "items" in schema:
        item = compile_schema(schema["items"])

        def check_items(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
            if isinstance(v, list):
                for i, value in enumerate(v):
                    item(value, (*p, i), o)

        checks.append(check_items)

    def run(v: Any, p: tuple[Any, ...], o: list[Problem]) -> None:
        for check in checks:
            check(v, p, o)

    return checks[0] if len(checks) == 1 else run
