"""Turn pydantic validation errors into ``path:line:col`` diagnostics that say how to fix them."""

from __future__ import annotations

import difflib
import re
import types
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from toporender.errors import Diagnostic, UserError
from toporender.load.models import (
    DNS_LABEL_PATTERN,
    LABEL_KEY_PATTERN,
    LABEL_VALUE_PATTERN,
    NAME_PATTERN,
    QUANTITY_PATTERN,
)
from toporender.load.yaml_source import Document, Loc

M = TypeVar("M", bound=BaseModel)

_PATTERN_HINTS = {
    NAME_PATTERN: "use letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
    DNS_LABEL_PATTERN: "use lower-case letters, digits and '-', starting and ending with a letter or digit",
    LABEL_KEY_PATTERN: "use a Kubernetes label key such as 'example.com/name'",
    LABEL_VALUE_PATTERN: "use a Kubernetes label value: letters, digits, '-', '_' or '.', at most 63 characters",
}

_DATA = "toporender renders Kubernetes objects from Git and moves no data; mount volumes with a pod template"
OSMO_UNSUPPORTED: dict[tuple[str, str], str] = {
    ("TaskSpec", "inputs"): _DATA,
    ("TaskSpec", "outputs"): _DATA,
    ("TaskSpec", "checkpoint"): _DATA,
    ("TaskSpec", "downloadType"): _DATA,
    ("TaskSpec", "cacheSize"): _DATA,
    ("TaskSpec", "kpis"): "KPIs are OSMO service data; nothing in the cluster reads them",
    ("TaskSpec", "credentials"): "reference Kubernetes Secrets from a pod template (env valueFrom, volumes) instead; "
                                 "secrets never belong in a Git repo",
    ("TaskSpec", "exitActions"): "OSMO's controller restarts tasks; with plain Pods and a gang scheduler there is "
                                 "no controller to act on exit codes",
    ("TaskSpec", "privileged"): "set securityContext in a pod template, where the platform team reviews it",
    ("TaskSpec", "hostNetwork"): "set hostNetwork in a pod template, where the platform team reviews it",
    ("TaskSpec", "volumeMounts"): "OSMO mounts pool-allowed host paths by name; add volumes and volumeMounts in a "
                                  "pod template",
    ("TaskSpec", "resources"): "name a resource of the workflow's 'resources' with 'resource:' instead",
    ("TaskSpec", "backend"): "the pool's backend decides; set 'backend' on the pool in toporender.yaml",
    ("GroupSpec", "barrier"): "a gang scheduler starts the group's pods together; there is no barrier to configure",
    ("GroupSpec", "ignoreNonleadStatus"): "group status is the scheduler's and Kubernetes'; toporender only renders",
    ("WorkflowSpec", "backend"): "the pool's backend decides; set 'backend' on the pool in toporender.yaml",
    ("TimeoutSpec", "queue_timeout"): "a PodGroup waits in its queue until the scheduler admits it; the scheduler has "
                                      "no queue timeout to set",
}
"""OSMO workflow fields toporender refuses by name, with the reason (OSMO's ``TaskSpec``, ``TaskGroupSpec``,
``WorkflowSpec`` and ``TimeoutSpec`` in ``src/utils/job/task.py`` and ``workflow.py``)."""


def parse(model: type[M], doc: Document, base: Loc = ()) -> M:
    """Validate ``doc.data`` (or the part at ``base``) as ``model``; errors carry positions."""
    data = doc.data
    for part in base:
        data = data[part]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(_diagnostics(model, doc, base, exc)) from None


def _diagnostics(model: type[BaseModel], doc: Document, base: Loc, exc: ValidationError) -> list[Diagnostic]:
    """One message per place in the document: a field typed ``A | B`` fails once per member, and the user
    needs one line that names every accepted form."""
    at: dict[Loc, list[Any]] = {}
    for err in exc.errors(include_url=False):
        loc = _data_loc(doc, base, tuple(err["loc"]))
        kinds = at.setdefault(loc, [])
        if all(e["type"] != err["type"] for e in kinds):
            kinds.append(err)
    out: list[Diagnostic] = []
    for loc, errs in at.items():
        rel = loc[len(base) :]
        messages = _merged(rel, errs) if len(errs) > 1 else None
        for message in [messages] if messages else [_message(model, rel, e) for e in errs]:
            out.append(Diagnostic(message, doc.pos(loc)))
    return out


_WHOLE = ("a whole number", "{leaf}: 8")
_NUMBER = ("a number", "{leaf}: 8 or {leaf}: 0.5")
_BOOL = ("true or false", "{leaf}: true")
_LIST = ("a list", "{leaf}: [a, b], or one '- item' per line under '{leaf}:'")
_MAPPING = ("a mapping", "'name: value' lines indented under '{leaf}:'")
_TYPE_WORDS = {
    "int_parsing": _WHOLE, "int_type": _WHOLE, "int_from_float": _WHOLE,
    "float_parsing": _NUMBER, "float_type": _NUMBER,
    "bool_parsing": _BOOL, "bool_type": _BOOL,
    "string_type": ("text", "{leaf}: 'some text'"),
    "list_type": _LIST,
    "dict_type": _MAPPING, "model_type": _MAPPING,
}
"""pydantic's error types in the user's words: what was expected, and an example of it for the field."""
_QUANTITY_TYPO = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtTpPeE])(?:i?[bB]|I)?\s*$")


def _found(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _quantity(field: str, value: Any) -> str:
    """Kubernetes quantities use ``Gi`` where people write ``GB``; suggest the binary unit, which is what memory
    sizes in a workflow almost always mean."""
    typo = _QUANTITY_TYPO.match(str(value))
    hint = f" (did you mean '{typo[1]}{typo[2].upper()}i'?)" if typo else ""
    return (f"{field}: {_found(value)} is not a Kubernetes quantity{hint}; write a number with an optional unit: "
            "Ki, Mi, Gi, Ti (powers of 1024) or k, M, G, T (powers of 1000), e.g. 512Gi")


def _expected(loc: Loc, kinds: list[str], value: Any) -> str:
    field = ".".join(str(p) for p in loc) or "document"
    leaf = str(loc[-1]) if loc else "value"
    words = list(dict.fromkeys(_TYPE_WORDS[k] for k in kinds))
    expected = " or ".join(w for w, _ in words)
    examples = " or ".join(e.format(leaf=leaf) for _, e in words)
    return f"{field}: expected {expected}, found {_found(value)}; e.g. {examples}"


def _merged(loc: Loc, errs: list[Any]) -> str | None:
    field = ".".join(str(p) for p in loc) or "document"
    value = errs[0].get("input")
    if any(e["type"] == "string_pattern_mismatch" and e.get("ctx", {}).get("pattern") == QUANTITY_PATTERN
           for e in errs):
        return _quantity(field, value)
    if not all(e["type"] in _TYPE_WORDS for e in errs):
        return None
    return _expected(loc, [e["type"] for e in errs], value)


def _data_loc(doc: Document, base: Loc, loc: Loc) -> Loc:
    """Drop pydantic's union-member tags so the location is a path into the data."""
    data: Any = doc.data
    path: list[str | int] = list(base)
    for part in base:
        data = data[part]
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        elif isinstance(data, dict) and isinstance(part, str):
            path.append(part)
            break
        else:
            break
        path.append(part)
    return tuple(path)


def _message(model: type[BaseModel], loc: Loc, err: Any) -> str:
    field = ".".join(str(p) for p in loc) or "document"
    kind = err["type"]
    if kind == "missing":
        return f"missing required field '{loc[-1] if loc else field}'"
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        reason = OSMO_UNSUPPORTED.get((parent.__name__ if parent else "", str(loc[-1])))
        if reason is not None:
            return f"OSMO field '{loc[-1]}' is not supported by toporender: {reason}"
        allowed = f"; allowed here: {', '.join(parent.model_fields)}" if parent else ""
        close = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields) if parent else [], n=1)
        return f"unknown field '{loc[-1]}'{f' (did you mean {close[0]!r}?)' if close else ''}{allowed}"
    if kind == "string_pattern_mismatch":
        pattern = err.get("ctx", {}).get("pattern", "")
        if pattern == QUANTITY_PATTERN:
            return _quantity(field, err["input"])
        hint = _PATTERN_HINTS.get(pattern, f"it must match {pattern}")
        return f"{field}: {err['input']!r} is not valid; {hint}"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind in ("model_type", "dict_type") and loc == ():
        return f"expected a mapping at the top of the document, found {_found(err['input'])}"
    if kind in ("model_type", "dict_type"):
        inner = _model_at(model, loc)
        fields = f" with the fields {', '.join(inner.model_fields)}" if inner else ""
        indent = ""
        if inner is not None and loc and loc[-1] in inner.model_fields:
            indent = (f"; '{loc[-1]}' is itself one of those fields: is it indented too little, "
                      "so that it sits beside the entry it belongs to?")
        return f"{field}: expected a mapping{fields}, found {_found(err['input'])}{indent}"
    if kind in _TYPE_WORDS:
        return _expected(loc, [kind], err["input"])
    ctx = err.get("ctx", {})
    bounds = {"greater_than_equal": ("at least", "ge"), "less_than_equal": ("at most", "le"),
              "greater_than": ("more than", "gt"), "less_than": ("less than", "lt")}
    if kind in bounds:
        words, key = bounds[kind]
        bound = ctx.get(key)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"{field}: expected {words} {bound}, found {_found(err['input'])}"
    if kind in ("string_too_long", "string_too_short", "too_long", "too_short"):
        unit = "characters" if kind.startswith("string") else "items"
        words, key = ("at most", "max_length") if kind.endswith("long") else ("at least", "min_length")
        size = len(err["input"]) if hasattr(err["input"], "__len__") else ctx.get("actual_length")
        return f"{field}: expected {words} {ctx.get(key)} {unit}, found {size}"
    if kind == "literal_error":
        return f"{field}: expected {ctx.get('expected', msg)}, found {_found(err['input'])}"
    return f"{field}: {msg}"


def _unwrap(tp: Any) -> Any:
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            tp = next((a for a in members if get_origin(a) in (list, dict) or _is_model(a)), members[0])
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    tp: Any = model
    for part in loc:
        tp = _unwrap(tp)
        if _is_model(tp):
            fields = tp.model_fields
            if not isinstance(part, str) or part not in fields:
                return None
            tp = fields[part].annotation
        elif get_origin(tp) is list and isinstance(part, int):
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        else:
            return None
    tp = _unwrap(tp)
    return tp if _is_model(tp) else None
