"""A content-addressed cache of finished renders, so re-rendering an unchanged repo costs a hash, not a render.

A render is a deterministic function of toporender's own code, the options, ``toporender.yaml``, the workflow
files the config's patterns match, ``toporender.lock`` and the inventory files. The key of an entry covers all
of them: the config's bytes, the files the patterns match now (by name and content hash), the lock and the
inventories the config names, read with a plain YAML read of the config before anything is parsed. A new,
removed or edited file is a new key, so a stale render is never served. The render checks that its own parse
of the config names the same patterns and inventories, and takes the key again afterwards, before it stores.

Besides whole renders it keeps the parts a render is made of, per workflow file, per packing and per
inventory, from which :mod:`toporender.rerender` renders again only what changed.

Only successful renders are stored. A bad input renders uncached every time and fails exactly as without a
cache. The cache directory may be shared or written by someone else, so nothing in it is trusted: entries are
plain bytes behind a versioned header with their kind, key, length and CRC-32; anything that does not match
is a miss and gets rewritten. Nothing is ever unpickled or evaluated. Entries are read from regular files only
(not links, pipes or devices) of at most an entry's size, and written to files created anew, never through a
link someone put in the directory.

The check is a CRC-32, not a cryptographic hash: it is there to catch a torn, truncated or damaged file, and
twice as fast over the tens of megabytes a cache hit reads. A hash would not stop a forged entry either, since
whoever can write an entry can write its hash.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import stat
import sys
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import toporender
from toporender.errors import Diagnostic, Position
from toporender.load import walk
from toporender.options import RenderOptions

FORMAT = "toporender-cache 2"
"""Entry header; bumped when the layout of an entry changes, which makes every older entry a miss."""
MAX_ENTRY_BYTES = 256 * 2**20
"""A render larger than this is not stored (the 1M-GPU repo would be half a gigabyte of JSON)."""
DEFAULT_MAX_BYTES = 2 * 2**30
"""What the cache directory may hold before the least recently used entries go (``TOPORENDER_CACHE_MAX_MB``)."""
CONFIG_FILE = "toporender.yaml"
LOCK_FILE = "toporender.lock"
LIBRARIES = ("yaml_rs", "yaml", "ruamel", "orjson", "jinja2", "markupsafe", "pydantic", "pydantic_core", "click",
             "jsonschema")
DISABLE_ENV = "TOPORENDER_NO_CACHE"
OFF_WORDS = {"", "0", "false", "no", "off", "n"}


def cache_directory(environ: Mapping[str, str]) -> Path | None:
    """``$TOPORENDER_CACHE_DIR``, else ``$XDG_CACHE_HOME/toporender``, else ``~/.cache/toporender``; None when
    ``$TOPORENDER_NO_CACHE`` is set to a true word, or no home directory is known."""
    if environ.get(DISABLE_ENV, "").strip().lower() not in OFF_WORDS:
        return None
    if environ.get("TOPORENDER_CACHE_DIR"):
        return Path(environ["TOPORENDER_CACHE_DIR"])
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]) / "toporender"
    home = environ.get("HOME")
    return Path(home) / ".cache" / "toporender" if home else None


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        h.update(b"%d:" % len(data))
        h.update(data)
    return h.hexdigest()


_CODE: list[str] = []


def code_fingerprint() -> str:
    """toporender's version and the size and mtime of each of its files, and the libraries' folders.

    The version string alone misses an edited checkout; installing or upgrading a library that shapes the
    output (YAML, JSON, Jinja2, pydantic) changes the modification time of the folder it went into; code
    that ``PYTHONPATH`` or a ``sitecustomize`` module puts in front of ours changes the render too."""
    if _CODE:
        return _CODE[0]
    package = Path(toporender.__file__).parent
    parts = [toporender.__version__, sys.version]
    for directory, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            info = os.stat(os.path.join(directory, name))
            parts.append(f"{os.path.relpath(os.path.join(directory, name), package)}:{info.st_size}:"
                         f"{info.st_mtime_ns}")
    parts.append(os.environ.get("PYTHONPATH", ""))
    for name in ("sitecustomize", "usercustomize"):
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if origin:
            with contextlib.suppress(OSError):
                parts.append(f"{name}:{origin}:{os.stat(origin).st_mtime_ns}")
    for name in LIBRARIES:
        with contextlib.suppress(ImportError, ValueError, OSError):
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.origin:
                origin = Path(spec.origin)
                folder = origin.parent.parent if origin.name == "__init__.py" else origin.parent
                parts.append(f"{name}:{origin}:{os.stat(origin).st_mtime_ns}:{os.stat(folder).st_mtime_ns}")
    _CODE.append(digest(*parts))
    return _CODE[0]


HEADER_BYTES = 512
"""An entry's first line is shorter than this."""
_READ_FLAGS = walk.READ_FLAGS | getattr(os, "O_NOFOLLOW", 0)
"""An entry is never read through a link."""
_WRITE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                | getattr(os, "O_BINARY", 0))
"""A new file only, never through a link: a link planted at the temporary name would send the write elsewhere."""
MAX_INPUT_BYTES = 256 * 2**20
""":data:`toporender.placement.inventory.MAX_INVENTORY_BYTES`, the largest file a render reads (a test keeps them
equal; that module is not imported on a cache hit); a larger one renders uncached, and fails there."""


def _read_regular(fd: int, limit: int) -> bytes | None:
    """The contents of the open file ``fd`` when it is a regular file of at most ``limit`` bytes, else None."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        return None
    parts = []
    got = 0
    while got <= info.st_size:
        part = os.read(fd, info.st_size + 1 - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    if got > info.st_size:
        return None  # grew while read: not an entry a render wrote (those are renamed into place whole)
    return parts[0] if len(parts) == 1 else b"".join(parts)  # one part, as a rule: no copy of it


def entry_header(kind: str, key: str, payload: bytes | memoryview) -> bytes:
    """The first line of an entry: the format, what the entry is, and the payload's length and CRC-32."""
    return f"{FORMAT} {kind} {key} {len(payload)} {zlib.crc32(payload):08x}\n".encode()


class Store:
    """Entries as files ``<dir>/<kind>-<key>``; written atomically (a temporary file named by the writing
    process, then a rename), so concurrent renders sharing a directory each see a whole entry or none."""

    def __init__(self, directory: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.directory = directory / "v1"
        self.max_bytes = max_bytes

    def _path(self, kind: str, key: str) -> Path:
        return self.directory / f"{kind}-{key}"

    def read(self, kind: str, key: str) -> memoryview | None:
        """The payload of a whole, intact entry (a view, not a copy: a render can be tens of megabytes).

        Only a regular file is read, and only up to the largest size an entry can have: whoever can write the
        directory can put a link there (to a device that never ends), a pipe (whose read would wait forever) or a
        file of any size, and each of those is a miss."""
        try:
            fd = os.open(self._path(kind, key), _READ_FLAGS)
        except OSError:
            return None
        try:
            raw = _read_regular(fd, MAX_ENTRY_BYTES + HEADER_BYTES)
            end = raw.find(b"\n", 0, HEADER_BYTES) if raw is not None else -1
            if raw is None or end < 0:
                return None
            payload = memoryview(raw)[end + 1:]
            if raw[:end + 1] != entry_header(kind, key, payload):
                return None
            with contextlib.suppress(OSError, NotImplementedError):
                os.utime(fd)
            return payload
        except OSError:
            return None
        finally:
            os.close(fd)

    def write(self, kind: str, key: str, payload: bytes | memoryview, *, evict: bool = True) -> None:
        """Store ``payload``; a failure to write (read-only or full disk) only costs the next render time.
        ``evict=False`` leaves trimming the directory to a later write (a render that writes several entries
        scans the directory once)."""
        if len(payload) > MAX_ENTRY_BYTES:
            return
        head = entry_header(kind, key, payload)
        path = self._path(kind, key)
        tmp = self.directory / f".tmp-{kind}-{key}.{os.getpid()}"
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                fd = os.open(tmp, _WRITE_FLAGS, 0o600)
            except FileExistsError:  # left by an earlier process of this pid, or a link someone put there
                tmp.unlink()
                fd = os.open(tmp, _WRITE_FLAGS, 0o600)
            with open(fd, "wb") as fh:
                fh.write(head)
                fh.write(payload)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            return
        if evict:
            self.evict()

    def evict(self) -> None:
        """Drop the least recently used entries once the directory holds more than its cap (to 3/4 of it)."""
        entries = []
        with contextlib.suppress(OSError), os.scandir(self.directory) as scan:
            for item in scan:
                with contextlib.suppress(OSError):
                    info = item.stat(follow_symlinks=False)
                    entries.append((info.st_mtime_ns, info.st_size, item.path))
        total = sum(size for _, size, _ in entries)
        if total <= self.max_bytes:
            return
        for _, size, path in sorted(entries):
            with contextlib.suppress(OSError):
                os.unlink(path)
                total -= size
            if total <= self.max_bytes * 3 // 4:
                return


class Plans:
    """The packer's outcomes per pool, kept between renders (:class:`toporender.placement.stage.PlanMemo`): a
    render that changes no demand and no inventory byte skips reading the inventory and packing."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, key: str) -> Any | None:
        import orjson

        raw = self.store.read("plan", digest(code_fingerprint(), key))
        try:
            return orjson.loads(raw) if raw is not None else None
        except orjson.JSONDecodeError:
            return None

    def put(self, key: str, data: Any) -> None:
        import orjson

        self.store.write("plan", digest(code_fingerprint(), key), orjson.dumps(data))


def open_store(root: Path, environ: Mapping[str, str] = os.environ) -> Store | None:
    """The cache for rendering ``root``, or None when caching is off or the directory lies inside the repo
    (the cache never writes into the repo it renders)."""
    directory = cache_directory(environ)
    if directory is None:
        return None
    try:
        if walk.inside(root, directory):
            return None
        max_mb = environ.get("TOPORENDER_CACHE_MAX_MB")
        return Store(directory, int(max_mb) * 2**20 if max_mb else DEFAULT_MAX_BYTES)
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Inputs:
    """What a render of the repo will read, as far as the config's own text says: the workflow patterns and
    the inventory files (read before parsing the config, so with a plain YAML read of it)."""

    patterns: tuple[str, ...]
    inventories: tuple[str, ...]


DEFAULT_PATTERNS = ("workflows/**/*.yaml", "workflows/**/*.yml")


def config_inputs(config: bytes, inventory: str | None) -> Inputs | None:
    """The patterns and inventories ``config`` names, or None when it is anything but a plain mapping
    (the render then parses and reports it, uncached). Any deterministic reading will do: the render checks
    that its own parse of the config names the same before it stores anything. So it is ``yaml_rs`` itself,
    without the checks :mod:`toporender.load.yaml_fast` needs for a whole file (importing those is a twentieth
    of a cache hit)."""
    try:
        import yaml_rs

        data = yaml_rs.loads(config.decode("utf-8-sig"), parse_datetime=False,
                             duplicate_key_policy=yaml_rs.DuplicateKeyPolicy.Error)
    except Exception:  # noqa: BLE001 - any problem with the config (or no yaml_rs) is the uncached render's
        return None
    if not isinstance(data, dict):
        return None
    patterns = data.get("workflows", list(DEFAULT_PATTERNS))
    if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
        return None
    pools = data.get("pools")
    named = [inventory, data.get("inventory")]
    if isinstance(pools, dict):
        named += [p.get("inventory") for p in pools.values() if isinstance(p, dict)]
    if not all(n is None or isinstance(n, str) for n in named):
        return None
    return Inputs(tuple(patterns), tuple(sorted({n for n in named if isinstance(n, str)})))


def _file_hash(root: Path, rel: str, found: bool = False) -> tuple[str, int]:
    """SHA-256 and size of a regular file inside the repo (("-", 0) when nothing is there); raises OSError for
    anything a render would refuse or report (a link out of the repo, a folder, a path that leaves the repo).
    ``found``: the walk just classified ``rel`` as a regular file inside the repo (resolving each of 10,000
    files again cost 0.5 s)."""
    path = root / rel
    if not found:
        if os.path.isabs(rel) or ".." in Path(rel).parts:
            raise OSError(f"{rel} is outside the repo")
        if not os.path.lexists(path):
            return "-", 0
        if not walk.inside(root, path) or not path.is_file():
            raise OSError(f"{rel} is not a regular file inside the repo")
    fd = os.open(path, walk.READ_FLAGS)
    try:
        data = _read_regular(fd, MAX_INPUT_BYTES)
    finally:
        os.close(fd)
    if data is None:  # replaced since it was looked at, or larger than any input a render reads
        raise OSError(f"{rel} is not a regular file of a size a render reads")
    return hashlib.sha256(data).hexdigest(), len(data)


@dataclass(frozen=True)
class Taken:
    """A render's key and what it was taken from: the config's hash, and each workflow file's (in the order a
    render reads them) with its size, and the hashes of the lock and inventory files."""

    key: str
    inputs: Inputs
    config: str
    files: tuple[tuple[str, str, int], ...]
    others: tuple[tuple[str, str], ...]


def render_key(root: Path, what: str, inventory: str | None, *, contents: bool = True) -> Taken | None:
    """The key of rendering ``root`` with ``what`` (options and output kind): toporender's code, the config's
    bytes, and the content of every file the render reads. None when the repo is one a render would refuse
    (a missing or unusual config, a pattern that matches something unreadable): those render uncached.

    Without ``contents``, the workflow files are not read (their hashes are left empty), for a render that
    stores nothing and only needs the list of files and their sizes."""
    try:
        config = root / CONFIG_FILE
        if not walk.inside(root, config) or not config.is_file():
            return None
        raw = config.read_bytes()
        inputs = config_inputs(raw, inventory)
        if inputs is None or any(os.path.isabs(p) or ".." in Path(p).parts for p in inputs.patterns):
            return None
        found = walk.find(root, list(inputs.patterns), {CONFIG_FILE})
        if found.problems:
            return None
        files = tuple((rel, *_file_hash(root, rel, found=True)) if contents else (rel, "", found.sizes[rel])
                      for rel in sorted(found.files))
        others = tuple((rel, _file_hash(root, rel)[0]) for rel in (LOCK_FILE, *inputs.inventories))
        parts: list[bytes | str] = [FORMAT, code_fingerprint(), what, raw]
        parts += [f"w\0{rel}\0{sha}" for rel, sha, _ in files]
        parts += [f"x\0{rel}\0{sha}" for rel, sha in others]
        return Taken(digest(*parts), inputs, hashlib.sha256(raw).hexdigest(), files, others)
    except (OSError, walk.TooManyEntries, ValueError):
        return None


@dataclass(frozen=True)
class Found:
    """A render's key and the inputs it was taken from; ``meta`` and ``body`` when the cache holds it."""

    key: str
    inputs: Inputs
    meta: dict[str, Any] | None = None
    head: memoryview | bytes = b""
    parts: tuple[memoryview, ...] = ()
    """The ``emit`` entries a render written file by file lists after its own body (:func:`pack_entry`)."""
    taken: Taken | None = None

    @property
    def pieces(self) -> list[memoryview | bytes]:
        """The stored render, as the pieces to write one after the other."""
        return [p for p in (self.head, *self.parts) if p]

    @property
    def body(self) -> memoryview | bytes:
        """The stored render in one piece."""
        return b"".join(self.pieces) if self.parts else self.head


def find(store: Store, root: Path, kind: str, options: RenderOptions, *, read: bool = True) -> Found | None:
    """Look up the render of ``root`` as ``kind`` (what is stored: a stream format, a result) with
    ``options``. None when the repo cannot be cached; an entry that is not exactly what a render stored (a
    bad header, length or hash, a meta part that does not parse) is a miss, rewritten by the next render."""
    taken = render_key(root, f"{kind} {options!r}", options.inventory)
    if taken is None:
        return None
    key, inputs = taken.key, taken.inputs
    payload = store.read("render", key) if read else None
    entry = unpack_entry(payload) if payload is not None else None
    if entry is not None:
        meta, body = entry
        try:
            diagnostics_from_json(meta["warnings"])
            names = meta.get("parts", [])
            if not isinstance(names, list) or not all(isinstance(p, str) and len(p) == 64 for p in names):
                raise ValueError("bad parts")
            parts = tuple(p for p in (store.read("emit", name) for name in names) if p is not None)
            if len(parts) != len(names):
                raise ValueError("a part is gone")
            if meta["lock"] is None or isinstance(meta["lock"], str):
                return Found(key, inputs, meta, body, parts, taken)
        except (KeyError, TypeError, ValueError):
            pass
    return Found(key, inputs, taken=taken)


def diagnostics_to_json(diags: list[Diagnostic]) -> list[Any]:
    return [[d.message, d.severity] + ([] if d.pos is None else
                                       [d.pos.path, d.pos.line, d.pos.col, list(d.pos.data_path), d.pos.doc_index])
            for d in diags]


def diagnostics_from_json(items: Any) -> list[Diagnostic]:
    """Raises ValueError on anything but what :func:`diagnostics_to_json` wrote."""
    out = []
    for item in items:
        if len(item) == 2:
            out.append(Diagnostic(str(item[0]), None, str(item[1])))
        elif len(item) == 7:
            message, severity, path, line, col, data_path, index = item
            if not all(isinstance(v, int) for v in (line, col, index)):
                raise ValueError("bad position")
            pos = Position(str(path), line, col, tuple(data_path), index)
            out.append(Diagnostic(str(message), pos, str(severity)))
        else:
            raise ValueError("bad diagnostic")
    return out


def pack_entry(meta: dict[str, Any], body: bytes) -> bytes:
    """One entry: a JSON header line (warnings, lock, ...) then the body bytes as they are.

    A render written file by file (:mod:`toporender.rerender`) lists its files' ``emit`` entries under
    ``parts`` instead of copying them: its body is the pool objects, and the files' bytes follow from those
    entries (a part that is gone makes the whole entry a miss)."""
    return json.dumps(meta, sort_keys=True, separators=(",", ":")).encode() + b"\n" + body


def unpack_entry(payload: memoryview) -> tuple[dict[str, Any], memoryview] | None:
    """The meta part and a view of the body (no copy of a render that may be tens of megabytes)."""
    n = 4096
    end = bytes(payload[:n]).find(b"\n")
    while end < 0 and n < len(payload):
        n *= 8
        end = bytes(payload[:n]).find(b"\n")
    if end < 0:
        return None
    try:
        meta = json.loads(bytes(payload[:end]))
    except ValueError:
        return None
    return (meta, payload[end + 1:]) if isinstance(meta, dict) else None
