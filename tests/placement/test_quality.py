"""Quality against the exact arrival-order optimum (HiGHS) on a fixed set of small fragmented instances."""

from __future__ import annotations

from toporender.placement.packer import pack

SEEDS = range(100, 112)


def test_quality_against_exact_arrival_order_optimum() -> None:
    from instances import LEVELS, arrival_optimum, bestfit_run, check_plan, small_instance

    ours, greedy = [], []
    for seed in SEEDS:
        inst = small_instance(seed)
        plan = pack(inst.inventory, LEVELS, inst.gangs)
        assert check_plan(inst.inventory, LEVELS, inst.gangs, plan) == []
        opt, _, unknown = arrival_optimum(inst.inventory, LEVELS, inst.gangs)
        assert unknown == 0
        bf = bestfit_run(inst.inventory, LEVELS, inst.gangs)
        ours.append(plan.placed_gpus / opt)
        greedy.append(sum(g.gpus for g in inst.gangs if g.key in bf) / opt)
    assert sum(ours) / len(ours) >= 0.99, ours
    assert min(ours) >= 0.95, ours
    assert sum(ours) >= sum(greedy)


def test_oracle_agrees_with_node_level_model_on_a_tiny_case() -> None:
    from instances import LEVELS, mip_feasible, rack_feasible, small_instance

    inst = small_instance(7, gangs=3)
    for k in range(1, 4):
        assert rack_feasible(inst.inventory, LEVELS, inst.gangs[:k]) == mip_feasible(
            inst.inventory, LEVELS, inst.gangs[:k])
