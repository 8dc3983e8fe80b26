"""Run every benchmark and print one table: ``python benchmarks/run.py [--runs N]``.

Convention: each folder ``benchmarks/<name>/`` with a ``bench.py`` is one benchmark. It runs as
its own process (``python benchmarks/<name>/bench.py [--runs N]``), prints Markdown table rows
``| target | measured median (min–max) | baseline figure | ratio | pass/FAIL/info |`` and exits
non-zero when a target is missed; detail tables go to stderr and pass through. A folder without
``bench.py`` but with a ``run.py`` is run as ``python benchmarks/<name>/run.py`` (no options) and
its output is shown as it is. Benchmarks run one after another so they do not disturb each
other's timings. ``benchmarks/timing.py`` holds what the ``bench.py`` files share.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = ("| target | measured: median (min–max) | baseline, same run | ratio | result |\n"
          "|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run every benchmarks/*/bench.py and print one table.")
    parser.add_argument("--runs", type=int, help="measured runs per figure (passed to each benchmark)")
    parser.add_argument("only", nargs="*", help="benchmark folder names to run (default: all)")
    args = parser.parse_args(argv)

    folders = sorted(p for p in HERE.iterdir() if p.is_dir() and (not args.only or p.name in args.only))
    benches = [f / "bench.py" if (f / "bench.py").is_file() else f / "run.py" for f in folders
               if (f / "bench.py").is_file() or (f / "run.py").is_file()]
    if not benches:
        print("no benchmarks found", file=sys.stderr)
        return 2
    print(HEADER, flush=True)
    status = 0
    for bench in benches:
        cmd = [sys.executable, str(bench)]
        if args.runs and bench.name == "bench.py":
            cmd += ["--runs", str(args.runs)]
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        print(proc.stdout, end="" if proc.stdout.endswith("\n") or not proc.stdout else "\n", flush=True)
        print(f"{bench.parent.name}: exit {proc.returncode} after {time.perf_counter() - start:.0f} s",
              file=sys.stderr)
        status = status or proc.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
