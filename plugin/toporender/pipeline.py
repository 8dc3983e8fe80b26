"""The one render pipeline every host calls.

load (with source positions) -> validate -> expand topology -> pack -> render objects -> emit.
``render_repo`` reads a directory; ``render_documents`` takes in-memory documents (KRM
function). Both return every object or raise :class:`~toporender.errors.UserError`; nothing
is ever half-rendered.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toporender.build.objects import build_gangs, check_backends, check_identities, pool_objects
from toporender.build.templates.policy import check_templates
from toporender.errors import Diagnostic, DiagnosticSink, Position, UserError, fail
from toporender.expand.gangs import Gang, check_config, expand, resolve_namespace
from toporender.load.repo import CONFIG_FILE, Repo, WorkflowFile, check_not_empty, load_config, load_repo, load_workflow
from toporender.load.yaml_source import Document
from toporender.placement.stage import pack_stage


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
    check_backends(repo, sink)
    check_templates(repo.config, repo.config_doc, sink)
    sink.raise_if_errors()
    check_not_empty(repo)
    gangs = expand(repo, namespace=options.namespace, pool=options.pool, sink=sink)
    sink.raise_if_errors()
    return gangs


def render(repo: Repo, options: RenderOptions = RenderOptions(),
           inventory_docs: list[Document] | None = None) -> RenderResult:
    sink = DiagnosticSink()
    if options.sync_waves is not None:
        repo = replace(repo, config=repo.config.model_copy(update={"sync_waves": options.sync_waves}))
    gangs = _expand(repo, options, sink)
    pool_objs = pool_objects(repo, resolve_namespace(repo.config, options.namespace), options.pool_objects)
    built = build_gangs(repo, gangs, sink)
    lock = pack_stage(repo, built, inventory=options.inventory, inventory_docs=inventory_docs,
                      strict=options.strict, sink=sink)

    files: list[RenderedFile] = []
    if pool_objs:
        files.append(RenderedFile(CONFIG_FILE, pool_objs))
    by_source: dict[str, list[dict[str, Any]]] = {}
    for gang, group_objs, pods in built:
        by_source.setdefault(gang.source, []).extend(group_objs + pods)
    files.extend(RenderedFile(src, objs) for src, objs in by_source.items())
    result = RenderResult(files, sink.warnings, lock)
    check_identities((f.source, f.objects) for f in result.files)
    return result


def plan_repo(root: Path, inventory: Path | None = None) -> list[tuple[str, Any]]:
    """(pool name, PlacementPlan) for every pool of the repo that has an inventory (``toporender plan``)."""
    from toporender.placement.stage import plan_pools

    repo = load_repo(root)
    sink = DiagnosticSink()
    gangs = _expand(repo, RenderOptions(), sink)
    pods = {gang.key: pods for gang, _, pods in build_gangs(repo, gangs, sink)}
    inv = None
    if inventory is not None:
        inv = inventory.as_posix()
        if inventory.is_absolute():
            if not inventory.resolve().is_relative_to(root.resolve()):
                raise fail(f"--inventory {inventory} is outside the repo {root}; copy it into the repo, or pass a "
                           "path inside it", Position(str(inventory)))
            inv = inventory.resolve().relative_to(root.resolve()).as_posix()
    return [(name, plan) for name, plan, _ in plan_pools(repo, gangs, pods, inventory=inv)]
