"""The node-by-node search of tight regions: what it finds keeps every constraint, it agrees with an exact solver
wherever it ends within its steps, and it admits the perfect fills the unit-by-unit search runs out of steps on."""

from __future__ import annotations

import pytest

from toporender.expand.levels import LevelConstraint
from toporender.placement import repair
from toporender.placement.compiled import CompiledGang
from toporender.placement.demand import GangDemand, PodDemand, SubgroupDemand
from toporender.placement.inventory import Inventory, Node, Taint
from toporender.placement.node_fill import NodeFill
from toporender.placement.packer import Packer, pack
from toporender.placement.tree import ROOT, Tree

from .test_exact import ALL_NEIGHBOURHOODS, assert_arrangement


@pytest.mark.parametrize(("family", "seed", "picked"), ALL_NEIGHBOURHOODS,
                         ids=[f"{f}-{s}-{p[-1]}" for f, s, p in ALL_NEIGHBOURHOODS])
def test_agrees_with_the_exact_solver(family: str, seed: int, picked: tuple[int, ...]) -> None:
    """An arrangement found keeps every constraint, and exists for HiGHS too; a search that ends within its steps
    without one agrees with HiGHS that there is none."""
    from instances import FAMILIES, FAMILY_LEVELS, mip_feasible

    inst = FAMILIES[family][0](seed)
    tree = Tree(inst.inventory, FAMILY_LEVELS, {})
    compiled = Packer(tree, inst.gangs).gangs
    gangs = [compiled[i] for i in picked]
    assert NodeFill.applies(gangs)
    search = NodeFill(tree, ROOT, gangs, 20_000)
    found = search.solve()
    feasible = mip_feasible(inst.inventory, FAMILY_LEVELS, [inst.gangs[i] for i in picked])
    assert feasible is not None
    if found is not None:
        assert feasible
        assert_arrangement(tree, gangs, found)
    elif search.steps <= search.budget:
        assert not feasible


def _tree(frees: list[tuple[str, str, int]], taints: dict[str, tuple[Taint, ...]] | None = None) -> Tree:
    """Nodes (name, clique, free GPUs) of one zone, block and rack, each of 4 GPUs."""
    nodes = [Node(name, {"zone": "z", "block": "b", "rack": "r", "clique": clique}, 4, 4 - free, False,
                  (taints or {}).get(name, ())) for name, clique, free in frees]
    return Tree(Inventory.of(nodes), ("zone", "block", "rack", "clique"), {})


def _gang(key: str, subgroups: list[tuple[str | None, list[int]]], tolerates_maintenance: bool = False
          ) -> GangDemand:
    tolerations = (("gpu-maintenance", None, "NoSchedule"),) if tolerates_maintenance else ()
    subs = tuple(SubgroupDemand(f"s{i}", None, LevelConstraint(required=level), tuple(
        PodDemand(f"s{i}-{j}", gpus, tolerations) for j, gpus in enumerate(sizes)))
        for i, (level, sizes) in enumerate(subgroups))
    pods = tuple(p for s in subs for p in s.pods)
    return GangDemand(key, key, LevelConstraint(required="zone"), subs, pods,
                      tuple((p.name, s.name) for s in subs for p in s.pods))


def _search(tree: Tree, demands: list[GangDemand], budget: int = 10_000) -> tuple[NodeFill, list[CompiledGang]]:
    gangs = Packer(tree, demands).gangs
    return NodeFill(tree, ROOT, gangs, budget), gangs


def test_a_perfect_fill_with_one_gpu_holes_to_avoid() -> None:
    """A clique-bound pair of one-GPU pods and two two-GPU pods on two nodes with 3 free GPUs each, in two
    cliques: the GPUs add up, but wherever the pair goes it leaves a one-GPU hole, and so does the two-GPU pod
    on the other node. No arrangement, proven within the steps."""
    tree = _tree([("a1", "a", 3), ("b1", "b", 3)])
    search, _ = _search(tree, [_gang("g1", [("clique", [1, 1])]), _gang("g2", [(None, [2, 2])])])
    assert search.solve() is None
    assert search.steps <= search.budget, "proven, not out of steps"


def test_a_node_may_keep_free_gpus_up_to_the_slack() -> None:
    tree = _tree([("a1", "a", 4), ("a2", "a", 3), ("b1", "b", 2)])
    gangs = [_gang("g1", [("clique", [2, 2, 2])]), _gang("g2", [(None, [1, 1, 1])])]
    search, compiled = _search(tree, gangs)
    assert search.slack == 0
    found = search.solve()
    assert found is not None
    assert_arrangement(tree, compiled, found)
    search, _ = _search(tree, [_gang("g1", [("clique", [2, 2, 2])]), _gang("g2", [(None, [1, 1])])])
    assert search.slack == 1
    found = search.solve()
    assert found is not None


def test_only_tolerating_pods_take_tainted_nodes() -> None:
    taint = (Taint("gpu-maintenance", None, "NoSchedule"),)
    tree = _tree([("a1", "a", 4), ("a2", "a", 4)], {"a2": taint})
    plain, tolerant = _gang("g1", [(None, [4])]), _gang("g2", [(None, [4])], tolerates_maintenance=True)
    search, compiled = _search(tree, [plain, tolerant])
    found = search.solve()
    assert found is not None
    assert_arrangement(tree, compiled, found)
    search, _ = _search(tree, [plain, _gang("g3", [(None, [4])])])
    assert search.solve() is None


def test_steps_are_counted_and_a_search_out_of_them_admits_nothing() -> None:
    """A pool of 2-GPU nodes in cliques of two, filled to the last GPU by clique-bound pairs of 2-GPU pods and
    one-GPU pods bound to nothing: found within enough steps, and not within too few."""
    frees = [(f"{c}{i}", c, 2) for c in "abcdef" for i in range(2)]
    gangs = [_gang("g1", [("clique", [2, 2]), ("clique", [2, 2])]), _gang("g2", [(None, [1] * 8)]),
             _gang("g3", [("clique", [2, 2])])]
    search, compiled = _search(_tree(frees), gangs, budget=10_000)
    found = search.solve()
    assert found is not None
    assert_arrangement(_tree(frees), compiled, found)
    needed = search.steps
    search, _ = _search(_tree(frees), gangs, budget=needed - 1)
    assert search.solve() is None
    assert search.steps == needed


def test_what_it_does_not_model_is_left_to_the_unit_search() -> None:
    tree = _tree([("a1", "a", 4)])
    gangs = Packer(tree, [_gang("g1", [(None, [4])])]).gangs
    assert NodeFill.applies(gangs)
    gangs[0].excluded = frozenset({0})
    assert not NodeFill.applies(gangs)


PERFECT_FILLS = [
    # (seed of the varied family, GPUs placed, the gang the unit-by-unit search could not admit)
    (7902, 241, "g00013 (nine GPUs in a zone, two cliques) fits only where all 241 free GPUs are used: no order of "
                "the unit-by-unit search admits it within its steps (was 232)"),
]


@pytest.mark.parametrize(("seed", "gpus", "why"), PERFECT_FILLS, ids=[str(c[0]) for c in PERFECT_FILLS])
def test_tight_regions_are_searched_node_by_node_last(monkeypatch: pytest.MonkeyPatch, seed: int, gpus: int,
                                                      why: str) -> None:
    from instances import FAMILIES, FAMILY_LEVELS, check_plan

    verdicts: list[bool] = []
    solve = NodeFill.solve

    def recorded(search: NodeFill) -> dict[int, dict[int, int]] | None:
        found = solve(search)
        verdicts.append(found is not None)
        return found

    monkeypatch.setattr(NodeFill, "solve", recorded)
    # the searches that bind gangs to one block with the admitted one, or all but one, and the pool's block
    # search change the arrangement g00013 meets; the row guards the node-by-node search on the one it met
    # without them (only the moved gangs bound to one block where their old levels fail)
    monkeypatch.setitem(repair.SIDE_RUN_STEPS, "tight-pool", 0)
    monkeypatch.setattr(repair.Repairer, "_one_each",
                        lambda self, gs, region, coarse, before, side, in_all=False: self._tight_try(
                            gs, region, coarse, before, repair.TIGHT_COARSE_STEPS, side, in_all))
    inst = FAMILIES["varied"][0](seed)
    plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
    assert check_plan(inst.inventory, FAMILY_LEVELS, inst.gangs, plan) == []
    assert plan.placed_gpus == gpus, why
    assert True in verdicts, "a node-by-node search admitted the gang"
