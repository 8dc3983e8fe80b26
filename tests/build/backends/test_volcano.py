"""Volcano backend: the PodGroup (network topology, sub-group policies) and pod links for each shape of
topology requirement, HyperNodes from the inventory, and what it refuses.

Each case in ``fixtures/volcano/cases.yaml`` is rendered through the public pipeline and compared field for
field; every rendered stream must also pass the vendored Volcano CRD schemas and admission rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import ROOT, render_pool_case, run_cli, write_repo
from toporender.build.backends.volcano import GROUP_ANNOTATION, SUBGROUP_LABEL, hypernodes
from toporender.load.models import PoolConfig
from toporender.pipeline import RenderResult, render_repo
from toporender.validation import validate_objects

CASES = yaml.safe_load((Path(__file__).parent / "fixtures" / "volcano" / "cases.yaml").read_text())["cases"]
IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
EXAMPLE = ROOT / "examples" / "volcano-hypernodes"


def render(case: dict[str, Any]) -> RenderResult:
    result: RenderResult = render_pool_case("volcano", case, IMAGE)
    return result


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_podgroup_spec_and_pod_links(case: dict[str, Any]) -> None:
    result = render(case)
    objects = result.objects
    (podgroup,) = [o for o in objects if o["kind"] == "PodGroup"]
    assert podgroup["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert podgroup["spec"] == case["spec"]
    pods = {p["metadata"]["labels"]["toporender.dev/task"]: p for p in objects if p["kind"] == "Pod"}
    assert set(pods) == set(case["subgroups"])
    for task, subgroup in case["subgroups"].items():
        meta = pods[task]["metadata"]
        assert meta["annotations"][GROUP_ANNOTATION] == podgroup["metadata"]["name"]
        assert meta["labels"].get(SUBGROUP_LABEL) == subgroup
        assert pods[task]["spec"]["schedulerName"] == "volcano"
    messages = [w.message for w in result.warnings]
    assert len(messages) == len(case["warnings"]), messages
    for expected in case["warnings"]:
        assert any(expected in m for m in messages), (expected, messages)
    assert validate_objects(objects, require_namespace=True) == []


def test_hypernodes_from_the_example_inventory() -> None:
    objects = render_repo(EXAMPLE).objects
    nodes = [o for o in objects if o["kind"] == "HyperNode"]
    assert [(n["spec"]["tier"], n["metadata"]["name"]) for n in nodes] == [
        (1, "block-block-s0-b0"), (1, "block-block-s0-b1"), (1, "block-block-s1-b0"), (1, "block-block-s1-b1"),
        (2, "spine-spine-0"), (2, "spine-spine-1")]
    spine0 = nodes[4]["spec"]["members"]
    assert spine0 == [{"type": "HyperNode", "selector": {"exactMatch": {"name": "block-block-s0-b0"}}},
                      {"type": "HyperNode", "selector": {"exactMatch": {"name": "block-block-s0-b1"}}}]
    assert nodes[0]["spec"]["members"] == [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {
        "network.topology.nvidia.com/spine": "spine-0", "network.topology.nvidia.com/block": "block-s0-b0"}}}}]
    assert validate_objects(objects, require_namespace=True) == []


def test_hypernodes_split_a_reused_name_and_skip_unlabelled_nodes() -> None:
    keys = [{"key": "zone", "label": "z"}, {"key": "rack", "label": "r"},
            {"key": "host", "label": "kubernetes.io/hostname"}]
    pool = PoolConfig.model_validate({"backend": "volcano", "node_selector": {"gpu": "yes"}, "topology_keys": keys})
    nodes = [("n1", {"z": "a", "r": "r1", "gpu": "yes"}), ("n2", {"z": "b", "r": "r1", "gpu": "yes"}),
             ("n3", {"z": "a", "gpu": "yes"}), ("n4", {"z": "a", "r": "r9"})]
    out = hypernodes("p", pool, reversed(nodes))
    assert out == hypernodes("p", pool, nodes)
    racks = [o for o in out if o["spec"]["tier"] == 1]
    assert len(racks) == 2 and len({r["metadata"]["name"] for r in racks}) == 2
    assert [o["metadata"]["name"] for o in out if o["spec"]["tier"] == 2] == ["zone-a", "zone-b"]
    assert validate_objects(out) == []


def test_broken_hypernode_tree_and_subgroup_sizes_are_caught() -> None:
    objects = render_repo(EXAMPLE).objects
    spine = next(o for o in objects if o["kind"] == "HyperNode" and o["spec"]["tier"] == 2)
    spine["spec"]["members"][0]["selector"]["exactMatch"]["name"] = "missing"
    pg = next(o for o in objects if o["kind"] == "PodGroup" and "subGroupPolicy" in o["spec"])
    pg["spec"]["subGroupPolicy"][0]["subGroupSize"] = 3
    pg["spec"]["networkTopology"]["highestTierAllowed"] = 3
    problems = "\n".join(validate_objects(objects))
    assert "HyperNode 'missing' is not in this output" in problems
    assert "subGroupSize 3 exceeds the 2 Pods its labelSelector selects" in problems
    assert "tier 3 is above the highest HyperNode tier in this output (2)" in problems


def test_volcano_pool_objects_need_an_inventory(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {
        "toporender.yaml": "namespace: ml\npools:\n  p:\n    backend: volcano\n    render_pool_objects: true\n"
                           "    topology_keys:\n    - {key: rack, label: example.com/rack}\n",
        "workflows/a.yaml": "workflow:\n  name: a\n  tasks:\n  - {name: t, image: busybox}\n"})
    result = run_cli("render", str(repo))
    assert result.code == 1 and result.stdout == "" and "Traceback" not in result.stderr
    assert "toporender.yaml:3:3: pool 'p' (backend volcano) renders pool objects" in result.stderr, result.stderr
