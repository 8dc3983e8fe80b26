"""One scale case in its own process (so wall time and peak RSS are the whole process's): build an NVL72-style
inventory and a mix of gangs, pack them with ``ours`` or the scan-everything BestFit ``baseline``, print a JSON
line with placed GPUs, the packing time and the plan hash."""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from toporender.expand.levels import LevelConstraint  # noqa: E402
from toporender.placement.demand import GangDemand, PodDemand, SubgroupDemand  # noqa: E402
from toporender.placement.inventory import Inventory, Node  # noqa: E402

LEVELS = ("zone", "block", "rack")
RACKS_PER_BLOCK = 16
BLOCKS_PER_ZONE = 8


def inventory(gpus: int, seed: int = 1) -> Inventory:
    """Racks of 18 nodes x 4 GPUs; 16 racks a block, 8 blocks a zone; 5% of nodes partly used, 1% cordoned."""
    rng = random.Random(seed)
    nodes = []
    racks = max(1, gpus // 72)
    for r in range(racks):
        b, z = r // RACKS_PER_BLOCK, r // (RACKS_PER_BLOCK * BLOCKS_PER_ZONE)
        labels = {"zone": f"z{z}", "block": f"b{b}", "rack": f"r{r}"}
        for n in range(18):
            used = rng.choice((1, 2, 3)) if rng.random() < 0.05 else 0
            nodes.append(Node(f"r{r:05d}-n{n:02d}", labels, 4, used, rng.random() < 0.01))
    return Inventory.of(nodes)


def gangs(count: int, seed: int = 2) -> list[GangDemand]:
    """Gangs of 1-4 rack-bound subgroups (2-18 whole-node pods each) inside one block; ~100 GPUs on average.

    Demands are immutable, so gangs share their equal subgroups (the same names and pod counts) instead of
    building a million equal pod records at the largest size.
    """
    rng = random.Random(seed)
    shared: dict[tuple[int, int], SubgroupDemand] = {}
    out = []
    for i in range(count):
        subs, pods, pod_sub = [], [], []
        for s in range(rng.randint(1, 4)):
            k = rng.randint(2, 18)
            sub = shared.get((s, k))
            if sub is None:
                pods_k = tuple(PodDemand(f"s{s}-{j}", 4) for j in range(k))
                sub = shared[(s, k)] = SubgroupDemand(f"s{s}", None, LevelConstraint("rack"), pods_k)
            subs.append(sub)
            pods.extend(sub.pods)
            pod_sub.extend((p.name, sub.name) for p in sub.pods)
        out.append(GangDemand(f"g{i:05d}", f"g{i:05d}", LevelConstraint("block", "rack"), tuple(subs),
                              tuple(pods), tuple(pod_sub)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--gangs", type=int, required=True)
    ap.add_argument("--algo", choices=("ours", "baseline"), default="ours")
    args = ap.parse_args()
    # like the toporender console entry point, the whole process runs without the cyclic garbage collector
    gc.disable()
    inv = inventory(args.gpus)
    gs = gangs(args.gangs)
    start = time.perf_counter()
    if args.algo == "ours":
        from toporender.placement.packer import pack

        plan = pack(inv, LEVELS, gs)
        placed, digest = plan.placed_gpus, plan.hash
    else:
        # imported here: the packer's process should not pay for loading (or, without cached bytecode,
        # compiling) the benchmark module that holds the baseline
        from instances import BestFit

        bf = BestFit(inv, LEVELS)
        placed = sum(g.gpus for g in gs if bf.place(g) is not None)
        digest = ""
    elapsed = time.perf_counter() - start
    print(json.dumps({"placed": placed, "requested": sum(g.gpus for g in gs), "pack_s": elapsed, "hash": digest}))


if __name__ == "__main__":
    main()
