"""Quality against the exact arrival-order optimum (HiGHS) on a fixed set of small fragmented instances."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from toporender.placement import repair
from toporender.placement.compiled import CompiledGang
from toporender.placement.inventory import Inventory, Node
from toporender.placement.packer import pack
from toporender.placement.plan import PlacementPlan
from toporender.placement.tree import ROOT

from .test_packer import gang

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


@pytest.mark.parametrize("family", ["mixed", "varied", "fragmented"])
def test_held_out_seeds_are_never_tuning_seeds(family: str) -> None:
    """Each family's named seed sets are disjoint, so a held-out figure never comes from a seed tuned on."""
    from quality import FAMILY_SETS

    sets = FAMILY_SETS[family]
    names = list(sets)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            assert not set(sets[first]) & set(sets[second]), (family, first, second)


def test_oracle_agrees_with_node_level_model_on_a_tiny_case() -> None:
    from instances import LEVELS, mip_feasible, rack_feasible, small_instance

    inst = small_instance(7, gangs=3)
    for k in range(1, 4):
        assert rack_feasible(inst.inventory, LEVELS, inst.gangs[:k]) == mip_feasible(
            inst.inventory, LEVELS, inst.gangs[:k])


def _one_of_two() -> object:
    """x + y = 1 over two binaries, as the oracle's models write a domain choice."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for c in range(2):
        h.addVar(0, 1)
        h.changeColIntegrality(c, highspy.HighsVarType.kInteger)
    h.addRow(1, 1, 2, [0, 1], [1.0, 1.0])
    return h.getLp()


@pytest.mark.parametrize(("values", "holds"), [
    ([1.0, 0.0], True),
    ([1e-9, 0.999999999], True),  # within the solver's tolerance of a whole solution that checks
    ([0.5, 0.5], False),  # fractional: the row holds only before rounding
    ([1.0, 1.0], False),  # the row broken
    ([2.0, -1.0], False),  # the row holds, the bounds do not
    ([1.0], False),  # not a solution of this model
])
def test_a_feasible_verdict_is_checked_in_whole_numbers(values: list[float], holds: bool) -> None:
    import highspy
    from instances import witness_holds

    lp = _one_of_two()
    assert witness_holds(lp, values) is holds
    # the same model with its matrix stored by rows, the other layout HiGHS keeps
    by_rows = SimpleNamespace(
        num_col_=2, num_row_=1, col_lower_=[0, 0], col_upper_=[1, 1], row_lower_=[1], row_upper_=[1],
        a_matrix_=SimpleNamespace(format_=highspy.MatrixFormat.kRowwise, start_=[0, 2], index_=[0, 1],
                                  value_=[1.0, 1.0]))
    assert witness_holds(by_rows, values) is holds


def test_exact_repair_admits_what_the_bounded_search_missed() -> None:
    """Mixed-family tuning seed 2022: 38 nodes of 8 GPUs (some 4), gangs of clique- and rack-bound subgroups.
    The bounded repair placed 182 GPUs; re-packing the pool exactly admits a 32-GPU gang (the optimum, 214)."""
    from instances import FAMILY_LEVELS, check_plan, family_instance

    inst = family_instance(2022)
    plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
    assert check_plan(inst.inventory, FAMILY_LEVELS, inst.gangs, plan) == []
    assert plan.placed_gpus == 214
    assert plan.gangs["g00009"].placed
    assert pack(inst.inventory, FAMILY_LEVELS, inst.gangs).hash == plan.hash


def test_a_gang_of_smaller_pods_is_searched_after_a_larger_podded_one_failed() -> None:
    """Mixed-family development seed 4065: g00002 (24 GPUs in 8-GPU pods) cannot be admitted; g00003 asks more
    GPUs (37) with a larger subgroup, but 29 of its pods take 1 GPU. Skipped as no easier, it was left out and
    the packer placed 71 of the optimum's 92 GPUs (77%); re-arranging admits it."""
    from instances import FAMILY_LEVELS, check_plan, family_instance

    inst = family_instance(4065)
    plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
    assert check_plan(inst.inventory, FAMILY_LEVELS, inst.gangs, plan) == []
    assert not plan.gangs["g00002"].placed and plan.gangs["g00003"].placed
    assert plan.placed_gpus == 92
    assert plan.gangs["g00002"].reason.endswith(
        "; no arrangement of the 2 earlier gangs in the pool leaves room for it (exact search)")


@pytest.mark.parametrize(("run_steps", "verdict"), [
    (100_000, "an exact search over the 10 earlier gangs in zone z0 ran out of steps"),
    (400_000, "no arrangement of the 10 earlier gangs in zone z0 leaves room for it (exact search)"),
])
def test_a_gang_the_exact_search_could_not_decide_says_so(monkeypatch: pytest.MonkeyPatch, run_steps: int,
                                                          verdict: str) -> None:
    """Mixed-family seed 3033: with 100,000 exact steps for the run the searches for g00012 run out of steps, and
    its reason says so (150,000 prove it with each take checked against the later units' sums, 250,000 with the
    groups a unit leaves out checked only as it leaves them); with
    400,000 (and the run's 1,000,000) one of them ends within its steps, which proves it
    (with restarts of 1,500 steps a term, so does one within 300,000)."""
    from instances import FAMILY_LEVELS, family_instance

    monkeypatch.setattr(repair, "EXACT_RUN_STEPS", run_steps)
    inst = family_instance(3033)
    reason = pack(inst.inventory, FAMILY_LEVELS, inst.gangs).gangs["g00012"].reason
    assert reason.endswith(f"blocked by earlier gangs g00001; {verdict}")


def test_a_gang_the_exact_search_proved_unfit_says_so() -> None:
    """Mixed-family seed 3060: the search in the second order of units ends within its steps, so the reason
    says no arrangement leaves room (in the first order alone it ran out of steps)."""
    from instances import FAMILY_LEVELS, family_instance

    inst = family_instance(3060)
    reason = pack(inst.inventory, FAMILY_LEVELS, inst.gangs).gangs["g00011"].reason
    assert reason.endswith("blocked by earlier gangs g00006, g00007; no arrangement of the "
                           "10 earlier gangs in zone z0 leaves room for it (exact search)")


def test_never_fewer_gpus_than_first_fit_or_bestfit() -> None:
    """On the first generator the packer placed fewer GPUs than BestFit on 3 of these 40 instances and than
    first-fit on 2 (they skip an early gang the packer admits, and place larger later ones)."""
    from instances import LEVELS, bestfit_run, check_plan, firstfit_run, small_instance

    for seed in range(1000, 1040):
        inst = small_instance(seed)
        plan = pack(inst.inventory, LEVELS, inst.gangs)
        assert check_plan(inst.inventory, LEVELS, inst.gangs, plan) == []
        gpus = {g.key: g.gpus for g in inst.gangs}
        for baseline in (firstfit_run, bestfit_run):
            got = sum(gpus[k] for k in baseline(inst.inventory, LEVELS, inst.gangs))
            assert plan.placed_gpus >= got, (seed, baseline.__name__)

SPREAD = [
    # (family, development seed, GPUs placed, level, gangs over more than one domain of it)
    # without re-placing the gangs a re-arrangement moved, 5, 3 and 6 gangs were spread for the same GPUs
    ("mixed", 3034, 251, "block", ["g00007"]),  # g00005 before the search one level below the region
    ("mixed", 3095, 236, "block", ["g00001"]),
    # before the repair searched first with the moved gangs kept inside the blocks they used, 4 gangs here;
    # g00007 too until the admitted gang was bound to one block with the moved ones, or all but one of them
    ("mixed", 3084, 243, "block", ["g00000"]),
    # before the gangs of an admitting re-arrangement were re-placed together, largest first, 3, 3, 3 and 1 gangs
    # were spread for the same GPUs
    ("varied", 1062, 51, "rack", ["g00002"]),
    ("varied", 1091, 221, "rack", ["g00001", "g00003"]),
    ("varied", 1139, 209, "rack", []),  # g00017 until every gang of the pool was bound to one block
    ("varied", 1161, 194, "rack", []),
    # before exact searches bound the moved gangs to the levels they lay in one domain of, 6, 7 and 3 gangs
    # (35000: g00008 and g00009 before the search one level below the region; the arrangement it keeps at one
    # admission, on fewer domains then, leads later searches elsewhere: 1.25 racks a gang for 1.19 here, while
    # the development sets' means fall)
    ("varied", 35000, 383, "rack", ["g00001", "g00002", "g00005"]),
    ("varied", 35003, 135, "rack", ["g00013", "g00014"]),
    ("varied", 35024, 168, "block", ["g00001"]),  # g00002 until the searches that leave no new hole
    # before a search bound the moved gangs one level below the region where their old levels fail, 3 and 1
    ("varied", 35031, 266, "block", ["g00016"]),
    ("mixed", 4011, 392, "block", []),
    # before every gang of the pool was bound to one block after an admission (its gangs lifted, not searched), 3
    ("varied", 35013, 88, "block", []),
    ("varied", 35014, 183, "block", []),  # 1 before the admitted gang was bound with the moved ones
    # while the pool's block search kept an arrangement on fewer blocks however many racks it added, 7 and 6 gangs
    # over more than one rack (10222: for g00019 in one block)
    ("fragmented", 10222, 364, "rack", ["g00019"]),
    ("fragmented", 10242, 243, "rack", ["g00001", "g00008", "g00011", "g00012"]),
]


def spread_gangs(inventory: Inventory, plan: PlacementPlan, level: str) -> list[str]:
    """The gangs of ``plan`` whose pods lie in more than one domain of ``level``, in key order."""
    domain = {n.name: n.labels[level] for n in inventory.nodes}
    return sorted(k for k, g in plan.gangs.items() if len({domain[n] for n in g.pod_nodes.values()}) > 1)


@pytest.mark.parametrize(("family", "seed", "gpus", "level", "spread"), SPREAD, ids=[str(c[1]) for c in SPREAD])
def test_moved_gangs_are_re_placed_on_fewer_domains(family: str, seed: int, gpus: int, level: str,
                                                    spread: list[str]) -> None:
    from instances import FAMILIES, FAMILY_LEVELS, check_plan

    inst = FAMILIES[family][0](seed)
    plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
    assert check_plan(inst.inventory, FAMILY_LEVELS, inst.gangs, plan) == []
    assert plan.placed_gpus == gpus
    assert spread_gangs(inst.inventory, plan, level) == spread


STRANDED = [
    # (mixed-family development seed or first-generator seed, GPUs placed, stranded GPUs); before the gang just
    # placed moved its leaf groups into holes, 4 and 8 GPUs were stranded for the same GPUs placed (BestFit: 2, 6)
    (3001, 188, 0),
    (1008, 338, 6),
]


@pytest.mark.parametrize(("seed", "gpus", "stranded"), STRANDED, ids=[str(c[0]) for c in STRANDED])
def test_leaf_groups_of_the_gang_just_placed_fill_holes(seed: int, gpus: int, stranded: int) -> None:
    from instances import FAMILY_LEVELS, LEVELS, check_plan, family_instance, small_instance
    from quality import metrics

    inst, levels, spans = ((small_instance(seed), LEVELS, ("rack", "block")) if seed < 2000
                           else (family_instance(seed), FAMILY_LEVELS, ("clique", "rack", "block")))
    plan = pack(inst.inventory, levels, inst.gangs)
    assert check_plan(inst.inventory, levels, inst.gangs, plan) == []
    placed, _, got = metrics(inst, {k: g.pod_nodes for k, g in plan.gangs.items() if g.placed}, spans)
    assert (placed, got) == (gpus, stranded)


# (varied-family development seed, GPUs placed = the arrival-order optimum, what the row guards; before, the share)
VARIED = [
    (107, 145, "a gang that does not tolerate the taint fits once a tolerating one moves onto a tainted node (82%)"),
    (112, 379, "tolerating gangs are re-arranged, not only placed (92%)"),
    (113, 99, "equal groups under one coupled parent are interchangeable: 17,167 steps, not 258,882 (91%)"),
    (123, 61, "regions count the tainted nodes earlier gangs tolerate (77%)"),
    (127, 127, "greedy baselines place tolerating gangs too, so ours no longer trails first-fit (96%)"),
    (135, 281, "a gang's pods outside its subgroups counted once: no false proof of no arrangement (86%)"),
    (141, 104, "an earlier gang lifted and placed again after the new one admits it (99%)"),
    (161, 245, "lifted gangs searched exactly with the new one; the lifts chosen by room left (100%, was 96%; "
                "107% while a search that ran out of steps left g00008 out and g00009 in)"),
    (162, 181, "lifted gangs searched exactly with the new one (98%)"),
    (170, 258, "the pool is searched after two zones holding the same earlier gangs failed (90%)"),
    (177, 202, "two earlier gangs lifted where an exact search of the zone ran out of 5 million steps (93%)"),
    (214, 290, "lifted gangs searched exactly with the new one (96%)"),
    (227, 300, "the lift that admits g00004 leaves room: g00005 fits by an exact search with a lifted gang (96%)"),
    (817, 188, "the lift that admits g00014 takes the largest of 13 earlier gangs with two others (93%)"),
    (1122, 284, "searches proven hopeless from sums leave steps to the search that admits g00002 (85%)"),
    (1130, 335, "a gang bound to nothing searched in parts: the others are given zones first (79%)"),
    (1235, 284, "old domains first ran out of steps; the plain order finds g00009's arrangement (90%)"),
    (1945, 123, "a rack-bound subgroup's pods, once one is in a rack, must all fit it: g00007 admitted (80%)"),
    (1926, 347, "racks fewest free GPUs first ran out of steps; most free first admits g00010 (83%)"),
    (2111, 236, "racks fewest free GPUs first needed 916,000 steps; most free first 120,000: g00009 admitted (86%)"),
]


@pytest.mark.parametrize(("seed", "gpus", "why"), VARIED, ids=[str(v[0]) for v in VARIED])
def test_varied_family_rows(seed: int, gpus: int, why: str) -> None:
    from instances import FAMILY_LEVELS, check_plan, firstfit_run, varied_instance

    inst = varied_instance(seed)
    plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
    assert check_plan(inst.inventory, FAMILY_LEVELS, inst.gangs, plan) == []
    assert plan.placed_gpus == gpus, why
    placed = {g.key: g.gpus for g in inst.gangs}
    assert plan.placed_gpus >= sum(placed[k] for k in firstfit_run(inst.inventory, FAMILY_LEVELS, inst.gangs))


@pytest.mark.parametrize(("seed", "gpus", "left_out"), [
    (305, 234, "g00006: left out so that more GPUs are placed in total (234 against 233 with it placed); "),
    (469, 268, "g00004: left out so that more gangs are placed (8 against 6 with it placed, 268 GPUs either way); "),
], ids=["305", "469"])
def test_a_lift_that_costs_later_gangs_more_is_not_kept(seed: int, gpus: int, left_out: str) -> None:
    """Lifting earlier gangs admits one that leaves later gangs less room: the run that lifts none places more
    (or as many GPUs in more gangs), so its plan is kept, and the gang left out is told why."""
    from instances import FAMILY_LEVELS, check_plan, varied_instance

    inst = varied_instance(seed)
    plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
    assert check_plan(inst.inventory, FAMILY_LEVELS, inst.gangs, plan) == []
    assert plan.placed_gpus == gpus
    key = left_out.split(":")[0]
    assert plan.gangs[key].moved and (plan.gangs[key].reason or "").startswith(left_out)


@pytest.mark.parametrize("seed", [371, 390, 518, 545, 566])
def test_never_below_the_benchmarks_greedy_packers_on_the_varied_family(seed: int) -> None:
    """The packer's own first-fit and BestFit placed a gang's pods outside its subgroups before its subgroups, the
    benchmark's (and Kueue's, one PodSet at a time) after them: on these development seeds the benchmark's
    placed up to 42 GPUs more than the packer's plan."""
    from instances import FAMILY_LEVELS, bestfit_run, firstfit_run, varied_instance

    inst = varied_instance(seed)
    plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
    gpus = {g.key: g.gpus for g in inst.gangs}
    for baseline in (firstfit_run, bestfit_run):
        assert plan.placed_gpus >= sum(gpus[k] for k in baseline(inst.inventory, FAMILY_LEVELS, inst.gangs))


def test_the_fragmented_family_is_what_it_says_and_its_plans_keep_every_constraint() -> None:
    """The fourth family (its named seed sets start at 10000): seeds below them show that instances are
    deterministic, heavily pre-used, sorted or not, and packed within every constraint."""
    from instances import FAMILY_LEVELS, check_plan, fragmented_instance

    orders = set()
    for seed in range(6):
        inst = fragmented_instance(seed)
        assert inst == fragmented_instance(seed)
        nodes = inst.inventory.nodes
        assert sum(0 < n.used_gpus for n in nodes) >= len(nodes) // 5
        sizes = [g.gpus for g in inst.gangs]
        orders.add("largest" if sizes == sorted(sizes, reverse=True) else
                   "smallest" if sizes == sorted(sizes) else "random")
        levels = {s.constraint.required for g in inst.gangs for s in g.subgroups}
        assert levels <= {None, "rack", "clique"}
        plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
        assert check_plan(inst.inventory, FAMILY_LEVELS, inst.gangs, plan) == []
    assert len(orders) >= 2


@pytest.mark.parametrize(("seed", "flagged"), [(3060, False), (3081, True), (3106, True)])
def test_the_screen_flags_exactly_the_plans_that_differ_from_the_optimum(seed: int, flagged: bool) -> None:
    """``screen.py`` solves only where the packer left a gang out; its verdict is the full optimum's: flagged
    iff the optimum admits other gangs, and then at the first gang the optimum admits and the packer left out.
    On 3081 and 3106 the packer leaves out a gang the optimum admits and places more GPUs (112 and 39 against
    110 and 38)."""
    from instances import FAMILIES, arrival_optimum
    from screen import screen

    make, levels = FAMILIES["varied"]
    inst = make(seed)
    ours, first, unknown = screen("varied", seed, 30.0)
    opt, accepted, opt_unknown = arrival_optimum(inst.inventory, levels, inst.gangs)
    assert unknown == opt_unknown == 0
    placed = {k for k, g in pack(inst.inventory, levels, inst.gangs).gangs.items() if g.placed}
    assert (first >= 0) == flagged == (placed != set(accepted))
    if flagged:
        differ = [i for i, g in enumerate(inst.gangs) if (g.key in placed) != (g.key in accepted)]
        assert first == differ[0] and inst.gangs[first].key in accepted
        assert ours > opt


def test_without_the_kept_searches_the_moved_gangs_spread(monkeypatch: pytest.MonkeyPatch) -> None:
    from instances import FAMILIES, FAMILY_LEVELS

    monkeypatch.setitem(repair.SIDE_RUN_STEPS, "keep", 0)
    monkeypatch.setitem(repair.SIDE_RUN_STEPS, "tight", 0)
    monkeypatch.setitem(repair.SIDE_RUN_STEPS, "tight-pool", 0)
    inst = FAMILIES["mixed"][0](3084)
    plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
    assert plan.placed_gpus == 243
    assert spread_gangs(inst.inventory, plan, "block") == ["g00000", "g00002", "g00003", "g00005"]


def test_without_the_tight_searches_the_moved_gangs_spread(monkeypatch: pytest.MonkeyPatch) -> None:
    from instances import FAMILIES, FAMILY_LEVELS

    monkeypatch.setitem(repair.SIDE_RUN_STEPS, "tight", 0)
    monkeypatch.setitem(repair.SIDE_RUN_STEPS, "tight-pool", 0)
    inst = FAMILIES["varied"][0](35003)
    plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
    assert plan.placed_gpus == 135
    assert len(spread_gangs(inst.inventory, plan, "rack")) == 7


def _placed_and_stranded(family: str, seed: int) -> tuple[int, int]:
    """GPUs placed and stranded GPUs (free GPUs of a rack below the smallest subgroup) of the packer's plan for a
    benchmark instance, whose constraints it must keep."""
    from instances import FAMILIES, check_plan
    from quality import metrics

    make, levels = FAMILIES[family]
    inst = make(seed)
    plan = pack(inst.inventory, levels, inst.gangs)
    assert check_plan(inst.inventory, levels, inst.gangs, plan) == []
    placed, _, stranded = metrics(inst, {k: g.pod_nodes for k, g in plan.gangs.items() if g.placed}, ("rack",))
    return placed, stranded


NO_HOLE = [
    # (family, seed, stranded GPUs, stranded GPUs without the searches that leave no new hole)
    ("varied", 35030, 0, 4),
    ("varied", 35045, 0, 3),
    ("varied", 35011, 1, 0),  # a hole avoided early can leave a later gang one it cannot avoid
    ("mixed", 3016, 0, 2),
    ("mixed", 3057, 0, 5),
    ("mixed", 3093, 0, 5),
]


@pytest.mark.parametrize(("family", "seed", "ours", "without"), NO_HOLE)
def test_the_no_hole_searches_against_the_stranded_gpus_without_them(
        monkeypatch: pytest.MonkeyPatch, family: str, seed: int, ours: int, without: int) -> None:
    """Stranded GPUs (free GPUs of a rack below the smallest subgroup) with and without the exact searches that
    re-place a gang, or a re-arrangement's gangs, leaving no new hole: the same GPUs placed either way."""
    got = []
    for steps in (repair.HOLE_STEPS, 0):
        monkeypatch.setattr(repair, "HOLE_STEPS", steps)
        got.append(_placed_and_stranded(family, seed))
    assert got[0][0] == got[1][0]
    assert (got[0][1], got[1][1]) == (ours, without)


NO_HOLE_POOL = [
    # (family, development seed, GPUs placed, stranded GPUs, stranded GPUs without the pool's no-hole search)
    ("mixed", 3009, 120, 0, 2),
    ("mixed", 3039, 237, 0, 1),
    ("varied", 35024, 168, 0, 1),
    ("varied", 35028, 116, 0, 1),
]


@pytest.mark.parametrize(("family", "seed", "gpus", "ours", "without"), NO_HOLE_POOL)
def test_the_pool_no_hole_search_after_an_admission(
        monkeypatch: pytest.MonkeyPatch, family: str, seed: int, gpus: int, ours: int, without: int) -> None:
    """Every gang of the pool placed again leaving no new hole once a re-arrangement admitted a gang: the holes
    best fit left earlier go, for the same GPUs placed."""
    got = []
    for steps in (repair.HOLE_RUN_STEPS, 0):
        monkeypatch.setitem(repair.SIDE_RUN_STEPS, "pool", steps)
        got.append(_placed_and_stranded(family, seed))
    assert got == [(gpus, ours), (gpus, without)]


@pytest.mark.parametrize(("family", "seed", "key"), [("mixed", 3009, "g00008"), ("varied", 35024, "g00010"),
                                                     ("varied", 35028, "g00004")])
def test_the_gang_an_admission_placed_is_not_flagged_moved_by_the_pool_search(
        monkeypatch: pytest.MonkeyPatch, family: str, seed: int, key: str) -> None:
    """The pool's no-hole search after an admission moves the admitted gang too; it had no place before, so the
    plan does not flag it as moved (nothing moves it later on these seeds)."""
    from instances import FAMILIES

    make, levels = FAMILIES[family]
    inst = make(seed)
    moved_by_pool: list[int] = []
    search = repair.Repairer.no_hole_pool

    def watched(self: repair.Repairer, admitted: CompiledGang) -> None:
        was = dict(self.assign.get(admitted.idx, {}))
        search(self, admitted)
        if self.assign.get(admitted.idx, {}) != was:
            moved_by_pool.append(admitted.idx)

    monkeypatch.setattr(repair.Repairer, "no_hole_pool", watched)
    plan = pack(inst.inventory, levels, inst.gangs)
    assert [inst.gangs[i].key for i in moved_by_pool] == [key]
    assert plan.gangs[key].placed and not plan.gangs[key].moved


# varied development seeds where, held only to their blocks, gangs preferring one rack were split over two
@pytest.mark.parametrize("seed", [35012, 35032, 35040])
def test_the_no_hole_searches_keep_a_gang_in_one_domain_of_its_preferred_level(
        monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """The searches that leave the two finest levels free hold a gang lying in one domain of its preferred level
    (the rack, where it prefers a clique) inside one, and never spread gangs over more domains of the levels above
    those two."""
    from instances import FAMILIES

    make, levels = FAMILIES["varied"]
    seen = {"kept": 0}
    search = repair.Repairer._no_hole_try

    def checked(self: repair.Repairer, gs: list[CompiledGang], region: int, before: dict[int, dict[int, int]],
                side: str = "tight", free_levels: int = 1) -> bool:
        def prefs() -> list[int]:
            finer = len(self.tree.levels) - 2  # the finest level is always left free
            return [self._span(x, min(pref, finer)) for x in gs if (pref := x.groups[0].pref) is not None]

        def coarse() -> tuple[int, ...]:
            return self._spans(gs, ROOT)[:len(self.tree.levels) - free_levels]

        was_prefs, was_coarse = prefs(), coarse()
        kept = search(self, gs, region, before, side, free_levels)
        if kept and free_levels == 2:
            seen["kept"] += 1
            assert [n for w, n in zip(was_prefs, prefs(), strict=True) if w == 1] == [1] * was_prefs.count(1)
            assert all(n <= w for n, w in zip(coarse(), was_coarse, strict=True))
        return kept

    monkeypatch.setattr(repair.Repairer, "_no_hole_try", checked)
    inst = make(seed)
    pack(inst.inventory, levels, inst.gangs)
    assert seen["kept"] > 0


def _racks(*free: tuple[int, ...]) -> Inventory:
    """One zone and block; rack r<i> holds one 8-GPU node per entry of ``free[i]``, that many GPUs free."""
    return Inventory.of([Node(f"r{r}-n{n}", {"zone": "z", "block": "b", "rack": f"r{r}"}, 8, 8 - f)
                         for r, nodes in enumerate(free) for n, f in enumerate(nodes)])


FEWEST = [
    # (free GPUs per node of each rack, the gang's one subgroup as (pods, GPUs each, level), smallest subgroup,
    # fewest stranded)
    (((3,), (2,)), (1, 2, "rack"), 2, (0, 0)),  # the pod takes the rack of 2: the rack of 3 keeps a whole unit
    (((3,), (3,)), (1, 2, "rack"), 2, (1, 1)),  # either rack is left with 1
    (((3,), (3,)), (2, 2, None), 2, (2, 2)),  # one pod in each rack, 1 left in both
    (((4, 4),), (1, 2, "rack"), 2, (0, 0)),  # 6 left in one rack: a whole unit and more
    (((2, 1), (1,)), (1, 1, "rack"), 2, (0, 0)),  # the pod fills the rack of 1; the other keeps 3
    (((3,), (3,)), (2, 2, "rack"), 2, None),  # 4 GPUs in one rack of 3: no arrangement
]


@pytest.mark.parametrize(("free", "sub", "unit", "fewest"), FEWEST)
def test_fewest_stranded_gpus_of_an_arrangement(free: tuple[tuple[int, ...], ...], sub: tuple[int, int, str | None],
                                                unit: int, fewest: tuple[int, int] | None) -> None:
    from instances import LEVELS, fewest_stranded

    assert fewest_stranded(_racks(*free), LEVELS, [gang("g", [("s", *sub)])], unit) == fewest


@pytest.mark.parametrize(("family", "seed", "ours", "fewest"), [
    ("varied", 35000, 2, 0),  # 383 of 387 free GPUs placed; the 4 left lie 1, 1 and 2 in three racks
    # 1 until every gang of the pool was bound to one block after an admission: its blocks, then its racks, come
    # before holes
    ("mixed", 3000, 4, 1),
])
def test_stranded_gpus_against_the_fewest_the_admitted_gangs_allow(family: str, seed: int, ours: int,
                                                                   fewest: int) -> None:
    """The packer's stranded GPUs against the fewest any arrangement of the same gangs leaves: where they differ,
    the arrangement strands them, not the amount of work admitted."""
    from instances import FAMILIES, fewest_stranded
    from quality import metrics, stranded_unit

    make, levels = FAMILIES[family]
    inst = make(seed)
    plan = pack(inst.inventory, levels, inst.gangs)
    asg = {k: g.pod_nodes for k, g in plan.gangs.items() if g.placed}
    assert metrics(inst, asg, ("rack",))[2] == ours
    admitted = [g for g in inst.gangs if g.key in asg]
    assert fewest_stranded(inst.inventory, levels, admitted, stranded_unit(inst)) == (fewest, fewest)


def _blocks(*free: tuple[int, ...]) -> Inventory:
    """One zone; block b<i> holds one 8-GPU node (in a rack of its own) per entry of ``free[i]``, that many free."""
    return Inventory.of([Node(f"b{b}-n{n}", {"zone": "z", "block": f"b{b}", "rack": f"b{b}-r{n}"}, 8, 8 - f)
                         for b, nodes in enumerate(free) for n, f in enumerate(nodes)])


FEWEST_BLOCKS = [
    # (free GPUs per node of each block, gangs as (key, pods of 4 GPUs), the gangs counted, fewest blocks)
    (((8,), (8,)), (("a", 2),), "a", (1, 1)),  # both pods in one block
    (((4,), (4,)), (("a", 2),), "a", (2, 2)),  # no block holds 8 GPUs
    (((8,), (4,), (4,)), (("a", 2), ("b", 2)), "ab", (3, 3)),  # one gang in the 8, the other split
    (((8,), (4,), (4,)), (("a", 2), ("b", 2)), "b", (1, 1)),  # the uncounted gang is the one split
    (((4, 4), (8,)), (("a", 2), ("b", 1), ("c", 1)), "a", (1, 1)),  # b and c leave a block whole for a
    (((4,), (4,)), (("a", 3),), "a", None),  # 12 GPUs in 8: no arrangement
]


@pytest.mark.parametrize(("free", "gangs", "counted", "fewest"), FEWEST_BLOCKS)
def test_fewest_blocks_of_an_arrangement(free: tuple[tuple[int, ...], ...], gangs: tuple[tuple[str, int], ...],
                                         counted: str, fewest: tuple[int, int] | None) -> None:
    from instances import LEVELS, fewest_blocks

    demands = [gang(key, pods=pods) for key, pods in gangs]
    assert fewest_blocks(_blocks(*free), LEVELS, demands, set(counted)) == fewest


def _block_sums(inst: Any, levels: tuple[str, ...]) -> tuple[list[Any], set[str], dict[str, int], int]:
    """The gangs ours admits, the gangs all three packers place, per packer the blocks those span in all, and the
    blocks all the gangs ours admits span in its plan."""
    from instances import bestfit_run, firstfit_run

    plan = pack(inst.inventory, levels, inst.gangs)
    asgs = {"ours": {k: g.pod_nodes for k, g in plan.gangs.items() if g.placed},
            "first-fit": firstfit_run(inst.inventory, levels, inst.gangs),
            "bestfit": bestfit_run(inst.inventory, levels, inst.gangs)}
    both = set.intersection(*(set(a) for a in asgs.values()))
    block = {n.name: n.labels["block"] for n in inst.inventory.nodes}
    sums = {name: sum(len({block[n] for n in asg[k].values()}) for k in both) for name, asg in asgs.items()}
    ours_all = sum(len({block[n] for n in pods.values()}) for pods in asgs["ours"].values())
    return [g for g in inst.gangs if g.key in asgs["ours"]], both, sums, ours_all


@pytest.mark.parametrize(("family", "seed", "ours", "bestfit", "fewest"), [
    ("varied", 35001, 4, 3, 3),  # one gang spans a block more than an arrangement of the same gangs needs
    ("varied", 35008, 7, 6, 7),  # the gangs ours admits force a block more than BestFit's plan spans
])
def test_blocks_against_the_fewest_the_admitted_gangs_allow(family: str, seed: int, ours: int, bestfit: int,
                                                            fewest: int) -> None:
    """Blocks spanned by the gangs every packer placed, of ours and BestFit, against the fewest any arrangement
    of the gangs ours admits allows: the room the arrangement leaves, and the part the admitted work forces."""
    from instances import FAMILIES, fewest_blocks

    make, levels = FAMILIES[family]
    inst = make(seed)
    admitted, both, spans, _ = _block_sums(inst, levels)
    assert (spans["ours"], spans["bestfit"]) == (ours, bestfit)
    assert fewest_blocks(inst.inventory, levels, admitted, both) == (fewest, fewest)


def test_quality_table_compares_spans_on_the_instances_of_the_same_work() -> None:
    """The table's same-work rows hold spans, stranded and free GPUs left over the instances where BestFit admits
    exactly the gangs ours does, for both packers alike; its last, the fewest stranded GPUs ours' gangs allow."""
    import statistics

    from instances import FAMILY_LEVELS, bestfit_run, family_instance, fewest_blocks, fewest_stranded, firstfit_run
    from quality import free_gpus, metrics, run, stranded_unit

    seeds = range(2000, 2006)
    table = run(seeds, False, "mixed", fewest_row=True, blocks_row=True)
    rows = {r[0]: r for r in table}
    levels = ("clique", "rack", "block")
    same: dict[str, list[tuple[list[float], int, int]]] = {"ours": [], "bestfit": []}
    fewest = []
    fewest_per_gang = []
    left: dict[str, list[int]] = {"ours": [], "bestfit": []}
    for seed in seeds:
        inst = family_instance(seed)
        plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
        asgs = {"ours": {k: g.pod_nodes for k, g in plan.gangs.items() if g.placed},
                "bestfit": bestfit_run(inst.inventory, FAMILY_LEVELS, inst.gangs)}
        got = fewest_stranded(inst.inventory, FAMILY_LEVELS, [g for g in inst.gangs if g.key in asgs["ours"]],
                              stranded_unit(inst))
        assert got is not None and got[0] == got[1]
        fewest.append(got[1])
        both = set(asgs["ours"]) & set(asgs["bestfit"]) & set(firstfit_run(inst.inventory, FAMILY_LEVELS, inst.gangs))
        blocks = fewest_blocks(inst.inventory, FAMILY_LEVELS, [g for g in inst.gangs if g.key in asgs["ours"]], both)
        assert blocks is not None and blocks[0] == blocks[1]
        fewest_per_gang.append(blocks[1] / len(both))
        for name, asg in asgs.items():
            placed, spans, stranded = metrics(inst, asg, levels)
            left[name].append(free_gpus(inst) - placed)
            if set(asgs["ours"]) == set(asgs["bestfit"]):
                same[name].append((spans, stranded, left[name][-1]))
    assert 0 < len(same["ours"]) < len(seeds)
    for name, vals in same.items():
        row = rows[f"{name}, same gangs**"]
        assert row[3] == f"{len(vals)} of {len(seeds)} instances"
        assert row[4:7] == [f"{statistics.mean(v[0][i] for v in vals):.2f}" for i in range(3)]
        assert row[7] == f"{statistics.mean(v[1] for v in vals):.1f}"
        assert row[8] == f"{statistics.mean(v[2] for v in vals):.1f}"
    # free GPUs each plan leaves: ours places no fewer GPUs than BestFit, so it leaves no more
    for name, got in left.items():
        assert rows[name][8] == f"{statistics.mean(got):.1f}"
    assert all(a <= b for a, b in zip(left["ours"], left["bestfit"], strict=True))
    # the last row: the fewest stranded GPUs and blocks per gang the gangs ours admits allow, never more than ours
    assert rows["HiGHS, ours' gangs***"][4:8] == ["", "", f"{statistics.mean(fewest_per_gang):.2f}",
                                                  f"{statistics.mean(fewest):.1f}"]
    assert statistics.mean(fewest) <= float(rows["ours"][7])
    assert statistics.mean(fewest_per_gang) <= float(rows["ours"][6])


def test_quality_verbose_lines_give_each_instances_blocks(capsys: pytest.CaptureFixture[str]) -> None:
    """With ``--verbose --fewest-blocks``, each instance's blocks of the gangs every packer placed, per packer
    and the fewest ours' gangs allow: the sums the table's block column averages, for comparisons finer than it;
    then the blocks of all the gangs ours placed against the fewest they allow, and those summed."""
    from instances import FAMILY_LEVELS, family_instance, fewest_blocks
    from quality import run

    seeds = range(2000, 2003)
    run(seeds, True, "mixed", optimum=False, blocks_row=True)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "blocks of" in ln]
    want = []
    total = [0, 0, 0]
    for seed in seeds:
        inst = family_instance(seed)
        admitted, both, sums, ours = _block_sums(inst, FAMILY_LEVELS)
        got = fewest_blocks(inst.inventory, FAMILY_LEVELS, admitted, both)
        assert got is not None
        want.append(f"seed {seed}: blocks of the {len(both)} gangs every packer placed: ours {sums['ours']}  "
                    f"first-fit {sums['first-fit']}  bestfit {sums['bestfit']}  fewest for ours' gangs {got[1]}")
        # all the gangs ours admits, not only those every packer placed
        every = fewest_blocks(inst.inventory, FAMILY_LEVELS, admitted, {g.key for g in admitted})
        assert every is not None and every[0] == every[1] <= ours
        want.append(f"seed {seed}: blocks of all {len(admitted)} gangs ours placed: ours {ours}  fewest {every[1]}")
        total = [total[0] + len(admitted), total[1] + ours, total[2] + every[1]]
    want.append(f"blocks of all {total[0]} gangs ours placed, summed: ours {total[1]}  fewest found {total[2]}  "
                f"least proved {total[2]}")
    assert lines == want
    # seed 2000 (first of these lines): ours spreads its own gangs over a block more than an arrangement needs
    assert want[1].endswith("ours 9  fewest 8")


def test_quality_table_without_the_optimum_keeps_every_other_column() -> None:
    """``--no-optimum`` drops the optimum's solves only: the share columns show "-", the solver's row is gone, and
    baselines, spans, stranded and free GPUs are those of the full table."""
    from quality import run

    seeds = range(2010, 2013)
    full = {r[0]: r for r in run(seeds, False, "mixed")}
    quick = {r[0]: r for r in run(seeds, False, "mixed", optimum=False)}
    assert set(full) - set(quick) == {"HiGHS (optimum)"}
    for name in ("ours", "first-fit", "bestfit"):
        assert quick[name][1:3] == ["-", "-"]
        assert full[name][1] != "-"
        assert quick[name][3:9] == full[name][3:9]
    for name in ("ours, same gangs**", "bestfit, same gangs**"):
        assert quick[name][:9] == full[name][:9]


ABOVE_FEWEST = [
    # (nodes of gang "a"'s two 4-GPU pods, (above the fewest: racks, blocks, stranded GPUs)); blocks of one node
    # with 8, 4 and 4 free GPUs, and a's subgroup of 8 GPUs the smallest
    (("b1-n0", "b2-n0"), (1, 1, 0)),  # two blocks where one holds both; no rack left below 8 free GPUs
    (("b0-n0", "b0-n0"), (0, 0, 8)),  # one block, but both 4-GPU blocks left stranded where none need be
    ((), (0, 0, 0)),  # nothing placed: nothing to arrange, the two blocks' 4 free GPUs strand either way
]


@pytest.mark.parametrize(("nodes", "above"), ABOVE_FEWEST, ids=["spread", "stranding", "nothing"])
def test_a_plan_above_the_fewest_its_own_gangs_allow(nodes: tuple[str, ...], above: tuple[int, ...]) -> None:
    """A plan is charged for how it arranges its own gangs: span and stranded GPUs above the fewest any
    arrangement of the same gangs allows, which may trade one for the other."""
    from instances import LEVELS, Instance
    from quality import above_fewest

    inst = Instance(0, _blocks((8,), (4,), (4,)), (gang("a", [("s", 2, 4, None)]),))
    asg = {"a": {f"s-{i}": n for i, n in enumerate(nodes)}} if nodes else {}
    assert above_fewest(inst, LEVELS, asg, ("rack", "block"), 30.0) == (list(above), list(above), 0)


def test_quality_table_rows_above_the_fewest_each_packers_gangs_allow(capsys: pytest.CaptureFixture[str]) -> None:
    """``--excess`` rows: per packer, the mean over instances of what :func:`quality.above_fewest` gives for its
    own plan, and the verbose line of each instance the same figures."""
    import statistics

    from instances import FAMILY_LEVELS, bestfit_run, family_instance
    from quality import above_fewest, run

    seeds = range(3004, 3006)
    rows = {r[0]: r for r in run(seeds, True, "mixed", optimum=False, excess=True)}
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "above the fewest" in ln]
    got: dict[str, list[list[int]]] = {"ours": [], "bestfit": []}
    same: list[bool] = []
    for seed in seeds:
        inst = family_instance(seed)
        plan = pack(inst.inventory, FAMILY_LEVELS, inst.gangs)
        asgs = {"ours": {k: g.pod_nodes for k, g in plan.gangs.items() if g.placed},
                "bestfit": bestfit_run(inst.inventory, FAMILY_LEVELS, inst.gangs)}
        same.append(set(asgs["ours"]) == set(asgs["bestfit"]))
        for name, asg in asgs.items():
            found, least, unproven = above_fewest(inst, FAMILY_LEVELS, asg, ("clique", "rack", "block"), 30.0)
            assert found == least and unproven == 0
            got[name].append(found)
        assert f"seed {seed}: above the fewest for its own gangs: " + "  ".join(
            f"{n} cliques {v[-1][0]} racks {v[-1][1]} blocks {v[-1][2]} stranded {v[-1][3]}"
            for n, v in got.items()) in lines
    assert len(lines) == len(seeds)
    for name, vals in got.items():
        assert rows[f"{name}, above fewest****"][3:8] == ["", *(f"{statistics.mean(v[i] for v in vals):.2f}"
                                                                 for i in range(4))]
        kept = [v for v, s in zip(vals, same, strict=True) if s]
        assert rows[f"{name}, above fewest, same gangs"][3:8] == [
            f"{len(kept)} of {len(seeds)} instances", *(f"{statistics.mean(v[i] for v in kept):.2f}" for i in range(4))]
    assert 0 < sum(same) < len(seeds)
    # BestFit's own arrangement lies further above what its gangs allow on these seeds than ours' (3005: one clique
    # and one rack since a gang's groups are kept together where it spreads; none before)
    assert sum(map(sum, got["bestfit"])) > sum(map(sum, got["ours"])) > 0
