"""Packer scale (target 3) as rows of the benchmark table: ``python benchmarks/placement/bench.py [--runs N]``.

Every scale case runs in its own process (see ``run.py``); the rows give each target's median with its range and
the scan-all-domains BestFit baseline of the same run where it finishes in seconds. The quality and stability
tables of the placement design, and the full scale table, are printed to stderr as detail, so stdout stays rows of
the one table ``benchmarks/run.py`` prints. The exit status is 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from run import CASES, Case, detail, measure_cases, print_scale  # noqa: E402
from timing import Figure, precompile, row, verdict  # noqa: E402

TIME_TARGETS_S = {100_000: 1.0, 1_000_000: 10.0}
MEMORY_TARGET_MIB = 2048
DOUBLING_TARGET = 2.2


def rows(measured: list[Case]) -> tuple[list[str], bool]:
    """The table rows and whether every target was met."""
    ours = {c.gpus: c for c in measured if c.algo == "ours"}
    baseline = {c.gpus: c for c in measured if c.algo == "baseline"}
    out: list[str] = []
    ok = True

    sizes = sorted(baseline)
    growth = ""
    if len(sizes) >= 2:
        growth = (f"; it grew {baseline[sizes[-1]].wall / baseline[sizes[-2]].wall:.0f}x from {sizes[-2]:,} to "
                  f"{sizes[-1]:,} GPUs in this run")

    def against(case: Case) -> tuple[str, str]:
        base = baseline.get(case.gpus)
        if base is None:
            return f"scan-all-domains BestFit: not run (minutes{growth})", ""
        return (f"scan-all-domains BestFit: {Figure(base.walls, 's').text()}, placed {base.out['placed']:,} GPUs",
                f"{case.wall / base.wall:.2f}x")

    for gpus, case in sorted(ours.items()):
        what = f"3. packer, {gpus:,} GPUs / {case.gangs:,} gangs, placed {case.out['placed']:,} GPUs"
        limit = TIME_TARGETS_S.get(gpus)
        base_text, ratio = against(case)
        if limit is None:
            out.append(row(f"{what} (reference)", Figure(case.walls, "s").text(), base_text, ratio, "info"))
            continue
        result = verdict(case.wall, limit)
        ok = ok and result == "pass"
        out.append(row(f"{what} <= {limit:g} s", Figure(case.walls, "s").text(), base_text, ratio, result))
        if gpus == 1_000_000:
            rss = max(case.rss)
            result = verdict(rss, MEMORY_TARGET_MIB)
            ok = ok and result == "pass"
            out.append(row(f"3. packer peak RSS, {gpus:,} GPUs / {case.gangs:,} gangs <= 2 GiB",
                           Figure(case.rss, "MiB").text(), "", "", result))
    big = sorted(ours)[-2:]
    if len(big) == 2 and big[1] == 2 * big[0]:
        small, large = ours[big[0]], ours[big[1]]
        pairs = doubling_pairs(small, large)
        doubling = statistics.median(pairs)
        result = verdict(doubling, DOUBLING_TARGET)
        ok = ok and result == "pass"
        out.append(row(f"3. packer, doubling the cluster ({small.gpus:,} -> {large.gpus:,} GPUs, {small.gangs:,} -> "
                       f"{large.gangs:,} gangs) <= {DOUBLING_TARGET}x the time",
                       f"{doubling:.3f}x, median of {len(pairs)} rounds ({min(pairs):.3f}–{max(pairs):.3f}); "
                       f"{large.gpus:,} GPUs: {Figure(large.walls, 's').text()}, peak {max(large.rss):.0f} MiB",
                       f"{small.gpus:,} GPUs: {Figure(small.walls, 's').text()}; ratio of the medians "
                       f"{large.wall / small.wall:.3f}x", f"{doubling:.3f}x", result))
    return out, ok


def doubling_pairs(small: Case, large: Case) -> list[float]:
    """The larger case's time over the smaller one's, round by round.

    The two cases run back to back in every round (``run.measure_cases``), so each pair saw about the same
    machine; a load change between rounds moves both halves of a pair, where it could move one median alone.
    """
    return [big / little for little, big in zip(small.walls, large.walls, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per scale case (median and range)")
    parser.add_argument("--skip-detail", action="store_true", help="no quality and stability tables")
    args = parser.parse_args(argv)
    precompile()
    if not args.skip_detail:
        detail(quick=False, file=sys.stderr)
    measured = measure_cases(args.runs, CASES)
    print_scale(measured, args.runs, file=sys.stderr)
    lines, ok = rows(measured)
    print("\n".join(lines), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
