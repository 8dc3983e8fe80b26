"""Reading a user's file: a regular file is read; anything else is an error at its path, at once (a named pipe
would otherwise wait for a writer, and a device need not end)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import within
from toporender.errors import UserError
from toporender.load.yaml_source import read_text


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


CASES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("regular file", lambda p: (p.write_text("a: 1\n"), p)[1], ""),
    ("named pipe", fifo, "expected a regular file but found a named pipe"),
    ("device", lambda p: Path(os.devnull), "expected a regular file but found a device"),
    ("directory", lambda p: (p.mkdir(), p)[1], "expected a file but found a directory"),
    ("missing", lambda p: p, "file not found"),
]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes or /dev/null on this platform")
@pytest.mark.parametrize(("what", "make", "message"), CASES, ids=[c[0] for c in CASES])
def test_read_text_reads_regular_files_only(tmp_path: Path, what: str, make: Callable[[Path], Path],
                                            message: str) -> None:
    path = make(tmp_path / "f.yaml")
    if not message:
        assert within(30, lambda: read_text(path, "f.yaml")) == "a: 1\n"
        return
    with pytest.raises(UserError) as err:
        within(30, lambda: read_text(path, "f.yaml"))
    assert str(err.value).startswith(f"f.yaml:1:1: {message}")
