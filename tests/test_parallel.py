"""Emitting on two cores (``toporender.parallel``) writes exactly the one-process stream."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toporender import parallel
from toporender.emit import dump, dump_chunks
from toporender.render import render_repo

FORMATS = ["yaml", "json"]


def objects(count: int) -> list[dict[str, Any]]:
    """Objects with the values the emitters treat specially: quoting, escapes, floats orjson spells its own way."""
    odd = ["yes", "0o17", "1e3", "", " lead", "ünï", "tab\there", "line\nbreak", "😀", "a: b"]
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"cm-{i}", "labels": {"n": str(i)}},
             "data": {"odd": odd[i % len(odd)], "float": [1e-9, 0.5, float(i)][i % 3], "int": i, "none": None,
                      "list": [True, False, {"k": odd[(i + 3) % len(odd)]}], "empty": {} if i % 2 else []}}
            for i in range(count)]


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Count the forks ``toporender.parallel`` makes."""
    calls: list[int] = []
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            calls.append(pid)
        return pid

    monkeypatch.setattr(parallel.os, "fork", fork)
    yield calls


def need_fork() -> None:
    if not parallel.can_fork():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true runs on Linux with two cores, where toporender must emit on both")
        pytest.skip("this machine cannot fork with memfd_create, or has one core: every stream is written in one "
                    "process")


def test_two_process_stream_is_the_one_process_stream(forks: list[int]) -> None:
    need_fork()
    objs = objects(parallel.MIN_OBJECTS + 501)
    assert b"".join(parallel.dump_chunks_parallel(objs, "yaml")) == b"".join(dump_chunks(objs, "yaml"))
    assert len(forks) == 1


def test_failed_child_half_is_written_by_the_parent(forks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    need_fork()

    def broken(fd: int, objs: list[dict[str, Any]], fmt: str) -> None:
        os._exit(3)

    monkeypatch.setattr(parallel, "_child", broken)
    objs = objects(parallel.MIN_OBJECTS)
    assert b"".join(parallel.dump_chunks_parallel(objs, "yaml")) == b"".join(dump_chunks(objs, "yaml"))
    assert len(forks) == 1


def _refuse(*args: object) -> int:
    raise OSError(11, "Resource temporarily unavailable")


@pytest.mark.parametrize("call", ["fork", "memfd_create"])
def test_refused_fork_or_memory_file_writes_in_one_process(call: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A container's process limit makes fork fail with EAGAIN; that is no error of the render."""
    need_fork()
    monkeypatch.setattr(parallel.os, call, _refuse)
    objs = objects(parallel.MIN_OBJECTS)
    assert parallel.dump_chunks_parallel(objs, "yaml") == dump_chunks(objs, "yaml")


def _with_thread(fn: Callable[[], object]) -> object:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        return fn()
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("case, fmt, count, run", [
    ("small stream", "yaml", parallel.MIN_OBJECTS - 1, lambda f: f()),
    ("JSON, which a fork does not speed up", "json", parallel.MIN_OBJECTS * 2, lambda f: f()),
    ("another thread is running", "yaml", parallel.MIN_OBJECTS, _with_thread),
])
def test_one_process_when_forking_does_not_pay_or_is_unsafe(case: str, fmt: str, count: int,
                                                            run: Callable[[Callable[[], object]], object],
                                                            forks: list[int]) -> None:
    objs = objects(count)
    out = run(lambda: parallel.dump_chunks_parallel(objs, fmt))
    assert out == dump_chunks(objs, fmt)
    assert forks == []


def large_repo(root: Path, tasks: int) -> Path:
    lines = ["workflow:", "  name: big", "  groups:"]
    for g in range(tasks // 100):
        lines += [f"  - name: g{g}", "    tasks:"]
        lines += [f"    - {{name: g{g}-t{t}, image: busybox, resource: default}}" for t in range(100)]
    lines += ["  resources:", "    default: {cpu: 1, memory: 1Gi}"]
    (root / "workflows").mkdir(parents=True)
    (root / "workflows" / "big.yaml").write_text("\n".join(lines) + "\n")
    (root / "toporender.yaml").write_text("namespace: ns\ndefault_pool: p\npools:\n  p: {backend: kai, queue: q}\n")
    return root


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_stream_of_a_large_repo_is_the_library_stream(fmt: str, tmp_path: Path) -> None:
    need_fork()
    root = large_repo(tmp_path / "repo", 2_100)
    expected = dump(render_repo(root).objects, fmt)
    assert len(render_repo(root).objects) >= parallel.MIN_OBJECTS
    cli = [sys.executable, "-m", "toporender", "render", "--format", fmt, str(root)]
    done = subprocess.run(cli, capture_output=True, check=True)
    assert done.stdout.decode() == expected
