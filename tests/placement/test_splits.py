"""The split of ours' blocks above the fewest by whether a gang over several blocks had one with room at arrival."""

from __future__ import annotations

import argparse
import dataclasses

import pytest


@pytest.mark.parametrize(("seed", "want"), [
    # a late gang (38 GPUs: a rack of 2-GPU pods, a rack of 4-GPU ones, a clique) finds no block with room and
    # spans two; the fewest arrangement of the same gangs moves earlier ones to give it one
    (3032, {"with_splits": 1, "above_found": 1, "added": 1, "no_room": 1, "accounted": 1}),
    # a gang lay in one block at its arrival and over three after a later admission moved it: not stability's
    (3030, {"with_splits": 1, "above_found": 1, "added": 2, "no_room": 0, "accounted": 0}),
    # no gang over several blocks: nothing to solve
    (3000, {"with_splits": 0, "above_found": 0, "added": 0, "no_room": 0, "accounted": 0}),
])
def test_splits_tell_gangs_no_block_had_room_for_from_the_rest(seed: int, want: dict[str, int]) -> None:
    from splits import splits

    got = dataclasses.asdict(splits("mixed", seed, 30.0))
    assert got["unknown"] == 0
    assert got["above_found"] == got["above_least"]
    assert {k: got[k] for k in want} == want


def test_room_at_arrival_counts_the_gangs_before_as_the_packer_placed_them() -> None:
    from instances import FAMILY_LEVELS, family_instance
    from splits import left_free, room_at_arrival

    from toporender.placement.packer import pack

    inst = family_instance(3032)
    late = [g.key for g in inst.gangs].index("g00011")
    assert room_at_arrival(inst, FAMILY_LEVELS, late, 30.0) is False
    # with nothing before it, the same gang has a block of its own
    alone = dataclasses.replace(inst, gangs=inst.gangs[late:late + 1])
    assert room_at_arrival(alone, FAMILY_LEVELS, 0, 30.0) is True
    # pods of different gangs share names ("s0-0"): each is charged its own gang's GPUs
    plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs[:late])
    asg = {k: g.pod_nodes for k, g in plan.gangs.items() if g.placed}
    free = left_free(inst, asg)
    assert sum(n.free_gpus for n in inst.inventory.nodes) - sum(n.free_gpus for n in free.nodes) == plan.placed_gpus


@pytest.mark.parametrize(("argv", "first", "count"), [
    (["--family", "mixed", "--set", "held-out"], 7000, 48),
    (["--family", "mixed", "--set", "development", "--first", "3010", "--seeds", "5"], 3010, 5),
    (["--family", "fragmented", "--set", "development"], 10100, 400),
])
def test_set_seeds_picks_a_named_set_or_part_of_it(argv: list[str], first: int, count: int) -> None:
    from quality import set_parser, set_seeds

    assert set_seeds(set_parser("doc", ("mixed", "fragmented")).parse_args(argv)) == range(first, first + count)


@pytest.mark.parametrize(("args", "message"), [
    ({"family": "fragmented", "set": "tuning", "first": None, "seeds": None}, "has the sets"),
    ({"family": "mixed", "set": "held-out", "first": 7040, "seeds": 20}, "leave the held-out set"),
])
def test_set_seeds_refuses_seeds_outside_the_named_set(args: dict[str, object], message: str) -> None:
    from quality import set_seeds

    with pytest.raises(SystemExit, match=message):
        set_seeds(argparse.Namespace(**args))
