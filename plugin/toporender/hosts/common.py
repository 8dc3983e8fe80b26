"""Small helpers shared by the host adapters (Argo CD, KRM, pre-commit).

The adapters only translate a host's inputs into :class:`toporender.pipeline.RenderOptions` and the
result back into the host's output format; these helpers keep that translation uniform.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath
from typing import Any

from toporender.errors import Diagnostic, Position, fail

TRUE_WORDS = {"1", "true", "yes", "on", "y"}
FALSE_WORDS = {"0", "false", "no", "off", "n", ""}


def parse_bool(value: object, what: str, pos: Position | None = None) -> bool:
    """Accept YAML/JSON booleans and the usual words ("true", "no", "1", ...)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise fail(f"{what} must be true or false, got {value!r}", pos)


def check_repo_relative(value: str, what: str, pos: Position | None = None) -> str:
    """A path that must stay inside the repo: relative, no ``..`` segments, POSIX separators."""
    path = PurePosixPath(value.replace("\\", "/"))
    if not value.strip() or path.is_absolute() or ".." in path.parts:
        raise fail(f"{what} must be a path relative to the repo that stays inside it, got {value!r}", pos)
    return path.as_posix()


def write_stdout(text: str | Sequence[bytes | memoryview]) -> None:
    """Write the whole output at once as UTF-8, whatever the locale of the host process.

    ``text`` may be UTF-8 pieces, all rendered before the first is written."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # replaced stdout (tests)
        sys.stdout.write(text if isinstance(text, str) else b"".join(text).decode())
    else:
        sys.stdout.flush()
        if isinstance(text, str):
            buffer.write(text.encode("utf-8"))
        elif len(text) > _IOV_MAX and hasattr(os, "writev") and (fd := _fileno(buffer)) is not None:
            buffer.flush()
            write_pieces(fd, text)
        else:
            buffer.writelines(text)
    sys.stdout.flush()


_IOV_MAX = 1024
"""The most pieces one ``writev`` takes (POSIX requires at least 16; Linux takes 1,024)."""


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (OSError, ValueError):  # io.UnsupportedOperation is both: a stream in memory
        return None


def write_pieces(fd: int, pieces: Sequence[bytes | memoryview]) -> None:
    """Write ``pieces`` to ``fd`` in order, :data:`_IOV_MAX` at a time: a stream of a few hundred thousand
    pieces (a large render's lines, cut where placement annotates them) went through the buffered writer's
    8 KiB buffer one piece at a time, twice as slow. A short write (a signal, a full pipe) writes the rest
    again; a write that takes nothing raises OSError."""
    for start in range(0, len(pieces), _IOV_MAX):
        batch = [piece for piece in pieces[start:start + _IOV_MAX] if len(piece)]
        first = 0
        while first < len(batch):
            done = os.writev(fd, batch[first:])
            if not done:
                raise OSError(errno.EIO, "the output took no bytes")
            while first < len(batch) and done >= len(batch[first]):
                done -= len(batch[first])
                first += 1
            if done:
                batch[first] = memoryview(batch[first])[done:]


def read_stdin() -> str:
    """All of stdin as UTF-8 text (a non-UTF-8 byte is a clean error, not a crash)."""
    buffer = getattr(sys.stdin, "buffer", None)
    raw = buffer.read() if buffer is not None else sys.stdin.read().encode("utf-8")
    try:
        return str(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise fail(f"stdin is not valid UTF-8 (byte {exc.start})") from None


def check_namespace(value: str, what: str, pos: Position | None = None) -> str:
    """A namespace must be a DNS-1123 label (the API server rejects anything else at apply time)."""
    from toporender.expand.naming import is_dns_label

    if not is_dns_label(value):
        raise fail(
            f"{what} {value!r} is not a valid namespace (lower-case letters, digits and '-', at most 63 characters)",
            pos,
        )
    return value


def print_diagnostics(diags: Iterable[Diagnostic]) -> None:
    for d in diags:
        print(str(d), file=sys.stderr)
