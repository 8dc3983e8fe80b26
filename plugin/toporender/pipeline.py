"""The one render pipeline every host calls.

load (with source positions) -> validate -> expand topology -> pack -> render objects -> verify -> emit.
``render_repo`` reads a directory; ``render_documents`` takes in-memory documents (KRM
function). Both return every object or raise :class:`~toporender.errors.UserError`; nothing
is ever half-rendered, and nothing is returned that fails the output checks (:func:`verify_output`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toporender.build.objects import (
    BuiltGang,
    build_gang,
    build_gangs,
    check_backends,
    check_identities,
    pool_objects,
)
from toporender.build.templates.apply import from_group_template
from toporender.build.templates.policy import check_templates
from toporender.cache import Found, Plans, Store, diagnostics_from_json, diagnostics_to_json, find, pack_entry
from toporender.errors import Diagnostic, DiagnosticSink, Position, UserError, fail
from toporender.expand.gangs import Gang, check_config, expand, resolve_namespace
from toporender.jobs import worth_spreading
from toporender.load.models import RepoConfig
from toporender.load.repo import (
    CONFIG_FILE,
    Repo,
    WorkflowFile,
    check_not_empty,
    iter_workflows,
    load_config,
    load_repo,
    load_repo_config,
    load_workflow,
    read_workflow,
    workflow_sizes,
)
from toporender.load.yaml_source import Document
from toporender.options import RenderOptions
from toporender.placement.stage import PlanMemo, pack_stage


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
    owners: list[Gang | None] = field(default_factory=list, repr=False)
    """Per object of :attr:`objects`, the gang that made it (None: the pool config), to point at its source."""

    @property
    def objects(self) -> list[dict[str, Any]]:
        return [o for f in self.files for o in f.objects]


def render_repo(root: Path, options: RenderOptions = RenderOptions(), store: Store | None = None) -> RenderResult:
    """Render the repo in ``root``; with ``store``, a render of the same inputs comes from the cache.

    A result from the cache has its files, warnings and lock, but no :attr:`RenderResult.owners` (hosts that
    point at sources for output problems render uncached)."""
    if store is None:
        return render(load_repo(root), options)
    import orjson

    def body(result: RenderResult) -> bytes | None:
        files = [[f.source, f.objects] for f in result.files]
        raw = orjson.dumps(files)
        return raw if orjson.loads(raw) == files else None  # only what JSON gives back exactly

    meta, raw, fresh = _cached(root, options, store, "result", body)
    if fresh is not None:
        return fresh
    if meta is None:
        return render(load_repo(root), options)
    files = [RenderedFile(str(src), objs) for src, objs in orjson.loads(raw)]
    return RenderResult(files, diagnostics_from_json(meta["warnings"]), meta["lock"])


def render_stream(root: Path, options: RenderOptions, fmt: str, store: Store | None = None,
                  found: Found | None = None) -> tuple[Sequence[bytes | memoryview], list[Diagnostic]]:
    """The repo's objects as a YAML or JSON-lines stream (UTF-8 pieces) and the render's warnings; with
    ``store``, straight from the cache when the inputs are the same as a render before (``found``: the
    lookup a caller made already with :func:`toporender.cache.find`)."""
    from toporender.emit.stream import dump_chunks

    fresh = None
    if store is not None:
        meta, raw, fresh = _cached(root, options, store, f"stream-{fmt}",
                                   lambda result: b"".join(dump_chunks(result.objects, fmt)), found)
        if meta is not None:
            return ([raw] if raw else []), diagnostics_from_json(meta["warnings"])
    result = fresh or render(load_repo(root), options)
    return dump_chunks(result.objects, fmt), result.warnings


def _cached(root: Path, options: RenderOptions, store: Store, kind: str,
            body: Callable[[RenderResult], bytes | None], found: Found | None = None
            ) -> tuple[dict[str, Any] | None, bytes | memoryview, RenderResult | None]:
    """(meta, body, None) of the cached render of ``root``, or (meta, body, result) of a render made now
    (and stored when the inputs held still), or (None, b"", None) when the repo cannot be cached and the caller
    renders as without a cache. A bad input raises from the render here exactly as it does uncached.

    ``found`` is what :func:`toporender.cache.find` gave a caller that looked the render up already. The key
    is taken again after the render: a file edited while rendering stores nothing."""
    found = found or find(store, root, kind, options)
    if found is None:
        return None, b"", None
    if found.meta is not None:
        return found.meta, found.body, None
    repo = load_repo(root)
    result = render(repo, options, memo=Plans(store))
    named = {n for n in (options.inventory, repo.config.inventory, *(p.inventory for p in repo.config.pools.values()))
             if n is not None}
    out = body(result)
    after = find(store, root, kind, options, read=False)
    if out is None or after is None or after.key != found.key or \
            tuple(repo.config.workflows) != found.inputs.patterns or tuple(sorted(named)) != found.inputs.inventories:
        return None, b"", result
    meta = {"warnings": diagnostics_to_json(result.warnings), "lock": result.lock}
    store.write("render", found.key, pack_entry(meta, out))
    return meta, out, result


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
    _check_repo_config(repo, sink)
    sink.raise_if_errors()
    check_not_empty(repo)
    gangs = expand(repo, namespace=options.namespace, pool=options.pool, sink=sink)
    sink.raise_if_errors()
    return gangs


def _check_repo_config(repo: Repo, sink: DiagnosticSink) -> None:
    check_config(repo, sink)
    check_backends(repo, sink)
    check_templates(repo.config, repo.config_doc, sink)


def render(repo: Repo, options: RenderOptions = RenderOptions(),
           inventory_docs: list[Document] | None = None, memo: PlanMemo | None = None) -> RenderResult:
    """The pipeline over a loaded repo; ``memo`` keeps the packer's outcomes between renders."""
    sink = DiagnosticSink()
    repo, gangs, pool_objs = _expanded(repo, options, sink, inventory_docs)
    built = _built(repo, gangs, sink)
    lock = pack_stage(repo, built, inventory=options.inventory, inventory_docs=inventory_docs,
                      strict=options.strict, sink=sink, memo=memo)

    files: list[RenderedFile] = []
    owners: list[Gang | None] = []
    if pool_objs:
        files.append(RenderedFile(CONFIG_FILE, pool_objs))
        owners.extend(None for _ in pool_objs)
    by_source: dict[str, list[BuiltGang]] = {}
    for item in built:
        by_source.setdefault(item[0].source, []).append(item)
    for src, items in by_source.items():
        objs = [obj for _, group_objs, pods in items for obj in group_objs + pods]
        files.append(RenderedFile(src, objs))
        owners.extend(gang for gang, group_objs, pods in items for _ in range(len(group_objs) + len(pods)))
    result = RenderResult(files, sink.warnings, lock, owners)
    objects = result.objects
    check_identities(objects, lambda i: _origin(repo, objects[i], owners[i]))
    verify_output(repo, objects, owners)
    return result


def with_options(repo: Repo, options: RenderOptions) -> Repo:
    """The repo as this render reads it: ``options.sync_waves`` overrides the config's."""
    if options.sync_waves is None:
        return repo
    return replace(repo, config=repo.config.model_copy(update={"sync_waves": options.sync_waves}))


Tagged = list[tuple[Diagnostic, str | None]]
"""A file's build warnings, each with the template it warns about once per render (None: every time)."""


class _Tagging(DiagnosticSink):
    """A sink that tags each warning with the template name its build step adds to ``warned`` just before
    warning, so a render that builds some files and takes the rest from the cache can replay the once-per-render
    warnings in the order a whole render gives them."""

    def __init__(self, warned: set[str]) -> None:
        super().__init__()
        self.warned = warned
        self.tagged: Tagged = []

    def warn(self, message: str, pos: Position | None = None) -> None:
        super().warn(message, pos)
        new = self.warned.difference(tag for _, tag in self.tagged if tag is not None)
        self.tagged.append((self.warnings[-1], min(new) if new else None))


def build_files(repo: Repo, options: RenderOptions
                ) -> tuple[Repo, list[dict[str, Any]], dict[str, tuple[list[BuiltGang], Tagged]]]:
    """The part of :func:`render` that reads the config and each workflow file on its own: validate, expand
    and build each file's gangs (without placement), each file with its own once-per-render warnings. With the
    pool objects; raises what :func:`render` raises for the same files, though not always the same errors.

    The render cache builds only the files it has not seen; the checks across files (workflow names, object
    identities) and placement are its to run over what it stored of every file (:mod:`toporender.rerender`)."""
    repo, gangs, pool_objs = _expanded(repo, options, DiagnosticSink())
    by_source: dict[str, list[Gang]] = {}
    for gang in gangs:
        by_source.setdefault(gang.source, []).append(gang)
    files: dict[str, tuple[list[BuiltGang], Tagged]] = {}
    for source, members in by_source.items():
        warned: set[str] = set()
        tagging = _Tagging(warned)
        files[source] = (_built(repo, members, tagging, warned), tagging.tagged)
    return repo, pool_objs, files


def _expanded(repo: Repo, options: RenderOptions, sink: DiagnosticSink,
              inventory_docs: list[Document] | None = None) -> tuple[Repo, list[Gang], list[dict[str, Any]]]:
    """The first steps of every render: the repo as the options read it, its gangs, and its pool objects."""
    repo = with_options(repo, options)
    gangs = _expand(repo, options, sink)
    pool_objs = pool_objects(repo, resolve_namespace(repo.config, options.namespace), options.pool_objects,
                             inventory=options.inventory, inventory_docs=inventory_docs)
    return repo, gangs, pool_objs


def _built(repo: Repo, gangs: list[Gang], sink: DiagnosticSink, warned: set[str] | None = None) -> list[BuiltGang]:
    """``gangs`` built, and held to the restricted Pod Security profile when the repo asks for it."""
    built = build_gangs(repo, gangs, sink, warned)
    if repo.config.policy.pod_security == "restricted":
        check_restricted(repo, built)
    return built


def _origin(repo: Repo, obj: dict[str, Any], owner: Gang | None) -> tuple[str, Position | None]:
    """The file that produced ``obj`` and the position of its task (a Pod) or group (anything else)."""
    if owner is None:
        return CONFIG_FILE, repo.config_doc.pos(("pools",))
    if obj.get("kind") == "Pod":
        name = obj.get("metadata", {}).get("name")
        for j, task in enumerate(owner.tasks):
            if task.pod_name == name:
                loc = owner.loc + ("tasks", j) if "groups" in owner.loc else owner.loc
                return owner.source, owner.workflow.pos(loc)
    return owner.source, owner.pos


def check_restricted(repo: Repo, built: list[BuiltGang]) -> None:
    """Every Pod meets what the "restricted" Pod Security Standard requires, at the task that made it."""
    from toporender.build.templates.security import forbidden, restricted_missing

    errors = []
    for gang, _, pods in built:
        for pod in pods:
            problems = restricted_missing(pod) + forbidden(pod, "restricted")
            if problems:
                _, pos = _origin(repo, pod, gang)
                path, message = problems[0]
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                errors.append(Diagnostic(
                    f"Pod '{pod['metadata']['name']}': {'.'.join(map(str, path))} {message}{more}; set it in a pod "
                    "template of the pool, or lower policy.pod_security in toporender.yaml", pos))
    if errors:
        raise UserError(errors)


def kai_schema_version(config: RepoConfig) -> str:
    """The KAI schema and webhook rules the repo's objects are checked against: v0.14 only when every KAI pool
    renders for v0.14."""
    kai = {p.kai_version for p in config.pools.values() if p.backend == "kai"}
    return "v0.14.0" if kai == {"v0.14"} else "main"


def verify_output(repo: Repo, objects: list[dict[str, Any]], owners: list[Gang | None]) -> None:
    """Refuse to hand a host anything the cluster would reject or misread.

    Runs :func:`toporender.validation.output_problems` over the whole render, and writes nothing when it finds
    a problem. An object a group template made is the template's to fix, so the message points at the
    template. Anything else toporender built itself, from inputs it has already checked: that is a bug in
    toporender, and the message says so and names the workflow group (or pool config) it came from.

    A render from the cache's per-file entries (:mod:`toporender.rerender`) runs the same check on the objects it
    builds or annotates, with the pool objects, and writes the other files' bytes as stored: those passed this
    check in the render that stored them, and the rules spanning objects link only one gang's objects and the
    pool objects, apart from identities, which it checks over every file. A problem sends it here."""
    from toporender.validation import output_problems

    problems = output_problems(objects, kai_version=kai_schema_version(repo.config))
    if problems:
        raise UserError(_positioned(repo, objects, owners, problems, bug=True))


def check_rendered(repo: Repo, result: RenderResult) -> list[Diagnostic]:
    """Every rule :mod:`toporender.validation` knows, Pod bodies included (``validate --output``), each problem
    at the task, group or group template that made the object."""
    from toporender.validation import object_problems

    objects = result.objects
    problems = object_problems(objects, kai_version=kai_schema_version(repo.config))
    return _positioned(repo, objects, result.owners, problems, bug=False)


def _positioned(repo: Repo, objects: list[dict[str, Any]], owners: list[Gang | None],
                problems: list[tuple[int, str]], *, bug: bool) -> list[Diagnostic]:
    """Output problems as diagnostics at their source: an object a group template made is the template's to fix;
    anything else was built from the workflow task (a Pod), group or pool config at its position. With ``bug``
    (the check every render runs, on objects built from inputs already checked) the message says so."""
    errors = []
    for index, problem in problems:
        obj, owner = objects[index], owners[index] if index < len(owners) else None
        if owner is not None and from_group_template(obj):
            names = [n for n in owner.pool.common_group_templates
                     if repo.config.group_templates[n].get("kind") == obj.get("kind")]
            name = (names or list(owner.pool.common_group_templates))[-1]
            errors.append(Diagnostic(
                f"group template '{name}' renders an object the cluster would reject: {problem}; fix the template "
                f"(rendered for group '{owner.name}' of {owner.source})",
                repo.config_doc.pos(("group_templates", name))))
            continue
        _, pos = _origin(repo, obj, owner)
        if bug:
            errors.append(Diagnostic(
                f"toporender rendered an object the cluster would reject or misread, so nothing was written: "
                f"{problem}. This is a bug in toporender unless the field comes from one of your pod templates; "
                "please report it with this message", pos))
        else:
            errors.append(Diagnostic(problem, pos))
    return errors


def plan_repo(root: Path, inventory: Path | None = None, jobs: int = 1) -> list[tuple[str, Any]]:
    """(pool name, PlacementPlan) for every pool of the repo that has an inventory (``toporender plan``).

    The repo is read one workflow at a time, and only each gang's demand is kept: the models and Pods of a
    10,000-workflow repo were most of a plan's memory. Problems are reported as a render reports them, in its
    order: files that cannot be loaded, else the config's cross-field problems, else everything wrong in
    expanding and building.

    With ``jobs`` > 1 and files worth it (:func:`toporender.jobs.worth_spreading`), worker processes read the
    files (chunks of them, results taken in file order) while this process reads the inventory, builds its
    topology tree and compiles the gangs for the packer as they come; each pool's packer packs each gang as
    soon as the gangs before it in arrival order have come (:class:`~toporender.placement.stage.PackAhead`). Any
    problem they meet sends the repo through this process one file at a time, so messages and their order never
    depend on ``jobs``."""
    from toporender.placement.outcomes import load_order
    from toporender.placement.stage import PackAhead, plan_pools

    config_doc, config = load_repo_config(root)
    repo = Repo(root, config_doc, config, ())
    config_sink = DiagnosticSink()
    _check_repo_config(repo, config_sink)
    sizes = workflow_sizes(root, config)
    paths = [rel for rel, _ in sizes]
    inventories: dict[str, Any] = {}
    trees: dict[str, Any] = {}
    ahead: list[PackAhead] = []

    def meanwhile(chunks: Iterator[_Chunk | None]) -> None:
        """Read the inventories and build their trees, then pack the gangs whose turn it is as the workers send
        them."""
        _read_inventories(repo, inventory, inventories, trees)
        if not trees:
            return
        try:
            ahead.append(PackAhead(trees, load_order(root)))
            for chunk in chunks:
                if chunk is None:
                    return
                ahead[0].feed(chunk[1])
        except Exception:  # noqa: BLE001, S110 - what a worker raised is _plan_in_processes's to handle
            return

    planned = None
    if jobs > 1 and not config_sink.errors and worth_spreading(size for _, size in sizes):
        planned = _plan_in_processes(repo, paths, jobs, meanwhile)
    queued, demands = planned or _plan_here(repo, paths, config_sink)
    inv = _inventory_in_repo(root, inventory)
    return [(name, plan) for name, plan, _ in plan_pools(repo, queued, demands, inventory=inv,
                                                           inventories=inventories, trees=trees,
                                                           ahead=ahead[0] if planned and ahead else None)]


def _plan_here(repo: Repo, paths: list[str], config_sink: DiagnosticSink) -> tuple[list[Queued], dict[str, Any]]:
    """Each gang's packing key and demand, the files read in this process; raises every problem as a render does."""
    assert repo.root is not None
    load_sink, sink = DiagnosticSink(), DiagnosticSink()
    demands: dict[str, Any] = {}
    queued: list[Queued] = []
    names: dict[str, str] = {}
    warned: set[str] = set()
    for wf in iter_workflows(repo.root, repo.config, load_sink, paths):
        if load_sink.errors or config_sink.errors:
            continue  # reading on only to report every file that cannot be loaded
        for key, pool_name, demand in _file_demands(replace(repo, workflows=(wf,)), sink, names, warned):
            demands[key] = demand
            queued.append(Queued(key, pool_name))
    load_sink.raise_if_errors()
    config_sink.raise_if_errors()
    if not names:
        check_not_empty(repo)
    sink.raise_if_errors()
    return queued, demands


def _file_demands(one: Repo, sink: DiagnosticSink, names: dict[str, str], warned: set[str]
                  ) -> list[tuple[str, str, Any]]:
    """(key, pool, demand) of every gang of the one workflow of ``one``; problems go to ``sink``."""
    from toporender.placement.stage import gang_demand

    return [(gang.key, gang.pool_name, gang_demand(gang, build_gang(gang, one, sink, warned, delivery=False)[1]))
            for gang in expand(one, sink=sink, names=names)]


def _plan_in_processes(repo: Repo, paths: list[str], jobs: int, meanwhile: Callable[[Iterator[_Chunk | None]], None]
                       ) -> tuple[list[Queued], dict[str, Any]] | None:
    """:func:`_plan_here` with the files read in ``jobs`` worker processes; None when any file has a problem
    (or two files a workflow name), for :func:`_plan_here` to report in its order."""
    from toporender.errors import WorkerLost
    from toporender.jobs import map_in_processes

    size = max(1, min(128, -(-len(paths) // (jobs * 8))))
    try:
        chunks = map_in_processes(_plan_chunk, [paths[i:i + size] for i in range(0, len(paths), size)], jobs,
                                  initializer=_plan_worker, initargs=(repo,), meanwhile=meanwhile)
    except WorkerLost:
        raise
    except Exception:  # noqa: BLE001 - whatever a file raises, this process raises reading it on its own
        return None
    names: set[str] = set()
    demands: dict[str, Any] = {}
    queued: list[Queued] = []
    for chunk in chunks:
        if chunk is None or not names.isdisjoint(chunk[0]):
            return None
        names.update(chunk[0])
        for key, pool_name, demand in chunk[1]:
            demands[key] = demand
            queued.append(Queued(key, pool_name))
    return queued, demands


_WORKER_REPO: list[Repo] = []


def _plan_worker(repo: Repo) -> None:
    """Set a worker process up with the repo's config (:func:`_plan_chunk` reads the files)."""
    _WORKER_REPO[:] = [repo]


_Chunk = tuple[list[str], list[tuple[str, str, Any]]]
"""What a worker sends for a chunk of files: the workflow names, and each gang's key, pool and demand."""


def _plan_chunk(paths: list[str]) -> _Chunk | None:
    """In a worker: the workflow names (as compared for uniqueness) and the gangs' (key, pool, demand) of the
    files ``paths``, or None as soon as one has a problem."""
    repo = _WORKER_REPO[0]
    assert repo.root is not None
    sink = DiagnosticSink()
    names: dict[str, str] = {}
    warned: set[str] = set()
    out: list[tuple[str, str, Any]] = []
    for path in paths:
        try:
            wf = read_workflow(repo.root, path)
        except UserError:
            return None
        out += _file_demands(replace(repo, workflows=(wf,)), sink, names, warned)
        if sink.errors:
            return None
    return list(names), out


def _read_inventories(repo: Repo, inventory: Path | None, into: dict[str, Any], trees: dict[str, Any]) -> None:
    """Read every pool's inventory ahead and build its topology tree, for :func:`plan_pools` to pack into; one
    that cannot be read or built is left for it to read again, and report in its turn. A pool without gangs
    costs its tree for nothing (its inventory is read by a render all the same)."""
    from toporender.placement.stage import pool_tree

    try:
        inv = _inventory_in_repo(repo.root, inventory) if repo.root is not None else None
    except UserError:
        return
    for pool_name in sorted(repo.config.pools):
        try:
            tree = pool_tree(repo, pool_name, inv, into)
        except Exception:  # noqa: BLE001, S112 - reported, or raised, where plan_pools reads it
            continue
        if tree is not None:
            trees[pool_name] = tree


def _inventory_in_repo(root: Path, inventory: Path | None) -> str | None:
    """``--inventory`` as a path inside the repo (the form the config gives), refused when outside it."""
    if inventory is None:
        return None
    if not inventory.is_absolute():
        return inventory.as_posix()
    if not inventory.resolve().is_relative_to(root.resolve()):
        raise fail(f"--inventory {inventory} is outside the repo {root}; copy it into the repo, or pass a "
                   "path inside it", Position(str(inventory)))
    return inventory.resolve().relative_to(root.resolve()).as_posix()


@dataclass(frozen=True)
class Queued:
    """What packing needs of a gang besides its demand: its key (arrival order) and its pool."""

    key: str
    pool_name: str
