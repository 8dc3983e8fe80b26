"""Safe YAML loading that remembers where every value came from.

Users' files are untrusted: we build plain data straight from the parser's event stream
(no Python tags, no object construction), with an explicit stack so deep nesting cannot crash
the interpreter, a bound on alias expansion (billion laughs), duplicate keys as errors, and a
size limit. Every mapping key, sequence item and value gets a position so later stages can say
``path:line:col``.

Most files are read by the fast reader (:mod:`toporender.load.yaml_fast`); the exact, position-tracking
loader (:mod:`toporender.load.yaml_exact`, over PyYAML) reads the rest and works out positions when a message
needs them, and is imported only then.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from toporender.errors import Position, fail
from toporender.load.walk import READ_FLAGS, file_kind
from toporender.load.yaml_fast import UNSURE, load_plain
from toporender.load.yaml_limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, Loc

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "MAX_NODES", "Document", "Loc", "first_invalid_utf8", "load_file",
           "load_text", "read_text"]




@dataclass
class Document:
    """One YAML document: plain data plus the position of every value in it.

    A document read by the fast reader keeps its ``text`` instead of positions; the positions are
    worked out by the exact loader the first time a message needs one (rarely, and never on the
    happy path).
    """

    source: str
    index: int
    data: Any
    marks: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    text: str | None = field(default=None, repr=False, compare=False)

    def pos(self, loc: Loc = ()) -> Position:
        """Position of ``loc`` or of its nearest ancestor that has one."""
        if self.text is not None:
            self.marks = _exact_documents(self.text, self.source, MAX_NODES * 64)[self.index].marks
            self.text = None
        wanted = loc = tuple(loc)
        while loc and loc not in self.marks:
            loc = loc[:-1]
        line, col = self.marks.get(loc, (1, 1))
        return Position(self.source, line, col, wanted, self.index)


def load_text(text: str, source: str, *, max_bytes: int = MAX_FILE_BYTES,
              max_nodes: int = MAX_NODES) -> list[Document]:
    """Parse every document of ``text``; ``source`` is the path shown in messages."""
    if len(text) > max_bytes:
        raise fail(f"file is larger than {_size(max_bytes)}; split it", Position(source))
    data = load_plain(text, max_nodes=max_nodes, max_depth=MAX_DEPTH)
    if data is not UNSURE:
        return [Document(source, 0, data, text=text)]
    return _exact_documents(text, source, max_nodes)


def _exact_documents(text: str, source: str, max_nodes: int) -> list[Document]:
    """The exact loader (:mod:`toporender.load.yaml_exact`): every document of ``text`` with the position of
    every value."""
    from toporender.load.yaml_exact import exact_documents

    return [Document(source, i, data, marks) for i, (data, marks) in enumerate(exact_documents(text, source,
                                                                                                max_nodes))]


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def read_text(path: Path, source: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """Read a user file as UTF-8 with clear errors for the usual ways this goes wrong."""
    try:
        # one open and fstat: three calls on the path each were a sixth of a read. Opened without waiting, so a
        # named pipe is refused below instead of blocking the read until someone writes to it.
        with open(os.open(path, READ_FLAGS), "rb") as stream:
            info = os.fstat(stream.fileno())
            kind = file_kind(info.st_mode)
            if kind == "a directory":
                raise IsADirectoryError
            if kind is not None:
                raise fail(f"expected a regular file but found {kind}; replace it with the file itself",
                           Position(source))
            if info.st_size > max_bytes:
                raise fail(f"file is larger than {_size(max_bytes)}; split it", Position(source))
            raw = stream.read()
    except IsADirectoryError:
        raise fail("expected a file but found a directory", Position(source)) from None
    except FileNotFoundError:
        raise fail("file not found", Position(source)) from None
    except OSError as exc:
        raise fail(f"cannot read file: {exc.strerror or exc}", Position(source)) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _line_col(raw, exc.start)
        raise fail(NOT_UTF8, Position(source, line, col)) from None


NOT_UTF8 = "file is not valid UTF-8; save it as UTF-8"
_UTF8_BLOCK = 4 * 1024 * 1024


def _line_col(raw: bytes, offset: int, line: int = 1) -> tuple[int, int]:
    line += raw.count(b"\n", 0, offset)
    return line, offset - (raw.rfind(b"\n", 0, offset) + 1) + 1


def first_invalid_utf8(stream: BinaryIO) -> tuple[int, int] | None:
    """(line, column) of the first byte of ``stream`` that is not UTF-8, read block by block; None when every
    byte is. For a file read as a stream, where the decoder's error knows only its place in one block."""
    line, col, carry = 1, 0, b""  # col: bytes since the last line break before ``data``
    while True:
        block = stream.read(_UTF8_BLOCK)
        data = carry + block
        try:
            data.decode("utf-8")
            done = len(data)
        except UnicodeDecodeError as exc:
            if not (block and exc.reason == "unexpected end of data"):
                if data.rfind(b"\n", 0, exc.start) >= 0:
                    return _line_col(data, exc.start, line)
                return line, col + exc.start + 1
            done = exc.start  # a character cut by the block's end: decoded with the next block
        if not block:
            return None
        carry = data[done:]
        breaks = data.count(b"\n", 0, done)
        line += breaks
        col = done - (data.rfind(b"\n", 0, done) + 1) if breaks else col + done


def load_file(path: Path, source: str | None = None, *, max_bytes: int = MAX_FILE_BYTES,
              max_nodes: int = MAX_NODES) -> list[Document]:
    """Load every YAML document in ``path``."""
    shown = source if source is not None else str(path)
    return load_text(read_text(path, shown, max_bytes), shown, max_bytes=max_bytes, max_nodes=max_nodes)
