"""The one render pipeline every host calls.

load (with source positions) -> validate -> expand topology -> pack -> render objects -> emit.
``render_repo`` reads a directory; ``render_documents`` takes in-memory documents (KRM
function). Both return every object or raise :class:`~toporender.errors.UserError`; nothing
is ever half-rendered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from toporender.build.backends import GangObjects, backend_for
from toporender.build.pod_shapes import PodShapes
from toporender.build.pods import base_pod, finish_pod, headless_service
from toporender.build.templates import (
    PodTemplates,
    apply_pod_templates,
    check_templates,
    group_variables,
    pod_templates,
    render_group_templates,
)
from toporender.errors import Diagnostic, DiagnosticSink, UserError
from toporender.expand.gangs import Gang, check_config, expand, resolve_namespace
from toporender.lifetime import keep
from toporender.load.repo import CONFIG_FILE, Repo, WorkflowFile, load_config, load_repo, load_workflow
from toporender.load.yaml_source import Document
from toporender.placement.stage import annotate, load_order, lock_text, place, uses_placement

SYNC_WAVE = "argocd.argoproj.io/sync-wave"
MAX_OBJECTS = 200_000


@dataclass(frozen=True)
class RenderOptions:
    """Per-invocation settings a host may override (Argo CD parameters, CLI flags)."""

    namespace: str | None = None
    pool: str | None = None
    inventory: str | None = None
    strict: bool | None = None
    pool_objects: bool | None = None
    sync_waves: bool | None = None


@dataclass(frozen=True)
class RenderedFile:
    source: str
    objects: list[dict[str, Any]]


@dataclass
class RenderResult:
    files: list[RenderedFile]
    warnings: list[Diagnostic] = field(default_factory=list)
    lock: str | None = None
    """Content of toporender.lock after this render (arrival order), when the repo uses placement."""

    @property
    def objects(self) -> list[dict[str, Any]]:
        return [o for f in self.files for o in f.objects]


def render_repo(root: Path, options: RenderOptions = RenderOptions()) -> RenderResult:
    return render(load_repo(root), options)


def render_documents(config: Document | None, workflows: list[Document], options: RenderOptions = RenderOptions(),
                     *, inventory: list[Document] | None = None, root: Path | None = None) -> RenderResult:
    if config is None:
        raise UserError(Diagnostic(f"no repo config ({CONFIG_FILE}) was given; add one with 'pools:'"))
    sink = DiagnosticSink()
    cfg = load_config(config)
    loaded: list[WorkflowFile] = []
    for doc in workflows:
        try:
            loaded.append(load_workflow(doc))
        except UserError as err:
            sink.extend(err)
    sink.raise_if_errors()
    loaded.sort(key=lambda w: (w.source, w.doc.index))
    return render(Repo(root, config, cfg, tuple(loaded)), options, inventory_docs=inventory)


def _expand(repo: Repo, options: RenderOptions, sink: DiagnosticSink) -> list[Gang]:
    """validate -> expand topology."""
    check_config(repo, sink)
    check_templates(repo.config, repo.config_doc, sink)
    sink.raise_if_errors()
    gangs = expand(repo, namespace=options.namespace, pool=options.pool, sink=sink)
    sink.raise_if_errors()
    return gangs


def _build(repo: Repo, gangs: list[Gang], sink: DiagnosticSink) -> list[tuple[Gang, list[Any], list[Any]]]:
    """render objects: every gang with its group objects (templates, PodGroups, Service) and pods."""
    warned: set[str] = set()
    built = [(gang, *render_gang(gang, repo, sink, warned)) for gang in gangs]
    sink.raise_if_errors()
    return built


def render(repo: Repo, options: RenderOptions = RenderOptions(),
           inventory_docs: list[Document] | None = None) -> RenderResult:
    sink = DiagnosticSink()
    if options.sync_waves is not None:
        repo = replace(repo, config=repo.config.model_copy(update={"sync_waves": options.sync_waves}))
    gangs = _expand(repo, options, sink)
    pool_objs = _pool_objects(repo, options)
    built = _build(repo, gangs, sink)
    placing = uses_placement(repo, options.inventory, inventory_docs)
    order = load_order(repo.root) if placing else []
    outcomes = place(repo, gangs, {g.key: pods for g, _, pods in built}, inventory=options.inventory,
                     inventory_docs=inventory_docs, order=order, strict=options.strict, sink=sink)
    sink.raise_if_errors()

    files: list[RenderedFile] = []
    if pool_objs:
        files.append(RenderedFile(CONFIG_FILE, pool_objs))
    by_source: dict[str, list[dict[str, Any]]] = {}
    for gang, group_objs, pods in built:
        if gang.key in outcomes:
            annotate(gang, group_objs, pods, outcomes[gang.key])
        by_source.setdefault(gang.source, []).extend(group_objs + pods)
    files.extend(RenderedFile(src, objs) for src, objs in by_source.items())
    lock = lock_text(gangs, order) if placing and repo.root is not None else None
    result = RenderResult(files, sink.warnings, lock)
    _check_identities(result)
    keep(repo, gangs, built, outcomes)
    return result


def _pool_objects(repo: Repo, options: RenderOptions) -> list[dict[str, Any]]:
    ns = resolve_namespace(repo.config, options.namespace)
    objs: list[dict[str, Any]] = []
    owners: dict[tuple[str, str], str] = {}
    for name in sorted(repo.config.pools):
        pool = repo.config.pools[name]
        wanted = options.pool_objects if options.pool_objects is not None else pool.render_pool_objects
        if not wanted:
            continue
        for obj in backend_for(pool).pool_objects(name, pool, ns):
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


def render_gang(gang: Gang, repo: Repo, sink: DiagnosticSink,
                warned: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Objects of one task group in stream order: (group-template objects, PodGroup(s), Service), Pods."""
    config, doc = repo.config, repo.config_doc
    variables = lru_cache(maxsize=1)(lambda: group_variables(gang, config))
    templated = render_group_templates(gang, config, doc, variables, sink, warned)
    backend = backend_for(gang.pool).render_gang(gang)
    if gang.pool.backend == "koordinator":
        from toporender.build.backends.koordinator import gang_warnings

        for msg in gang_warnings(gang):
            sink.warn(msg, gang.pos)
    pods = _pods(gang, repo, backend, variables, sink, warned)
    service = headless_service(gang)
    group_objs = templated + backend.objects + ([service] if service else [])
    if repo.config.sync_waves:
        for o in group_objs:
            _annotate(o, {SYNC_WAVE: "-1"})
        for p in pods:
            _annotate(p, {SYNC_WAVE: "0"})
    return group_objs, pods


def _pods(gang: Gang, repo: Repo, backend: GangObjects, variables: Callable[[], dict[str, Any]],
          sink: DiagnosticSink, warned: set[str]) -> list[dict[str, Any]]:
    """The gang's pods: by shape where tasks share one (:mod:`toporender.build.pod_shapes`), else each built,
    templated and labelled on its own (the general way, which also reports template problems)."""
    shapes = PodShapes(gang, repo.config, backend.scheduler_name, backend.pod_labels, backend.pod_annotations,
                       variables)
    pods: list[dict[str, Any]] = []
    by_platform: dict[str | None, PodTemplates] = {}
    for i, task in enumerate(gang.tasks):
        pod = shapes.pod(i)
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


def _check_identities(result: RenderResult) -> None:
    """Two objects with one identity would silently overwrite each other when applied."""
    seen: dict[tuple[str, str, str, str], str] = {}
    errors: list[Diagnostic] = []
    count = 0
    for f in result.files:
        for o in f.objects:
            count += 1
            meta = o.get("metadata", {})
            ident = (str(o.get("apiVersion")), str(o.get("kind")), str(meta.get("namespace", "")),
                     str(meta.get("name")))
            if ident in seen:
                errors.append(Diagnostic(
                    f"{ident[1]} '{ident[3]}' is rendered twice (also from {seen[ident]}); rename the workflow, group "
                    "or task so the generated names differ"))
            seen.setdefault(ident, f.source)
    if count > MAX_OBJECTS:
        errors.append(Diagnostic(f"the repo renders {count} objects, more than the limit of {MAX_OBJECTS}; "
                                 "split it into several Argo CD applications"))
    if errors:
        raise UserError(errors)


def plan_repo(root: Path, inventory: Path | None = None) -> list[tuple[str, Any]]:
    """(pool name, PlacementPlan) for every pool of the repo that has an inventory (``toporender plan``)."""
    from toporender.placement.stage import plan_pools

    repo = load_repo(root)
    sink = DiagnosticSink()
    gangs = _expand(repo, RenderOptions(), sink)
    pods = {gang.key: pods for gang, _, pods in _build(repo, gangs, sink)}
    inv = None
    if inventory is not None:
        inv = inventory.resolve().relative_to(root.resolve()).as_posix() if inventory.is_absolute() else \
            inventory.as_posix()
    return [(name, plan) for name, plan, _ in plan_pools(repo, gangs, pods, inventory=inv)]
