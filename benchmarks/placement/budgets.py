"""Screen many seeds for instances where more search steps would place more GPUs, without HiGHS.

Usage: python benchmarks/placement/budgets.py --family mixed|varied|fragmented --first S [--seeds N]
[--times M] [--every]

The repair's searches are bounded by step counts (``toporender.placement.repair``), so a gang may be left out
merely because a search ran out of steps. This screen packs each seed as usual and keeps the instances where the
reason given for a gang left out says that an exact search ran out of steps (with ``--every``, all of them).
Those are packed again with every step budget of the repair ``--times`` larger, and the restarts as many times
more (the restart base length aside: it sets the restarts' schedule, not their steps); the ones that then place
more GPUs are printed. An instance that gains is a case for the budgets or the search; one that does not is not
mended by a budget alone. Packing with ten times the steps takes several times the CPU of a normal pack, which
is why only the flagged instances are packed twice unless ``--every`` is given. A flag reads the reason of the
last region searched for a gang, so a gang whose earlier region ran out of steps and whose last was proven
full is not flagged; ``--every`` covers those. Keep fresh ranges of seeds apart from the named sets of
``quality.py``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import seed_range_parser
from screen import checked_pack

from toporender.placement import repair

BUDGETS = ("REPAIR_BASE_STEPS", "REPAIR_STEPS_PER_TRY", "REPAIR_STEPS_PER_DOMAIN", "REPAIR_STEPS_PER_GANG",
           "REPAIR_KEEP_STEPS", "REPAIR_KEEP_RUN_STEPS", "EXACT_STEPS", "EXACT_SECOND_STEPS", "EXACT_WIDE_STEPS",
           "EXACT_SHORT_RUN_STEPS", "EXACT_PREFERRED_STEPS", "EXACT_QUICK_STEPS",
           "EXACT_FLUID_RUN_STEPS", "EXACT_FLUID_STEPS", "NODE_FILL_STEPS", "NODE_FILL_RUN_STEPS", "POLISH_STEPS",
           "EXACT_RUN_STEPS", "EXACT_GANG_STEPS", "EXACT_LATE_STEPS", "EXACT_LATE_RUN_STEPS", "EJECT_RUN_STEPS",
           "EJECT_EXACT_STEPS", "EJECT_EXACT_RUN_STEPS", "EXACT_MAX_RESTARTS")
"""The repair's budgets that ``--times`` multiplies, with every side budget of ``SIDE_RUN_STEPS``."""

OUT_OF_STEPS = "ran out of steps"
"""What the reason of a gang left out says when the last exact search for it ended undecided."""


@contextmanager
def scaled_budgets(times: float) -> Iterator[None]:
    """The repair's step budgets times ``times`` (at least one step each) while the block runs, restored after it."""
    saved = {name: getattr(repair, name) for name in BUDGETS}
    side = dict(repair.SIDE_RUN_STEPS)
    region_search = repair.RegionSearch
    try:
        for name, value in saved.items():
            setattr(repair, name, max(1, int(value * times)))
        repair.SIDE_RUN_STEPS.update((k, max(1, int(v * times))) for k, v in side.items())
        # a region's late steps are a field default, read when the class was made
        repair.RegionSearch = functools.partial(region_search, late_left=repair.EXACT_LATE_STEPS)  # type: ignore[assignment,misc]
        yield
    finally:
        for name, value in saved.items():
            setattr(repair, name, value)
        repair.SIDE_RUN_STEPS.update(side)
        repair.RegionSearch = region_search  # type: ignore[misc]


def packed(family: str, seed: int) -> tuple[int, bool, float]:
    """(GPUs placed, whether a gang left out has an exact search that ran out of steps, CPU seconds)."""
    _, _, plan, cpu = checked_pack(family, seed)
    open_ = any(not g.placed and OUT_OF_STEPS in (g.reason or "") for g in plan.gangs.values())
    return plan.placed_gpus, open_, cpu


def main() -> None:
    ap = seed_range_parser(__doc__)
    ap.add_argument("--times", type=float, default=10, help="budget multiplier for the second pack (default 10)")
    ap.add_argument("--every", action="store_true", help="pack every seed twice, not only the flagged ones")
    args = ap.parse_args()
    flagged = gained = 0
    cpu = [0.0, 0.0]
    for seed in range(args.first, args.first + args.seeds):
        gpus, open_, took = packed(args.family, seed)
        cpu[0] += took
        if not (open_ or args.every):
            continue
        flagged += 1
        with scaled_budgets(args.times):
            more, _, more_took = packed(args.family, seed)
        cpu[1] += more_took
        gained += more > gpus
        print(f"seed {seed}: {gpus} GPUs, {more} with {args.times}x the steps ({took:.1f} s, {more_took:.1f} s)"
              f"{'  GAINS' if more > gpus else ''}", flush=True)
    print(f"{args.seeds} seeds {args.first}..{args.first + args.seeds - 1}: {flagged} packed again, {gained} "
          f"place more GPUs with {args.times}x the steps; CPU {cpu[0]:.0f} s, then {cpu[1]:.0f} s")


if __name__ == "__main__":
    main()
