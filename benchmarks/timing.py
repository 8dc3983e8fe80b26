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
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Child:
    """One finished child process as measured from outside: wall time around it, and its own peak RSS
    and CPU time from ``os.wait4`` (what ``/usr/bin/time -v`` reports).

    CPU time includes the processes it started and waited for (the kernel adds theirs on reaping). With
    ``tree=True`` :attr:`rss_mib` is the sum of the peak RSS of the child and of every process it started
    (:class:`TreePeaks`), an upper bound of the tree's peak, since the peaks need not come at once; else the
    child's own."""

    wall: float
    rss_mib: float
    cpu: float
    stdout: bytes
    processes: int = 1


class TreePeaks:
    """The peak RSS (``VmHWM``) of every process a child starts, read from ``/proc`` while the child runs.

    ``os.wait4`` gives a process's own peak only, and a parent's ``RUSAGE_CHILDREN`` the largest of its
    children, not their sum. The peaks are polled every 10 ms (the list of processes every 50 ms), so growth in
    a descendant's last 10 ms, or a descendant that lives less than 50 ms, is missed; the child's own peak comes
    from ``os.wait4`` exactly."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peaks: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        tick = 0
        known: set[int] = set()
        while not self.stop.wait(0.01 if tick else 0.002):
            if tick % 5 == 0:
                known = _descendants(self.root)
            tick += 1
            for pid in known:
                kib = _vm_hwm(pid)
                if kib > self.peaks.get(pid, 0):
                    self.peaks[pid] = kib

    def finish(self) -> tuple[float, int]:
        """(MiB summed over the descendants' peaks, how many were seen)."""
        self.stop.set()
        self.thread.join()
        return sum(self.peaks.values()) / 1024, len(self.peaks)


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            parents[int(entry)] = int(stat[stat.rindex(b")") + 2:].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _vm_hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run_child(argv: Sequence[str], *, stdout_path: Path | None = None, capture: bool = False,
              cwd: Path | None = None, tree: bool = False) -> Child:
    """Run ``argv`` to completion; its stdout goes to ``stdout_path``, is captured (``capture``) or is
    dropped. A failing child ends the benchmark with its command, exit code and stderr. ``tree``: peak RSS
    summed over the processes it starts (:class:`TreePeaks`; Linux only).

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
        peaks = TreePeaks(proc.pid) if tree else None
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        others, processes = peaks.finish() if peaks else (0.0, 0)
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        captured = b""
        if capture:
            out.seek(0)
            captured = out.read()
        err_file.seek(0)
        err = err_file.read().decode(errors="replace")
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} failed with exit code {code}:\n{err}")
    return Child(wall, usage.ru_maxrss / 1024 + others, usage.ru_utime + usage.ru_stime, captured, 1 + processes)


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
