"""Turn pydantic validation errors into ``path:line:col`` diagnostics that say how to fix them."""

from __future__ import annotations

import types
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from toporender.errors import Diagnostic, UserError
from toporender.load.models import DNS_LABEL_PATTERN, LABEL_KEY_PATTERN, LABEL_VALUE_PATTERN, NAME_PATTERN
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
    seen: set[tuple[Loc, str]] = set()
    out: list[Diagnostic] = []
    for err in exc.errors(include_url=False):
        loc = _data_loc(doc, base, tuple(err["loc"]))
        key = (loc, err["type"])
        if key in seen:
            continue
        seen.add(key)
        out.append(Diagnostic(_message(model, loc[len(base) :], err), doc.pos(loc)))
    return out


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
        return f"unknown field '{loc[-1]}'{allowed}"
    if kind == "string_pattern_mismatch":
        pattern = err.get("ctx", {}).get("pattern", "")
        hint = _PATTERN_HINTS.get(pattern, f"it must match {pattern}")
        return f"{field}: {err['input']!r} is not valid; {hint}"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind in ("model_type", "dict_type") and loc == ():
        return f"expected a mapping at the top of the document, got {type(err['input']).__name__}"
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
