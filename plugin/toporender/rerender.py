"""Re-render from the render cache file by file, so an edit to one workflow costs that file, not the repo.

Besides whole renders, the cache (:mod:`toporender.cache`) keeps, in plain JSON or as the bytes written:

* ``context``, per config, options and toporender code: each pool's placement settings and the pool objects;
* ``file``, per workflow file (its path and SHA-256, and the context): what the checks across files and the
  packer need of it (the workflow's name; each gang's key, pool, tasks and demand; each object's identity; its
  build warnings), and ``objects``: its objects as built, before placement annotates them;
* ``emit``: a file's objects annotated with given packing outcomes and written in one format, the outcomes in
  the key;
* ``rows``, beside the plan memo (:class:`toporender.cache.Plans`): its rows as text, so a render reads only
  the rows of the gangs it annotates; ``inventory``: a compact inventory's nodes, keyed by its bytes, for a
  packing of new demands.

A render reads them; the workflow files it holds nothing for are loaded, expanded and built as a whole render
builds them (:func:`toporender.pipeline.build_files`), and only those import the loader and the builders. What
spans files runs on the stored summaries: unique workflow names and object identities, placement (the plan memo
when no demand and no inventory byte changed, else a packing of the inventory), the lock, and the warnings, in
the order a whole render gives them. A file whose outcomes are those its ``emit`` entry was stored with is
written from it; any other file is annotated and written again.

The output check (:func:`toporender.pipeline.verify_output`) covers what this render made: every object built
or annotated here is checked with the pool objects by :func:`toporender.validation.output_problems`. That
holds every rule spanning objects, as those link the objects of one gang to each other and to the pool objects;
identities, the one rule across gangs, are checked over every file's stored identities. Bytes from an ``emit``
entry are not checked again: they were checked, with the same pool objects, by the render that stored them,
and a file's entries are stored only from a render that passed every check.

Nothing here reports an error. Anything unusual (an error in any input, a stored entry that does not read
back, a Volcano pool whose HyperNodes come from the inventory) hands the render to the whole pipeline, which
renders or fails exactly as without a cache, so the output is the same bytes either way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toporender.cache import (
    FORMAT,
    Found,
    Plans,
    Store,
    Taken,
    code_fingerprint,
    diagnostics_from_json,
    diagnostics_to_json,
    digest,
    find,
    pack_entry,
)
from toporender.errors import Diagnostic, Position, UserError
from toporender.options import RenderOptions

if TYPE_CHECKING:
    from toporender.expand.gangs import Gang
    from toporender.placement.inventory import Inventory
    from toporender.placement.outcomes import GangOutcome

MAX_OBJECTS = 1_000_000
""":data:`toporender.build.objects.MAX_OBJECTS` (a test keeps them equal; that module imports pydantic)."""
MAX_WORKFLOW_FILES = 10_000
MAX_TOTAL_BYTES = 256 * 1024 * 1024
""":mod:`toporender.load.repo`'s limits, past which the whole pipeline reports the repo."""


class _Whole(Exception):
    """This render goes to the whole pipeline."""


@dataclass
class _File:
    """One workflow file: its entry key, its summary, and when built in this render, its gangs and objects."""

    rel: str
    key: str
    summary: dict[str, Any]
    gangs: list[Gang] | None = None
    objects: list[list[list[dict[str, Any]]]] | None = None
    stored: bytes | None = None
    """The ``objects`` entry of a file built now (None: its objects do not read back from JSON exactly)."""


@dataclass
class _Render:
    """A render made file by file: the stream's pieces, its warnings and lock, and the entries to store."""

    pieces: list[bytes | memoryview] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    lock: str | None = None
    writes: list[tuple[str, str, bytes]] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    """The ``emit`` entry of every file, in stream order (after ``pieces[:head]``, the pool objects)."""
    head: int = 0


def render_stream(root: Path, options: RenderOptions, fmt: str, store: Store | None = None,
                  found: Found | None = None) -> tuple[Sequence[bytes | memoryview], list[Diagnostic]]:
    """:func:`toporender.pipeline.render_stream`, rendering only the workflow files the cache holds nothing for
    when it holds no whole render of these inputs (``found``: a lookup made already with
    :func:`toporender.cache.find`)."""
    if store is not None:
        found = found or find(store, root, f"stream-{fmt}", options)
        if found is not None and found.meta is not None:
            return found.pieces, diagnostics_from_json(found.meta["warnings"])
        if found is not None and found.taken is not None:
            try:
                done = _by_file(root, options, fmt, store, found.taken)
            except (_Whole, OSError, KeyError, TypeError, ValueError, IndexError, AttributeError):
                done = None  # a file that went away, or stored data no render writes: the whole pipeline decides
            if done is not None:
                store_render(store, root, f"stream-{fmt}", options, found.taken, done)
                return done.pieces, done.warnings
    from toporender.pipeline import render_stream as whole

    return whole(root, options, fmt, store, found)


def _read_json(store: Store, kind: str, key: str) -> Any:
    import orjson

    raw = store.read(kind, key)
    try:
        return orjson.loads(raw) if raw is not None else None
    except orjson.JSONDecodeError:
        return None


def _context(data: Any) -> dict[str, Any] | None:
    """A ``context`` entry as a render stored it, or None."""
    if not isinstance(data, dict) or not isinstance(data.get("pools"), dict) or \
            not isinstance(data.get("pool_objects"), list) or not isinstance(data.get("kai"), str) or \
            not isinstance(data.get("placement"), bool) or not all(isinstance(o, dict) for o in data["pool_objects"]):
        return None
    for pool in data["pools"].values():
        if not isinstance(pool, dict) or not isinstance(pool.get("levels"), list) or \
                not isinstance(pool.get("strict"), bool) or pool.get("pin") not in ("none", "soft", "hard") or \
                not (pool.get("inventory") is None or isinstance(pool.get("inventory"), str)) or \
                not isinstance(pool.get("node_selector"), dict):
            return None
    return data


def _summary(data: Any) -> dict[str, Any] | None:
    """A ``file`` entry as a render stored it, or None."""
    try:
        if not isinstance(data["name"], str) or not all(isinstance(i, str) for i in data["idents"]):
            return None
        diagnostics_from_json([w for w, _ in data["warnings"]])
        if not all(t is None or isinstance(t, str) for _, t in data["warnings"]):
            return None
        for gang in data["gangs"]:
            if not all(isinstance(gang[k], str) for k in ("key", "name", "pool")) or \
                    not isinstance(gang["loc"], list) or not all(isinstance(t, str) for t in gang["tasks"]) or \
                    type(gang["groups"]) is not int or not isinstance(gang["demand"], str):
                return None
        return data
    except (KeyError, TypeError, ValueError):
        return None


def _by_file(root: Path, options: RenderOptions, fmt: str, store: Store, taken: Taken) -> _Render | None:
    """The render of ``root`` from the per-file entries, building the files without one; None when the
    repo is not one to render this way."""
    files = taken.files
    if not files or len(files) > MAX_WORKFLOW_FILES or sum(size for _, _, size in files) > MAX_TOTAL_BYTES:
        return None
    context_key = digest(FORMAT, code_fingerprint(), "context", taken.config, repr(options))
    context = _context(_read_json(store, "context", context_key))
    out = _Render()
    loaded: list[_File | str] = []
    for rel, sha, _ in files:
        key = digest(context_key, "file", rel, sha)
        summary = _summary(_read_json(store, "file", key)) if context is not None else None
        loaded.append(_File(rel, key, summary) if summary is not None else key)
    new_context = context is None
    if context is None or any(isinstance(f, str) for f in loaded):
        context, built = _build(root, options, taken, loaded)
        if context is None:
            return None
        if new_context:
            out.writes.append(("context", context_key, _json(context)))
    else:
        built = [f for f in loaded if isinstance(f, _File)]

    _check_across(built, context["pool_objects"])
    out.warnings = _replay_warnings(built)
    outcomes = _Outcomes()
    if context["placement"]:
        outcomes, lock, placement_warnings = _place(root, store, context, built, out.writes)
        out.lock = lock
        out.warnings += placement_warnings

    def rebuild(missing: list[_File]) -> None:
        """Build again the files whose stored objects are gone or damaged; their summaries must not change."""
        _, again = _build(root, options, taken, [f.key if f in missing else f for f in built])
        for old, new in zip(built, again):
            if old in missing:
                if new.summary != old.summary:
                    raise _Whole
                old.gangs, old.objects, old.stored = new.gangs, new.objects, new.stored

    _write(store, fmt, context, built, outcomes, out, new_context, rebuild)
    return out


def _json(data: Any) -> bytes:
    import orjson

    return orjson.dumps(data)


def _build(root: Path, options: RenderOptions, taken: Taken, loaded: list[_File | str]
           ) -> tuple[dict[str, Any] | None, list[_File]]:
    """Load the config and the workflow files without an entry (every file when the context is new), and
    build them as a whole render does; raises :class:`_Whole` on any problem."""
    import orjson

    from toporender import pipeline
    from toporender.build.backends import volcano
    from toporender.expand.naming import normalize
    from toporender.load.repo import Repo, load_repo_config, load_workflow, single_document
    from toporender.placement.outcomes import demand_from_json
    from toporender.placement.stage import gang_demand, uses_placement

    fresh = [f if isinstance(f, str) else f.key for f in loaded]
    wanted = {rel for (rel, _, _), f in zip(taken.files, loaded) if isinstance(f, str)}
    try:
        config_doc, config = load_repo_config(root)
        named = {n for n in (options.inventory, config.inventory, *(p.inventory for p in config.pools.values()))
                 if n is not None}
        if tuple(config.workflows) != taken.inputs.patterns or tuple(sorted(named)) != taken.inputs.inventories:
            raise _Whole
        for pool in config.pools.values():
            renders = options.pool_objects if options.pool_objects is not None else pool.render_pool_objects
            if renders and pool.backend == "volcano" and \
                    [k for k in pool.topology_keys if k.label != volcano.HOSTNAME]:
                raise _Whole  # its HyperNodes come from the inventory, which the context's key does not cover
        workflows = tuple(load_workflow(single_document(root / rel, rel)) for rel, _, _ in taken.files
                          if rel in wanted)
        repo, pool_objects, by_source = pipeline.build_files(Repo(root, config_doc, config, workflows), options)
    except UserError:
        raise _Whole from None
    context = {
        "pools": {name: {"levels": [k.label for k in pool.topology_keys], "node_selector": dict(pool.node_selector),
                         "strict": pool.strict if options.strict is None else options.strict, "pin": pool.pin,
                         "inventory": options.inventory or pool.inventory or repo.config.inventory}
                  for name, pool in sorted(repo.config.pools.items())},
        "pool_objects": pool_objects,
        "kai": pipeline.kai_schema_version(repo.config),
        "placement": uses_placement(repo, options.inventory, None),
    }
    try:
        if orjson.loads(_json(context)) != context:
            return None, []
    except TypeError:
        return None, []
    names = {wf.source: normalize(wf.name) for wf in workflows}
    files: list[_File] = []
    for (rel, _, _), item, key in zip(taken.files, loaded, fresh):
        if isinstance(item, _File):
            files.append(item)
            continue
        built, tagged = by_source.get(rel, ([], []))
        demands = [gang_demand(gang, pods) for gang, _, pods in built]
        objects = [[group_objects, pods] for _, group_objects, pods in built]
        summaries = [{"key": g.key, "name": g.name, "pool": g.pool_name, "loc": list(g.loc),
                       "tasks": [t.spec.name for t in g.tasks], "groups": len(group_objects),
                       "demand": orjson.dumps(demand).decode()}
                      for (g, group_objects, _), demand in zip(built, demands)]
        summary = {
            "name": names[rel],
            "gangs": summaries,
            "warnings": [[diagnostics_to_json([d])[0], tag] for d, tag in tagged],
            "idents": [_identity(o) for _, group_objects, pods in built for o in group_objects + pods],
        }
        stored: bytes | None = None
        try:
            raw = orjson.dumps(objects)
            if orjson.loads(raw) == objects and all(
                    demand_from_json(orjson.loads(str(g["demand"]))) == d for g, d in zip(summaries, demands)):
                stored = raw
        except (TypeError, ValueError, KeyError):
            stored = None
        files.append(_File(rel, key, summary, [g for g, _, _ in built], objects, stored))
    return context, files


def _identity(obj: dict[str, Any]) -> str:
    """An object's kind and name, as one string. Coarser than the identities the whole render compares (API
    group or version, kind, namespace, name) on purpose: two objects it calls the same always meet here, and
    any other meeting (one name in two namespaces) only sends the render to the whole pipeline."""
    meta = obj.get("metadata")
    return f"{obj.get('kind')}\n{meta.get('name') if isinstance(meta, dict) else None}"


def _check_across(files: list[_File], pool_objects: list[dict[str, Any]]) -> None:
    """What a whole render checks across files, on the summaries: workflow names and object identities."""
    names = [f.summary["name"] for f in files]
    if len(set(names)) != len(names):
        raise _Whole
    idents = [_identity(o) for o in pool_objects]
    for f in files:
        idents += f.summary["idents"]
    if len(idents) > MAX_OBJECTS or len(set(idents)) != len(idents):
        raise _Whole


def _replay_warnings(files: list[_File]) -> list[Diagnostic]:
    """Every file's build warnings in file order, a template's once-per-render warning only the first time."""
    warned: set[str] = set()
    out: list[Diagnostic] = []
    for f in files:
        for item, tag in f.summary["warnings"]:
            if tag is not None:
                if tag in warned:
                    continue
                warned.add(tag)
            out += diagnostics_from_json([item])
    return out


class _Outcomes:
    """Each placed gang's outcome as the orjson text of its plan memo row (a row of
    :func:`toporender.placement.outcomes.outcomes_json`), read into a ``GangOutcome`` only for the gangs whose
    objects are annotated in this render; ``direct`` holds what was packed now, used as it is."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}
        self.direct: dict[str, GangOutcome] = {}
        self.inexact: set[str] = set()
        """Gangs packed now whose rows do not read back as their outcomes: their files' bytes are not stored."""

    def outcome(self, key: str) -> GangOutcome:
        import orjson

        from toporender.placement.outcomes import outcomes_from_json

        if key in self.direct:
            return self.direct[key]
        found = outcomes_from_json([orjson.loads(self.rows[key])])
        if found is None or key not in found:
            raise _Whole
        return found[key]


def _rows(data: Any, keys: list[str]) -> list[list[Any]] | None:
    """The ``rows`` entry of a pool's packing, ``[key, placed, reason, row text]`` per gang ``keys`` in that
    order, or None for anything else. It holds the plan memo's rows as text, which reads in a tenth of the time
    the rows themselves take, and what the placement warnings need beside."""
    if not isinstance(data, list) or len(data) != len(keys):
        return None
    for item, key in zip(data, keys):
        if not isinstance(item, list) or len(item) != 4 or item[0] != key or not isinstance(item[1], bool) or \
                not (item[2] is None or isinstance(item[2], str)) or not isinstance(item[3], str):
            return None
    return data


def _memo_rows(data: Any, keys: list[str]) -> list[list[Any]] | None:
    """The plan memo's rows for gangs ``keys`` (in that order) as a ``rows`` entry holds them, or None."""
    import orjson

    if not isinstance(data, list) or len(data) != len(keys):
        return None
    for row, key in zip(data, keys):
        if not isinstance(row, list) or len(row) != 10 or row[0] != key or not isinstance(row[5], bool) or \
                not (row[6] is None or isinstance(row[6], str)):
            return None
    return [[row[0], row[5], row[6], orjson.dumps(row).decode()] for row in data]


def _place(root: Path, store: Store, context: dict[str, Any], files: list[_File],
           writes: list[tuple[str, str, bytes]]) -> tuple[_Outcomes, str, list[Diagnostic]]:
    """Outcomes per gang key, the lock and the placement warnings, as the pack stage gives them: each pool's
    outcomes from the plan memo when its demands and inventory are the ones packed before, else packed now.
    What it learns goes to ``writes``, stored only when the inputs held still while the render ran (the
    inventory is read twice: for the key, and by the reader)."""
    import orjson

    from toporender.load.walk import inside
    from toporender.placement.outcomes import (
        arrival_keys,
        load_order,
        lock_lines,
        memo_key,
        outcomes_from_json,
        outcomes_json,
        same,
    )

    try:
        order = load_order(root)
    except UserError:
        raise _Whole from None
    gangs = [(f, g) for f in files for g in f.summary["gangs"]]
    arrived = [gangs[i] for i in arrival_keys([g["key"] for _, g in gangs], order)]
    memo = Plans(store)
    outcomes = _Outcomes()
    warnings: list[Diagnostic] = []
    for pool_name in sorted(context["pools"]):
        pool = context["pools"][pool_name]
        members = [(f, g) for f, g in arrived if g["pool"] == pool_name]
        path = pool["inventory"]
        if not members or path is None:
            continue
        target = root / path
        if Path(path).is_absolute() or ".." in Path(path).parts or not inside(root, target) or \
                not target.is_file():
            raise _Whole
        keys = [g["key"] for _, g in members]
        demands = ("[" + ",".join(g["demand"] for _, g in members) + "]").encode()
        inventory = target.read_bytes()
        key = memo_key(inventory, path, pool["levels"], demands, pool["node_selector"])
        rows_key = digest(code_fingerprint(), "rows", key)
        rows = _rows(_read_json(store, "rows", rows_key), keys)
        if rows is None:
            rows = _memo_rows(memo.get(key), keys)
            exact = True
            if rows is None:
                packed = _pack(store, target, path, hashlib.sha256(inventory).hexdigest(), pool,
                               [g["demand"] for _, g in members], writes)
                data = outcomes_json(packed)
                back = outcomes_from_json(orjson.loads(orjson.dumps(data)))
                exact = back is not None and all(same(back[k], o) for k, o in packed.items())
                if exact:
                    writes.append(("plan", digest(code_fingerprint(), key), orjson.dumps(data)))
                outcomes.direct.update(packed)
                if not exact:
                    outcomes.inexact.update(packed)
                rows = _memo_rows(data, keys)
                if rows is None:
                    raise _Whole
            if exact:  # rows that do not read back as the outcomes they came from are never stored
                writes.append(("rows", rows_key, orjson.dumps(rows)))
        for (f, g), (_, placed, reason, text) in zip(members, rows):
            outcomes.rows[g["key"]] = text
            if not placed:
                if pool["strict"]:
                    raise _Whole
                warnings.append(Diagnostic(f"group '{g['name']}' cannot be placed: {reason}", _gang_pos(root, f, g),
                                           "warning"))
    return outcomes, lock_lines([g["key"] for _, g in arrived]), warnings


def _pack(store: Store, target: Path, path: str, sha: str, pool: dict[str, Any], demands: list[Any],
          writes: list[tuple[str, str, bytes]]) -> dict[str, GangOutcome]:
    """Pack a pool's gangs (their demands as stored, in arrival order) into the inventory at ``target`` (whose
    bytes have SHA-256 ``sha``)."""
    import orjson

    from toporender.placement.outcomes import GangOutcome, demand_from_json
    from toporender.placement.packer import pack
    from toporender.placement.plan import gang_hash

    try:
        gangs = [demand_from_json(orjson.loads(d)) for d in demands]
        inventory = _inventory(store, target, path, sha, writes)
        plan = pack(inventory, pool["levels"], gangs, node_selector=pool["node_selector"])
    except (UserError, KeyError, TypeError, ValueError, AttributeError, IndexError):
        raise _Whole from None
    return {g.key: GangOutcome(plan.gangs[g.key], gang_hash(plan.levels, plan.gangs[g.key])) for g in gangs}


def _inventory(store: Store, target: Path, path: str, sha: str, writes: list[tuple[str, str, bytes]]) -> Inventory:
    """The inventory at ``target``: its nodes from an ``inventory`` entry keyed by its bytes (a compact JSON list
    of the nodes, read in a fraction of the YAML's time), else read and, when it is a compact inventory
    (positions come from the file, read again only for a message), stored."""
    import orjson

    from toporender.placement.inventory import Inventory, Node, Taint
    from toporender.placement.nodelist import FilePositions, read_inventory

    def nodes_from(data: Any) -> list[Node]:
        return [Node(name, labels, gpus, used, unschedulable, tuple(Taint(k, v, e) for k, v, e in taints))
                for name, labels, gpus, used, unschedulable, taints in data]

    key = digest(code_fingerprint(), "inventory", path, sha)
    data = _read_json(store, "inventory", key)
    if isinstance(data, list):
        try:
            nodes = nodes_from(data)
            if all(type(n.name) is str and type(n.labels) is dict and type(n.gpus) is int
                   and type(n.used_gpus) is int and type(n.unschedulable) is bool for n in nodes):
                return Inventory.of(nodes, path, FilePositions(target, path, (n.name for n in nodes)))
        except (TypeError, ValueError):
            pass
    inventory = read_inventory(target, path)
    if isinstance(inventory.positions, FilePositions) and all(
            type(n.name) is str and type(n.labels) is dict and type(n.gpus) is int and type(n.used_gpus) is int
            and type(n.unschedulable) is bool for n in inventory.nodes):
        try:  # JSON gives these types back as they are (labels: str to str, as both readers check)
            raw = orjson.dumps([[n.name, n.labels, n.gpus, n.used_gpus, n.unschedulable,
                                 [[t.key, t.value, t.effect] for t in n.taints]] for n in inventory.nodes])
        except TypeError:
            return inventory
        writes.append(("inventory", key, raw))
    return inventory


def _gang_pos(root: Path, f: _File, gang: dict[str, Any]) -> Position:
    """Where a gang is written: from the gang built now, else from its file read again (messages only)."""
    if f.gangs is not None:
        return next(g.pos for g in f.gangs if g.key == gang["key"])
    from toporender.load.yaml_source import load_file

    try:
        docs = [d for d in load_file(root / f.rel, f.rel) if d.data is not None]
    except UserError:
        raise _Whole from None
    if len(docs) != 1:
        raise _Whole
    return docs[0].pos(tuple(gang["loc"]))


def _write(store: Store, fmt: str, context: dict[str, Any], files: list[_File], outcomes: _Outcomes,
           out: _Render, new_context: bool, rebuild: Callable[[list[_File]], None]) -> None:
    """The stream: the pool objects, then each file from its ``emit`` entry when that holds its bytes with these
    outcomes, else annotated and written now (from its ``objects`` entry, or built again when that is gone or
    damaged); what is written now is checked with the pool objects (which are checked too when the context is
    new)."""

    from toporender.emit.stream import dump_chunks
    from toporender.placement.outcomes import annotate_objects

    fresh: list[dict[str, Any]] = []
    emits: list[tuple[str, bytes]] = []
    pool_objects = context["pool_objects"]
    out.pieces = list(dump_chunks(pool_objects, fmt))
    out.head = len(out.pieces)
    stored: dict[str, memoryview] = {}
    missing: list[_File] = []
    for f in files:
        gangs = f.summary["gangs"]
        emit_key = digest(f.key, fmt, "[" + ",".join(outcomes.rows[g["key"]] for g in gangs
                                                   if g["key"] in outcomes.rows) + "]")
        out.parts.append(emit_key)
        if f.objects is None:
            raw = store.read("emit", emit_key)
            if raw is not None:
                stored[emit_key] = raw
                continue
            f.objects = _stored_objects(store, f)
            if f.objects is None:
                missing.append(f)
    if missing:
        rebuild(missing)
    for f, emit_key in zip(files, out.parts):
        if emit_key in stored:
            out.pieces.append(stored[emit_key])
            continue
        assert f.objects is not None
        gangs = f.summary["gangs"]
        flat: list[dict[str, Any]] = []
        for g, (group_objects, pods) in zip(gangs, f.objects):
            if g["key"] in outcomes.rows:
                annotate_objects(g["tasks"], context["pools"][g["pool"]]["pin"], group_objects, pods,
                                 outcomes.outcome(g["key"]))
            flat += group_objects + pods
        fresh += flat
        data = b"".join(dump_chunks(flat, fmt))
        out.pieces.append(data)
        if not any(g["key"] in outcomes.inexact for g in gangs):
            emits.append((emit_key, data))
    if fresh or new_context:
        from toporender.validation import output_problems

        if output_problems(pool_objects + fresh, kai_version=context["kai"]):
            raise _Whole
    for f in files:
        if f.stored is not None:
            out.writes += [("file", f.key, _json(f.summary)), ("objects", f.key, f.stored)]
    out.writes += [("emit", key, data) for key, data in emits]


def _stored_objects(store: Store, f: _File) -> list[list[list[dict[str, Any]]]] | None:
    """A file's objects as stored before placement, in the shape of its summary's gangs (None when the entry
    is gone or is anything else)."""
    import orjson

    raw = store.read("objects", f.key)
    try:
        objects = orjson.loads(raw) if raw is not None else None
    except orjson.JSONDecodeError:
        objects = None
    gangs = f.summary["gangs"]
    if not isinstance(objects, list) or len(objects) != len(gangs) or not all(
            isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], list) and isinstance(pair[1], list)
            and len(pair[0]) == g["groups"] and len(pair[1]) == len(g["tasks"])
            and all(isinstance(o, dict) for o in pair[0] + pair[1]) for pair, g in zip(objects, gangs)):
        return None
    return objects


def store_render(store: Store, root: Path, kind: str, options: RenderOptions, taken: Taken, done: _Render) -> None:
    """Write a render's entries, and the whole render, when the inputs held still while it ran."""
    after = find(store, root, kind, options, read=False)
    if after is None or after.key != taken.key:
        return
    for entry_kind, key, payload in done.writes:
        store.write(entry_kind, key, payload, evict=False)
    meta = {"warnings": diagnostics_to_json(done.warnings), "lock": done.lock, "parts": done.parts}
    store.write("render", taken.key, pack_entry(meta, b"".join(done.pieces[:done.head])))


