"""Packing rules, one table row per rule, on the YAML fixture pool and small generated pools."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Sequence

import pytest
from tests.placement.conftest import FIXTURES, ROOT

from toporender.errors import UserError
from toporender.expand.levels import LevelConstraint
from toporender.placement import packer
from toporender.placement.compiled import CompiledGang, GangShape, compile_gang, size_counts
from toporender.placement.demand import GangDemand, PodDemand, SubgroupDemand
from toporender.placement.fit import hist_count
from toporender.placement.inventory import Inventory, Node, Taint, load_inventory
from toporender.placement.packer import covers, gang_shape, merge_pods, no_easier, pack, pods_at_least
from toporender.placement.tree import Tree

LEVELS = ["zone", "block", "rack"]
POOL = load_inventory(FIXTURES / "pool-inventory.yaml", "pool-inventory.yaml")


def gang(key: str, subs: Sequence[tuple[str, int, int, str | None]] = (), *, required: str | None = None,
         preferred: str | None = None, pods: int = 0, gpus: int = 4,
         tolerations: tuple[tuple[str, str | None, str | None], ...] = ()) -> GangDemand:
    """subs: (name, pods, gpus per pod, required level); without subs, ``pods`` pods directly in the gang."""
    if not subs:
        ps = tuple(PodDemand(f"p{i}", gpus, tolerations) for i in range(pods))
        return GangDemand(key, key, LevelConstraint(required, preferred), (), ps)
    sgs, allp, mapping = [], [], []
    for name, n, g, req in subs:
        sp = tuple(PodDemand(f"{name}-{i}", g, tolerations) for i in range(n))
        sgs.append(SubgroupDemand(name, None, LevelConstraint(req), sp))
        allp.extend(sp)
        mapping.extend((p.name, name) for p in sp)
    return GangDemand(key, key, LevelConstraint(required, preferred), tuple(sgs), tuple(allp), tuple(mapping))


def test_whole_gang_in_one_required_domain_and_subgroups_in_racks() -> None:
    plan = pack(POOL, LEVELS, [gang("g", [("a", 2, 4, "rack"), ("b", 2, 4, "rack")], required="zone")])
    g = plan.gangs["g"]
    assert g.placed
    assert g.subgroup_domains[""]["zone"] == "a"
    assert {g.subgroup_domains["a"]["rack"], g.subgroup_domains["b"]["rack"]} <= {"x.1", "x.2", "x.3"}
    assert g.pod_domain["a-0"][-1] == ("rack", g.subgroup_domains["a"]["rack"])


@pytest.mark.parametrize(
    ("name", "gangs", "expect"),
    [
        # best fit: 2 whole nodes fit rack x.2 exactly (2 schedulable nodes) rather than the larger x.1
        ("best-fit rack", [gang("g", required="rack", pods=2)], {"g": "x.2"}),
        # cordoned a1-2-n3 and tainted a2-3-n3 are excluded: 3 pods only fit x.1 (3 full nodes)
        ("cordon and taint excluded", [gang("g", required="rack", pods=3)], {"g": "x.1"}),
        # tolerating the taint opens x.3 (3 nodes) as the tightest rack for 3 pods
        ("toleration admits tainted node",
         [gang("g", required="rack", pods=3, tolerations=(("maintenance", "true", "NoSchedule"),))], {"g": "x.3"}),
        # operator Exists (value None) tolerates any value
        ("exists toleration", [gang("g", required="rack", pods=3, tolerations=(("maintenance", None, None),))],
         {"g": "x.3"}),
        # preferred rack honoured when it fits, otherwise relaxed to the block (never below the zone requirement)
        ("preferred honoured", [gang("g", required="zone", preferred="rack", pods=2)], {"g": "x.2"}),
        ("preferred relaxed", [gang("g", required="zone", preferred="rack", pods=5)], {"g": "a1"}),
    ],
)
def test_rules(name: str, gangs: list[GangDemand], expect: dict[str, str]) -> None:
    plan = pack(POOL, LEVELS, gangs)
    for key, domain in expect.items():
        got = plan.gangs[key]
        assert got.placed, got.reason
        assert domain in got.subgroup_domains[""].values(), (name, got.subgroup_domains)


def test_domains_already_used_by_the_gang_come_first() -> None:
    plan = pack(POOL, LEVELS, [gang("g", [("a", 1, 4, "rack"), ("b", 1, 4, "rack")], required="zone")])
    g = plan.gangs["g"]
    assert g.subgroup_domains["a"]["rack"] == g.subgroup_domains["b"]["rack"]


def test_nodes_largest_free_first_then_name_and_filled() -> None:
    # rack x.1: n1, n2, n4 have 4 free, n3 has 2: two 2-GPU pods fill n1 before touching n2
    plan = pack(POOL, LEVELS, [gang("g", required="rack", pods=2, gpus=2)])
    nodes = sorted(plan.gangs["g"].pod_nodes.values())
    assert len(set(nodes)) == 1


def test_node_missing_rack_label_cannot_serve_rack_constraint_but_serves_block() -> None:
    only_b = {"zone": "b"}
    plan = pack(POOL, LEVELS, [gang("r", required="rack", pods=3)], node_selector=only_b)
    assert not plan.gangs["r"].placed
    assert plan.gangs["r"].reason == "r needs 12 GPUs in one rack; the largest has 8 (x.4)"
    plan = pack(POOL, LEVELS, [gang("b", required="block", pods=3)], node_selector=only_b)
    assert plan.gangs["b"].placed and "b1-loose" in plan.gangs["b"].pod_nodes.values()


def test_unplaceable_reason_names_level_demand_and_capacity() -> None:
    plan = pack(POOL, ["zone", "block", "nvidia.com/gpu.clique"],
                [gang("model-1-group", required="nvidia.com/gpu.clique", pods=4)])
    g = plan.gangs["model-1-group"]
    assert not g.placed and not g.pod_nodes
    assert g.reason == "model-1-group needs 16 GPUs in one nvidia.com/gpu.clique; no node has the label " \
                       "nvidia.com/gpu.clique (1 cordoned node, 1 tainted node not tolerated excluded)"
    plan = pack(POOL, LEVELS, [gang("big", required="rack", pods=4)])
    assert plan.gangs["big"].reason == "big needs 16 GPUs in one rack; the largest has 14 (x.1) " \
                                       "(1 cordoned node, 1 tainted node not tolerated excluded)"


@pytest.mark.parametrize("required", [None, "rack"])
def test_a_pod_bigger_than_every_node_says_so(required: str | None) -> None:
    """Not "no arrangement of whole pods fits": no arrangement could, since a pod's GPUs come from one node."""
    plan = pack(POOL, LEVELS, [gang("wide", required=required, pods=2, gpus=8)])
    reason = plan.gangs["wide"].reason or ""
    assert reason.startswith("wide: pod p0 needs 8 GPUs on one node, but the largest node of the pool has 4"), reason


def test_unknown_level_is_a_user_error() -> None:
    with pytest.raises(UserError, match="'nvidia.com/gpu.clique' is not one of the pool's levels"):
        pack(POOL, LEVELS, [gang("g", required="nvidia.com/gpu.clique", pods=1)])


def test_duplicate_gang_keys_are_rejected() -> None:
    with pytest.raises(UserError, match="repeated: g"):
        pack(POOL, LEVELS, [gang("g", pods=1), gang("g", pods=1)])


def test_cpu_only_pods_get_no_node() -> None:
    g = GangDemand("g", "g", LevelConstraint("rack"), (), (PodDemand("launcher", 0), PodDemand("w", 4)))
    plan = pack(POOL, LEVELS, [g])
    assert plan.gangs["g"].placed and list(plan.gangs["g"].pod_nodes) == ["w"]


def test_mid_level_subgroup_constrains_its_children() -> None:
    sp = lambda n, k: tuple(PodDemand(f"{n}-{i}", 4) for i in range(k))  # noqa: E731
    subs = (
        SubgroupDemand("mid", None, LevelConstraint("block"), ()),
        SubgroupDemand("l1", "mid", LevelConstraint("rack"), sp("l1", 2)),
        SubgroupDemand("l2", "mid", LevelConstraint(None), sp("l2", 2)),
    )
    pods = subs[1].pods + subs[2].pods
    mapping = tuple((p.name, "l1") for p in subs[1].pods) + tuple((p.name, "l2") for p in subs[2].pods)
    plan = pack(POOL, LEVELS, [GangDemand("g", "g", LevelConstraint("zone"), subs, pods, mapping)])
    g = plan.gangs["g"]
    assert g.placed
    blocks = {POOL_BY[n].labels["block"] for n in g.pod_nodes.values()}
    assert len(blocks) == 1 and g.subgroup_domains["mid"]["block"] in blocks


POOL_BY = {n.name: n for n in POOL.nodes}


def test_hist_count_matches_fill_rule() -> None:
    # nodes free [4, 4, 2]: three 2-GPU pods fill one 4-GPU node then use the next one
    assert hist_count([0, 0, 1, 0, 2], [(2, 3)]) == 3
    assert hist_count([0, 0, 1, 0, 2], [(4, 2), (2, 2)]) == 3
    assert hist_count([0, 3, 0, 0, 0], [(2, 1)]) == 0


def _random_case(seed: int) -> tuple[Inventory, list[GangDemand]]:
    from instances import random_gang, random_inventory

    rng = random.Random(seed)
    inv = random_inventory(rng, 2, 2, (1, 3), tainted=0.05)
    return inv, [random_gang(rng, f"g{i}") for i in range(10)]


def test_same_plan_under_permuted_nodes_and_subgroups() -> None:
    for seed in range(4):
        inv, gangs = _random_case(seed)
        base = pack(inv, LEVELS, gangs).hash
        rng = random.Random(seed)
        nodes = list(inv.nodes)
        rng.shuffle(nodes)
        shuffled = [GangDemand(g.key, g.display, g.constraint, tuple(rng.sample(g.subgroups, len(g.subgroups))),
                               tuple(rng.sample(g.pods, len(g.pods))), g.pod_subgroup) for g in gangs]
        assert pack(Inventory(tuple(nodes)), LEVELS, shuffled).hash == base


def test_same_hash_across_processes_and_hash_seeds() -> None:
    code = (
        "import sys; sys.path.insert(0, 'benchmarks/placement');"
        "from instances import small_instance, LEVELS; from toporender.placement.packer import pack;"
        "i = small_instance(3); print(pack(i.inventory, LEVELS, i.gangs).hash)"
    )
    hashes = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             check=True)
        hashes.add(out.stdout.strip())
    assert len(hashes) == 1


def test_stable_when_appended_gang_fits() -> None:
    moved = 0
    for seed in range(6):
        inv, gangs = _random_case(seed)
        for k in range(1, len(gangs)):
            before = pack(inv, LEVELS, gangs[:k])
            after = pack(inv, LEVELS, gangs[: k + 1])
            if after.gangs[gangs[k].key].placed and not any(g.moved for g in after.gangs.values()):
                for key, g in before.gangs.items():
                    assert after.gangs[key].pod_nodes == g.pod_nodes
            else:
                moved += 1
    # prefixes never change: a gang placed in a prefix keeps its nodes unless a later gang needed the room
    assert moved < 60


def test_node_selector_limits_the_pool() -> None:
    plan = pack(POOL, LEVELS, [gang("g", required="zone", pods=1)], node_selector={"zone": "b"})
    assert plan.gangs["g"].subgroup_domains[""]["zone"] == "b"


def test_plan_metrics_and_json() -> None:
    plan = pack(POOL, LEVELS, [gang("g", [("a", 2, 4, "rack"), ("b", 2, 4, "rack")], required="zone")])
    d = plan.to_dict()
    assert d["hash"] == plan.hash and len(plan.hash) == 64
    racks = {x.path[-1]: x for x in plan.domains_at("rack")}
    assert racks["x.2"].unavailable == 4 and racks["x.2"].total == 12
    assert sum(x.planned for x in racks.values()) == 16
    assert plan.gangs["g"].span["zone"] == 1
    zone = {x.path[-1]: x for x in plan.domains_at("zone")}
    assert zone["a"].free == zone["a"].total - zone["a"].preused - zone["a"].planned - zone["a"].unavailable
    assert plan.smallest_unit == 8


def test_a_gang_blocked_only_by_earlier_gangs_says_so() -> None:
    """Not a reason that reads as infeasible: the rack had room before the earlier gangs took it."""
    from toporender.load.yaml_source import load_text
    from toporender.placement.inventory import inventory_from_documents

    text = ("apiVersion: toporender.dev/v1alpha1\nkind: NodeInventory\nnodes:\n"
            "  - {name: n1, gpus: 4, labels: {rack: r1}}\n  - {name: n2, gpus: 4, labels: {rack: r1}}\n"
            "  - {name: n3, gpus: 4, labels: {rack: r2}}\n")
    inv = inventory_from_documents(load_text(text, "nodes.yaml"), "nodes.yaml")
    plan = pack(inv, ["rack"], [gang("first", required="rack", pods=2), gang("second", required="rack", pods=2)])
    assert plan.gangs["first"].placed and not plan.gangs["second"].placed
    assert plan.gangs["second"].reason == ("second needs 8 GPUs in one rack; the largest has 4 (r2); rack r1 had "
                                           "room for it (8 GPUs) before other gangs: blocked by earlier gangs first")
    alone = pack(inv, ["rack"], [gang("big", required="rack", pods=3)])
    assert alone.gangs["big"].reason == "big needs 12 GPUs in one rack; the largest has 8 (r1)"


def test_a_gang_blocked_by_a_gang_spread_over_racks_names_it() -> None:
    """The blocking gang's pods lie in two racks (its lowest common domain is the zone), yet it is the one that
    took the rack's room; the reason used to name only gangs lying wholly inside the rack."""
    from toporender.load.yaml_source import load_text
    from toporender.placement.inventory import inventory_from_documents

    nodes = "".join(f"  - {{name: n{r}{i}, gpus: 4, labels: {{zone: z, rack: r{r}}}}}\n"
                    for r in (1, 2) for i in (1, 2))
    text = "apiVersion: toporender.dev/v1alpha1\nkind: NodeInventory\nnodes:\n" + nodes
    inv = inventory_from_documents(load_text(text, "nodes.yaml"), "nodes.yaml")
    spread = gang("spread", [("a", 2, 4, "rack"), ("b", 1, 4, "rack")], required="zone")
    plan = pack(inv, ["zone", "rack"], [spread, gang("late", required="rack", pods=2)])
    assert plan.gangs["spread"].placed and plan.gangs["spread"].span["rack"] == 2
    assert not plan.gangs["late"].placed
    assert "had room for it (8 GPUs) before other gangs: blocked by earlier gangs spread" in (
        plan.gangs["late"].reason or "")


def excluding(g: GangDemand, *nodes: str) -> GangDemand:
    """``g`` with every pod excluding ``nodes`` (a resource's nodesExcluded)."""
    from dataclasses import replace

    pods = tuple(replace(p, excluded=nodes) for p in g.pods)
    by_name = {p.name: p for p in pods}
    subs = tuple(replace(s, pods=tuple(by_name[p.name] for p in s.pods)) for s in g.subgroups)
    return replace(g, pods=pods, subgroups=subs)


@pytest.mark.parametrize(("name", "g", "expect_rack", "avoid"), [
    # best fit would take rack x.2 (2 nodes); excluding one of them leaves x.3 as the tightest rack with 2 nodes
    ("excluded node moves the gang", excluding(gang("g", required="rack", pods=2), "a1-2-n1"), "x.3", {"a1-2-n1"}),
    # one pod: rack x.2 keeps its other node, which is now the tightest fit
    ("excluded node inside the rack", excluding(gang("g", required="rack", pods=1), "a1-2-n1"), "x.2",
     {"a1-2-n1"}),
    ("an unknown node name excludes nothing", excluding(gang("g", required="rack", pods=2), "no-such-node"), "x.2",
     set()),
])
def test_nodes_excluded(name: str, g: GangDemand, expect_rack: str, avoid: set[str]) -> None:
    got = pack(POOL, LEVELS, [g]).gangs["g"]
    assert got.placed, got.reason
    assert got.subgroup_domains[""]["rack"] == expect_rack, name
    assert not avoid & set(got.pod_nodes.values())


def test_a_gang_that_needs_its_excluded_nodes_is_unplaceable_and_says_why() -> None:
    got = pack(POOL, LEVELS, [excluding(gang("g", required="rack", pods=3), "a1-1-n1", "a1-1-n2")]).gangs["g"]
    assert not got.placed
    assert got.reason.endswith("(2 nodes excluded by its resources' nodesExcluded)"), got.reason


def test_later_gangs_never_move_a_gang_with_excluded_nodes() -> None:
    first = excluding(gang("first", required="rack", pods=2), "a1-2-n1")
    plan = pack(POOL, LEVELS, [first, gang("second", required="rack", pods=3), gang("third", required="rack", pods=2)])
    alone = pack(POOL, LEVELS, [first]).gangs["first"]
    assert plan.gangs["first"].pod_nodes == alone.pod_nodes
    assert "a1-2-n1" not in plan.gangs["first"].pod_nodes.values()


def _racks(*free: int, node_gpus: int = 8) -> Inventory:
    """One zone, one block; rack r<i> is one node of ``node_gpus`` GPUs with ``free[i]`` of them free."""
    return Inventory.of([Node(f"n{i}", {"zone": "z", "block": "b", "rack": f"r{i}"}, node_gpus, node_gpus - f)
                         for i, f in enumerate(free)])


@pytest.mark.parametrize(("name", "free", "gangs", "expect"), [
    # the tightest rack (5 free) would keep 1 GPU, less than the 4 any gang seen so far asks: take the 8
    ("hole avoided", (5, 8), [gang("g", required="rack", pods=1)], "r1"),
    # an exact fit leaves no hole at all
    ("exact fit kept", (4, 8), [gang("g", required="rack", pods=1)], "r0"),
    # every rack would keep a hole: the tightest still
    ("only holes: tightest", (5, 6), [gang("g", required="rack", pods=1)], "r0"),
    # a 2-GPU gang seen before makes 2 free GPUs usable, 1 still a hole: r2 (6 -> 2) over r1 (5 -> 1)
    ("smaller gang seen before", (2, 5, 6), [gang("a", required="rack", pods=1, gpus=2),
                                             gang("g", required="rack", pods=1)], "r2"),
    # inside a block the pods go to the child rack that keeps no hole too
    ("child rack of a block", (5, 8), [gang("g", required="block", pods=1)], "r1"),
])
def test_tightest_fit_avoids_holes(name: str, free: tuple[int, ...], gangs: list[GangDemand],
                                   expect: str) -> None:
    plan = pack(_racks(*free), LEVELS, gangs)
    got = plan.gangs["g"]
    assert got.placed, got.reason
    assert {n.replace("n", "r") for n in got.pod_nodes.values()} == {expect}, name


@pytest.mark.parametrize(("pods", "than", "no_easier"), [
    ([8, 8, 8], [8, 8, 8], True),
    ([8, 8, 8, 1], [8, 8, 8], True),
    ([8] + [1] * 29, [8, 8, 8], False),    # more GPUs, but in small pods that pack where 8-GPU ones cannot
    ([4] * 6, [8, 8, 8], False),
    ([8, 8, 8], [4] * 6, True),
    ([8, 4, 2], [8, 2, 2, 2], True),
    ([8, 2, 2], [4, 4, 4], False),
    ([], [], True),
])
def test_a_failed_gang_rules_out_only_gangs_no_easier(pods: list[int], than: list[int], no_easier: bool) -> None:
    """After re-arranging failed to admit a gang, a later one is not searched again only if it asks, for every
    pod size, at least as many GPUs in pods of at least that size."""
    assert pods_at_least(size_counts([8, 8, 1, 4])) == ((8, 16), (4, 20), (1, 21))
    assert covers(pods_at_least(size_counts(pods)), pods_at_least(size_counts(than))) == no_easier


def _tainted_twin(inv: Inventory, gangs: Sequence[GangDemand], tolerate: bool = True
                  ) -> tuple[Inventory, list[GangDemand]]:
    """Every node with the taint GPU nodes often carry; every pod tolerating it (``tolerate``)."""
    import dataclasses

    taint = Taint("nvidia.com/gpu", "present", "NoSchedule")
    tolerations = (("nvidia.com/gpu", None, "NoSchedule"),) if tolerate else ()
    twin = []
    for g in gangs:
        pods = {p.name: dataclasses.replace(p, tolerations=tolerations) for p in g.pods}
        twin.append(dataclasses.replace(
            g, pods=tuple(pods.values()),
            subgroups=tuple(dataclasses.replace(s, pods=tuple(pods[p.name] for p in s.pods)) for s in g.subgroups)))
    return Inventory.of([dataclasses.replace(n, taints=(*n.taints, taint)) for n in inv.nodes]), twin


@pytest.mark.parametrize("seed", [2001, 2016, 2021, 2033])
def test_a_taint_every_node_has_and_every_pod_tolerates_changes_no_placement(seed: int) -> None:
    """Such a taint tells no node from another. Searched as tolerated taints, these gangs lost up to 38 of 46
    GPUs (2033) for want of re-arrangement."""
    from instances import FAMILY_LEVELS, check_plan, family_instance

    inst = family_instance(seed)
    inv, gangs = _tainted_twin(inst.inventory, inst.gangs)
    plain, tainted = pack(inst.inventory, FAMILY_LEVELS, inst.gangs), pack(inv, FAMILY_LEVELS, gangs)
    assert check_plan(inv, FAMILY_LEVELS, gangs, tainted) == []
    assert {k: g.pod_nodes for k, g in tainted.gangs.items()} == {k: g.pod_nodes for k, g in plain.gangs.items()}


def test_a_gang_that_does_not_tolerate_a_taint_of_every_node_says_so() -> None:
    from instances import FAMILY_LEVELS, family_instance

    inst = family_instance(2001)
    inv, gangs = _tainted_twin(inst.inventory, inst.gangs)
    _, intolerant = _tainted_twin(inst.inventory, inst.gangs[1:2], tolerate=False)
    plan = pack(inv, FAMILY_LEVELS, [gangs[0], *intolerant, *gangs[2:]])
    first = sorted(intolerant[0].pods, key=lambda p: (-p.gpus, p.name))[0].name
    assert not plan.gangs["g00001"].placed
    assert plan.gangs["g00001"].reason == (
        f"g00001: pod {first} does not tolerate the taint nvidia.com/gpu=present:NoSchedule, which every "
        "schedulable node of the pool has; add a matching toleration to its pod template")
    assert plan.gangs["g00000"].placed and plan.gangs["g00002"].placed


@pytest.mark.parametrize(("taints", "pool"), [
    ([["a"], ["a", "b"], ["a"]], ["a"]),
    ([["a"], ["a"], []], []),            # one node without it: the taint tells nodes apart
    ([["a"], ["a"], ["cordoned"]], ["a"]),  # a cordoned node is no candidate, whatever its taints
    ([["a", "soft"], ["a", "soft"]], ["a"]),  # PreferNoSchedule keeps no pod away
])
def test_pool_taints(taints: list[list[str]], pool: list[str]) -> None:
    from toporender.placement.tree import Tree

    def taint(key: str) -> Taint:
        return Taint(key, None, "PreferNoSchedule" if key == "soft" else "NoSchedule")

    nodes = [Node(f"n{i}", {"rack": "r"}, 8, 0, keys == ["cordoned"], tuple(taint(k) for k in keys if k != "cordoned"))
             for i, keys in enumerate(taints)]
    tree = Tree(Inventory.of(nodes), ("rack",), {})
    assert [t.key for t in tree.pool_taints] == pool
    assert all(t not in tree.pool_taints for ts in tree.node_taints for t in ts)


@pytest.mark.parametrize(("second", "first_on", "second_on"), [
    ([8, 8], {"n1"}, {"n0", "n2"}),  # b needs both untainted nodes: a moves onto the tainted one
    ([8], {"n2"}, {"n0"}),           # room for both: nothing moves
])
def test_a_gang_that_tolerates_a_taint_moves_onto_it_for_one_that_does_not(
        second: list[int], first_on: set[str], second_on: set[str]) -> None:
    """Gang a tolerates the taint of n1; b does not. Searched as tolerated, a was never re-arranged, and the
    greedy baselines never placed a, so the plan kept was theirs, with a left out."""
    taint = Taint("team", "a", "NoSchedule")
    nodes = [Node("n0", {"zone": "z", "rack": "r0"}, 8), Node("n1", {"zone": "z", "rack": "r0"}, 8, 0, False, (taint,)),
             Node("n2", {"zone": "z", "rack": "r1"}, 8)]

    def gang(key: str, gpus: list[int], tolerations: tuple[tuple[str, str | None, str | None], ...] = ()
             ) -> GangDemand:
        return GangDemand(key, key, LevelConstraint("zone"), (),
                          tuple(PodDemand(f"p{i}", g, tolerations) for i, g in enumerate(gpus)))

    plan = pack(Inventory.of(nodes), ("zone", "rack"),
                [gang("a", [8], (("team", None, "NoSchedule"),)), gang("b", second)])
    assert plan.gangs["a"].placed and plan.gangs["b"].placed
    assert set(plan.gangs["a"].pod_nodes.values()) == first_on
    assert set(plan.gangs["b"].pod_nodes.values()) == second_on


_NO = frozenset[int]()
_T = frozenset({7})


def _shape(req: int, leaves: list[tuple[int, int, int]], tol: frozenset[int] = _NO, leaf_tol: frozenset[int] = _NO,
           nested: bool = False) -> GangShape:
    """A gang shape of leaf groups (level, pods, GPUs a pod); levels 0 zone, 1 block, 2 rack, 3 clique."""
    sizes: dict[int, int] = {}
    for _, n, g in leaves:
        sizes[g] = sizes.get(g, 0) + n
    return GangShape(req, sum(n * g for _, n, g in leaves), max(n * g for _, n, g in leaves),
                     pods_at_least(sorted(sizes.items(), reverse=True)), tol,
                     tuple((lvl, n * g, pods_at_least([(g, n)]), leaf_tol) for lvl, n, g in leaves), nested)


NO_EASIER = [
    # (new gang, failed gang, whether the new one surely asks at least as much)
    (_shape(1, [(3, 7, 2), (3, 7, 2)]), _shape(1, [(3, 7, 2), (3, 7, 2)]), True),
    (_shape(1, [(2, 7, 2), (2, 7, 2)]), _shape(1, [(3, 7, 2), (3, 7, 2)]), False),  # racks are not cliques
    (_shape(1, [(3, 7, 2), (3, 7, 2)]), _shape(1, [(2, 7, 2), (2, 7, 2)]), True),
    (_shape(1, [(3, 7, 2), (1, 14, 1)]), _shape(1, [(3, 7, 2), (3, 7, 2)]), False),  # one clique leaf fewer
    (_shape(1, [(3, 7, 2), (3, 7, 2), (2, 4, 1)]), _shape(1, [(3, 7, 2), (3, 7, 2)]), True),
    (_shape(1, [(3, 7, 2)]), _shape(1, [(3, 7, 2), (3, 7, 2)]), False),  # fewer GPUs
    (_shape(1, [(3, 14, 1), (3, 14, 1)]), _shape(1, [(3, 7, 2), (3, 7, 2)]), False),  # smaller pods
    (_shape(1, [(3, 4, 4), (3, 4, 4)]), _shape(1, [(3, 7, 2), (3, 7, 2)]), True),  # larger pods
    (_shape(0, [(3, 7, 2), (3, 7, 2)]), _shape(1, [(3, 7, 2), (3, 7, 2)]), False),  # another required level
    (_shape(1, [(3, 7, 2), (3, 7, 2)]), _shape(1, [(3, 7, 2), (3, 7, 2)], nested=True), False),  # nesting
    (_shape(1, [(3, 7, 2), (3, 7, 2)], tol=_T, leaf_tol=_T), _shape(1, [(3, 7, 2), (3, 7, 2)]), False),
    (_shape(1, [(3, 7, 2), (3, 7, 2)]), _shape(1, [(3, 7, 2), (3, 7, 2)], tol=_T, leaf_tol=_T), True),
    # a first match that must give way: the rack leaf takes the clique one first, the clique leaf needs it
    (_shape(1, [(3, 4, 2), (2, 4, 2)]), _shape(1, [(2, 4, 2), (3, 4, 2)]), True),
    (_shape(1, [(3, 4, 2), (3, 4, 2)]), _shape(1, [(2, 4, 2), (2, 4, 2), (2, 4, 2)]), False),
    # one leaf may hold several: the failed ones may share a domain
    (_shape(1, [(3, 4, 2)]), _shape(1, [(3, 2, 2), (3, 2, 2)]), True),
    (_shape(1, [(2, 4, 2)]), _shape(1, [(3, 2, 2), (3, 2, 2)]), False),  # ... of their level or a finer one
    (_shape(1, [(3, 4, 2), (3, 2, 2)]), _shape(1, [(3, 3, 2), (3, 3, 2)]), False),  # ... if they fit together
    (_shape(1, [(3, 4, 2), (3, 1, 4)]), _shape(1, [(3, 2, 2), (3, 1, 4), (3, 2, 2)]), True),
    # a one-pod leaf asks nothing of its level, and holds leaves of any level
    (_shape(1, [(2, 2, 8)]), _shape(1, [(2, 1, 8), (2, 1, 8)]), True),
    (_shape(1, [(2, 2, 8)]), _shape(1, [(3, 1, 8), (3, 1, 8)]), True),
    (_shape(1, [(2, 1, 8)]), _shape(1, [(3, 2, 4)]), True),
    (_shape(1, [(2, 1, 8)]), _shape(1, [(3, 4, 2)]), True),
    (_shape(1, [(2, 2, 4)]), _shape(1, [(3, 2, 4)]), False),
]


@pytest.mark.parametrize(("a", "b", "want"), [
    ([], [(2, 3)], ((2, 6),)),
    ([(4, 2)], [(2, 3)], ((4, 8), (2, 14))),
    ([(8, 1), (2, 1)], [(4, 1), (2, 2)], ((8, 8), (4, 12), (2, 18))),
    ([(4, 1), (1, 2)], [(4, 3)], ((4, 16), (1, 18))),
])
def test_merged_pods_count_both_groups_at_every_size(a: list[tuple[int, int]], b: list[tuple[int, int]],
                                                     want: tuple[tuple[int, int], ...]) -> None:
    assert merge_pods(pods_at_least(a), pods_at_least(b)) == want
    assert merge_pods(pods_at_least(b), pods_at_least(a)) == want
    assert merge_pods(pods_at_least(a), pods_at_least(b)) == pods_at_least(size_counts(
        [g for g, n in a for _ in range(n)] + [g for g, n in b for _ in range(n)]))


@pytest.mark.parametrize(("shape", "than", "want"), NO_EASIER)
def test_a_gang_is_refused_unsearched_only_when_no_easier(shape: GangShape, than: GangShape, want: bool) -> None:
    assert no_easier(shape, than) is want


def test_pods_of_a_group_with_subgroups_are_matched_too() -> None:
    """A failed gang's pods outside its subgroups need room too: a new gang whose only 8-GPU pod is taken by the
    failed gang's clique-bound subgroup does not ask what the failed one did (its 8-GPU pod has nowhere to go)."""
    tree = Tree(Inventory.of([Node(f"n{i}", {"zone": "z", "block": "b", "rack": "r", "clique": "c"}, 8)
                              for i in range(4)]), ("zone", "block", "rack", "clique"), {})

    def gang(idx: int, root: list[int], leaf: list[int], level: str) -> CompiledGang:
        pods = [PodDemand(f"p{i}", g) for i, g in enumerate(root + leaf)]
        sub = SubgroupDemand("s", None, LevelConstraint(level), tuple(pods[len(root):]))
        return compile_gang(tree, idx, GangDemand(f"g{idx}", f"g{idx}", LevelConstraint("block"), (sub,),
                                                  tuple(pods)))

    failed, new = gang(0, [8], [4, 4], "clique"), gang(1, [4, 4], [8], "rack")
    assert not no_easier(gang_shape(new), gang_shape(failed))
    assert no_easier(gang_shape(gang(2, [8], [4, 4], "clique")), gang_shape(failed))


def test_leaf_matching_claims_nothing_when_its_trials_run_out(monkeypatch: pytest.MonkeyPatch) -> None:
    shape, than = _shape(1, [(3, 2, 2)] * 6), _shape(1, [(3, 1, 2)] * 12)
    assert no_easier(shape, than)
    monkeypatch.setattr(packer, "MATCH_STEPS", 11)
    assert not no_easier(shape, than)


def test_large_pools_compare_only_the_largest_leaf() -> None:
    """Beyond ``fit.HOLE_MAX_NODES`` nodes the cheaper rule stands: rack-bound leaves count as clique-bound ones."""
    racks, cliques = _shape(1, [(2, 7, 2), (2, 7, 2)]), _shape(1, [(3, 7, 2), (3, 7, 2)])
    assert no_easier(racks, cliques, by_leaves=False)
    assert not no_easier(racks, cliques)
    assert not no_easier(_shape(1, [(3, 6, 2), (3, 6, 2), (3, 2, 2)]), cliques, by_leaves=False)


def _blocks(racks: dict[str, tuple[int, ...]]) -> Inventory:
    """One zone; block -> the free GPUs of its racks, each rack one node of 8 GPUs (named r<block>-<i>)."""
    return Inventory.of([Node(f"{b}-{i}", {"zone": "z", "block": b, "rack": f"r{b}-{i}"}, 8, 8 - f)
                         for b, free in racks.items() for i, f in enumerate(free)])


@pytest.mark.parametrize(("name", "racks", "subgroups", "expect"), [
    # no block holds all four: best fit one group at a time takes the first exact racks (b0, b1, then b2's)
    # over three blocks; the block that holds three of them, then one more, spans two
    ("siblings kept together", {"b0": (8,), "b1": (8,), "b2": (8, 8, 8)}, 4, {"b0", "b2"}),
    ("fewest blocks, tightest last", {"b0": (8, 8), "b1": (8,), "b2": (8, 8, 8)}, 4, {"b1", "b2"}),
    # the preferred block holds the gang: one block, as before
    ("preferred block holds it", {"b0": (8,), "b1": (8, 8, 8, 8)}, 4, {"b1"}),
])
def test_a_gang_over_several_domains_keeps_its_groups_together(
        name: str, racks: dict[str, tuple[int, ...]], subgroups: int, expect: set[str]) -> None:
    g = gang("g", [(f"s{i}", 1, 8, "rack") for i in range(subgroups)], required="zone", preferred="block")
    got = pack(_blocks(racks), LEVELS, [g]).gangs["g"]
    assert got.placed, got.reason
    assert {n.split("-")[0] for n in got.pod_nodes.values()} == expect, name
