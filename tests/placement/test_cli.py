"""The plan and inventory commands: output on stdout, problems as path:line:col on stderr with exit 1."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner
from tests.placement.conftest import FIXTURES

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
