"""Templates applied to a gang: the variables they see, group objects rendered and merged, pod templates merged
into each pod, and the unrendered merge ``pool show --parsed`` prints.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from toporender.build.templates.engine import TemplateFailure, compiled
from toporender.build.templates.merge import merge_patch, merge_pod
from toporender.build.templates.policy import check_reserved, namespace_rule, police_pod_patch, string_fields
from toporender.errors import DiagnosticSink, Position
from toporender.load.models import RepoConfig
from toporender.load.yaml_source import Document, Loc

if TYPE_CHECKING:
    from toporender.expand.gangs import Gang, Task


def parsed_group_templates(config: RepoConfig, pool: str) -> list[dict[str, Any]]:
    """The pool's group templates merged by identity, unrendered (``pool show --parsed``)."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
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


def _identity(obj: Mapping[str, Any]) -> tuple[str, str]:
    """A group template's identity, as OSMO's group templates are identified: kind and name. Two versions of one
    kind with one name would be one object to the API server, so they merge (the later apiVersion wins)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return (str(obj.get("kind")), str((meta or {}).get("name")))


GROUP_UUID_LABEL = "toporender.dev/group-uuid"


def from_group_template(obj: Mapping[str, Any]) -> bool:
    """Whether a rendered object was made by a group template: only those carry the group UUID label, which no
    template may set itself (:func:`~toporender.build.templates.policy.check_reserved`)."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return isinstance(labels, Mapping) and GROUP_UUID_LABEL in labels


def template_object_labels(gang: Gang, config: RepoConfig) -> dict[str, str]:
    """Labels on every object a group template makes: the gang's, plus its UUIDs and who submitted it, under
    ``toporender.dev/``; with ``osmo_labels`` also OSMO's own keys, for tooling that selects by them."""
    labels = {**gang.labels, "toporender.dev/workflow-uuid": gang.workflow_uuid, GROUP_UUID_LABEL: gang.uuid}
    if config.submitted_by is not None:
        labels["toporender.dev/submitted-by"] = config.submitted_by
    if config.osmo_labels:
        labels.update({"osmo.workflow_id": gang.workflow.run_name, "osmo.workflow_uuid": gang.workflow_uuid,
                       "osmo.group_name": gang.name, "osmo.group_uuid": gang.uuid})
        if config.submitted_by is not None:
            labels["osmo.submitted_by"] = config.submitted_by
    return labels


def group_variables(gang: Gang, config: RepoConfig) -> dict[str, Any]:
    """Variables of group templates; pod templates add the task's own on top."""
    tasks = [task_variables(gang, t) for t in gang.tasks]
    variables: dict[str, Any] = {
        "WF_ID": gang.workflow.run_name,
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


def render_group_templates(gang: Gang, config: RepoConfig, doc: Document, variables: Callable[[], Mapping[str, Any]],
                           sink: DiagnosticSink, warned: set[str]) -> list[dict[str, Any]]:
    """Rendered group-template objects of one gang, merged by identity in config order."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
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
        pos = partial(doc.pos, base + ("metadata",))
        string_fields(obj, env=False)
        namespace_rule("group", name, meta, gang.namespace, pos, sink, warned)
        check_reserved("group", name, meta, gang.labels, pos, sink)
        ident = _identity(obj)
        merged[ident] = merge_patch(merged[ident], obj) if ident in merged else obj
    out: list[dict[str, Any]] = []
    ours = template_object_labels(gang, config) if merged else {}
    for obj in merged.values():
        meta = obj.setdefault("metadata", {})
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        meta["labels"] = {**gang.workflow.spec.workflow.labels, **labels, **ours}
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

