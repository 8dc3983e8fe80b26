"""Atomic file writes: an interrupted run never leaves a truncated or half-written file.

The content goes to a temporary file in the *same directory* (so the final rename never crosses a
file system), is flushed and fsync'ed, gets the target's permission bits, and then replaces the
target with ``os.replace`` (atomic on POSIX). The directory is fsync'ed afterwards so the rename
itself survives a crash. A process killed at any point leaves either the old file or the new one;
at worst a stale ``.toporender-*.tmp`` file stays behind, which :func:`is_temp_name` recognises so
callers can ignore or clean it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

TEMP_PREFIX = ".toporender-"
TEMP_SUFFIX = ".tmp"
DEFAULT_MODE = 0o644


def is_temp_name(name: str) -> bool:
    """True for the names of our temporary files (left over only when a writer was killed)."""
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


def _fsync_dir(directory: Path) -> None:
    # Not every platform/file system lets us open a directory; durability of the rename is then
    # best effort, atomicity is still guaranteed by os.replace.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _target_mode(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return DEFAULT_MODE & ~umask


def atomic_write(path: Path, data: bytes | str | Iterable[bytes]) -> None:
    """Replace ``path`` with ``data`` atomically, keeping the existing file's mode.

    ``data`` may be text (written as UTF-8), bytes, or an iterable of byte chunks (for large
    content; also lets tests interrupt a writer between chunks).
    """
    path = Path(path)
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    mode = _target_mode(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.{os.getpid()}.", suffix=TEMP_SUFFIX,
                                    dir=directory)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, str):
                fh.write(data.encode("utf-8"))
            elif isinstance(data, (bytes, bytearray, memoryview)):
                fh.write(data)
            else:
                for chunk in data:
                    fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _fsync_dir(directory)


def atomic_delete(path: Path) -> bool:
    """Remove ``path`` (a rename-free unlink is already atomic); False when it was already gone."""
    try:
        Path(path).unlink()
    except FileNotFoundError:
        return False
    _fsync_dir(Path(path).parent)
    return True


def _writer_gone(name: str) -> bool:
    """Whether the process that wrote temp file ``name`` (its pid is in the name) no longer runs."""
    parts = name[: -len(TEMP_SUFFIX)].split(".")
    if len(parts) < 3 or not parts[-2].isdigit():
        return False
    try:
        os.kill(int(parts[-2]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def remove_stale_temps(directory: Path, older_than: float = 600.0, *, recursive: bool = True) -> list[Path]:
    """Delete our temp files under ``directory`` left by killed writers: at once when the writer's process is
    gone, else once they are more than ``older_than`` s old.

    A young temp file of a process that still runs is left alone: it may be a writer of this moment.
    """
    removed: list[Path] = []
    if not directory.is_dir():
        return removed
    now = time.time()
    pattern = f"{TEMP_PREFIX}*{TEMP_SUFFIX}"
    for tmp in directory.rglob(pattern) if recursive else directory.glob(pattern):
        try:
            if tmp.is_file() and not tmp.is_symlink() and (
                _writer_gone(tmp.name) or now - tmp.stat().st_mtime > older_than
            ):
                tmp.unlink()
                removed.append(tmp)
        except FileNotFoundError:
            continue
    return sorted(removed)
