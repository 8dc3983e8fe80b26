"""Emitting on two cores (``toporender.emit.parallel``) writes exactly the one-process stream."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, load_script
from toporender.emit import parallel
from toporender.emit.stream import dump, dump_chunks
from toporender.pipeline import render_repo

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
    """Count the forks ``toporender.emit.parallel`` makes."""
    calls: list[int] = []
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            calls.append(pid)
        return pid

    monkeypatch.setattr(parallel.os, "fork", fork)
    yield calls


def same_stream(got: list[bytes], objs: list[dict[str, Any]], fmt: str) -> bool:
    """Whether the pieces make up the one-process stream (a bare bool: a failing diff would be megabytes)."""
    return b"".join(got) == b"".join(dump_chunks(objs, fmt))


def need_fork() -> None:
    if not parallel.can_fork():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true runs on Linux with two cores, where toporender must emit on both")
        pytest.skip("this machine cannot fork with memfd_create, or has one core: every stream is written in one "
                    "process")


def test_two_process_stream_is_the_one_process_stream(forks: list[int]) -> None:
    need_fork()
    objs = objects(parallel.MIN_OBJECTS + 501)
    assert same_stream(parallel.dump_chunks_parallel(objs, "yaml"), objs, "yaml")
    assert len(forks) == 1


def test_failed_child_half_is_written_by_the_parent(forks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    need_fork()

    def broken(fd: int, objs: list[dict[str, Any]], fmt: str) -> None:
        os._exit(3)

    monkeypatch.setattr(parallel, "_child", broken)
    objs = objects(parallel.MIN_OBJECTS)
    assert same_stream(parallel.dump_chunks_parallel(objs, "yaml"), objs, "yaml")
    assert len(forks) == 1


def _refuse(*args: object) -> int:
    raise OSError(11, "Resource temporarily unavailable")


@pytest.mark.parametrize("call", ["fork", "memfd_create"])
def test_refused_fork_or_memory_file_writes_in_one_process(call: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A container's process limit makes fork fail with EAGAIN; that is no error of the render."""
    need_fork()
    monkeypatch.setattr(parallel.os, call, _refuse)
    objs = objects(parallel.MIN_OBJECTS)
    assert same_stream(parallel.dump_chunks_parallel(objs, "yaml"), objs, "yaml")


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
    assert isinstance(out, list) and same_stream(out, objs, fmt)
    assert forks == []


@pytest.mark.parametrize("cgroup, cpu_max, limit", [
    ("0::/kubepods/pod-a/repo-server\n", "100000 100000\n", 1.0),
    ("0::/\n", "250000 100000\n", 2.5),
    ("0::/kubepods/pod-b\n", "max 100000\n", None),
    ("0::/no-cpu-controller\n", None, None),
    ("12:cpu,cpuacct:/docker/abc\n", None, None),
])
def test_container_cpu_limit(cgroup: str, cpu_max: str | None, limit: float | None, tmp_path: Path) -> None:
    """A repo-server container limited to one CPU sees all of its node's cores; its cgroup says otherwise."""
    proc = tmp_path / "cgroup"
    proc.write_text(cgroup)
    root = tmp_path / "sys"
    if cpu_max is not None:
        path = root / cgroup.strip()[3:].lstrip("/") / "cpu.max"
        path.parent.mkdir(parents=True)
        path.write_text(cpu_max)
    assert parallel.cpu_limit(proc, root) == limit


def test_one_cpu_container_writes_in_one_process(forks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "cpu_limit", lambda: 1.5)
    objs = objects(parallel.MIN_OBJECTS)
    assert same_stream(parallel.dump_chunks_parallel(objs, "yaml"), objs, "yaml")
    assert forks == []


def benchmark_repo(root: Path, workflows: int) -> Path:
    """The render benchmark's repo with fewer workflows: 250 Pods each, and the 1 MB node inventory."""
    generate = load_script(ROOT / "benchmarks" / "render" / "generate.py", "bench_generate")
    generate.WORKFLOWS = workflows
    return Path(generate.generate(root))


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return benchmark_repo(tmp_path_factory.mktemp("big") / "repo", 8)


def one_process_stream(root: Path, fmt: str) -> bytes:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parallel, "can_fork", lambda: False)
        return dump(render_repo(root).objects, fmt).encode()


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_stream_of_a_large_repo_is_the_one_process_stream(fmt: str, big_repo: Path) -> None:
    """YAML emitted on two cores (JSON in one process) by the real command, on the benchmark's repo shape."""
    need_fork()
    assert len(render_repo(big_repo).objects) >= parallel.MIN_OBJECTS
    cli = [sys.executable, "-m", "toporender", "render", "--format", fmt, str(big_repo)]
    done = subprocess.run(cli, capture_output=True, check=True)
    same = done.stdout == one_process_stream(big_repo, fmt)
    assert same, "the command's stream differs from the one-process stream"
