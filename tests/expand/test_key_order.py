"""A pool's topology_keys are coarsest first; an order that contradicts well-known labels is refused with its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli, write_repo
from toporender.expand.key_order import order_problem, rank
from toporender.load.models import TopologyKey

SEED = Path(__file__).resolve().parent / "fixtures" / "seed"
POOLS = yaml.safe_load((SEED / "_pools.yaml").read_text())
SEED_CASES = sorted(p for p in SEED.glob("*.yaml") if not p.name.startswith("_"))


def seed_levels(path: Path) -> list[str]:
    pools = POOLS[yaml.safe_load(path.read_text())["pools"]]["pools"]
    return [k["key"] for pool in pools.values() for k in pool.get("topology_keys", [])]


# every seed case whose pool has an order to get wrong
ORDERED = [p for p in SEED_CASES if len(seed_levels(p)) >= 2]

ZONE = ("zone", "topology.kubernetes.io/zone")
CLIQUE = ("gpu-clique", "nvidia.com/gpu.clique")
SEED_CLIQUE = ("gpu-clique", "nvidia.com/gpu-clique")
SPINE = ("spine", "topology.kubernetes.io/spine")
RACK = ("rack", "topology.kubernetes.io/rack")
BLOCK = ("block", "example.com/block")
HOST = ("host", "kubernetes.io/hostname")
REGION = ("region", "topology.kubernetes.io/region")
CUSTOM = ("pod", "example.com/superpod-id")
TOPOGRAPH_LEAF = ("leaf", "network.topology.nvidia.com/leaf")
TOPOGRAPH_NVL = ("nvl", "network.topology.nvidia.com/accelerator")


def keys(*pairs: tuple[str, str]) -> list[TopologyKey]:
    return [TopologyKey(key=k, label=label) for k, label in pairs]


@pytest.mark.parametrize("order", [
    [ZONE, CLIQUE],
    [REGION, ZONE, SPINE, RACK, CLIQUE, HOST],
    [ZONE, BLOCK, RACK],
    [ZONE, SPINE, BLOCK],            # spine and block have no order between them
    [ZONE, BLOCK, SPINE],
    [CUSTOM, ZONE, CLIQUE],          # a label of no known rank stays where it is
    [ZONE, CUSTOM, CLIQUE],
    [TOPOGRAPH_LEAF, TOPOGRAPH_NVL],
    [CLIQUE],
    [],
])
def test_coarsest_first_orders_pass(order: list[tuple[str, str]]) -> None:
    assert order_problem(keys(*order)) is None


@pytest.mark.parametrize(("order", "fix"), [
    ([CLIQUE, ZONE], "[zone, gpu-clique]"),
    ([SEED_CLIQUE, ZONE], "[zone, gpu-clique]"),
    ([RACK, SPINE, ZONE], "[zone, spine, rack]"),
    ([HOST, RACK], "[rack, host]"),
    ([ZONE, CLIQUE, RACK], "[zone, rack, gpu-clique]"),
    ([CLIQUE, CUSTOM, ZONE], "[zone, pod, gpu-clique]"),
    ([TOPOGRAPH_NVL, TOPOGRAPH_LEAF], "[leaf, nvl]"),
])
def test_finer_before_coarser_is_refused_with_the_fix(order: list[tuple[str, str]], fix: str) -> None:
    problem = order_problem(keys(*order))
    assert problem is not None
    assert "coarsest first" in problem and f"did you mean {fix}?" in problem


def test_rank_reads_the_label_then_the_key() -> None:
    assert rank(TopologyKey(key="x", label="example.com/rack")) == rank(TopologyKey(key="rack", label="example.com/x"))
    assert rank(TopologyKey(key="x", label="example.com/x")) is None


def finest_first(pools: dict[str, Any]) -> dict[str, Any]:
    """The seed test plan's own order of a pool config: its topology_keys reversed."""
    out = yaml.safe_load(yaml.safe_dump(pools))
    for pool in out["pools"].values():
        pool["topology_keys"] = list(reversed(pool.get("topology_keys", [])))
    return out


def test_every_seed_case_with_levels_is_covered() -> None:
    assert len(ORDERED) >= 10 and len(SEED_CASES) - len(ORDERED) <= 4


@pytest.mark.parametrize("path", ORDERED, ids=[p.stem for p in ORDERED])
def test_seed_pools_in_their_own_order_give_the_order_error(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    pools = POOLS[case["pools"]]
    levels = seed_levels(path)
    repo = write_repo(tmp_path, {"toporender.yaml": yaml.safe_dump(finest_first(pools), sort_keys=False),
                                 "workflows/wf.yaml": case["workflow"]})
    result = run_cli("render", str(repo))
    assert result.code == 1 and result.stdout == ""
    assert "toporender.yaml:" in result.stderr and "topology_keys are coarsest first" in result.stderr
    assert f"did you mean [{', '.join(levels)}]?" in result.stderr, result.stderr
    assert "different parents" not in result.stderr
