"""Never below a greedy baseline: GPUs placed by the packer, plain first-fit and BestFit on the mixed family at
scale (about 1,000, 8,000 and 216,000 nodes).

Usage: python benchmarks/placement/dominance.py [--nodes 1000 8000 ...] [--seeds N]
The baselines are the independent ones of ``instances.py``; they scan every node of a domain for every gang, so
above ``--baseline-max`` nodes the row compares the packer with the same two rules run on the packer's tree
(``toporender.placement.packer.GreedyPacker``, marked *), which the packer itself runs on pools of up to
12,000 nodes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import (  # noqa: E402
    FAMILY_LEVELS,
    Instance,
    bestfit_run,
    check_plan,
    family_scale_instance,
    firstfit_run,
)

from toporender.placement.packer import GreedyPacker, pack  # noqa: E402
from toporender.placement.tree import Tree  # noqa: E402


def greedy_gpus(inst: Instance, best_fit: bool) -> int:
    packer = GreedyPacker(Tree(inst.inventory, FAMILY_LEVELS, {}), inst.gangs, best_fit)
    packer.run()
    return sum(x.need for x in packer.gangs if x.idx in packer.placed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1_000, 8_000, 216_000])
    ap.add_argument("--seeds", type=int, default=2, help="seeds per size (odd: racks, even: leaf groups)")
    ap.add_argument("--baseline-max", type=int, default=10_000)
    args = ap.parse_args()
    rows = [["nodes", "seed", "gangs", "free GPUs", "ours", "first-fit", "bestfit", "ours time", "violations"]]
    for nodes in args.nodes:
        for seed in range(1, args.seeds + 1):
            inst = family_scale_instance(nodes, seed)
            t0 = time.perf_counter()
            plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
            took = time.perf_counter() - t0
            gpus = {g.key: g.gpus for g in inst.gangs}
            ff = f"{greedy_gpus(inst, False):,}*"
            bf = f"{greedy_gpus(inst, True):,}*"
            if nodes <= args.baseline_max:
                ff = f"{sum(gpus[k] for k in firstfit_run(inst.inventory, FAMILY_LEVELS, inst.gangs)):,}"
                bf = f"{sum(gpus[k] for k in bestfit_run(inst.inventory, FAMILY_LEVELS, inst.gangs)):,}"
            errors = check_plan(inst.inventory, FAMILY_LEVELS, inst.gangs, plan) if nodes <= 20_000 else []
            free = sum(n.free_gpus for n in inst.inventory.nodes if not n.unschedulable)
            rows.append([f"{len(inst.inventory.nodes):,}", str(seed), f"{len(inst.gangs):,}", f"{free:,}",
                         f"{plan.placed_gpus:,}", ff, bf, f"{took:.2f} s",
                         str(len(errors)) if nodes <= 20_000 else "not checked"])
            print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main()
