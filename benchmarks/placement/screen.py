"""Screen many seeds for instances where the packer is not the arrival-order optimum, with few HiGHS solves.

Usage: python benchmarks/placement/screen.py --family mixed|varied|fragmented --first S [--seeds N]
[--time-limit T]

``quality.py`` solves one feasibility model per gang to know the optimum's GPUs. This screen solves only where
the packer left a gang out: while the packer's admitted gangs equal the optimum's so far, a gang it admitted
fits with them (its plan shows it), so the optimum admits it too; a gang it left out is solved against the
gangs it admitted before it. If that solve is infeasible, the optimum leaves it out too and the two still
agree; if feasible, the optimum admits a gang the packer left out, and the instance is flagged. An instance
that is not flagged has exactly the optimum's gangs. A flagged one may still place more GPUs than the optimum
(a later, larger gang in place of the one left out): for flagged instances only, the optimum's GPUs are
computed in full and printed beside the packer's. Seeds whose solves hit the time limit are listed apart.
Keep fresh ranges of seeds apart from the named sets of ``quality.py`` (which it does not check).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import (
    FAMILIES,
    Instance,
    arrival_optimum,
    check_plan,
    mip_feasible,
    rack_feasible,
    rack_model_applies,
    seed_range_parser,
)

from toporender.placement.packer import pack
from toporender.placement.plan import PlacementPlan


def checked_pack(family: str, seed: int) -> tuple[Instance, tuple[str, ...], PlacementPlan, float]:
    """The family's instance of ``seed``, its levels, the packer's plan of it and the CPU seconds packing took.

    A plan that breaks a hard rule (:func:`check_plan`) ends the screen there: no figure comes from it."""
    make, levels = FAMILIES[family]
    inst = make(seed)
    start = time.process_time()
    plan = pack(inst.inventory, levels, inst.gangs)
    cpu = time.process_time() - start
    errors = check_plan(inst.inventory, levels, inst.gangs, plan)
    if errors:
        raise SystemExit(f"seed {seed}: constraint violations: {errors}")
    return inst, levels, plan, cpu


def screen(family: str, seed: int, time_limit: float) -> tuple[int, int, int]:
    """(GPUs the packer placed, index of the first gang the optimum admits and the packer left out or -1,
    solves that hit the time limit)."""
    inst, levels, plan, _ = checked_pack(family, seed)
    placed = {k for k, g in plan.gangs.items() if g.placed}
    solve = rack_feasible if rack_model_applies(inst.inventory, levels, inst.gangs) else mip_feasible
    admitted = []
    unknown = 0
    for i, gang in enumerate(inst.gangs):
        if gang.key in placed:
            admitted.append(gang)
            continue
        ok = solve(inst.inventory, levels, [*admitted, gang], time_limit)
        if ok is None:
            unknown += 1
        elif ok:
            return sum(g.gpus for g in inst.gangs if g.key in placed), i, unknown
    return sum(g.gpus for g in inst.gangs if g.key in placed), -1, unknown


def main() -> None:
    ap = seed_range_parser(__doc__)
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per HiGHS solve (default 20)")
    args = ap.parse_args()
    make, levels = FAMILIES[args.family]
    flagged = undecided = below = 0
    for seed in range(args.first, args.first + args.seeds):
        ours, gang, unknown = screen(args.family, seed, args.time_limit)
        if unknown:
            print(f"seed {seed}: {unknown} solve(s) hit the time limit; run it again with a longer one")
        if gang < 0:
            undecided += unknown > 0
            continue
        flagged += 1
        inst = make(seed)
        opt, _, unknown = arrival_optimum(inst.inventory, levels, inst.gangs, args.time_limit)
        below += ours < opt
        print(f"seed {seed}: the optimum admits {inst.gangs[gang].key}, left out; GPUs placed {ours}, "
              f"optimum {opt}{' (undecided solves)' if unknown else ''} ({100 * ours / opt:.1f}%)")
    print(f"{args.seeds} seeds {args.first}..{args.first + args.seeds - 1}: {args.seeds - flagged - undecided} "
          f"admit exactly the optimum's gangs, {flagged} differ ({below} with fewer GPUs), {undecided} undecided")


if __name__ == "__main__":
    main()
