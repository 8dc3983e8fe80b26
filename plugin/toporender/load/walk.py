"""Find the workflow files of a repo: a bounded walk that visits each directory once.

``glob.glob(recursive=True)`` follows directory symlinks without remembering where it has been, so two links
to ``.`` make it run forever, and it silently drops what is not a regular file. Workflow repos come from Git,
where both are ordinary. This walk resolves every directory it enters, enters each real directory once,
refuses links that leave the repo, stops after :data:`MAX_ENTRIES` directory entries, and reports a match that
is not a regular file (a directory, a pipe, a device, a dangling link) instead of skipping it: under Argo CD
with prune, a skipped workflow is a deleted one.

Patterns are ``glob`` patterns relative to the repo: ``*``, ``?`` and ``[...]`` within one path segment, and
``**`` as a whole segment for any number of directories. As with ``glob``, wildcards do not match names that
start with a dot.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_ENTRIES = 50_000
"""Directory entries one discovery may look at; a repo with more under its workflow folders is refused."""

_MAGIC = re.compile(r"[*?\[]")


@dataclass
class Found:
    """Regular files that match, and matches that cannot be read as one (repo-relative path, reason)."""

    files: set[str] = field(default_factory=set)
    problems: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    """Each file's size when the walk looked at it."""


class TooManyEntries(Exception):
    """The walk looked at :data:`MAX_ENTRIES` entries without finishing."""


def segments(pattern: str) -> list[str]:
    """A pattern's path segments (empty and ``.`` segments dropped)."""
    return [p for p in pattern.split("/") if p not in ("", ".")]


def static_prefix(parts: list[str]) -> list[str]:
    """The leading segments of a pattern that hold no wildcard (``**`` is one): the folder it searches."""
    out: list[str] = []
    for part in parts:
        if _MAGIC.search(part):
            break
        out.append(part)
    return out


@functools.lru_cache(maxsize=256)
def _segment(part: str) -> re.Pattern[str]:
    """A wildcard segment as a regular expression, made once: translating it for each of 10,000 files was half
    of a large repo's walk."""
    return re.compile(fnmatch.translate(part))


def matches(parts: list[str], pattern: list[str]) -> bool:
    """Whether path segments ``parts`` match pattern segments (``**`` for zero or more segments)."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(matches(parts[i:], rest) for i in range(len(parts) + 1)
                   if all(not p.startswith(".") for p in parts[:i]))
    if not parts:
        return False
    name = parts[0]
    if _MAGIC.search(head):
        if name.startswith(".") and not head.startswith("."):
            return False
        if not _segment(head).match(name):
            return False
    elif name != head:
        return False
    return matches(parts[1:], rest)


READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
"""How to open a file to read it: without waiting, so that a named pipe found in its place can be refused (by
``fstat`` and :func:`file_kind`) instead of blocking until someone writes to it."""


def file_kind(mode: int) -> str | None:
    """What a file of ``mode`` is, when it is not a regular file (None for one), as messages name it."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def find(root: Path, patterns: list[str], exclude: set[str]) -> Found:
    """Every path under ``root`` that matches one of ``patterns`` (already checked to be relative and free of
    ``..``), except ``exclude``."""
    found = Found()
    real_root = root.resolve()
    visited: set[tuple[int, int]] = set()
    budget = [MAX_ENTRIES]
    split = [segments(pattern) for pattern in patterns]
    for pattern in split:
        static = static_prefix(pattern)
        if len(static) == len(pattern):
            _visit_leaf(root, real_root, static, found, exclude)
            continue
        base = root.joinpath(*static)
        if static and not base.is_dir():
            continue
        _walk(root, real_root, base, static, split, found, exclude, visited, budget)
    return found


def _visit_leaf(root: Path, real_root: Path, parts: list[str], found: Found, exclude: set[str]) -> None:
    rel = "/".join(parts)
    path = root / rel
    if rel in exclude or not os.path.lexists(path):
        return
    _classify(path, rel, real_root, found)


def _classify(path: Path | str, rel: str, real_root: Path, found: Found, linked: bool = True) -> None:
    """``linked=False``: ``path`` is no symlink and sits in a directory already resolved inside the repo, so it
    is inside too (resolving each of 10,000 workflow files cost a large repo 0.4 s)."""
    try:
        info = os.stat(path)
    except OSError:
        found.problems[rel] = "is a symlink that points nowhere (dangling) or cannot be read"
        return
    if linked and not Path(path).resolve().is_relative_to(real_root):
        found.problems[rel] = "symlink points outside the repo; copy the file into the repo instead"
        return
    kind = file_kind(info.st_mode)
    if kind is None:
        found.files.add(rel)
        found.sizes[rel] = info.st_size
    else:
        found.problems[rel] = f"matches a workflow pattern but is {kind}; a workflow must be a regular file"


def _walk(root: Path, real_root: Path, base: Path, prefix: list[str], patterns: list[list[str]], found: Found,
          exclude: set[str], visited: set[tuple[int, int]], budget: list[int]) -> None:
    stack = [(base, prefix)]
    while stack:
        directory, parts = stack.pop()
        try:
            info = directory.stat()
        except OSError:
            continue
        key = (info.st_dev, info.st_ino)
        if key in visited:
            continue
        visited.add(key)
        if not directory.resolve().is_relative_to(real_root):
            found.problems["/".join(parts)] = "symlink to a directory outside the repo; remove it"
            continue
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            found.problems["/".join(parts) or "."] = f"cannot be listed ({exc.strerror})"
            continue
        for entry in entries:
            budget[0] -= 1
            if budget[0] < 0:
                raise TooManyEntries
            sub = [*parts, entry.name]
            rel = "/".join(sub)
            if any(matches(sub, p) for p in patterns) and rel not in exclude:
                try:
                    linked = entry.is_symlink()
                except OSError:
                    linked = True
                _classify(entry.path, rel, real_root, found, linked)
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir and any(could_hold(sub, p) for p in patterns):
                stack.append((Path(entry.path), sub))


def could_hold(parts: list[str], pattern: list[str]) -> bool:
    """Whether a directory at ``parts`` may contain a match of ``pattern`` (a prefix match)."""
    for i, head in enumerate(pattern):
        if head == "**":
            return all(not p.startswith(".") for p in parts[i:])
        if i >= len(parts):
            return True
        name = parts[i]
        if _MAGIC.search(head):
            if (name.startswith(".") and not head.startswith(".")) or not _segment(head).match(name):
                return False
        elif name != head:
            return False
    return False


def files_under(directory: Path) -> list[Path]:
    """Regular files below ``directory``, without following links, each directory once, bounded like
    :func:`find`."""
    out: list[Path] = []
    budget = MAX_ENTRIES
    stack = [directory]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            budget -= 1
            if budget < 0:
                raise TooManyEntries
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                out.append(Path(entry.path))
    return out


def inside(root: Path, path: Path) -> bool:
    """True when ``path`` (after resolving symlinks) stays inside ``root``; here, with no loader imports, so
    that the render cache can check paths without loading the loader."""
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True
