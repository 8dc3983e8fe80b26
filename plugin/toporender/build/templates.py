"""Group templates and pod templates (seed 004, OSMO group/pod templates).

Templates are untrusted text from the repo: every string value is rendered with a sandboxed
Jinja2 environment and ``StrictUndefined``; keys are never rendered. A value that is exactly one
``{{ expression }}`` keeps the expression's type (``{{ TASKS|length }}`` is an integer), anything
else renders to a string. Group templates with the same identity are merged with RFC 7386 JSON
merge patch; pod templates merge with the Kubernetes-aware rule in :func:`merge_pod`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from toporender.errors import DiagnosticSink, Position
from toporender.load.models import RepoConfig
from toporender.load.yaml_source import Document, Loc

if TYPE_CHECKING:
    from toporender.expand.gangs import Gang, Task

RESERVED_PREFIXES = ("toporender.dev/", "kai.scheduler/", "gang.scheduling.koordinator.sh/",
                     "pod-group.scheduling.sigs.k8s.io", "runai/")
RESERVED_KEYS = {"pod-group-name"}
SET_LISTS = {"tolerations", "resourceClaims", "claims", "imagePullSecrets", "finalizers"}
_WHOLE = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\}\}|\{\{|\{%).)*)\}\}\s*$", re.S)
_MAX_RENDERED = 1_000_000


class TemplateFailure(Exception):
    """A template could not be rendered; carries the data path of the failing value."""

    def __init__(self, path: Loc, message: str):
        super().__init__(message)
        self.path = path
        self.message = message


_MAX_SEQUENCE = 100_000
_RENDER_SECONDS = 0.5


@lru_cache(maxsize=1)
def _env() -> Any:
    """The sandboxed environment, imported on first use: most renders have no templates.

    Besides Jinja's sandbox (no private attributes, bounded ``range``), ``*`` and ``**`` are
    intercepted so ``{{ 'x' * 10**9 }}`` cannot exhaust memory.
    """
    from jinja2 import StrictUndefined
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import SandboxedEnvironment

    class BoundedSandbox(SandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**" and isinstance(right, (int, float)) and abs(right) > 64:
                raise SecurityError("exponent larger than 64 refused")
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > _MAX_SEQUENCE:
                        raise SecurityError(f"repeating a sequence past {_MAX_SEQUENCE} items refused")
            return super().call_binop(context, operator, left, right)

    env = BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.globals.clear()
    env.globals["range"] = lambda *args: _bounded_range(*args)
    return env


def _bounded_range(*args: int) -> range:
    from jinja2.exceptions import SecurityError

    rng = range(*args)
    if len(rng) > 10_000:
        raise SecurityError("range() longer than 10000 refused")
    return rng


class _Deadline:
    """Stop a runaway template (nested loops) after ``_RENDER_SECONDS`` of CPU time when we run in the
    main thread. CPU time, not wall time: a busy machine (a loaded repo server) must not turn a
    healthy template into an error."""

    def __enter__(self) -> None:
        import signal
        import threading

        self.armed = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
        if self.armed:
            def timeout(signum: int, frame: Any) -> None:
                raise TimeoutError(f"template rendering took longer than {_RENDER_SECONDS} s of CPU time")

            self.previous = signal.signal(signal.SIGVTALRM, timeout)
            signal.setitimer(signal.ITIMER_VIRTUAL, _RENDER_SECONDS)

    def __exit__(self, *exc: object) -> None:
        if self.armed:
            import signal

            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            signal.signal(signal.SIGVTALRM, self.previous)


@lru_cache(maxsize=8192)
def _compile(text: str) -> Callable[[Mapping[str, Any]], Any]:
    from jinja2 import Undefined

    env = _env()
    whole = _WHOLE.match(text)
    if whole:
        expr = env.compile_expression(whole.group("expr"), undefined_to_none=False)

        def native(variables: Mapping[str, Any]) -> Any:
            value = expr(**variables)
            if isinstance(value, Undefined):
                str(value)  # raises UndefinedError with Jinja's message
            return value

        return native
    template = env.from_string(text)
    return lambda variables: template.render(**variables)


def _jsonable(value: Any, path: Loc) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, path) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v, path) for k, v in value.items()}
    raise TemplateFailure(path, f"expression produced a {type(value).__name__}, which is not a YAML value")


_SIMPLE_REF = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# ``{{ TASKS|length }}``, the usual ``numNodes`` of a ComputeDomain: Jinja's ``length`` is ``len``.
_LENGTH_REF = re.compile(r"\s*\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\|\s*length\s*\}\}\s*")
_SIZED = (list, tuple, str, dict)


@lru_cache(maxsize=8192)
def _simple(text: str) -> tuple[str, ...] | None:
    """Split ``text`` into literal/name parts when it uses nothing but ``{{ NAME }}`` references.

    Most template values are like ``compute-domain-{{WF_GROUP_UUID}}``; substituting them directly
    gives exactly what Jinja would (``str()`` of the value) without a Jinja context per pod.
    """
    parts = _SIMPLE_REF.split(text)
    if any("{{" in lit or "{%" in lit or "{#" in lit for lit in parts[::2]):
        return None
    return tuple(parts)


def format_string(parts: tuple[str, ...]) -> str:
    """The ``str.format_map`` string of :func:`_simple` parts: literals escaped, names as fields."""
    return "".join(p.replace("{", "{{").replace("}", "}}") if i % 2 == 0 else "{" + p + "}"
                   for i, p in enumerate(parts))


def render_value(value: Any, variables: Mapping[str, Any], path: Loc = ()) -> Any:
    """Render every string inside ``value`` (not keys) with ``variables``; the result shares nothing with
    ``value``."""
    return _compile_tree(value, path)(variables)


def _jinja_string(value: str, variables: Mapping[str, Any], path: Loc) -> Any:
    """Render with sandboxed Jinja, under the CPU-time limit; every failure becomes a TemplateFailure."""
    from jinja2 import TemplateSyntaxError, UndefinedError
    from jinja2.exceptions import SecurityError, TemplateError

    try:
        template = _compile(value)
        with _Deadline():
            out = template(variables)
    except UndefinedError as exc:
        msg = str(exc.message or exc)
        if "unsafe" in msg:
            raise TemplateFailure(path, f"refused by the template sandbox: {msg}") from None
        known = ", ".join(sorted(k for k in variables if not k.startswith("_")))
        raise TemplateFailure(path, f"{msg}; available variables: {known}") from None
    except SecurityError as exc:
        raise TemplateFailure(path, f"refused by the template sandbox: {exc}") from None
    except TemplateSyntaxError as exc:
        raise TemplateFailure(path, f"template syntax error: {exc.message}") from None
    except TemplateError as exc:
        raise TemplateFailure(path, f"template error: {exc}") from None
    except TimeoutError as exc:
        raise TemplateFailure(path, f"refused: {exc}") from None
    except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError, RecursionError,
            MemoryError) as exc:
        raise TemplateFailure(path, f"template expression failed: {type(exc).__name__}: {exc}") from None
    if isinstance(out, str) and len(out) > _MAX_RENDERED:
        raise TemplateFailure(path, f"rendered value is longer than {_MAX_RENDERED} characters")
    return _jsonable(out, path)


_COMPILED: dict[int, tuple[Any, Callable[[Mapping[str, Any]], Any]]] = {}


def compiled(template: Any) -> Callable[[Mapping[str, Any]], Any]:
    """``render_value`` for one template, with the tree walk done once instead of once per pod.

    The returned function builds fresh dicts and lists on every call, so pods never share them.
    """
    hit = _COMPILED.get(id(template))
    if hit is not None and hit[0] is template:
        return hit[1]
    fn = _compile_tree(template, ())
    if len(_COMPILED) > 256:
        _COMPILED.clear()
    _COMPILED[id(template)] = (template, fn)
    return fn


def _compile_tree(value: Any, path: Loc) -> Callable[[Mapping[str, Any]], Any]:
    """A function that renders ``value`` with the given variables into fresh dicts and lists.

    Constant scalars are copied along with their container (``dict.copy``); only strings with
    ``{`` and nested containers are visited per call, which is what makes a template cheap to
    apply to thousands of pods.
    """
    if isinstance(value, str):
        return _compile_string(value, path)
    if isinstance(value, (dict, list)):
        slots = value.items() if isinstance(value, dict) else enumerate(value)
        dynamic = [(k, _compile_tree(v, path + (k,))) for k, v in slots
                   if isinstance(v, (dict, list)) or (isinstance(v, str) and "{" in v)]
        static = dict(value) if isinstance(value, dict) else list(value)
        if not dynamic:
            return lambda variables: static.copy()

        def render(variables: Mapping[str, Any]) -> Any:
            out = static.copy()
            for k, f in dynamic:
                out[k] = f(variables)
            return out

        return render
    return lambda variables: value


def _compile_string(value: str, path: Loc) -> Callable[[Mapping[str, Any]], Any]:
    """Plain ``{{ NAME }}`` references become a lookup or a ``str.format_map``, and ``{{ NAME|length }}``
    a ``len``; anything else, or a name that is not defined or not sized, goes through Jinja (which
    also words the error). A render that needs nothing else never imports Jinja."""
    if "{" not in value:
        return lambda variables: value
    length = _LENGTH_REF.fullmatch(value)
    if length is not None:
        sized = length.group(1)

        def count(variables: Mapping[str, Any]) -> Any:
            items = variables.get(sized)
            if isinstance(items, _SIZED):
                return len(items)
            return _jinja_string(value, variables, path)

        return count
    parts = _simple(value)
    if parts is None:
        return lambda variables: _jinja_string(value, variables, path)
    if len(parts) == 3 and not parts[0].strip() and not parts[2].strip():
        name = parts[1]

        def whole(variables: Mapping[str, Any]) -> Any:
            if name not in variables:
                return _jinja_string(value, variables, path)
            return _jsonable(variables[name], path)

        return whole
    fmt = format_string(parts)

    def joined(variables: Mapping[str, Any]) -> Any:
        try:
            return fmt.format_map(variables)
        except KeyError:
            return _jinja_string(value, variables, path)

    return joined


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _named(items: list[Any]) -> bool:
    for item in items:
        if not isinstance(item, dict) or "name" not in item:
            return False
    return True


def merge_pod(base: Any, patch: Any, key: str | None = None) -> Any:
    """Pod-template merge: dicts deep-merge (``null`` deletes); lists of named objects merge by
    ``name`` (new names appended); set-like lists (tolerations, resourceClaims, claims,
    imagePullSecrets, finalizers) become de-duplicated unions; other lists are replaced.

    ``base`` is updated in place and returned, and parts of ``patch`` become parts of it: callers
    own both (a freshly built pod, a freshly rendered patch), so nothing is copied per pod."""
    if isinstance(patch, dict) and isinstance(base, dict):
        for k, v in patch.items():
            if v is None:
                base.pop(k, None)
            elif k in base and isinstance(v, (dict, list)):
                base[k] = merge_pod(base[k], v, k)
            else:
                base[k] = v
        return base
    if isinstance(patch, list) and isinstance(base, list):
        if base and patch and _named(base) and _named(patch):
            index = {item["name"]: i for i, item in enumerate(base)}
            for item in patch:
                at = index.get(item["name"])
                if at is not None:
                    base[at] = merge_pod(base[at], item)
                else:
                    index[item["name"]] = len(base)
                    base.append(item)
            return base
        if key in SET_LISTS:
            seen: set[str] = set()
            union: list[Any] = []
            for item in base + patch:
                ident = json.dumps(item, sort_keys=True)
                if ident not in seen:
                    seen.add(ident)
                    union.append(item)
            return union
    return patch


def parsed_group_templates(config: RepoConfig, pool: str) -> list[dict[str, Any]]:
    """The pool's group templates merged by identity, unrendered (``pool show --parsed``)."""
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    for name in config.pools[pool].common_group_templates:
        tmpl = config.group_templates.get(name)
        if tmpl is None:
            continue
        ident = _identity(tmpl)
        merged[ident] = merge_patch(merged[ident], tmpl) if ident in merged else copy.deepcopy(tmpl)
    return list(merged.values())


def parsed_pod_template(config: RepoConfig, pool: str, platform: str | None) -> dict[str, Any]:
    """The pool's pod templates, then the platform's overrides, merged in order, unrendered."""
    out: dict[str, Any] = {}
    for name in pod_template_names(config, pool, platform):
        out = merge_pod(out, copy.deepcopy(config.pod_templates.get(name, {})))
    return out


def pod_template_names(config: RepoConfig, pool: str, platform: str | None) -> list[str]:
    p = config.pools[pool]
    names = list(p.common_pod_template)
    plat = platform or p.default_platform
    if plat and plat in p.platforms:
        names += p.platforms[plat].override_pod_template
    return names


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return (str(obj.get("apiVersion")), str(obj.get("kind")), str((meta or {}).get("name")))


def check_templates(config: RepoConfig, doc: Document, sink: DiagnosticSink) -> None:
    """Static checks: a group template is a full object; a pod template is a partial Pod."""
    for name, tmpl in config.group_templates.items():
        loc: Loc = ("group_templates", name)
        meta = tmpl.get("metadata")
        missing = [f for f in ("apiVersion", "kind") if not isinstance(tmpl.get(f), str) or not tmpl.get(f)]
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
            missing.append("metadata.name")
        if missing:
            sink.error(f"group template '{name}' lacks {', '.join(missing)}; a group template is a whole "
                       "Kubernetes object", doc.pos(loc))
    for name, tmpl in config.pod_templates.items():
        loc = ("pod_templates", name)
        extra = sorted(set(tmpl) - {"metadata", "spec"})
        if extra:
            sink.error(f"pod template '{name}' has {', '.join(extra)}; a pod template may only hold "
                       "'metadata' and 'spec'", doc.pos(loc + (extra[0],)))
        for field in ("metadata", "spec"):
            if field in tmpl and not isinstance(tmpl[field], dict):
                sink.error(f"pod template '{name}': '{field}' must be a mapping", doc.pos(loc + (field,)))


def reserved(key: str) -> bool:
    return key in RESERVED_KEYS or key.startswith(RESERVED_PREFIXES)


def check_reserved(kind: str, name: str, meta: Mapping[str, Any], ours: Mapping[str, str],
                   pos: Position, sink: DiagnosticSink) -> None:
    """A template may not change labels or annotations the renderer owns."""
    for field in ("labels", "annotations"):
        values = meta.get(field)
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            if reserved(key) and ours.get(key) != value:
                sink.error(f"{kind} template '{name}' sets {field[:-1]} '{key}', which toporender owns; "
                           "remove it from the template", pos)


# ---------------------------------------------------------------------------------------------
# Application to a gang


def group_variables(gang: Gang, config: RepoConfig) -> dict[str, Any]:
    """Variables of group templates; pod templates add the task's own on top."""
    tasks = [task_variables(gang, t) for t in gang.tasks]
    variables: dict[str, Any] = {
        "WF_ID": gang.workflow.name,
        "WF_UUID": gang.workflow_uuid,
        "WF_GROUP_NAME": gang.name,
        "WF_GROUP_UUID": gang.uuid,
        "WF_POOL": gang.pool_name,
        "WF_NAMESPACE": gang.namespace,
        "TASKS": tasks,
    }
    if config.submitted_by is not None:
        variables["WF_SUBMITTED_BY"] = config.submitted_by
    return variables


def task_variables(gang: Gang, task: Task) -> dict[str, Any]:
    res = task.resource
    return {
        **task.identity(),
        "USER_GPU": res.gpu or 0,
        "USER_CPU": res.cpu or 0,
        "USER_MEMORY": "" if res.memory is None else str(res.memory),
        "USER_STORAGE": "" if res.storage is None else str(res.storage),
    }


def _namespace_rule(kind: str, name: str, meta: dict[str, Any], namespace: str, pos: Position,
                    sink: DiagnosticSink, warned: set[str]) -> None:
    value = meta.pop("namespace", None)
    if value is None:
        return
    if value != namespace:
        sink.error(f"{kind} template '{name}' sets metadata.namespace '{value}'; objects are always created in the "
                   f"workflow namespace '{namespace}': remove metadata.namespace", pos)
    elif name not in warned:
        warned.add(name)
        sink.warn(f"{kind} template '{name}' sets metadata.namespace; it is ignored (objects always go to the "
                  "workflow namespace)", pos)


def render_group_templates(gang: Gang, config: RepoConfig, doc: Document, variables: Callable[[], Mapping[str, Any]],
                           sink: DiagnosticSink, warned: set[str]) -> list[dict[str, Any]]:
    """Rendered group-template objects of one gang, merged by identity in config order."""
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    for name in gang.pool.common_group_templates:
        base: Loc = ("group_templates", name)
        try:
            obj = compiled(config.group_templates[name])(variables())
        except TemplateFailure as exc:
            sink.error(f"group template '{name}': {exc.message}", doc.pos(base + exc.path))
            continue
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            sink.error(f"group template '{name}' renders without metadata.name", doc.pos(base))
            continue
        pos = doc.pos(base + ("metadata",))
        _namespace_rule("group", name, meta, gang.namespace, pos, sink, warned)
        check_reserved("group", name, meta, gang.labels, pos, sink)
        ident = _identity(obj)
        merged[ident] = merge_patch(merged[ident], obj) if ident in merged else obj
    out: list[dict[str, Any]] = []
    for obj in merged.values():
        meta = obj.setdefault("metadata", {})
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        meta["labels"] = {**gang.workflow.spec.workflow.labels, **labels, **gang.labels}
        ordered = {"name": meta.pop("name"), "namespace": gang.namespace, **meta}
        obj["metadata"] = ordered
        out.append(obj)
    return out


PodTemplates = list[tuple[str, Callable[[Mapping[str, Any]], Any]]]


def pod_templates(config: RepoConfig, gang: Gang, platform: str | None) -> PodTemplates:
    """(name, compiled template) for every pod template a task on ``platform`` gets, in merge order."""
    names = pod_template_names(config, gang.pool_name, platform)
    return [(name, compiled(config.pod_templates[name])) for name in names]


def apply_pod_templates(pod: dict[str, Any], gang: Gang, templates: PodTemplates, task_vars: Mapping[str, Any],
                        doc: Document, sink: DiagnosticSink, warned: set[str]) -> dict[str, Any]:
    """Merge the pool's and platform's pod templates (from :func:`pod_templates`) into ``pod``, in order.

    ``task_vars`` are the group's variables with the task's own on top."""
    for name, template in templates:
        base: Loc = ("pod_templates", name)
        try:
            patch = template(task_vars)
        except TemplateFailure as exc:
            sink.error(f"pod template '{name}': {exc.message}", doc.pos(base + exc.path))
            continue

        def position(loc: Loc, base: Loc = base) -> Position:
            return doc.pos(base + loc)

        police_pod_patch(name, patch, gang.namespace, position, sink, warned)
        pod = merge_pod(pod, patch)
    return pod


def police_pod_patch(name: str, patch: dict[str, Any], namespace: str, position: Callable[[Loc], Position],
                     sink: DiagnosticSink, warned: set[str]) -> None:
    """Report what a rendered pod template may not do, and drop what it reports (a namespace, a non-mapping
    field) so the merge can go on. ``position`` gives a path's place inside the template.

    It changes ``patch`` only where it also reports something, so a caller that merges patches in bulk
    (:mod:`toporender.build.pod_shapes`) can run it with a sink of its own and leave every reported patch to
    :func:`apply_pod_templates`."""
    meta = patch.get("metadata")
    if isinstance(meta, dict):
        pos = position(("metadata",))
        _namespace_rule("pod", name, meta, namespace, pos, sink, warned)
        if "name" in meta:
            sink.error(f"pod template '{name}' sets metadata.name; pod names come from the workflow", pos)
        for field in ("labels", "annotations"):
            if meta.get(field) is not None and not isinstance(meta[field], dict):
                sink.error(f"pod template '{name}': metadata.{field} must be a mapping of names to strings",
                           position(("metadata", field)))
                del meta[field]
        check_reserved("pod", name, meta, {}, pos, sink)
    spec = patch.get("spec")
    if isinstance(spec, dict) and "schedulerName" in spec:
        sink.error(f"pod template '{name}' sets spec.schedulerName, which the pool's backend owns; "
                   "set scheduler_name on the pool instead", position(("spec", "schedulerName")))
