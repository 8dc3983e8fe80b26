"""Seed 000 (topology-aware scheduling test plan), every case as a table row.

Fixtures live in ``fixtures/seed/<case>-<title>.yaml``: the workflow text, which shared pool
config to use (coarsest-first ``topology_keys``), and either the exact PodGroup spec and pod
subgroup labels expected, or the error expected at ``file:line:col``. Where the seed contradicts
itself (1.1/4.3 expect one subgroup, 4.4 and OSMO collapse a single shared level into the
top-level constraint) the collapsed form is expected.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli, write_repo
from toporender.expand.naming import uid_text
from toporender.pipeline import render_repo

SEED = Path(__file__).resolve().parent / "fixtures" / "seed"
POOLS = yaml.safe_load((SEED / "_pools.yaml").read_text())
CASES = sorted(p for p in SEED.glob("*.yaml") if not p.name.startswith("_"))


def case_repo(tmp_path: Path, case: dict[str, Any]) -> Path:
    return write_repo(tmp_path, {
        "toporender.yaml": yaml.safe_dump(POOLS[case["pools"]], sort_keys=False),
        "workflows/wf.yaml": case["workflow"],
    })


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_seed_case(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    repo = case_repo(tmp_path, case)
    if "error" in case:
        err = case["error"]
        result = run_cli("render", str(repo))
        assert result.code == 1
        assert result.stdout == ""
        assert "Traceback" not in result.stderr
        assert f"{err['file']}:{err['line']}:{err['col']}: " in result.stderr, result.stderr
        assert err["contains"] in result.stderr, result.stderr
        return
    objects = render_repo(repo).objects
    podgroups = [o for o in objects if o["kind"] == "PodGroup"]
    groups = [pg["metadata"]["labels"]["toporender.dev/group"] for pg in podgroups]
    assert groups == [e["group"] for e in case["expect"]]
    for expected, pg in zip(case["expect"], podgroups):
        assert pg["spec"] == expected["spec"]
        pods = [o for o in objects if o["kind"] == "Pod"
                and o["metadata"]["annotations"]["pod-group-name"] == pg["metadata"]["name"]]
        labels = [p["metadata"]["labels"] for p in pods]
        got = {lab["toporender.dev/task"]: lab.get("kai.scheduler/subgroup-name") for lab in labels}
        assert got == expected["pods"]
        for pod in pods:
            assert pod["spec"]["schedulerName"] == "kai-scheduler"
            assert pod["spec"]["restartPolicy"] == "Never"
            assert pod["metadata"]["labels"]["kai.scheduler/queue"] == pg["spec"]["queue"]


def test_seed_case_4_5_order_does_not_matter(tmp_path: Path) -> None:
    """4.5: listing requirements coarse-first or fine-first renders byte-identical output."""
    case = yaml.safe_load((SEED / "4.5-keys-out-of-order.yaml").read_text())
    swapped = case["workflow"].replace(
        "- {key: zone, group: wf}\n    - {key: gpu-clique, group: c1}",
        "- {key: gpu-clique, group: c1}\n    - {key: zone, group: wf}")
    assert swapped != case["workflow"]
    a = run_cli("render", str(case_repo(tmp_path / "a", case)))
    b = run_cli("render", str(case_repo(tmp_path / "b", {**case, "workflow": swapped})))
    assert a.code == b.code == 0
    assert a.stdout == b.stdout


@pytest.mark.parametrize("name", ["a", "s0-r0-w0", "Task_With.Dots", "ünïcode", ""])
def test_uid_text_is_the_uuid5_string(name: str) -> None:
    parent = uuid.uuid5(uuid.NAMESPACE_DNS, "toporender.dev")
    assert uid_text(parent, name) == uid_text(parent.bytes, name) == str(uuid.uuid5(parent, name))
