"""The benchmarks' measured child (``benchmarks/timing.py``): output of any size, failures with their stderr."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest

from conftest import ROOT, load_script

TIMING = load_script(ROOT / "benchmarks" / "timing.py", "bench_timing")
# Well over what a pipe holds (64 KiB on Linux): a child writing this into a pipe nobody reads would stall.
BIG = 1 << 20


def run_within(seconds: float, argv: list[str], capture: bool = True) -> Any:
    """``run_child(argv)``, failing instead of hanging when the child stalls; returns the Child or the
    exception run_child raised."""
    done: list[Any] = []

    def run() -> None:
        try:
            done.append(TIMING.run_child(argv, capture=capture))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            done.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not done:
        pytest.fail(f"the measured child did not finish within {seconds} s: it stalls on a full pipe")
    return done[0]


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_child_writing_more_than_a_pipe_holds_is_measured(stream: str) -> None:
    code = f"import sys; sys.{stream}.write('x' * {BIG})"
    child = run_within(30, [sys.executable, "-c", code])
    assert len(child.stdout) == (BIG if stream == "stdout" else 0)
    assert child.wall > 0 and child.rss_mib > 1 and child.cpu > 0


def test_failing_child_ends_the_benchmark_with_its_stderr() -> None:
    code = f"import sys; sys.stderr.write('e' * {BIG} + 'the reason'); sys.exit(3)"
    failure = run_within(30, [sys.executable, "-c", code], capture=False)
    assert isinstance(failure, SystemExit)
    assert "exit code 3:" in str(failure) and str(failure).endswith("the reason")


_ALLOCATE = "import time; b = bytearray({mib} << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(0.3)"


@pytest.mark.parametrize(("tree", "at_least", "at_most"), [(True, 240, 400), (False, 140, 230)],
                         ids=["the tree summed", "the child alone"])
def test_peak_memory_of_a_process_tree(tree: bool, at_least: float, at_most: float) -> None:
    """A child of 150 MiB that starts one of 100 MiB: the tree's figure counts both, the child's its own."""
    grandchild = _ALLOCATE.format(mib=100)
    code = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {grandchild!r}]); "
            f"{_ALLOCATE.format(mib=150)}; p.wait()")
    child = TIMING.run_child([sys.executable, "-c", code], tree=tree)
    assert at_least <= child.rss_mib <= at_most, child
    assert child.processes == (2 if tree else 1)
