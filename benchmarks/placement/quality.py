"""Quality benchmark: GPUs placed as a share of the exact arrival-order optimum (HiGHS), ours vs greedy BestFit.

Usage: python benchmarks/placement/quality.py [--seeds N] [--first S]
Prints per-instance rows (with --verbose) and a summary table: average / worst share of the optimum, average
domains spanned per placed gang (racks, blocks), stranded GPUs (free GPUs in racks smaller than the smallest
subgroup) and the time per instance.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import LEVELS, Instance, arrival_optimum, bestfit_run, check_plan, small_instance  # noqa: E402

from toporender.placement.packer import pack  # noqa: E402


def metrics(inst: Instance, assignment: Mapping[str, Mapping[str, str]]) -> tuple[int, float, float, int]:
    """(GPUs placed, avg racks per gang, avg blocks per gang, stranded GPUs)."""
    nodes = {n.name: n for n in inst.inventory.nodes}
    used = {n: 0 for n in nodes}
    racks, blocks = [], []
    placed = 0
    gpus = {g.key: {p.name: p.gpus for p in g.pods} for g in inst.gangs}
    for key, pods in assignment.items():
        placed += sum(gpus[key][p] for p in pods)
        for p, n in pods.items():
            used[n] += gpus[key][p]
        racks.append(len({nodes[n].labels["rack"] for n in pods.values()}))
        blocks.append(len({nodes[n].labels["block"] for n in pods.values()}))
    unit = min(len(s.pods) * s.pods[0].gpus for g in inst.gangs for s in g.subgroups)
    free: dict[str, int] = {}
    for n in nodes.values():
        if not n.unschedulable:
            free[n.labels["rack"]] = free.get(n.labels["rack"], 0) + n.gpus - n.used_gpus - used[n.name]
    stranded = sum(f for f in free.values() if 0 < f < unit)
    return placed, statistics.mean(racks or [0]), statistics.mean(blocks or [0]), stranded


def run(seeds: Sequence[int], verbose: bool) -> list[list[str]]:
    rows: dict[str, list[tuple[float, float, float, int, float]]] = {"ours": [], "bestfit": []}
    solver_s = []
    for seed in seeds:
        inst = small_instance(seed)
        t0 = time.perf_counter()
        plan = pack(inst.inventory, LEVELS, inst.gangs)
        t_ours = time.perf_counter() - t0
        errors = check_plan(inst.inventory, LEVELS, inst.gangs, plan)
        if errors:
            raise SystemExit(f"seed {seed}: constraint violations: {errors}")
        t0 = time.perf_counter()
        bf = bestfit_run(inst.inventory, LEVELS, inst.gangs)
        t_bf = time.perf_counter() - t0
        t0 = time.perf_counter()
        opt, _, unknown = arrival_optimum(inst.inventory, LEVELS, inst.gangs)
        solver_s.append(time.perf_counter() - t0)
        if unknown:
            raise SystemExit(f"seed {seed}: the solver hit its time limit")
        ours_asg = {k: g.pod_nodes for k, g in plan.gangs.items() if g.placed}
        both = set(ours_asg) & set(bf)
        for name, asg, t in (("ours", ours_asg, t_ours), ("bestfit", bf, t_bf)):
            placed, _, _, s = metrics(inst, asg)
            _, r, b, _ = metrics(inst, {k: v for k, v in asg.items() if k in both})
            rows[name].append((placed / opt, r, b, s, t))
        if verbose:
            print(f"seed {seed}: optimum {opt}  ours {rows['ours'][-1][0]:.3f}  bestfit {rows['bestfit'][-1][0]:.3f}")
    table = [["packer", "avg % of optimum", "worst %", "racks/gang*", "blocks/gang*", "stranded GPUs (avg)",
              "median time"]]
    for name, vals in rows.items():
        table.append([
            name,
            f"{100 * statistics.mean(v[0] for v in vals):.1f}",
            f"{100 * min(v[0] for v in vals):.1f}",
            f"{statistics.mean(v[1] for v in vals):.2f}",
            f"{statistics.mean(v[2] for v in vals):.2f}",
            f"{statistics.mean(v[3] for v in vals):.1f}",
            f"{1000 * statistics.median(v[4] for v in vals):.1f} ms",
        ])
    table.append(["HiGHS (optimum)", "100.0", "100.0", "", "", "", f"{1000 * statistics.median(solver_s):.0f} ms"])
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--first", type=int, default=1000)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    table = run(range(args.first, args.first + args.seeds), args.verbose)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    print(f"quality on {args.seeds} random fragmented instances (seeds {args.first}..{args.first + args.seeds - 1})")
    print("* spans averaged over the gangs both packers placed; stranded = free GPUs in racks smaller than the "
          "smallest subgroup")
    for i, r in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main()
