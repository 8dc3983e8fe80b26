"""Writing a stream of many pieces: in order, whole, whatever a system call takes at a time."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toporender.hosts import common
from toporender.hosts.common import write_pieces, write_stdout

PIECES: list[bytes | memoryview] = [str(i).encode() * (i % 7) for i in range(5000)] + [memoryview(b"end\n")]


def test_many_pieces_are_written_in_order(tmp_path: Path) -> None:
    with open(tmp_path / "out", "wb") as fh:
        write_pieces(fh.fileno(), PIECES)
    assert (tmp_path / "out").read_bytes() == b"".join(PIECES)


@pytest.mark.parametrize("most", [1, 5, 4096])
def test_a_short_write_writes_the_rest(tmp_path: Path, most: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``writev`` may write less than it was given (a signal, a full pipe): the rest follows, once."""
    calls: list[int] = []

    def short(fd: int, buffers: list[bytes | memoryview]) -> int:
        calls.append(len(buffers))
        return os.write(fd, b"".join(buffers)[:most])

    monkeypatch.setattr(os, "writev", short)
    with open(tmp_path / "out", "wb") as fh:
        write_pieces(fh.fileno(), PIECES)
    assert (tmp_path / "out").read_bytes() == b"".join(PIECES)
    assert max(calls) <= 1024


def test_stdout_takes_many_pieces_through_a_pipe() -> None:
    code = ("from toporender.hosts.common import write_stdout\n"
            "write_stdout([b'%d\\n' % i for i in range(300000)])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout
    assert out == b"".join(b"%d\n" % i for i in range(300000))


def test_a_write_that_takes_nothing_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "writev", lambda fd, buffers: 0)
    with open(tmp_path / "out", "wb") as fh, pytest.raises(OSError, match="took no bytes"):
        write_pieces(fh.fileno(), PIECES)


def test_empty_pieces_are_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece of no bytes is not handed to ``writev``, which would take nothing for a batch of them."""
    calls: list[list[int]] = []
    real = os.writev

    def spy(fd: int, buffers: list[bytes | memoryview]) -> int:
        calls.append([len(b) for b in buffers])
        return real(fd, buffers)

    monkeypatch.setattr(os, "writev", spy)
    with open(tmp_path / "out", "wb") as fh:
        write_pieces(fh.fileno(), [b""] * 2000 + [b"a", b"", b"b"])
    assert (tmp_path / "out").read_bytes() == b"ab"
    assert calls == [[1, 1]]


def test_a_stdout_without_a_file_takes_the_pieces_too(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out, encoding="utf-8"))
    write_stdout(PIECES)
    assert out.getvalue() == b"".join(PIECES)
    assert common._fileno(out) is None
