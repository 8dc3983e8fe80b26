"""Run specs: one test per rule of the pack-to-empty planner."""

from __future__ import annotations

import pytest
from tests.placement.conftest import FIXTURES

from toporender.errors import UserError
from toporender.load.yaml_source import load_file, load_text
from toporender.placement.inventory import Inventory, Node, load_inventory
from toporender.placement.runs import RunSpec, group_sizes, parse_runs, plan_runs

INV = load_inventory(FIXTURES / "runs-inventory.yaml", "runs-inventory.yaml")
H100 = "H100-80GB"


def node(name: str, fd: str, gpus: int = 8, used: int = 0, flavor: str = H100, rack: str = "r1",
         region: str = "us", cluster: str = "c1") -> Node:
    labels = {"region": region, "cluster": cluster, "fabric.domain": fd, "rack": rack, "gpu.flavor": flavor}
    return Node(name, labels, gpus, used)


def test_fixed_size_groups_with_smaller_final_group() -> None:
    assert group_sizes(128, 32) == [32, 32, 32, 32]
    assert group_sizes(40, 16) == [16, 16, 8]
    plan = plan_runs(INV, [RunSpec("r", H100, 40, 16)])
    assert [g.gpus for g in plan.runs[0].groups] == [16, 16, 8]


def test_each_group_remains_within_a_single_fast_fabric_domain() -> None:
    plan = plan_runs(INV, [RunSpec("r", H100, 48, 16)])
    by = {n.name: n for n in INV.nodes}
    for g in plan.runs[0].groups:
        doms = {"/".join(by[n].labels[k] for k in ("region", "cluster", "fabric.domain")) for n in g.nodes}
        assert doms == {g.domain} and sum(g.nodes.values()) == g.gpus


def test_without_group_gpus_chunks_fill_one_domain_to_empty_before_spilling() -> None:
    plan = plan_runs(INV, [RunSpec("r", H100, 60)])
    groups = plan.runs[0].groups
    # fd-b has the most free GPUs (44) and is emptied first, the remainder goes to the next largest (fd-a)
    assert [(g.domain, g.gpus) for g in groups] == [("us-east/c1/fd-b", 44), ("us-east/c1/fd-a", 16)]
    assert plan.residual["us-east/c1/fd-b"] == 0


def test_allow_cross_group_spread_false_forces_one_domain() -> None:
    plan = plan_runs(INV, [RunSpec("r", H100, 32, 8, allow_spread=False)])
    run = plan.runs[0]
    assert run.placed and {g.domain for g in run.groups} == {"us-east/c1/fd-a"}  # tightest domain holding 32


def test_allow_cross_group_spread_false_fails_fast_if_no_domain_has_enough() -> None:
    plan = plan_runs(INV, [RunSpec("r", H100, 48, 16, allow_spread=False)])
    run = plan.runs[0]
    assert not run.placed and run.groups == []
    assert run.reason == ("run r needs 48 H100-80GB GPUs in one fabric domain (allowCrossGroupSpread=false); "
                          "the largest has 44 (us-east/c1/fd-b)")
    assert plan.residual["us-east/c1/fd-b"] == 44  # nothing was taken


def test_match_flavor_only_nodes_of_the_run_flavor_participate() -> None:
    plan = plan_runs(INV, [RunSpec("r", "A100-40GB", 16, 8)])
    assert {g.domain for g in plan.runs[0].groups} == {"us-east/c1/fd-d"}
    plan = plan_runs(INV, [RunSpec("r", "B200", 8)])
    assert not plan.runs[0].placed


def test_match_flavor_falls_back_to_gpu_product_label() -> None:
    inv = Inventory.of([Node("n", {"region": "r", "cluster": "c", "fabric.domain": "f",
                                   "nvidia.com/gpu.product": H100}, 8)])
    assert plan_runs(inv, [RunSpec("r", H100, 8)]).runs[0].placed


def test_domains_lacking_required_labels_are_rejected() -> None:
    plan = plan_runs(INV, [RunSpec("r", H100, 8)])
    used = {n for g in plan.runs[0].groups for n in g.nodes}
    assert "nolabel" not in used and "nolabel" not in str(plan.to_dict())


def test_cordoned_and_tainted_nodes_are_excluded() -> None:
    plan = plan_runs(INV, [RunSpec("r", H100, 92)])
    used = {n for g in plan.runs[0].groups for n in g.nodes}
    assert plan.runs[0].placed and not used & {"b-cordoned", "b-tainted"}
    assert not plan_runs(INV, [RunSpec("r", H100, 93)]).runs[0].placed


def test_prefer_domain_already_filled_by_the_same_run() -> None:
    # 3 groups of 16 fit fd-b (44 free) only twice; the third prefers fd-b over nothing but must move on
    plan = plan_runs(INV, [RunSpec("r", H100, 40, 16)])
    assert [g.domain for g in plan.runs[0].groups] == ["us-east/c1/fd-b"] * 3


def test_least_residual_waste_among_fitting_domains() -> None:
    inv = Inventory.of([node("a1", "a", 8), node("a2", "a", 8), node("a3", "a", 8),
                        node("b1", "b", 8), node("b2", "b", 8)])
    plan = plan_runs(inv, [RunSpec("r", H100, 16, 16)])
    assert plan.runs[0].groups[0].domain == "us/c1/b"


def test_fill_one_domain_before_moving_on_for_group_aware_runs() -> None:
    inv = Inventory.of([node(f"a{i}", "a") for i in range(3)] + [node(f"b{i}", "b") for i in range(2)])
    plan = plan_runs(inv, [RunSpec("r", H100, 40, 8)])
    doms = [g.domain for g in plan.runs[0].groups]
    assert doms == ["us/c1/a"] * 3 + ["us/c1/b"] * 2


def test_assign_gpus_to_nodes_largest_free_first_then_by_name() -> None:
    inv = Inventory.of([node("n-c", "a", used=6), node("n-b", "a"), node("n-a", "a", used=4)])
    plan = plan_runs(inv, [RunSpec("r", H100, 11)])
    assert plan.runs[0].groups[0].nodes == {"n-b": 8, "n-a": 3}


def test_spares_in_the_group_domain_when_possible() -> None:
    plan = plan_runs(INV, [RunSpec("r", H100, 16, 16, spares=2)])
    g = plan.runs[0].groups[0]
    assert g.spare_domain == g.domain and sum(g.spare_nodes.values()) == 2


def test_spares_otherwise_in_the_nearest_domain_by_rack() -> None:
    inv = Inventory.of([node("a", "a", rack="r1"), node("b", "b", rack="r2"), node("c", "c", rack="r9"),
                        node("d", "d", rack="r1", region="zz")])
    plan = plan_runs(inv, [RunSpec("r", H100, 8, 8, spares=4)])
    g = plan.runs[0].groups[0]
    assert g.domain == "us/c1/a" and g.spare_domain == "us/c1/b"


def test_plan_is_deterministic_and_hashed() -> None:
    a = plan_runs(INV, [RunSpec("r", H100, 40, 16, spares=1)])
    b = plan_runs(Inventory.of(reversed(INV.nodes)), [RunSpec("r", H100, 40, 16, spares=1)])
    assert a.hash == b.hash and len(a.hash) == 64


def test_runs_are_planned_in_document_order() -> None:
    docs = load_text(
        "kind: Run\nmetadata: {name: first}\nspec: {resources: {gpuType: H100-80GB, totalGPUs: 44}, "
        "locality: {allowCrossGroupSpread: false}}\n---\n"
        "kind: Run\nmetadata: {name: second}\nspec: {resources: {gpuType: H100-80GB, totalGPUs: 40}, "
        "locality: {allowCrossGroupSpread: false}}\n", "runs.yaml")
    plan = plan_runs(INV, parse_runs(docs))
    assert plan.runs[0].placed and not plan.runs[1].placed


def test_run_fixture_parses() -> None:
    runs = parse_runs(load_file(FIXTURES / "run-fixed.yaml"))
    assert runs == [RunSpec("train-70b", H100, 40, 16, True, 2)]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("{resources: {gpuType: H100, totalGPUs: 0}}", "r.yaml:3:35: spec.resources.totalGPUs must be a positive"),
        ("{resources: {totalGPUs: 8}}", "r.yaml:3:8: spec.resources.gpuType must be a non-empty string"),
        ("{resources: {gpuType: H, totalGPUs: 8}, locality: {groupGPUs: x}}",
         "r.yaml:3:58: spec.locality.groupGPUs must be a positive integer"),
        ("{resources: {gpuType: H, totalGPUs: 8}, spares: -1}", "r.yaml:3:47: spec.spares must be a non-negative"),
    ],
)
def test_bad_run_spec_reports_position(spec: str, expected: str) -> None:
    with pytest.raises(UserError) as err:
        parse_runs(load_text(f"kind: Run\nmetadata: {{name: r}}\nspec: {spec}\n", "r.yaml"))
    assert str(err.value).startswith(expected)


RUN = "kind: Run\nmetadata: {name: r}\nspec:\n  resources: {gpuType: H100, totalGPUs: 8}\n"


@pytest.mark.parametrize(("extra", "message"), [
    ("  priority: high\n", "spec.priority is not supported: Runs are planned in the order"),
    ("  selector: {region: us}\n", "spec.selector is not supported: the planner sees only the committed inventory"),
    ("  malleability: {step: 8}\n", "spec.malleability is not supported: a Run's size is fixed by totalGPUs"),
    ("  elastic: true\n", "spec.elastic is not supported"),
    ("  labels: {team: a}\n", "spec.labels is not supported: groups carry no labels"),
    ("  spraes: 1\n", "unknown field spec.spraes; allowed here: locality, resources, spares"),
])
def test_run_fields_the_planner_does_not_implement_are_refused(extra: str, message: str) -> None:
    with pytest.raises(UserError) as err:
        parse_runs(load_text(RUN + extra, "runs.yaml"))
    assert message in str(err.value) and str(err.value).startswith("runs.yaml:5:3: "), str(err.value)


def test_unknown_resource_field_is_refused() -> None:
    text = "kind: Run\nmetadata: {name: r}\nspec:\n  resources: {gpuType: H100, totalGPUs: 8, gpus: 8}\n"
    with pytest.raises(UserError, match=r"unknown field spec\.resources\.gpus; allowed here: gpuType, totalGPUs"):
        parse_runs(load_text(text, "runs.yaml"))
