"""What every ``bench.py`` shares: a measured child process, a figure with its range, a table row, a
verdict, compiled bytecode.

Not a benchmark itself (``benchmarks/run.py`` runs folders only); a ``bench.py`` puts this folder on
``sys.path`` and imports it.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Child:
    """One finished child process as measured from outside: wall time around it, and its own peak RSS
    and CPU time from ``os.wait4`` (what ``/usr/bin/time -v`` reports)."""

    wall: float
    rss_mib: float
    cpu: float
    stdout: bytes


def run_child(argv: Sequence[str], *, stdout_path: Path | None = None, capture: bool = False,
              cwd: Path | None = None) -> Child:
    """Run ``argv`` to completion; its stdout goes to ``stdout_path``, is captured (``capture``) or is
    dropped. A failing child ends the benchmark with its command, exit code and stderr.

    Captured output and stderr go to temporary files, not pipes: the child is reaped with ``os.wait4``
    (for its own peak RSS and CPU time) before anything is read, and a pipe would stall a child that
    writes more than the pipe holds."""
    with contextlib.ExitStack() as files:
        err_file = files.enter_context(tempfile.TemporaryFile())
        out: Any = subprocess.DEVNULL
        if capture:
            out = files.enter_context(tempfile.TemporaryFile())
        elif stdout_path:
            out = files.enter_context(open(stdout_path, "wb"))
        start = time.perf_counter()
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err_file, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        captured = b""
        if capture:
            out.seek(0)
            captured = out.read()
        err_file.seek(0)
        err = err_file.read().decode(errors="replace")
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} failed with exit code {code}:\n{err}")
    return Child(wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, captured)


@dataclass
class Figure:
    samples: list[float]
    unit: str

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def text(self) -> str:
        fmt = "{:.3f}" if self.unit == "s" else "{:.0f}"
        lo, hi = min(self.samples), max(self.samples)
        return f"{fmt.format(self.median)} {self.unit} ({fmt.format(lo)}–{fmt.format(hi)})"


def row(target: str, measured: str, baseline: str, ratio: str, result: str) -> str:
    return f"| {target} | {measured} | {baseline} | {ratio} | {result} |"


def verdict(value: float, limit: float) -> str:
    return "pass" if value <= limit else "FAIL"


def precompile() -> None:
    """Give the installed package its bytecode, as a wheel install or the warm-up run would.

    Python caches compiled modules after their first import, except where PYTHONDONTWRITEBYTECODE
    is set (as in some CI images); an editable install there would recompile all of toporender in
    every timed run, a cost no installed copy pays.
    """
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("toporender")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)
