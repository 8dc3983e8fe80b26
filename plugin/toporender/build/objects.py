"""The build stage: every gang's objects in stream order, and the pool-level objects.

A gang becomes its group-template objects, the backend's scheduler objects (PodGroups), an optional headless
Service and its Pods. Pods are built by task shape where tasks share one (:mod:`toporender.build.pod_shapes`),
else one by one, the general way that also reports template problems.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter

from toporender.build.backends import GangObjects, backend_for, kueue, volcano
from toporender.build.backends.koordinator import gang_warnings, pool_problems
from toporender.build.pod_shapes import PodShapes
from toporender.build.pods import base_pod, files_configmap, finish_pod, headless_service
from toporender.build.templates.apply import (
    PodTemplates,
    apply_pod_templates,
    group_variables,
    pod_templates,
    render_group_templates,
)
from toporender.errors import Diagnostic, DiagnosticSink, Position, UserError
from toporender.expand.gangs import Gang
from toporender.load.models import PoolConfig, ResourceSpec
from toporender.load.repo import Repo
from toporender.load.yaml_source import Document
from toporender.placement.stage import pool_inventory

SYNC_WAVE = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
REPLACE = "Force=true,Replace=true"
REVISION = "toporender.dev/gang-revision"
MAX_OBJECTS = 1_000_000
"""Objects one render may hold: a 1M-GPU repo of 10,000 workflows renders about 310,000; a repo far past
that is a mistake (or a bomb) better split into several applications."""

BuiltGang = tuple[Gang, list[dict[str, Any]], list[dict[str, Any]]]
"""A gang with its group objects (templates, PodGroups, Service) and its Pods, in stream order."""


def check_backends(repo: Repo, sink: DiagnosticSink) -> None:
    """Pool settings a backend cannot honour, found before anything is built."""
    for name, pool in repo.config.pools.items():
        problems = {"koordinator": pool_problems, "kueue": kueue.pool_problems,
                    "volcano": volcano.pool_problems}.get(pool.backend)
        for where, msg in problems(pool) if problems else []:
            sink.error(f"pool '{name}': {msg}", repo.config_doc.pos(("pools", name) + where))


def build_gangs(repo: Repo, gangs: Iterable[Gang], sink: DiagnosticSink,
                warned: set[str] | None = None) -> list[BuiltGang]:
    """Every gang built; template problems are collected for all gangs before any is raised. ``warned`` holds
    the templates warned about once per render (the render cache builds a file at a time and replays them)."""
    warned = set() if warned is None else warned
    built = [(gang, *build_gang(gang, repo, sink, warned)) for gang in gangs]
    sink.raise_if_errors()
    return built


def pool_objects(repo: Repo, namespace: str, wanted: bool | None, *, inventory: str | None = None,
                 inventory_docs: list[Document] | None = None) -> list[dict[str, Any]]:
    """Cluster-level objects of the pools that ask for them (or of all pools, when ``wanted`` says so).

    A Volcano pool's HyperNodes are built from its inventory (the same one placement reads), so a Volcano pool
    that renders pool objects without an inventory is an error rather than a silently empty tree."""
    objs: list[dict[str, Any]] = []
    owners: dict[tuple[str, str], str] = {}
    for name in sorted(repo.config.pools):
        pool = repo.config.pools[name]
        if not (wanted if wanted is not None else pool.render_pool_objects):
            continue
        rendered = backend_for(pool).pool_objects(name, pool, namespace)
        if pool.backend == "volcano" and [k for k in pool.topology_keys if k.label != volcano.HOSTNAME]:
            inv = pool_inventory(repo, name, inventory, inventory_docs)
            if inv is None:
                raise UserError(Diagnostic(
                    f"pool '{name}' (backend volcano) renders pool objects, but its HyperNodes are built from a "
                    "node inventory and it has none; set 'inventory:' (see 'toporender inventory import') or turn "
                    "render_pool_objects off and let Volcano discover HyperNodes",
                    repo.config_doc.pos(("pools", name))))
            rendered = volcano.hypernodes(name, pool, volcano.inventory_nodes(inv.nodes))
        if pool.backend == "kueue":
            for where, msg in kueue.pool_objects_problems(pool):
                raise UserError(Diagnostic(f"pool '{name}': {msg}", repo.config_doc.pos(("pools", name) + where)))
        for obj in rendered:
            ident = (str(obj["kind"]), str(obj["metadata"]["name"]))
            if ident in owners:
                raise UserError(Diagnostic(
                    f"pools '{owners[ident]}' and '{name}' both render the cluster-wide {ident[0]} "
                    f"'{ident[1]}'; set render_pool_objects on only one of them",
                    repo.config_doc.pos(("pools", name))))
            owners[ident] = name
            objs.append(obj)
    if repo.config.sync_waves:
        for o in objs:
            _annotate(o, {SYNC_WAVE: "-2"})
    return objs


def build_gang(gang: Gang, repo: Repo, sink: DiagnosticSink, warned: set[str],
               delivery: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Objects of one task group in stream order: (group-template objects, PodGroup(s), Service), Pods.

    ``delivery=False`` is for ``toporender plan``, which builds gangs only to read their Pods' demands: it
    leaves out the Argo CD annotations (sync waves, the gang revision; hashing each gang's inputs was a sixth
    of a plan), and tasks whose pod shape tolerates the same for every task share one Pod (the shape's first),
    which then stands for each of them only as far as GPUs and tolerations go."""
    config, doc = repo.config, repo.config_doc
    variables = lru_cache(maxsize=1)(lambda: group_variables(gang, config))
    templated = render_group_templates(gang, config, doc, variables, sink, warned)
    backend = backend_for(gang.pool).render_gang(gang)
    warnings = {"koordinator": gang_warnings, "kueue": kueue.gang_warnings,
                "volcano": volcano.gang_warnings}.get(gang.pool.backend)
    for msg in warnings(gang) if warnings else []:
        sink.warn(msg, gang.pos)
    pods = _pods(gang, repo, backend, variables, sink, warned, tolerations_only=not delivery)
    if gang.pool.backend == "kueue":
        for msg in kueue.finish_pods(gang, pods):
            sink.warn(msg, gang.pos)
    service = headless_service(gang)
    files = files_configmap(gang)
    group_objs = templated + ([files] if files else []) + backend.objects + ([service] if service else [])
    replace = gang.pool.on_change == "replace"
    group_notes: dict[str, str] = {}
    pod_notes: dict[str, str] = {}
    if not delivery:
        return group_objs, pods
    if repo.config.sync_waves or replace:
        group_notes[SYNC_WAVE], pod_notes[SYNC_WAVE] = "-1", "0"
    if replace:
        revision = {REVISION: gang_revision(gang, repo), SYNC_OPTIONS: REPLACE}
        group_notes.update(revision)
        pod_notes.update(revision)
    if group_notes:
        service_notes = {k: v for k, v in group_notes.items() if k != SYNC_OPTIONS}
        for o in group_objs:
            _annotate(o, service_notes if o is service else group_notes)
        for p in pods:
            _annotate(p, pod_notes)
    return group_objs, pods


def gang_revision(gang: Gang, repo: Repo) -> str:
    """A hash of everything a gang is rendered from: its tasks and their resources, the workflow's settings,
    its pool, the templates the pool uses and the namespace, as toporender reads them (so ``gpu: "4"`` and
    ``gpu: 4``, or a default written out, are the same revision).

    With ``on_change: replace`` every object of the gang carries it, so an edit anywhere in the gang (one task's
    args) changes every object, Argo CD sees the whole gang out of sync and replaces it together: replacing one
    Pod of a gang alone can leave the gang waiting forever for a member."""
    config = repo.config
    pod_names = [*gang.pool.common_pod_template,
                 *(n for platform in gang.pool.platforms.values() for n in platform.override_pod_template)]
    inputs = {
        "tasks": [t.spec for t in gang.tasks],
        "resources": {name: _canonical(r) for name, r in {t.spec.resource: t.resource for t in gang.tasks}.items()},
        "workflow": gang.workflow.spec.workflow.model_copy(update={"groups": None, "tasks": None, "resources": None}),
        "pool": _pool_inputs(gang.pool),
        "group_templates": {n: config.group_templates.get(n) for n in gang.pool.common_group_templates},
        "pod_templates": {n: config.pod_templates.get(n) for n in pod_names},
        "namespace": gang.namespace,
    }
    return hashlib.sha256(_REVISION_INPUTS.dump_json(inputs)).hexdigest()[:16]


_REVISION_INPUTS: Any = TypeAdapter(dict[str, Any])


def _pool_inputs(pool: PoolConfig) -> Any:
    """The pool as the revision hashes it: ``kueue_version`` counts for Kueue pools only, so its arrival left
    the revisions of every other pool's gangs, and with them the running objects, as they were."""
    if pool.backend == "kueue":
        return pool
    data = pool.model_dump()
    del data["kueue_version"]
    return data


def _canonical(resource: ResourceSpec) -> ResourceSpec:
    """A resource with its lists in a fixed order where their order means nothing (as the render treats them);
    the resource itself when they are in that order already (copying it was a fifth of a gang's revision)."""
    topology = sorted(resource.topology, key=lambda r: (r.key, r.group, r.requirementType))
    excluded = sorted(set(resource.nodesExcluded))
    if topology == resource.topology and excluded == resource.nodesExcluded:
        return resource
    return resource.model_copy(update={"topology": topology, "nodesExcluded": excluded})


def _pods(gang: Gang, repo: Repo, backend: GangObjects, variables: Callable[[], dict[str, Any]],
          sink: DiagnosticSink, warned: set[str], tolerations_only: bool = False) -> list[dict[str, Any]]:
    """The gang's pods: by shape where tasks share one, else each built, templated and labelled on its own.

    ``tolerations_only``: where a shape tolerates the same for all its tasks, they share its first pod."""
    shapes = PodShapes(gang, repo.config, backend.scheduler_name, backend.pod_labels, backend.pod_annotations,
                       variables)
    pods: list[dict[str, Any]] = []
    by_platform: dict[str | None, PodTemplates] = {}
    first_of_shape: dict[Any, dict[str, Any]] = {}
    for i, task in enumerate(gang.tasks):
        pod = first_of_shape.get(shapes.keys[i]) if tolerations_only else None
        if pod is not None:
            pods.append(pod)
            continue
        pod = shapes.pod(i)
        if pod is not None and tolerations_only and shapes.tolerations_shared(i):
            first_of_shape[shapes.keys[i]] = pod
        if pod is None:
            platform = task.resource.platform
            templates = by_platform.get(platform)
            if templates is None:
                templates = by_platform[platform] = pod_templates(repo.config, gang, platform)
            pod = base_pod(gang, task, backend.scheduler_name)
            if templates:
                group_vars = variables()
                pod = apply_pod_templates(pod, gang, templates, {**group_vars, **group_vars["TASKS"][i]},
                                          repo.config_doc, sink, warned)
            name = task.spec.name
            finish_pod(pod, gang, name, backend.pod_labels.get(name, {}), backend.pod_annotations.get(name))
        pods.append(pod)
    return pods


def _annotate(obj: dict[str, Any], annotations: dict[str, str]) -> None:
    obj["metadata"].setdefault("annotations", {}).update(annotations)


def check_identities(objects: list[dict[str, Any]], where: Callable[[int], tuple[str, Position | None]]) -> None:
    """Two objects with one identity would silently overwrite each other when applied.

    ``where(i)`` names what produced object ``i`` (its file, and the task or group's position), so both
    places are in the message."""
    seen: dict[tuple[str, str, str, str], int] = {}
    errors: list[Diagnostic] = []
    for i, o in enumerate(objects):
        meta = o.get("metadata", {})
        ident = (str(o.get("apiVersion")), str(o.get("kind")), str(meta.get("namespace", "")), str(meta.get("name")))
        first = seen.setdefault(ident, i)
        if first != i:
            source, pos = where(i)
            other, other_pos = where(first)
            errors.append(Diagnostic(
                f"{ident[1]} '{ident[3]}' is rendered twice: also from {other_pos or other}; rename the workflow, "
                "group or task so the generated names differ", pos or Position(source)))
    if len(objects) > MAX_OBJECTS:
        errors.append(Diagnostic(f"the repo renders {len(objects)} objects, more than the limit of {MAX_OBJECTS}; "
                                 "split it into several Argo CD applications"))
    if errors:
        raise UserError(errors)
