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

import contextlib
import functools
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toporender.cache import (
    FORMAT,
    LOCK_FILE,
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
    render_key,
)
from toporender.errors import Diagnostic, Position, UserError
from toporender.jobs import worth_spreading
from toporender.options import RenderOptions

if TYPE_CHECKING:
    from toporender.expand.gangs import Gang
    from toporender.jobs import Workers
    from toporender.placement.demand import GangDemand
    from toporender.placement.inventory import Inventory
    from toporender.placement.outcomes import GangOutcome
    from toporender.placement.packer import Packer
    from toporender.placement.stage import PackAhead

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
    spilled: tuple[str, int, int] | None = None
    """Where a worker that built the file wrote its ``objects`` entry instead: a file of the render's spill
    folder, the offset and the length."""
    slots: list[int] | None = None
    """For a file a worker spilled as the stream's text with slots (:func:`_slot`) rather than as objects: each
    gang's number of PodGroups, whose slots come before its pods' (one each)."""
    at: list[int] | None = None
    """Where each slot starts in that text."""

    def objects_json(self) -> bytes | None:
        """The ``objects`` entry of a file built now, wherever it is kept."""
        return self.stored if self.spilled is None else _unspill(self.spilled)


def _unspill(spilled: tuple[str, int, int]) -> bytes:
    """What a worker spilled: ``length`` bytes at ``offset`` of the file ``path``."""
    path, offset, length = spilled
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(length)


_Entry = tuple[str, str, bytes | memoryview]
"""An entry for the store to write: its kind, its key and its bytes."""


@dataclass
class _Render:
    """A render made file by file: the stream's pieces, its warnings and lock, and the entries to store."""

    pieces: list[bytes | memoryview] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    lock: str | None = None
    writes: list[_Entry] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    """The ``emit`` entry of every file, in stream order (after ``pieces[:head]``, the pool objects)."""
    head: int = 0


def render_stream(root: Path, options: RenderOptions, fmt: str, store: Store | None = None,
                  found: Found | None = None, jobs: int = 1) -> tuple[Sequence[bytes | memoryview], list[Diagnostic]]:
    """:func:`toporender.pipeline.render_stream`, rendering only the workflow files the cache holds nothing for
    when it holds no whole render of these inputs (``found``: a lookup made already with
    :func:`toporender.cache.find`).

    With ``jobs`` > 1, worker processes build and write the files when those to build are worth it
    (:func:`toporender.jobs.worth_spreading`; without a cache, every file: the render goes file by file with a
    cache that holds nothing and keeps nothing)."""
    taken = None
    if store is not None:
        found = found or find(store, root, f"stream-{fmt}", options)
        if found is not None and found.meta is not None:
            return found.pieces, diagnostics_from_json(found.meta["warnings"])
        taken = found.taken if found is not None else None
    elif jobs > 1:
        taken = render_key(root, f"stream-{fmt} {options!r}", options.inventory, contents=False)
        if taken is not None and not worth_spreading(size for _, _, size in taken.files):
            taken = None
    if taken is not None:
        try:
            done = _by_file(root, options, fmt, store or _Nowhere(), taken, jobs)
        except (_Whole, OSError, KeyError, TypeError, ValueError, IndexError, AttributeError):
            done = None  # a file that went away, or stored data no render writes: the whole pipeline decides
        if done is not None:
            if store is not None:
                store_render(store, root, f"stream-{fmt}", options, taken, done)
            return done.pieces, done.warnings
    from toporender.pipeline import render_stream as whole

    return whole(root, options, fmt, store, found)


class _Nowhere(Store):
    """A cache that holds nothing and keeps nothing: a render without a cache that goes file by file (to spread
    the files over worker processes) reads and writes its entries here."""

    def __init__(self) -> None:
        pass

    def read(self, kind: str, key: str) -> memoryview | None:
        return None

    def write(self, kind: str, key: str, payload: bytes | memoryview, *, evict: bool = True) -> None:
        pass

    def evict(self) -> None:
        pass


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


def _by_file(root: Path, options: RenderOptions, fmt: str, store: Store, taken: Taken, jobs: int = 1
             ) -> _Render | None:
    """The render of ``root`` from the per-file entries, building the files without one; None when the
    repo is not one to render this way. With ``jobs`` > 1 and files to build worth it (:func:`worth_spreading`),
    worker processes build them and, once placed, annotate and write them (:class:`_Ahead` says what this process
    does meanwhile)."""
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
    spread = jobs > 1 and worth_spreading(size for (_, _, size), f in zip(files, loaded) if isinstance(f, str))
    with contextlib.ExitStack() as stack:
        workers = None
        if spread:
            import tempfile

            spill = stack.enter_context(tempfile.TemporaryDirectory(prefix="toporender-"))
            workers = stack.enter_context(_workers(jobs, root, options, taken, spill,
                                                   keep=not isinstance(store, _Nowhere), fmt=fmt))
        ahead = _Ahead()
        if workers is not None:
            context, built = _build_spread(workers, taken, loaded,
                                           lambda results: ahead.run(root, store, taken, results, out.writes))
        elif context is None or any(isinstance(f, str) for f in loaded):
            context, built = _build(root, options, taken, loaded)
        else:
            built = [f for f in loaded if isinstance(f, _File)]
        if context is None:
            return None
        if new_context:
            out.writes.append(("context", context_key, _json(context)))

        _check_across(built, context["pool_objects"])
        out.warnings = _replay_warnings(built)
        outcomes = _Outcomes()
        if context["placement"]:
            outcomes, lock, placement_warnings = _place(root, store, context, built, out.writes, ahead,
                                                        dict(taken.others))
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

        _write(store, fmt, context, built, outcomes, out, new_context, rebuild, workers)
    return out


def _json(data: Any) -> bytes:
    import orjson

    return orjson.dumps(data)


def _build(root: Path, options: RenderOptions, taken: Taken, loaded: list[_File | str],
           encode: Callable[[Any], bytes | None] | None = None) -> tuple[dict[str, Any] | None, list[_File]]:
    """Load the config and the workflow files without an entry (every file when the context is new), and
    build them as a whole render does; raises :class:`_Whole` on any problem. ``encode`` gives the bytes a
    file's objects are kept as (None: they would not read back exactly); JSON unless given."""
    import orjson

    from toporender import pipeline
    from toporender.build.backends import volcano
    from toporender.expand.naming import normalize
    from toporender.load.repo import Repo, load_repo_config, load_workflow, single_document
    from toporender.placement.outcomes import checked_demand_json
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
        demands = [checked_demand_json(gang_demand(gang, pods)) for gang, _, pods in built]
        objects = [[group_objects, pods] for _, group_objects, pods in built]
        summaries = [{"key": g.key, "name": g.name, "pool": g.pool_name, "loc": list(g.loc),
                       "tasks": [t.spec.name for t in g.tasks], "groups": len(group_objects),
                       "demand": text.decode()}
                      for (g, group_objects, _), (text, _) in zip(built, demands)]
        summary = {
            "name": names[rel],
            "gangs": summaries,
            "warnings": [[diagnostics_to_json([d])[0], tag] for d, tag in tagged],
            "idents": [_identity(o) for _, group_objects, pods in built for o in group_objects + pods],
        }
        exact = all(read_back for _, read_back in demands)
        stored = (encode or _exact_json)(objects) if exact else None
        files.append(_File(rel, key, summary, [g for g, _, _ in built], objects, stored))
    return context, files


def _exact_json(objects: Any) -> bytes | None:
    """``objects`` as JSON when that reads back as exactly them, else None."""
    import orjson

    try:
        raw = orjson.dumps(objects)
        return raw if orjson.loads(raw) == objects else None
    except (TypeError, ValueError):
        return None


def _marshal(objects: Any) -> bytes | None:
    """``objects`` in :mod:`marshal`'s format, which reads back as exactly them (plain dicts, lists, strings and
    numbers; anything else it refuses: None), written and read by this render's own processes only."""
    import marshal

    try:
        return marshal.dumps(objects)
    except ValueError:
        return None


def _workers(jobs: int, root: Path, options: RenderOptions, taken: Taken, spill: str, keep: bool,
             fmt: str) -> Workers:
    """The worker processes of a render spread over them, set up with what :func:`_build_chunk` needs: the
    folder ``spill`` keeps the objects they build until they write them, so that this process never holds them
    (a tenth of a million-GPU render's memory): as JSON when the render is kept (``keep``: the cache stores
    them as they are); else as the stream's text in ``fmt`` with a slot for placement's annotations where
    :func:`_slot` can, or in :mod:`marshal`'s format, three times faster than JSON to write and read back
    exactly.

    The modules the workers and this process run meanwhile are imported first, so that the workers, forked at
    their first task, inherit them: imported after, each of the three processes imported the pipeline on its
    own (0.14 s of CPU each, a tenth of a 10,000-Pod render's)."""
    import toporender.emit.stream
    import toporender.pipeline
    import toporender.placement.stage
    import toporender.validation  # noqa: F401
    from toporender.jobs import Workers

    return Workers(jobs, _spread_worker, ((root, options, taken, spill, keep, fmt),))


def _chunks(count: int, jobs: int) -> list[range]:
    """``range(count)`` in chunks: eight or more per worker, of at most 128."""
    size = max(1, min(128, -(-count // (jobs * 8))))
    return [range(i, min(i + size, count)) for i in range(0, count, size)]


def _build_spread(workers: Workers, taken: Taken, loaded: list[_File | str],
                  meanwhile: Callable[[Iterator[_Built]], None]) -> tuple[dict[str, Any] | None, list[_File]]:
    """:func:`_build` with the files to build read and built by ``workers``, chunks of them, each sending back its
    files' summaries and objects as JSON; ``meanwhile`` runs in this process while they work."""
    wanted = [i for i, f in enumerate(loaded) if isinstance(f, str)]
    chunks = [[wanted[i] for i in c] for c in _chunks(len(wanted), workers.jobs)]
    results = workers.map(_build_chunk, [(tuple(taken.files[i] for i in c), [loaded[i] for i in c], f"{n}.json")
                                         for n, c in enumerate(chunks)], meanwhile)
    context: dict[str, Any] | None = None
    files = list(loaded)
    for chunk, (chunk_context, built) in zip(chunks, results):
        if chunk_context is None or (context is not None and chunk_context != context):
            return None, []
        context = chunk_context
        for i, f in zip(chunk, built):
            files[i] = f
    return context, [f for f in files if isinstance(f, _File)]


_SPREAD: list[Any] = []
"""A worker process's part of the render: what :func:`_spread_worker` was given."""


def _spread_worker(given: Any) -> None:
    _SPREAD[:] = [given]


_Built = tuple[dict[str, Any] | None, list[_File]]
"""What a worker sends for a chunk of files: the context, and each file with its objects as JSON."""


def _build_chunk(item: tuple[tuple[tuple[str, str, int], ...], list[_File | str], str]) -> _Built:
    """In a worker: :func:`_build` of the files ``item`` names, written to the spill folder: as the stream's text
    with slots where :func:`_slot` can (checked here, before the slots go in), else their objects (JSON when the
    render is kept, else :mod:`marshal`'s format) for :func:`_write_chunk` to annotate, write and check. A file
    whose objects do not read back exactly sends the render to the whole pipeline."""
    from dataclasses import replace

    root, options, taken, spill, keep, fmt = _SPREAD[0]
    files, loaded, name = item
    context, built = _build(root, options, replace(taken, files=files), loaded, None if keep else _unencoded)
    if not keep and context is not None:
        _slot(built, context, fmt)
    path = os.path.join(spill, name)
    offset = 0
    with open(path, "xb") as fh:
        for f in built:
            if f.stored is None:
                raise _Whole
            fh.write(f.stored)
            f.spilled = (path, offset, len(f.stored))
            offset += len(f.stored)
            f.gangs = f.objects = f.stored = None
    return context, built


def _unencoded(objects: Any) -> bytes:
    """Nothing yet: :func:`_slot` writes the objects."""
    return b""


_SLOT_KEY = "\x00"
"""The annotation key a slot is written as (``,"\\u0000":""`` in JSON, a line ``    "\\0": ''`` in YAML):
a file whose text holds that text anywhere else is kept as its objects."""


@functools.cache
def _slot_text(fmt: str) -> bytes:
    from toporender.emit.stream import annotation_entries

    return annotation_entries(fmt)({_SLOT_KEY: ""})


def _slot(built: list[_File], context: dict[str, Any], fmt: str) -> None:
    """In a worker: each file's objects as the stream's text in ``fmt``, each PodGroup's and pod's annotations
    ending with a slot for placement's (:func:`toporender.placement.outcomes.placement_notes`), for
    :func:`_fill` to fill once placement is done: reading the objects back to annotate them cost a tenth of a
    1M-GPU render's CPU, with freeing them twice. Those files' objects are checked here, with the pool
    objects, as they are before placement annotates them: no rule of the check reads the keys placement
    writes, and the one rule its values bear on, the annotations' size, :func:`_fill` keeps.

    A file holds slots only where placement's annotations go at the end of the object's own: each a
    non-empty mapping of its own, without the keys placement writes, in a pool that does not pin (that changes
    the pods' affinity). Any other file is kept as its objects, in :mod:`marshal`'s format."""
    from toporender.emit.stream import dump_chunks
    from toporender.placement.outcomes import PLACEMENT_NOTES
    from toporender.validation import output_problems

    pins = {name: pool["pin"] for name, pool in context["pools"].items()}
    slot = _slot_text(fmt)

    def annotations(f: _File) -> list[dict[str, Any]] | None:
        """The annotations of the file's PodGroups and pods, in stream order, when each can take a slot."""
        assert f.objects is not None
        found = []
        for g, (group_objects, pods) in zip(f.summary["gangs"], f.objects, strict=True):
            if pins[g["pool"]] != "none":
                return None
            for obj in [o for o in group_objects if o.get("kind") == "PodGroup"] + pods:
                meta = obj.get("metadata")
                notes = meta.get("annotations") if meta.__class__ is dict else None
                if notes.__class__ is not dict or not notes or _SLOT_KEY in notes \
                        or any(key in notes for key in PLACEMENT_NOTES):
                    return None
                found.append(notes)
        return found if len(set(map(id, found))) == len(found) else None

    slotted = {id(f): found for f in built if f.stored is not None and (found := annotations(f)) is not None}
    objects = [o for f in built if id(f) in slotted for group_objects, pods in f.objects or [] for o in
               group_objects + pods]
    if objects and output_problems(context["pool_objects"] + objects, kai_version=context["kai"]):
        raise _Whole
    for f in built:
        if f.stored is None:
            continue
        assert f.objects is not None
        if id(f) not in slotted:
            f.stored = _marshal(f.objects)
            continue
        for mapping in slotted[id(f)]:
            mapping[_SLOT_KEY] = ""
        lines = b"".join(dump_chunks([o for group_objects, pods in f.objects for o in group_objects + pods], fmt))
        at: list[int] = []
        start = lines.find(slot)
        while start >= 0 and len(at) <= len(slotted[id(f)]):
            at.append(start)
            start = lines.find(slot, start + len(slot))
        if len(at) != len(slotted[id(f)]):  # the file's text holds the slot's text elsewhere
            for mapping in slotted[id(f)]:
                del mapping[_SLOT_KEY]
            f.stored = _marshal(f.objects)
            continue
        f.stored, f.at = lines, at
        f.slots = [sum(o.get("kind") == "PodGroup" for o in group_objects) for group_objects, _ in f.objects]


class _Ahead:
    """What this process does while the workers build: read the inventories the config names, then pack the pools'
    gangs as their demands arrive (:class:`~toporender.placement.stage.PackAhead`), for :func:`_pack` to
    take. Anything that goes wrong here only leaves :func:`_pack` to read and pack from scratch, and report."""

    def __init__(self) -> None:
        self.inventories: dict[tuple[str, str], Inventory] = {}
        self.demands: dict[str, GangDemand] = {}
        self.packers: PackAhead | None = None
        self.trees: dict[str, tuple[str, str]] = {}
        """The inventory (path, hash) each pool's packer packs into."""

    def run(self, root: Path, store: Store, taken: Taken, results: Iterator[_Built],
            writes: list[_Entry]) -> None:
        import orjson

        from toporender.placement.outcomes import demand_from_json, load_order
        from toporender.placement.stage import PackAhead
        from toporender.placement.tree import Tree

        for path, sha in taken.others:
            if path == LOCK_FILE or sha == "-" or (path, sha) in self.inventories:
                continue
            try:
                self.inventories[path, sha] = _inventory(store, root / path, path, sha, writes)
            except Exception:  # noqa: BLE001, S112 - read again, and raised or reported, where it is packed
                continue
        try:
            hashes = dict(taken.others)
            trees = {}
            for context, files in results:
                if self.packers is None:
                    if context is None:
                        return
                    for name, pool in context["pools"].items():
                        path = pool["inventory"]
                        if path is not None and (path, hashes.get(path)) in self.inventories:
                            self.trees[name] = (path, hashes[path])
                            trees[name] = Tree(self.inventories[path, hashes[path]], pool["levels"],
                                               pool["node_selector"])
                    self.packers = PackAhead(trees, load_order(root))
                arrived = [(g["key"], g["pool"], demand_from_json(orjson.loads(g["demand"])))
                           for f in files for g in f.summary["gangs"]]
                self.demands.update((key, demand) for key, _, demand in arrived)
                self.packers.feed(arrived)
        except Exception:  # noqa: BLE001 - what a worker raised is _build_spread's to handle
            self.packers = None

    def take(self, pool_name: str, path: str, sha: str, demands: Sequence[GangDemand]) -> Packer | None:
        """The pool's packer when it packed into this inventory and the first of ``demands``."""
        if self.packers is None or self.trees.get(pool_name) != (path, sha):
            return None
        return self.packers.take(pool_name, demands)


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
           writes: list[_Entry], ahead: _Ahead | None = None, walked: dict[str, str] | None = None
           ) -> tuple[_Outcomes, str, list[Diagnostic]]:
    """Outcomes per gang key, the lock and the placement warnings, as the pack stage gives them: each pool's
    outcomes from the plan memo when its demands and inventory are the ones packed before, else packed now.
    What it learns goes to ``writes``, stored only when the inputs held still while the render ran (the
    inventory is read twice: for the key, and by the reader). A render that keeps nothing computes no key (at
    1M GPUs, joining and hashing the demands took half a second while the workers waited): it packs at once,
    into the inventory the hash in ``walked`` (inventory path -> SHA-256, from the walk) names."""
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
        if isinstance(store, _Nowhere):  # the rows only tell which gangs were packed
            sha = (walked or {}).get(path) or hashlib.sha256(target.read_bytes()).hexdigest()
            packed = _pack(store, target, path, sha, pool_name, pool, [g for _, g in members], writes,
                           ahead or _Ahead())
            outcomes.direct.update(packed)
            _note_unplaced(root, pool, members, [[k, packed[k].placement.placed, packed[k].placement.reason, ""]
                                                 for k in keys], outcomes, warnings)
            continue
        demands = ("[" + ",".join(g["demand"] for _, g in members) + "]").encode()
        inventory = target.read_bytes()
        sha = hashlib.sha256(inventory).hexdigest()
        key = memo_key(inventory, path, pool["levels"], demands, pool["node_selector"])
        del inventory, demands  # tens of megabytes in a large repo, not needed to pack
        rows_key = digest(code_fingerprint(), "rows", key)
        rows = _rows(_read_json(store, "rows", rows_key), keys)
        if rows is None:
            rows = _memo_rows(memo.get(key), keys)
            exact = True
            if rows is None:
                packed = _pack(store, target, path, sha, pool_name, pool,
                               [g for _, g in members], writes, ahead or _Ahead())
                outcomes.direct.update(packed)
                data = outcomes_json(packed)
                back = outcomes_from_json(orjson.loads(orjson.dumps(data)))
                exact = back is not None and all(same(back[k], o) for k, o in packed.items())
                if exact:
                    writes.append(("plan", digest(code_fingerprint(), key), orjson.dumps(data)))
                else:
                    outcomes.inexact.update(packed)
                rows = _memo_rows(data, keys)
                if rows is None:
                    raise _Whole
            if exact:  # rows that do not read back as the outcomes they came from are never stored
                writes.append(("rows", rows_key, orjson.dumps(rows)))
        _note_unplaced(root, pool, members, rows, outcomes, warnings)
    return outcomes, lock_lines([g["key"] for _, g in arrived]), warnings


def _note_unplaced(root: Path, pool: dict[str, Any], members: list[tuple[_File, dict[str, Any]]],
                   rows: list[list[Any]], outcomes: _Outcomes, warnings: list[Diagnostic]) -> None:
    """Each gang's row into ``outcomes``, and a warning for each gang not placed (the whole pipeline reports
    one a strict pool cannot place)."""
    for (f, g), (_, placed, reason, text) in zip(members, rows):
        outcomes.rows[g["key"]] = text
        if not placed:
            if pool["strict"]:
                raise _Whole
            warnings.append(Diagnostic(f"group '{g['name']}' cannot be placed: {reason}", _gang_pos(root, f, g),
                                       "warning"))


def _pack(store: Store, target: Path, path: str, sha: str, pool_name: str, pool: dict[str, Any],
          members: list[dict[str, Any]], writes: list[_Entry], ahead: _Ahead
          ) -> dict[str, GangOutcome]:
    """Pack a pool's gangs (their summaries, in arrival order) into the inventory at ``target`` (whose bytes have
    SHA-256 ``sha``), with what was read and packed ``ahead``."""
    import orjson

    from toporender.placement.outcomes import GangOutcome, demand_from_json
    from toporender.placement.packer import pack
    from toporender.placement.plan import gang_hash

    try:
        gangs = [ahead.demands.get(g["key"]) or demand_from_json(orjson.loads(g["demand"])) for g in members]
        inventory = ahead.inventories.get((path, sha)) or _inventory(store, target, path, sha, writes)
        packer = ahead.take(pool_name, path, sha, gangs)
        plan = pack(inventory, pool["levels"], gangs, node_selector=pool["node_selector"], ahead=packer,
                    compiled=ahead.packers.compiled.get(pool_name) if packer and ahead.packers else None)
    except (UserError, KeyError, TypeError, ValueError, AttributeError, IndexError):
        raise _Whole from None
    return {g.key: GangOutcome(plan.gangs[g.key], gang_hash(plan.levels, plan.gangs[g.key])) for g in gangs}


def _inventory(store: Store, target: Path, path: str, sha: str, writes: list[_Entry]) -> Inventory:
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
    if not isinstance(store, _Nowhere) and isinstance(inventory.positions, FilePositions) and all(
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
           out: _Render, new_context: bool, rebuild: Callable[[list[_File]], None],
           workers: Workers | None = None) -> None:
    """The stream: the pool objects, then each file from its ``emit`` entry when that holds its bytes with these
    outcomes, else annotated and written now (from its objects built in this render, as built or as the JSON a
    worker sent, or from its ``objects`` entry, or built again when that is gone or damaged); what is written
    now is checked with the pool objects (which are checked too when the context is new). Files a worker built
    are annotated, written and checked by the ``workers`` that built them."""
    import orjson

    from toporender.emit.stream import dump_chunks
    from toporender.placement.outcomes import annotate_objects

    fresh: list[dict[str, Any]] = []
    emits: list[tuple[str, list[bytes | memoryview]]] = []
    pool_objects = context["pool_objects"]
    out.pieces = list(dump_chunks(pool_objects, fmt))
    out.head = len(out.pieces)
    stored: dict[str, memoryview] = {}
    missing: list[_File] = []
    as_json: list[tuple[_File, str]] = []
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
            if f.stored is not None or f.spilled is not None:
                as_json.append((f, emit_key))
                continue
            f.objects = _stored_objects(store, f)
            if f.objects is None:
                missing.append(f)
    if missing:
        rebuild(missing)
    written: dict[str, list[bytes | memoryview]] = {}
    if workers is not None and as_json:
        written = _write_spread(workers, fmt, context, as_json, outcomes, keep=not isinstance(store, _Nowhere))
    else:
        for f, _ in as_json:
            f.objects = orjson.loads(f.objects_json() or b"")
    for f, emit_key in zip(files, out.parts):
        if emit_key in stored:
            out.pieces.append(stored[emit_key])
            continue
        if emit_key in written:
            out.pieces += written[emit_key]
            if not any(g["key"] in outcomes.inexact for g in f.summary["gangs"]):
                emits.append((emit_key, written[emit_key]))
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
            emits.append((emit_key, [data]))
    if fresh or new_context:
        from toporender.validation import output_problems

        if output_problems(pool_objects + fresh, kai_version=context["kai"]):
            raise _Whole
    if isinstance(store, _Nowhere):
        return
    for f in files:
        if f.stored is not None or f.spilled is not None:
            out.writes += [("file", f.key, _json(f.summary)), ("objects", f.key, f.objects_json() or b"")]
    out.writes += [("emit", key, data[0] if len(data) == 1 else b"".join(data)) for key, data in emits]


def _write_spread(workers: Workers, fmt: str, context: dict[str, Any], files: list[tuple[_File, str]],
                  outcomes: _Outcomes, keep: bool) -> dict[str, list[bytes | memoryview]]:
    """Each of ``files`` (a file a worker built and spilled, with its ``emit`` key) annotated with its outcomes
    and written, as pieces by ``emit`` key: a file spilled as text with slots by filling them here
    (:func:`_fill`), any other by ``workers``, chunks of files each checked with the pool objects. ``keep``:
    the files were spilled as JSON (else in :mod:`marshal`'s format or with slots).

    The spilled text and the workers' output are files of the spill folder, which this process maps: sent
    through the pool's pipe, the bytes of a 1M-GPU render (400 MB) were copied three times more and cost a
    CPU-second in page faults of this process alone. A mapping stays readable after the folder is removed."""
    import mmap

    maps: dict[str, memoryview] = {}

    def mapped(path: str) -> memoryview:
        if path not in maps:
            with open(path, "rb") as fh:
                maps[path] = memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
        return maps[path]

    written: dict[str, list[bytes | memoryview]] = {}
    for f, key in files:
        if f.at is not None:
            assert f.spilled is not None
            path, offset, length = f.spilled
            lines = mapped(path)[offset:offset + length]
            if len(lines) != length:
                raise _Whole
            written[key] = _fill(lines, f, outcomes, fmt)
    rest = [(f, key) for f, key in files if f.at is None]
    if not rest:
        return written
    given = (fmt, {name: pool["pin"] for name, pool in context["pools"].items()}, context["pool_objects"],
             context["kai"], keep)
    assert rest[0][0].spilled is not None
    spill = os.path.dirname(rest[0][0].spilled[0])  # where the workers spilled every file they built

    def out(n: int) -> str:
        """Where chunk ``n``'s bytes are written."""
        return os.path.join(spill, f"out-{n}")

    def chunks() -> Iterator[tuple[_Given, str, list[_Spilled]]]:
        for n, c in enumerate(_chunks(len(rest), workers.jobs)):
            items = []
            for f, _ in rest[c.start:c.stop]:
                assert f.spilled is not None
                gangs = f.summary["gangs"]
                items.append((f.spilled, [{"tasks": g["tasks"], "pool": g["pool"]} for g in gangs],
                              [outcomes.outcome(g["key"]) if g["key"] in outcomes.rows else None for g in gangs]))
            yield given, out(n), items

    pieces: list[bytes | memoryview] = []
    for n, sizes in enumerate(workers.map(_write_chunk, chunks(), window=4 * workers.jobs)):
        if not sum(sizes):
            pieces += [b""] * len(sizes)
            continue
        view = mapped(out(n))
        if len(view) != sum(sizes):
            raise _Whole
        offset = 0
        for size in sizes:
            pieces.append(view[offset:offset + size])
            offset += size
    written.update((key, [data]) for (_, key), data in zip(rest, pieces, strict=True))
    return written


def _fill(lines: memoryview, f: _File, outcomes: _Outcomes, fmt: str) -> list[bytes | memoryview]:
    """A file's text with slots (:func:`_slot`) as pieces, each slot filled with the placement annotations of
    its object, as the stream in ``fmt`` writes them after the object's own: the pieces are the text of the
    annotated objects. Raises :class:`_Whole` when an object could pass the annotations' size limit (the whole
    pipeline checks it exactly)."""
    from itertools import chain, repeat

    from toporender.emit.stream import annotation_entries
    from toporender.placement.outcomes import placement_notes
    from toporender.validation import annotations_fit

    assert f.at is not None and f.slots is not None
    written = annotation_entries(fmt)
    filled: list[bytes] = []
    for g, groups in zip(f.summary["gangs"], f.slots, strict=True):
        if g["key"] in outcomes.rows:
            gang_notes, pod_notes = placement_notes(g["tasks"], outcomes.outcome(g["key"]))
            filled += repeat(written(gang_notes), groups)
            filled += map(written, pod_notes)
        else:
            filled += repeat(b"", groups + len(g["tasks"]))
    if len(filled) != len(f.at):
        raise _Whole
    widest = max(map(len, filled), default=0)
    if not annotations_fit(len(lines) + widest) and \
            not annotations_fit(max(map(len, bytes(lines).split(_OBJECT_END[fmt]))) + widest):
        raise _Whole
    starts = [0, *map(len(_slot_text(fmt)).__add__, f.at)]
    cuts = list(map(lines.__getitem__, map(slice, starts, [*f.at, len(lines)])))
    pieces: list[bytes | memoryview] = list(chain.from_iterable(zip(cuts, filled)))
    pieces.append(cuts[-1])
    return pieces


_OBJECT_END = {"json": b"\n", "yaml": b"\n---\n"}
"""What the stream holds only between two objects, in each format (in YAML no line of an object is ``---``: a
plain ``---`` is quoted and block lines are indented)."""


_Spilled = tuple[tuple[str, int, int], list[dict[str, Any]], list["GangOutcome | None"]]
"""A file for :func:`_write_chunk`: where its objects were spilled, and each gang's tasks, pool and outcome (None:
the gang's pool packs nothing)."""

_Given = tuple[str, dict[str, str], list[dict[str, Any]], str, bool]
"""What every chunk :func:`_write_chunk` writes needs: the format, each pool's pin, the pool objects, the KAI
schema version, and whether the objects were spilled as JSON (else in :mod:`marshal`'s format)."""


def _write_chunk(item: tuple[_Given, str, list[_Spilled]]) -> list[int]:
    """In a worker: each file's objects (as spilled) annotated with their gangs' outcomes and written, one after
    the other, to a new file at the path given; returns each file's length. Raises :class:`_Whole` when the
    output check finds a problem, for the whole pipeline to report."""
    import marshal

    import orjson

    from toporender.emit.stream import dump_chunks
    from toporender.placement.outcomes import annotate_objects
    from toporender.validation import output_problems

    (fmt, pins, pool_objects, kai, as_json), path, items = item
    loads = orjson.loads if as_json else marshal.loads
    fresh: list[dict[str, Any]] = []
    out: list[bytes] = []
    for spilled, gangs, found in items:
        flat: list[dict[str, Any]] = []
        for g, (group_objects, pods), outcome in zip(gangs, loads(_unspill(spilled)), found, strict=True):
            if outcome is not None:
                annotate_objects(g["tasks"], pins[g["pool"]], group_objects, pods, outcome)
            flat += group_objects + pods
        fresh += flat
        out.append(b"".join(dump_chunks(flat, fmt)))
    if output_problems(pool_objects + fresh, kai_version=kai):
        raise _Whole
    with open(path, "xb") as fh:
        fh.writelines(out)
    return [len(data) for data in out]


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


