"""``toporender golden``: keep rendered snapshots of every workflow in the repo (pre-commit hook).

Layout: ``<golden_dir>/<source path>``: each workflow file's objects go to the same relative path
under the golden dir (``workflows/train.yaml`` -> ``golden/workflows/train.yaml``); pool-level
objects (source ``toporender.yaml``) go to ``golden/toporender.yaml``. Mirroring the source path
makes names collision-free and obvious in review.

Behaviour (see the pre-commit notes in docs/delivery.md):
- files are written only when their content changed (mtime untouched otherwise), atomically;
- each golden file starts with :data:`HEADER`; a file under the golden dir whose source is gone is deleted
  only when it starts with that line, so a file toporender did not write is never removed;
- the golden dir may not overlap an input (a workflow folder, the inventory, the config or lock file);
- every created/updated/deleted file is printed, and the exit code is 1 when anything changed,
  because pre-commit does not notice new untracked files by itself;
- ``--check`` writes nothing, prints a unified diff of the drift and exits 1 when there is any.
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path

from toporender.cache import open_store
from toporender.emit.atomic import atomic_delete, atomic_write, is_temp_name, remove_stale_temps
from toporender.emit.stream import dump_yaml
from toporender.errors import Position, fail
from toporender.hosts.common import check_repo_relative, print_diagnostics
from toporender.load import walk
from toporender.load.models import RepoConfig
from toporender.load.repo import CONFIG_FILE, load_config, single_document
from toporender.pipeline import RenderOptions, RenderResult, render_repo
from toporender.placement.outcomes import LOCK_FILE

GOLDEN_SUFFIXES = (".yaml", ".yml")
HEADER = "# Written by 'toporender golden' from {source}; do not edit, re-run it instead.\n"
HEADER_START = HEADER.split("{", 1)[0]


@dataclass
class GoldenPlan:
    """What a golden run would change, relative to the repo root."""

    root: Path
    golden_dir: str
    wanted: dict[str, str] = field(default_factory=dict)  # repo-relative golden path -> content
    create: list[str] = field(default_factory=list)
    update: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    """Files under the golden dir that toporender did not write; they are never deleted."""

    @property
    def changed(self) -> bool:
        return bool(self.create or self.update or self.delete)


def golden_dir_of(root: Path) -> str:
    """The repo's golden dir (``golden_dir`` in toporender.yaml), checked to stay inside the repo and apart from
    every input."""
    doc = single_document(root / CONFIG_FILE, CONFIG_FILE)
    config = load_config(doc)
    rel = check_repo_relative(config.golden_dir, "golden_dir", Position(CONFIG_FILE))
    if rel in ("", "."):
        raise fail("golden_dir must be a sub-directory of the repo, not the repo itself", Position(CONFIG_FILE))
    rel = Path(rel).as_posix().strip("/")
    problem = _overlap(rel, config)
    if problem:
        raise fail(f"golden_dir {rel!r} {problem}; golden files must live apart from every input (toporender "
                   "writes and deletes files there), e.g. golden_dir: golden", doc.pos(("golden_dir",)))
    target = root / rel
    if target.exists() and (target.is_symlink() or not target.resolve().is_relative_to(root.resolve())):
        raise fail(
            f"golden_dir {rel!r} is a symlink or leaves the repo; use a plain directory",
            Position(CONFIG_FILE),
        )
    return rel


def _overlap(golden: str, config: RepoConfig) -> str | None:
    """How ``golden`` overlaps an input of the repo, or None."""
    parts = golden.split("/")
    for pattern in config.workflows:
        segments = walk.segments(pattern)
        static = "/".join(walk.static_prefix(segments))
        if static and (static == golden or static.startswith(golden + "/")):
            return f"holds the workflow folder {static!r}"
        if walk.could_hold(parts, segments) or walk.matches(parts, segments):
            return f"is where the workflow pattern {pattern!r} looks for workflows"
    inventories = [config.inventory, *(pool.inventory for pool in config.pools.values())]
    for path in [CONFIG_FILE, LOCK_FILE, *(i for i in inventories if i)]:
        path = Path(path).as_posix().strip("/")
        if path == golden or path.startswith(golden + "/") or golden.startswith(path + "/"):
            return f"overlaps the input {path!r}"
    return None


def golden_files(result: RenderResult, golden_dir: str) -> dict[str, str]:
    """Golden path -> file content for one render (one file per workflow, one for pool objects)."""
    wanted: dict[str, str] = {}
    for rendered in result.files:
        wanted[f"{golden_dir}/{rendered.source}"] = HEADER.format(source=rendered.source) + dump_yaml(rendered.objects)
    return wanted


def ours(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts with the golden header (one toporender wrote)."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            return fh.read(len(HEADER_START)) == HEADER_START.encode()
    except OSError:
        return False


def existing_golden(root: Path, golden_dir: str) -> tuple[list[str], list[str]]:
    """(golden files toporender wrote, other files) under the golden dir, repo-relative and sorted."""
    base = root / golden_dir
    if not base.is_dir() or base.is_symlink():
        return [], []
    mine: list[str] = []
    others: list[str] = []
    for path in walk.files_under(base):
        if path.suffix in GOLDEN_SUFFIXES and not is_temp_name(path.name):
            (mine if ours(path) else others).append(path.relative_to(root).as_posix())
    return sorted(mine), sorted(others)


def plan(root: Path, result: RenderResult, gdir: str) -> GoldenPlan:
    p = GoldenPlan(root, gdir, golden_files(result, gdir))
    if result.lock is not None:
        p.wanted[LOCK_FILE] = result.lock
    for rel, content in sorted(p.wanted.items()):
        path = root / rel
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise fail(
                f"{rel} exists but is not a regular file; remove it so golden files can be written",
                Position(rel),
            )
        if not path.exists():
            p.create.append(rel)
        elif path.read_bytes() != content.encode("utf-8"):
            p.update.append(rel)
    mine, others = existing_golden(root, gdir)
    p.delete = [rel for rel in mine if rel not in p.wanted]
    p.foreign = [rel for rel in others if rel not in p.wanted]
    return p


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return ""


def diff(p: GoldenPlan) -> str:
    chunks: list[str] = []
    for rel in sorted(p.create + p.update + p.delete):
        old = _read(p.root / rel) if rel not in p.create else ""
        new = p.wanted.get(rel, "")
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"a/{rel}" if rel not in p.create else "/dev/null",
                tofile=f"b/{rel}" if rel not in p.delete else "/dev/null",
            )
        )
        if chunks and not chunks[-1].endswith("\n"):
            chunks[-1] += "\n\\ No newline at end of file\n"
    return "".join(chunks)


def apply(p: GoldenPlan) -> None:
    for rel in p.create + p.update:
        atomic_write(p.root / rel, p.wanted[rel])
    for rel in p.delete:
        atomic_delete(p.root / rel)
        # Drop directories that the deletion left empty (never the golden dir itself).
        parent = (p.root / rel).parent
        top = p.root / p.golden_dir
        while parent != top and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent


def run_golden(root: Path, check: bool, cache: bool = False) -> int:
    """Render ``root`` (from the render cache with ``cache``) and sync (or, with ``check``, compare) its golden
    files; returns the exit code."""
    gdir = golden_dir_of(root)  # an overlapping golden dir is refused before anything renders
    result = render_repo(root, RenderOptions(), open_store(root) if cache else None)
    print_diagnostics(result.warnings)
    p = plan(root, result, gdir)
    shown = "" if root == Path(".") else f"{root.as_posix().rstrip('/')}/"
    for rel in p.foreign:
        print(f"toporender golden: {shown}{rel} was not written by toporender (no golden header); left in place, "
              "remove it yourself if it is stale", file=sys.stderr)
    if not check:
        remove_stale_temps(p.root / p.golden_dir)
        remove_stale_temps(p.root, recursive=False)
    if not p.changed:
        return 0
    if check:
        sys.stdout.write(diff(p))
        print(
            f"toporender golden: {len(p.create) + len(p.update) + len(p.delete)} golden file(s) out of date "
            f"in {shown or './'}{p.golden_dir}; run 'toporender golden{' ' + str(root) if shown else ''}' "
            "and commit the result",
            file=sys.stderr,
        )
        return 1
    apply(p)
    for verb, items in (("created", p.create), ("updated", p.update), ("deleted", p.delete)):
        for rel in items:
            print(f"{verb} {shown}{rel}")
    print(
        "toporender golden: golden files changed; review and stage them (git add), then commit again",
        file=sys.stderr,
    )
    return 1
