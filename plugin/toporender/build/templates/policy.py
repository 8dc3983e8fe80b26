"""What templates may be and what their rendered output may do.

A group template is a whole Kubernetes object of a kind the repo's policy allows, and a pod template a
partial Pod within the repo's Pod Security Standard (:func:`check_templates`, before anything renders).
Rendered, neither may set labels or annotations the renderer owns, nor a namespace other than the
workflow's; a pod template may not set the pod's name or its scheduler (:func:`police_pod_patch`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from toporender.build.templates.security import forbidden
from toporender.errors import DiagnosticSink, Position
from toporender.load.models import RepoConfig
from toporender.load.yaml_source import Document, Loc

RESERVED_PREFIXES = ("toporender.dev/", "kai.scheduler/", "gang.scheduling.koordinator.sh/",
                     "pod-group.scheduling.sigs.k8s.io", "runai/", "kueue.x-k8s.io/podset-")
RESERVED_KEYS = {"pod-group-name", "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/pod-group-name",
                 "kueue.x-k8s.io/pod-group-pod-index", "kueue.x-k8s.io/pod-group-total-count",
                 "scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name"}


def check_templates(config: RepoConfig, doc: Document, sink: DiagnosticSink) -> None:
    """Static checks: a group template is a full object; a pod template is a partial Pod."""
    if not config.group_templates and not config.pod_templates:
        return
    from toporender.build.templates.fields import group_template_fields, pod_template_fields
    from toporender.build.templates.security import kind_allowed

    for name, tmpl in config.group_templates.items():
        loc: Loc = ("group_templates", name)
        meta = tmpl.get("metadata")
        missing = [f for f in ("apiVersion", "kind") if not isinstance(tmpl.get(f), str) or not tmpl.get(f)]
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
            missing.append("metadata.name")
        if missing:
            sink.error(f"group template '{name}' lacks {', '.join(missing)}; a group template is a whole "
                       "Kubernetes object", doc.pos(loc))
            continue
        for path, message in group_template_fields(tmpl):
            sink.error(f"group template '{name}': {'.'.join(map(str, path))}: {message}", doc.pos(loc + path))
        if not kind_allowed(tmpl["apiVersion"], tmpl["kind"], config.policy.allowed_kinds):
            group = tmpl["apiVersion"].rpartition("/")[0]
            entry = f"{tmpl['kind']}.{group}" if group else tmpl["kind"]
            sink.error(f"group template '{name}' renders a {tmpl['kind']} ({tmpl['apiVersion']}), which the repo's "
                       f"policy does not allow; a platform owner who means it adds '{entry}' to policy.allowed_kinds "
                       "(see docs/security.md)", doc.pos(loc + ("kind",)))
        elif tmpl["kind"] == "Pod" and tmpl["apiVersion"] == "v1":
            _pod_security(f"group template '{name}'", tmpl, loc, config, doc, sink)
    for name, tmpl in config.pod_templates.items():
        loc = ("pod_templates", name)
        extra = sorted(set(tmpl) - {"metadata", "spec"})
        if extra:
            sink.error(f"pod template '{name}' has {', '.join(extra)}; a pod template may only hold "
                       "'metadata' and 'spec'", doc.pos(loc + (extra[0],)))
        for field in ("metadata", "spec"):
            if field in tmpl and not isinstance(tmpl[field], dict):
                sink.error(f"pod template '{name}': '{field}' must be a mapping", doc.pos(loc + (field,)))
        if isinstance(tmpl.get("spec"), dict):
            for path, message in pod_template_fields(tmpl):
                sink.error(f"pod template '{name}': {'.'.join(map(str, path))}: {message}", doc.pos(loc + path))
        _pod_security(f"pod template '{name}'", tmpl, loc, config, doc, sink)


def _pod_security(what: str, pod: dict[str, Any], loc: Loc, config: RepoConfig, doc: Document,
                  sink: DiagnosticSink) -> None:
    for path, message in forbidden(pod, config.policy.pod_security):
        sink.error(f"{what}: {'.'.join(map(str, path))}: {message}; a platform owner who means it sets "
                   "policy.pod_security in toporender.yaml (see docs/security.md)", doc.pos(loc + path))


def reserved(key: str) -> bool:
    return key in RESERVED_KEYS or key.startswith(RESERVED_PREFIXES)


Where = Position | Callable[[], Position]
"""A position, or how to find it: finding one in a file read by the fast reader parses the file again, which a
check that reports nothing should not pay for."""


def _at(where: Where) -> Position:
    return where if isinstance(where, Position) else where()


def check_reserved(kind: str, name: str, meta: Mapping[str, Any], ours: Mapping[str, str],
                   pos: Where, sink: DiagnosticSink) -> None:
    """A template may not change labels or annotations the renderer owns."""
    for field in ("labels", "annotations"):
        values = meta.get(field)
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            if reserved(key) and ours.get(key) != value:
                sink.error(f"{kind} template '{name}' sets {field[:-1]} '{key}', which toporender owns; "
                           "remove it from the template", _at(pos))


def namespace_rule(kind: str, name: str, meta: dict[str, Any], namespace: str, pos: Where,
                   sink: DiagnosticSink, warned: set[str]) -> None:
    """Drop a template's ``metadata.namespace``: objects always go to the workflow namespace, so another one is
    an error and the same one a warning, given once per template."""
    value = meta.pop("namespace", None)
    if value is None:
        return
    if value != namespace:
        sink.error(f"{kind} template '{name}' sets metadata.namespace '{value}'; objects are always created in the "
                   f"workflow namespace '{namespace}': remove metadata.namespace", _at(pos))
    elif name not in warned:
        warned.add(name)
        sink.warn(f"{kind} template '{name}' sets metadata.namespace; it is ignored (objects always go to the "
                  "workflow namespace)", _at(pos))


def _as_string(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, (int, float)) else value


def string_fields(obj: dict[str, Any], *, env: bool = True) -> None:
    """Write as strings the rendered numbers and booleans in fields Kubernetes types as strings: label and
    annotation values, and (with ``env``, for Pods) container ``env`` values.

    A template value that is exactly one ``{{ expression }}`` keeps the expression's type, which ``numNodes``
    needs; in these fields the API server would reject the number, and the author wrote a string."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for field in ("labels", "annotations"):
            values = meta.get(field)
            if isinstance(values, dict):
                for key, value in values.items():
                    values[key] = _as_string(value)
    spec = obj.get("spec")
    if not env or not isinstance(spec, dict):
        return
    for field in ("containers", "initContainers"):
        containers = spec.get(field)
        for container in containers if isinstance(containers, list) else ():
            variables = container.get("env") if isinstance(container, dict) else None
            for var in variables if isinstance(variables, list) else ():
                if isinstance(var, dict) and "value" in var:
                    var["value"] = _as_string(var["value"])


def police_pod_patch(name: str, patch: dict[str, Any], namespace: str, position: Callable[[Loc], Position],
                     sink: DiagnosticSink, warned: set[str]) -> None:
    """Report what a rendered pod template may not do, and drop what it reports (a namespace, a non-mapping
    field) so the merge can go on. ``position`` gives a path's place inside the template.

    Besides :func:`string_fields`, it changes ``patch`` only where it also reports something, so a caller that
    merges patches in bulk (:mod:`toporender.build.pod_shapes`) can run it with a sink of its own and leave
    every reported patch to :func:`~toporender.build.templates.apply.apply_pod_templates`."""
    string_fields(patch)
    meta = patch.get("metadata")
    if isinstance(meta, dict):
        pos = partial(position, ("metadata",))
        namespace_rule("pod", name, meta, namespace, pos, sink, warned)
        if "name" in meta:
            sink.error(f"pod template '{name}' sets metadata.name; pod names come from the workflow", pos())
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

