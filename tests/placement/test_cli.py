"""The plan and inventory commands: output on stdout, problems as path:line:col on stderr with exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from tests.placement.conftest import FIXTURES

from conftest import write_repo
from toporender.cli import cli


def run(*args: str, stdin: str | None = None):  # noqa: ANN201
    return CliRunner().invoke(cli, list(args), input=stdin)


def test_inventory_import_from_file_and_stdin() -> None:
    a = run("inventory", "import", str(FIXTURES / "nodelist.yaml"))
    assert a.exit_code == 0, a.output
    data = yaml.safe_load(a.stdout)
    assert [n["name"] for n in data["nodes"]] == ["gpu-a", "gpu-b"]
    b = run("inventory", "import", "-", stdin=(FIXTURES / "nodelist.yaml").read_text())
    assert b.stdout == a.stdout


def test_inventory_import_error_is_positioned() -> None:
    r = run("inventory", "import", str(FIXTURES / "bad-inventory.yaml"))
    assert r.exit_code == 1 and r.stdout == ""
    assert "bad-inventory.yaml:4:16: gpus must be a non-negative integer" in r.stderr


def test_plan_run_spec_table_and_json() -> None:
    inv = str(FIXTURES / "runs-inventory.yaml")
    t = run("plan", str(FIXTURES / "run-fixed.yaml"), "--inventory", inv)
    assert t.exit_code == 0, t.output
    assert "train-70b" in t.stdout and "us-east/c1/fd-b" in t.stdout
    j = run("plan", str(FIXTURES / "run-fixed.yaml"), "--inventory", inv, "--format", "json")
    data = json.loads(j.stdout)
    assert [g["gpus"] for g in data["runs"][0]["groups"]] == [16, 16, 8]


def test_plan_run_spec_needs_inventory() -> None:
    r = run("plan", str(FIXTURES / "run-fixed.yaml"))
    assert r.exit_code == 2 and "--inventory" in r.stderr


def test_plan_missing_target() -> None:
    r = run("plan", "no/such/dir")
    assert r.exit_code == 1 and r.stderr.startswith("no/such/dir:1:1: file or directory not found")


def test_plan_workflow_repo_json() -> None:
    from tests.placement.conftest import ROOT

    r = run("plan", str(ROOT / "examples" / "multi-rack-zone"), "--format", "json")
    assert r.exit_code == 0, r.output
    pools = json.loads(r.stdout)
    assert pools and all(len(p["hash"]) == 64 and p["gangs"] for p in pools.values())


def test_plan_json_is_what_the_standard_encoder_writes() -> None:
    from toporender.cli.plan import _plan_json

    for data in ({"p": {"gangs": [{"a": 1, "b": [1, 2], "c": None, "d": True, "e": {}}], "x": []}},
                 {"p": {"label": "zone-ä"}}, {"p": {"big": 2**70}}):
        assert _plan_json(data) == json.dumps(data, indent=2)


_INVENTORY = ("apiVersion: toporender.dev/v1alpha1\nkind: NodeInventory\nnodes:\n"
              "- {name: n1, gpus: 8, labels: {example.com/rack: r1}}\n")
_CONFIG = ("inventory: nodes.yaml\npools:\n  p:\n    backend: kai\n"
           "    topology_keys: [{key: rack, label: example.com/rack}]\n")


def _wf(name: str, pool: str = "p") -> str:
    return f"workflow:\n  name: {name}\n  pool: {pool}\n  tasks:\n  - {{name: t, resource: r}}\n  resources:\n" \
           "    r: {gpu: 1}\n"


@pytest.mark.parametrize(("files", "expected"), [
    # a file that cannot be loaded hides what is wrong in the others, as in a render
    ({"workflows/a.yaml": _wf("a", pool="nope"), "workflows/b.yaml": "workflow: [\n"},
     ["workflows/b.yaml:"]),
    ({"workflows/a.yaml": _wf("a", pool="nope"), "workflows/b.yaml": _wf("b")},
     ["workflows/a.yaml:3:3: pool 'nope' is not defined"]),
    ({"workflows/a.yaml": _wf("same"), "workflows/b.yaml": _wf("Same")},
     ["workflows/b.yaml:2:3: workflow name 'Same' is also used by workflows/a.yaml"]),
    ({"workflows/a.yaml": _wf("a"), "toporender.yaml": _CONFIG + "default_pool: q\n"},
     ["toporender.yaml:6:1: default_pool 'q' is not a pool"]),
    ({}, ["no file of the repo matches"]),
], ids=["load error first", "expand error", "duplicate names across files", "config error", "no workflow"])
def test_plan_reports_what_render_reports(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    """``plan`` reads a repo one workflow at a time; its problems are still the render's, in the render's order."""
    write_repo(tmp_path, {"toporender.yaml": _CONFIG, "nodes.yaml": _INVENTORY, **files})
    plan, render = run("plan", str(tmp_path)), run("render", "--no-cache", str(tmp_path))
    assert plan.exit_code == render.exit_code == 1, plan.output
    assert plan.stdout == "" and plan.stderr == render.stderr
    lines = plan.stderr.splitlines()
    assert len(lines) == len(expected) and all(e in line for e, line in zip(expected, lines)), plan.stderr
