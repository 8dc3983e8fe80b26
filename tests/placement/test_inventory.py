"""Inventory loading, import to the compact form, and hierarchy validation."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.placement.conftest import FIXTURES

from toporender.errors import UserError
from toporender.load.yaml_source import load_file, load_text
from toporender.placement.inventory import import_inventory, load_inventory
from toporender.placement.packer import pack


def test_compact_inventory_loads_sorted_with_cordon_taints_and_usage() -> None:
    inv = load_inventory(FIXTURES / "pool-inventory.yaml", "pool-inventory.yaml")
    names = [n.name for n in inv.nodes]
    assert names == sorted(names)
    by = {n.name: n for n in inv.nodes}
    assert by["a1-1-n3"].used_gpus == 2 and by["a1-1-n3"].free_gpus == 2
    assert by["a1-2-n3"].unschedulable
    assert by["a2-3-n3"].taints[0].effect == "NoSchedule"


def test_nodelist_import_is_compact_sorted_and_drops_noise() -> None:
    out = import_inventory(load_file(FIXTURES / "nodelist.yaml", "nodelist.yaml"))
    assert out["kind"] == "NodeInventory"
    assert [n["name"] for n in out["nodes"]] == ["gpu-a", "gpu-b"]
    a, b = out["nodes"]
    assert a == {"name": "gpu-a", "gpus": 8, "labels": {"gpu.flavor": "H100-80GB", "rack": "r1", "zone": "z1"},
                 "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}
    assert b["unschedulable"] is True and b["gpus"] == 8
    assert "feature.node.kubernetes.io/cpu-x" not in b["labels"]
    assert "managedFields" not in yaml.safe_dump(out) and "images" not in yaml.safe_dump(out)
    # the compact form reads back as the same nodes
    again = import_inventory(load_text(yaml.safe_dump(out), "x.yaml"))
    assert again == out


def test_import_accepts_json_dump() -> None:
    text = '{"kind": "NodeList", "items": [{"kind": "Node", "metadata": {"name": "n"}, ' \
           '"status": {"allocatable": {"nvidia.com/gpu": "4"}}}]}'
    out = import_inventory(load_text(text, "dump.json"))
    assert out["nodes"] == [{"name": "n", "gpus": 4, "labels": {}}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: NodeInventory\napiVersion: toporender.dev/v1alpha1\nnodes: 3\n", "x.yaml:3:1: 'nodes' must be a list"),
        ("kind: Pod\n", "x.yaml:1:1: expected kind NodeInventory, NodeList, List or Node, got 'Pod'"),
        ("kind: NodeInventory\napiVersion: toporender.dev/v1alpha1\nnodes:\n- {name: a, gpus: 1}\n"
         "- {name: a, gpus: 1}\n", "x.yaml:5:3: node 'a' is listed twice"),
        ("kind: NodeInventory\napiVersion: toporender.dev/v1alpha1\nnodes:\n- {name: a, gpus: 1, "
         "taints: [{key: k, effect: Sometimes}]}\n", "x.yaml:4:40: taint effect must be one of"),
    ],
)
def test_bad_inventory_reports_position(text: str, expected: str) -> None:
    from toporender.placement.inventory import nodes_from_documents

    with pytest.raises(UserError) as err:
        nodes_from_documents(load_text(text, "x.yaml"))
    assert str(err.value).startswith(expected)


def test_bad_fields_are_all_reported() -> None:
    with pytest.raises(UserError) as err:
        load_inventory(FIXTURES / "bad-inventory.yaml", "bad-inventory.yaml")
    lines = str(err.value).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("bad-inventory.yaml:4:16: gpus must be a non-negative integer")


def test_hierarchy_contradiction_names_both_nodes() -> None:
    inv = load_inventory(FIXTURES / "bad-hierarchy.yaml", "bad-hierarchy.yaml")
    with pytest.raises(UserError) as err:
        pack(inv, ["zone", "rack"], [])
    msg = str(err.value)
    assert msg.startswith("bad-hierarchy.yaml:5:5: rack=r1 appears under two different zone domains")
    assert "n1" in msg and "n2" in msg
    # the same labels are fine when the pool does not declare the coarser level
    assert pack(inv, ["rack"], []).gangs == {}


def test_hierarchy_contradiction_in_a_repo_points_at_the_node(tmp_path: Path) -> None:
    """The render path reads the inventory itself; its messages point at the node too, not at line 1."""
    from conftest import run_cli, write_repo

    repo = write_repo(tmp_path, {
        "toporender.yaml": "namespace: ml\ninventory: nodes.yaml\npools:\n  p:\n    backend: kai\n"
                           "    topology_keys:\n    - {key: zone, label: zone}\n    - {key: rack, label: rack}\n",
        "nodes.yaml": (FIXTURES / "bad-hierarchy.yaml").read_text(),
        "workflows/w.yaml": "workflow:\n  name: w\n  tasks:\n  - {name: t, image: x}\n"
                            "  resources:\n    default: {gpu: 1, topology: [{key: rack}]}\n",
    })
    result = run_cli("render", str(repo))
    assert result.code == 1 and result.stdout == ""
    assert result.stderr.startswith("nodes.yaml:5:5: rack=r1 appears under two different zone domains"), result.stderr


def test_levels_the_inventory_nests_the_other_way_round_name_the_fix() -> None:
    from toporender.load.yaml_source import load_text
    from toporender.placement.inventory import inventory_from_documents

    text = ("apiVersion: toporender.dev/v1alpha1\nkind: NodeInventory\nnodes:\n"
            "  - {name: n1, gpus: 4, labels: {zone: za, clique: c1}}\n"
            "  - {name: n2, gpus: 4, labels: {zone: za, clique: c2}}\n"
            "  - {name: n3, gpus: 4, labels: {zone: zb, clique: c3}}\n")
    inv = inventory_from_documents(load_text(text, "nodes.yaml"), "nodes.yaml")
    with pytest.raises(UserError) as err:
        pack(inv, ["clique", "zone"], [])
    msg = str(err.value)
    assert msg.startswith("nodes.yaml:5:5: zone=za appears under two different clique domains"), msg
    assert "every clique sits inside one zone" in msg and "did you mean the levels [zone, clique]?" in msg
    assert pack(inv, ["zone", "clique"], []).gangs == {}
