"""The whole commands on a 1M-GPU repo: ``plan --format json`` and ``render --format json``, time and memory.

The repo from ``generate.py`` (10,000 workflows, 280,000 Pods, 216,000 nodes, 1,008,000 GPUs) and its tenth
(1,000 workflows, 21,600 nodes) are rendered and planned as whole processes; the tenth is the same-run
baseline for the growth target (ten times the Pods in at most 10.5 times the time).

``python benchmarks/scale/bench.py [--runs N]`` prints table rows; exit status 1 when a target is missed.
A run takes several minutes: the full repo alone is 100 MB of YAML.

``plan`` reads a repo this large in worker processes, so peak memory is the sum of the peaks of every process
of the command (``timing.run_child(tree=True)``), an upper bound of what the command held at once. The CPU
time (user + system, the workers' included) and the load average go to stderr: on a shared machine they say
how far the wall time is the command's own. The output goes to a file, as a consumer reads it: written to
``/dev/null``, the pages of a render's output that the workers wrote to its spill folder and this process
maps would never be read, and the time and memory would not be what a user's run takes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from generate import generate  # noqa: E402
from timing import Figure, precompile, row, run_child  # noqa: E402

TARGETS = {"plan": (10.0, 1024), "render": (15.0, 1536)}
GROWTH = 10.5


def toporender() -> list[str]:
    script = shutil.which("toporender", path=str(Path(sys.executable).parent)) or shutil.which("toporender")
    return [script] if script else [sys.executable, "-m", "toporender"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ["TOPORENDER_NO_CACHE"] = "1"  # cold renders: a cache hit would time a file copy
    precompile()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        full = generate(Path(tmp) / "full")
        tenth = generate(Path(tmp) / "tenth", workflows=1_000, nodes=21_600)
        for command, (limit_s, limit_mib) in TARGETS.items():
            argv_of = {name: [*toporender(), command, str(repo), "--format", "json"]
                       for name, repo in (("full", full), ("tenth", tenth))}
            samples: dict[str, list] = {"full": [], "tenth": []}
            for _ in range(args.runs):
                for name in ("tenth", "full"):
                    samples[name].append(run_child(argv_of[name], tree=True, stdout_path=Path(tmp) / "out"))
            for name in ("full", "tenth"):
                print(f"{command}, {name}: cpu (user + system) "
                      f"{Figure([c.cpu for c in samples[name]], 's').text()}, "
                      f"processes {max(c.processes for c in samples[name])}, "
                      f"load average {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
            wall = Figure([c.wall for c in samples["full"]], "s")
            rss = max(c.rss_mib for c in samples["full"])
            base = Figure([c.wall for c in samples["tenth"]], "s")
            growth = wall.median / base.median
            ok = wall.median <= limit_s and rss <= limit_mib and growth <= GROWTH
            failed |= not ok
            print(row(f"`{command} --format json`, 10,000 workflows / 1,008,000 GPUs <= {limit_s:.0f} s, "
                      f"<= {limit_mib} MiB; 10x the repo <= {GROWTH}x the time",
                      f"{wall.text()}, {rss:.0f} MiB (all processes)", f"the repo's tenth: {base.text()}",
                      f"{growth:.2f}x", "pass" if ok else "FAIL"), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
