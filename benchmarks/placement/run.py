"""Placement benchmarks in one command: quality vs the exact optimum, stability, then packer scale.

Usage: python benchmarks/placement/run.py [--quick] [--repeat N]

Scale: each case runs in its own process; wall time (interpreter start, inventory generation, packing and plan
building) and peak RSS come from that child process (``os.wait4`` resource usage). Medians over ``--repeat``
runs. The baseline is the straightforward greedy BestFit that scans every domain for every gang; it is skipped
where it would run for more than a few minutes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from timing import Child, run_child  # noqa: E402

CASES = [(10_000, 100), (100_000, 1_000), (1_000_000, 10_000), (2_000_000, 20_000)]
BASELINE_MAX_GPUS = 100_000


def measure(gpus: int, gangs: int, algo: str) -> Child:
    """One run of a scale case in its own process; its stdout is the case's JSON output."""
    cmd = [sys.executable, str(HERE / "scale_case.py"), "--gpus", str(gpus), "--gangs", str(gangs), "--algo", algo]
    return run_child(cmd, capture=True)


@dataclass(frozen=True)
class Case:
    """Every run of one scale case: wall and CPU seconds, peak RSS (MiB) and the first run's output."""

    gpus: int
    gangs: int
    algo: str
    walls: list[float]
    cpus: list[float]
    rss: list[float]
    out: dict[str, Any]

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)


def measure_cases(repeat: int, cases: list[tuple[int, int]]) -> list[Case]:
    """Run every case ``repeat`` times with ours and, up to ``BASELINE_MAX_GPUS``, with the baseline.

    The runs go in rounds, each running every case once, so a change in the machine's load during a sitting
    reaches every case alike: the doubling ratio and the baseline ratios compare cases of the same sitting.
    """
    plan = [(gpus, gangs, algo) for gpus, gangs in cases for algo in ("ours", "baseline")
            if algo == "ours" or gpus <= BASELINE_MAX_GPUS]
    runs: dict[tuple[int, int, str], list[Child]] = {key: [] for key in plan}
    for _ in range(repeat):
        for key in plan:
            runs[key].append(measure(*key))
    measured = []
    for (gpus, gangs, algo), done in runs.items():
        outs = [json.loads(r.stdout) for r in done]
        if len({o["hash"] for o in outs}) != 1:
            raise SystemExit(f"plan hash differs between runs of {gpus}/{gangs}")
        measured.append(Case(gpus, gangs, algo, [r.wall for r in done], [r.cpu for r in done],
                             [r.rss_mib for r in done], outs[0]))
    return measured


def print_scale(measured: list[Case], repeat: int, file: TextIO = sys.stdout) -> None:
    rows = [["GPUs", "gangs", "packer", "wall (median)", "CPU (median)", "peak RSS", "placed GPUs",
             "wall ratio to previous size"]]
    previous: dict[str, float] = {}
    by_key = {(c.gpus, c.gangs, c.algo): c for c in measured}
    for gpus, gangs in dict.fromkeys((c.gpus, c.gangs) for c in measured):
        for algo in ("ours", "baseline"):
            case = by_key.get((gpus, gangs, algo))
            if case is None:
                rows.append([f"{gpus:,}", f"{gangs:,}", algo, "not run (minutes)", "", "", "", ""])
                continue
            ratio = f"{case.wall / previous[algo]:.2f}x" if algo in previous else ""
            previous[algo] = case.wall
            rows.append([f"{gpus:,}", f"{gangs:,}", algo, f"{case.wall:.2f} s", f"{statistics.median(case.cpus):.2f} s",
                         f"{max(case.rss):.0f} MiB", f"{case.out['placed']:,}/{case.out['requested']:,}", ratio])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"packer scale (median of {repeat}; whole process: start, inventory generation, packing, plan)", file=file)
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), file=file)
        if i == 0:
            print("  ".join("-" * w for w in widths), file=file)


def detail(quick: bool, file: TextIO = sys.stdout) -> None:
    """The quality and stability tables (targets of the placement design, not of the speed table)."""
    for script, seeds in (("quality.py", "10" if quick else "40"), ("stability.py", "5" if quick else "20")):
        file.flush()
        subprocess.run([sys.executable, str(HERE / script), "--seeds", seeds], check=True, stdout=file)
        print(file=file)


def main() -> None:
    ap = argparse.ArgumentParser(description="placement benchmarks")
    ap.add_argument("--quick", action="store_true", help="fewer quality seeds, smaller scale cases, one repeat")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-quality", action="store_true")
    args = ap.parse_args()
    if not args.skip_quality:
        detail(args.quick)
    repeat = 1 if args.quick else args.repeat
    print_scale(measure_cases(repeat, CASES[:2] if args.quick else CASES), repeat)


if __name__ == "__main__":
    main()
