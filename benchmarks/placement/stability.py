"""Stability: pack every prefix of the arrival order and count how often appending one gang moves earlier ones.

Usage: python benchmarks/placement/stability.py [--seeds N] [--family nvl72|mixed|varied]
A move is allowed only when the appended gang would otherwise be dropped; the script fails if any earlier gang
moves while the appended gang is not placed, or if an earlier gang is dropped except when a greedy baseline's
plan, placing more GPUs with the appended gang, replaced the packer's (counted apart).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import FAMILIES, TUNING_SEEDS, VARIED_DEVELOPMENT_SEEDS  # noqa: E402

from toporender.placement.packer import pack  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first", type=int, default=None,
                    help="first seed (default: 1000, the mixed tuning set's or the varied development set's)")
    ap.add_argument("--family", choices=tuple(FAMILIES), default="nvl72",
                    help="the first generator, the mixed family (whose repairs run the exact search most) or the "
                         "varied one (taints and tolerations)")
    args = ap.parse_args()
    make, levels = FAMILIES[args.family]
    start = {"nvl72": 1000, "mixed": TUNING_SEEDS.start, "varied": VARIED_DEVELOPMENT_SEEDS.start}[args.family]
    first = args.first if args.first is not None else start
    appended = unchanged = moved_to_admit = replaced = 0
    for seed in range(first, first + args.seeds):
        inst = make(seed)
        before = pack(inst.inventory, levels, inst.gangs[:1])
        for k in range(2, len(inst.gangs) + 1):
            after = pack(inst.inventory, levels, inst.gangs[:k])
            appended += 1
            same = all(after.gangs[key].pod_nodes == g.pod_nodes for key, g in before.gangs.items())
            dropped = [key for key, g in before.gangs.items() if g.placed and not after.gangs[key].placed]
            new_placed = after.gangs[inst.gangs[k - 1].key].placed
            if dropped and not (new_placed and after.placed_gpus > before.placed_gpus):
                raise SystemExit(f"seed {seed}: appending dropped {dropped}")
            if dropped:
                replaced += 1
            elif same:
                unchanged += 1
            elif new_placed:
                moved_to_admit += 1
            else:
                raise SystemExit(f"seed {seed}: earlier gangs moved but the appended gang was not placed")
            before = after
    print(f"{appended} appended gangs over {args.seeds} instances: {unchanged} left every earlier placement "
          f"unchanged, {moved_to_admit} re-arranged earlier gangs to be admitted, {replaced} replaced the plan by a "
          "greedy one placing more GPUs, 0 other moves, 0 other drops")


if __name__ == "__main__":
    main()
