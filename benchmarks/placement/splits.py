"""Where ours' blocks above the fewest come from: gangs that no block had room for when they arrived.

Usage: python benchmarks/placement/splits.py --family mixed|varied|fragmented --set S [--seeds N] [--first S]
[--time-limit T]

An append that fits moves no earlier gang: that is what keeps plans stable. A gang that arrives when no single
block has room for it, every earlier gang lying where the plan of the gangs before it put them, then either spans
blocks (where its level allows) or is refused, as BestFit refuses it. ``quality.py --excess`` charges the first
against ours: its blocks above the fewest any arrangement of its own gangs allows, an arrangement free to move
earlier gangs. This splits that count. Per instance: the blocks all of ours' gangs span above the fewest found
(HiGHS, as ``quality.py``), and the blocks added by gangs that span several in ours' plan and, at their arrival,
fit in no one block (HiGHS: the gang bound to a block, on the GPUs the packer's plan of the gangs before it leaves
free). Summed per instance as the smaller of the two, the part of the excess such gangs account for. Only
instances where some gang spans several blocks are solved: elsewhere the plan spans one block a gang, the least.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import FAMILIES, Instance, mip_feasible  # noqa: E402
from quality import all_spans, set_parser, set_seeds  # noqa: E402
from screen import checked_pack  # noqa: E402

from toporender.expand.levels import LevelConstraint  # noqa: E402
from toporender.placement.inventory import Inventory  # noqa: E402
from toporender.placement.packer import pack  # noqa: E402


@dataclasses.dataclass
class Splits:
    """One instance, or a set summed."""

    instances: int = 0
    with_splits: int = 0
    """Instances where some gang of ours spans several blocks."""
    above_found: int = 0
    """Blocks above the fewest arrangement found."""
    above_least: int = 0
    """Blocks above the least proved (equal where every solve finished)."""
    added: int = 0
    """Blocks beyond one a gang, over the gangs that span several."""
    no_room: int = 0
    """Of ``added``, those of gangs that fit in no one block when they arrived."""
    accounted: int = 0
    """Per instance the smaller of ``above_found`` and ``no_room``, summed."""
    unknown: int = 0
    """Solves that ended at their time limit (the fewest, or a gang's room at its arrival)."""

    def add(self, other: Splits) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def left_free(inst: Instance, asg: Mapping[str, Mapping[str, str]]) -> Inventory:
    """The inventory with the GPUs of the pods in ``asg`` counted as used."""
    taken: dict[str, int] = {}
    for gang in inst.gangs:
        for pod in gang.pods:
            if (node := asg.get(gang.key, {}).get(pod.name)) is not None:
                taken[node] = taken.get(node, 0) + pod.gpus
    return Inventory.of(dataclasses.replace(n, used_gpus=n.used_gpus + taken.get(n.name, 0))
                        for n in inst.inventory.nodes)


def room_at_arrival(inst: Instance, levels: Sequence[str], i: int, time_limit: float) -> bool | None:
    """Whether gang ``i`` fits in one block on what the packer's plan of the gangs before it leaves free (None:
    the solve hit its time limit). The gangs before it are those of the arrival order, refused ones included,
    packed as the packer packs that prefix."""
    before = pack(inst.inventory, levels, inst.gangs[:i])
    asg = {k: g.pod_nodes for k, g in before.gangs.items() if g.placed}
    bound = dataclasses.replace(inst.gangs[i], constraint=LevelConstraint("block"))
    return mip_feasible(left_free(inst, asg), levels, [bound], time_limit)


def splits(family: str, seed: int, time_limit: float) -> Splits:
    """The count of one instance."""
    inst, levels, plan, _ = checked_pack(family, seed)
    out = Splits(instances=1)
    asg = {k: g.pod_nodes for k, g in plan.gangs.items() if g.placed}
    block = {n.name: n.labels["block"] for n in inst.inventory.nodes}
    spans = []
    for i, gang in enumerate(inst.gangs):
        if gang.key in asg:
            on = {block[asg[gang.key][p.name]] for p in gang.pods if p.gpus}
            if len(on) > 1:
                spans.append((i, len(on)))
    if not spans:
        return out
    out.with_splits = 1
    admitted = [g for g in inst.gangs if g.key in asg]
    ours, found, least = all_spans(inst, levels, admitted, asg, time_limit)
    out.above_found, out.above_least = ours - found, ours - least
    out.unknown += found != least
    for i, n in spans:
        out.added += n - 1
        room = room_at_arrival(inst, levels, i, time_limit)
        out.unknown += room is None
        if room is False:
            out.no_room += n - 1
    out.accounted = min(out.above_found, out.no_room)
    return out


def main() -> None:
    ap = set_parser(__doc__, families=tuple(f for f in FAMILIES if f != "nvl72"))
    args = ap.parse_args()
    seeds = set_seeds(args)
    total = Splits()
    for seed in seeds:
        total.add(splits(args.family, seed, args.time_limit))
    print(f"blocks above the fewest on {len(seeds)} {args.family} instances, {args.set} set "
          f"(seeds {seeds.start}..{seeds.stop - 1}):")
    print(f"  instances with a gang over several blocks: {total.with_splits}")
    above = (f"{total.above_found}" if total.above_found == total.above_least
             else f"{total.above_found}-{total.above_least}")
    print(f"  blocks above the fewest: {above}")
    print(f"  blocks added by gangs over several: {total.added}, of gangs no block had room for at arrival: "
          f"{total.no_room}")
    print(f"  blocks above the fewest those gangs account for: {total.accounted} of {total.above_found}")
    print(f"  solves at their time limit: {total.unknown}")


if __name__ == "__main__":
    main()
