"""The plan and inventory commands: output on stdout, problems as path:line:col on stderr with exit 1."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from tests.placement.conftest import FIXTURES

from conftest import ROOT, write_repo
from toporender import jobs as jobs_module
from toporender import pipeline
from toporender.cli import cli
from toporender.placement import fit, stage


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
                 {"p": {"label": "zone-ä"}}, {"p": {"big": 2**70}}, {"p": {"key": "workflows/a\x7f.yaml#g"}},
                 {"p": {"key": "workflows/a\x1f\t\\.yaml#g"}}):
        assert _plan_json(data) == (json.dumps(data, indent=2) + "\n").encode()


_INVENTORY = ("apiVersion: toporender.dev/v1alpha1\nkind: NodeInventory\nnodes:\n"
              "- {name: n1, gpus: 8, labels: {example.com/rack: r1}}\n")
_CONFIG = ("inventory: nodes.yaml\npools:\n  p:\n    backend: kai\n"
           "    topology_keys: [{key: rack, label: example.com/rack}]\n")


def _wf(name: str, pool: str = "p") -> str:
    return f"workflow:\n  name: {name}\n  pool: {pool}\n  tasks:\n  - {{name: t, resource: r}}\n  resources:\n" \
           "    r: {gpu: 1}\n"


_BAD_LATER = {f"workflows/w{i}.yaml": _wf(f"w{i}") for i in range(4)}


@pytest.mark.parametrize("jobs", ["1", "2", "3"])
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
    ({**_BAD_LATER, "workflows/w1.yaml": _wf("w1", pool="nope"), "workflows/w3.yaml": _wf("w0")},
     ["workflows/w1.yaml:3:3: pool 'nope'", "workflows/w3.yaml:2:3: workflow name 'w0' is also used"]),
    ({**_BAD_LATER, "workflows/w2.yaml": "workflow: {name: x}\n", "workflows/w3.yaml": "- [\n"},
     ["workflows/w2.yaml:1:1: workflow: set exactly one", "workflows/w3.yaml:2:1: invalid YAML"]),
    ({**_BAD_LATER, "nodes.yaml": _INVENTORY.replace("gpus: 8", "gpus: -8")},
     ["nodes.yaml:4:14: gpus must be a non-negative integer, got -8"]),
], ids=["load error first", "expand error", "duplicate names across files", "config error", "no workflow",
        "problems in later files", "load errors in later files", "inventory read ahead"])
def test_plan_reports_what_render_reports(tmp_path: Path, files: dict[str, str], expected: list[str], jobs: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``plan`` reads a repo one workflow at a time, or in worker processes; its problems are still the
    render's, in the render's order."""
    monkeypatch.setattr(jobs_module, "SPREAD_FROM_FILES", 1)
    write_repo(tmp_path, {"toporender.yaml": _CONFIG, "nodes.yaml": _INVENTORY, **files})
    plan, render = run("plan", str(tmp_path), "--jobs", jobs), run("render", "--no-cache", str(tmp_path))
    assert plan.exit_code == render.exit_code == 1, plan.output
    assert plan.stdout == "" and plan.stderr == render.stderr
    lines = plan.stderr.splitlines()
    assert len(lines) == len(expected) and all(e in line for e, line in zip(expected, lines)), plan.stderr


@pytest.fixture(scope="module")
def scale_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 workflows of the scale benchmark on 720 nodes (every gang placed, some not: the inventory is small)."""
    from conftest import load_script

    generate = load_script(ROOT / "benchmarks" / "scale" / "generate.py", "scale_generate")
    return generate.generate(tmp_path_factory.mktemp("scale"), workflows=40, nodes=720)


@pytest.mark.parametrize(("jobs", "start_method"), [
    ("2", None), ("3", None), ("2", "spawn"), ("2", "forkserver"), ("7", None),
])
def test_plan_is_the_same_whatever_the_jobs(scale_repo: Path, jobs: str, start_method: str | None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Byte for byte the plan of one process, whatever the count of workers and however they are started; the
    workers did the reading (this process never read the files itself), and the gangs were compiled for the
    packer while they did (packing compiled none)."""
    one = run("plan", str(scale_repo), "--format", "json", "--jobs", "1")
    assert one.exit_code == 0, one.output
    monkeypatch.setattr(jobs_module, "SPREAD_FROM_FILES", 1)
    monkeypatch.setattr(jobs_module, "START_METHOD", start_method)

    def never(*_: object) -> None:
        raise AssertionError("the repo was read in this process")

    monkeypatch.setattr(pipeline, "_plan_here", never)
    monkeypatch.setattr(fit, "compile_gang", never)
    many = run("plan", str(scale_repo), "--format", "json", "--jobs", jobs)
    assert many.exit_code == 0, many.output
    assert many.stdout == one.stdout


def _variant(scale_repo: Path, root: Path, *, lock: bool = False, two_pools: bool = False,
             nodes: int | None = None) -> Path:
    """The scale repo with a lock in a permuted order (an absent key and unlisted gangs too), or half its
    workflows in a second, smaller pool, or fewer nodes (then some gangs do not fit)."""
    from toporender.placement.outcomes import lock_lines

    shutil.copytree(scale_repo, root)
    if nodes is not None:
        inv = root / "inventory" / "nodes.yaml"
        inv.write_text("\n".join(inv.read_text().splitlines()[:3 + nodes]) + "\n")
    paths = sorted((root / "workflows").glob("*.yaml"))
    if two_pools:
        config = (root / "toporender.yaml").read_text()
        block = config[config.index("  gb200:\n"):config.index("\ngroup_templates:") + 1]
        second = block.replace("  gb200:\n", "  second:\n    inventory: inventory/second.yaml\n", 1)
        config = config.replace("\ngroup_templates:", f"\n{second}group_templates:", 1)
        (root / "toporender.yaml").write_text(config)
        inv = (root / "inventory" / "nodes.yaml").read_text().splitlines()
        (root / "inventory" / "second.yaml").write_text("\n".join(inv[:3 + 300]) + "\n")
        for path in paths[1::2]:
            text = path.read_text()
            head = text.index("\n", text.index("  name:")) + 1
            path.write_text(text[:head] + "  pool: second\n" + text[head:])
    if lock:
        keys = [f"workflows/{p.name}#train" for p in paths[:30]]
        swapped = [keys[i ^ 1] for i in range(len(keys))]
        (root / "toporender.lock").write_text(lock_lines([*swapped[:20], "workflows/gone.yaml#train",
                                                          *swapped[20:]]))
    return root


@pytest.mark.parametrize(("variant", "streamed"), [
    ({}, {"gb200": 40}),
    ({"lock": True}, {"gb200": 20}),
    ({"two_pools": True}, {"gb200": 20, "second": 20}),
    ({"two_pools": True, "lock": True}, {"gb200": 10, "second": 10}),
    ({"nodes": 120}, {"gb200": 40}),
], ids=["no lock", "lock", "two pools", "two pools and a lock", "unplaceable gangs"])
def test_plan_packs_while_the_workers_read(scale_repo: Path, tmp_path: Path, variant: dict[str, Any],
                                           streamed: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Pools are packed while the workers still read, each gang once it and every gang before it in arrival
    order have come (the gangs listed in the lock before a key it lists that never comes); the rest are packed
    at the end. The plan is byte for byte the one packed all at once, in one process or not."""
    repo = _variant(scale_repo, tmp_path / "repo", **variant)
    one = run("plan", str(repo), "--format", "json", "--jobs", "1")
    assert one.exit_code == 0, one.output
    monkeypatch.setattr(jobs_module, "SPREAD_FROM_FILES", 1)
    take = stage.PackAhead.take
    with monkeypatch.context() as patched:
        patched.setattr(stage.PackAhead, "take", lambda *_: None)
        at_end = run("plan", str(repo), "--format", "json", "--jobs", "2")
    taken: dict[str, int] = {}
    worked_out: dict[str, bool] = {}

    def counted(self: stage.PackAhead, pool_name: str, demands: Any) -> Any:
        got = take(self, pool_name, demands)
        taken[pool_name] = -1 if got is None else len(got.gangs)
        if got is not None:  # the plan's parts of every gang placed ahead are worked out already
            worked_out[pool_name] = got.plan_parts is not None and bool(got.placed) and \
                got.placed <= set(got.plan_parts.kept)
        return got

    def never(*_: object) -> None:
        raise AssertionError("a gang was compiled while packing")

    monkeypatch.setattr(stage.PackAhead, "take", counted)
    if "nodes" not in variant:  # else the greedy baselines compile the gangs for trees of their own
        monkeypatch.setattr(fit, "compile_gang", never)
    ahead = run("plan", str(repo), "--format", "json", "--jobs", "2")
    assert ahead.exit_code == 0, ahead.output
    assert taken == streamed
    assert worked_out == dict.fromkeys(streamed, True)
    assert ahead.stdout == at_end.stdout == one.stdout
    pools = json.loads(one.stdout)
    assert set(pools) == set(streamed)
    if "nodes" in variant:
        left = [g for g in pools["gb200"]["gangs"] if not g["placed"]]
        assert left and all(g["reason"] for g in left)
        assert any("blocked by earlier gangs" in g["reason"] for g in left)


def test_plan_packs_from_scratch_when_packing_ahead_fails(scale_repo: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A packer that fails while the workers read leaves every pool to be packed at the end, from scratch."""
    one = run("plan", str(scale_repo), "--format", "json", "--jobs", "1")
    monkeypatch.setattr(jobs_module, "SPREAD_FROM_FILES", 1)
    feed = stage.PackAhead._feed
    calls: list[int] = []

    def failing(self: stage.PackAhead, gangs: Any) -> None:
        calls.append(self.streamed)
        if len(calls) == 3:
            raise RuntimeError("packing failed")
        feed(self, gangs)

    taken: list[object] = []
    take = stage.PackAhead.take
    monkeypatch.setattr(stage.PackAhead, "_feed", failing)
    monkeypatch.setattr(stage.PackAhead, "take", lambda self, *a: taken.append(take(self, *a)) or taken[-1])
    many = run("plan", str(scale_repo), "--format", "json", "--jobs", "2")
    assert many.exit_code == 0, many.output
    assert len(calls) == 3 and calls[2] > 0 and taken == [None]
    assert many.stdout == one.stdout


def _killed(_: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_that_dies_ends_plan_with_a_message(scale_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs_module, "SPREAD_FROM_FILES", 1)
    monkeypatch.setattr(pipeline, "_plan_chunk", _killed)
    r = run("plan", str(scale_repo), "--format", "json", "--jobs", "2")
    assert r.exit_code == 3 and r.stdout == ""
    assert "worker process ended" in r.stderr and "Traceback" not in r.stderr
    assert multiprocessing.active_children() == []


def test_ctrl_c_stops_the_workers_and_writes_nothing(scale_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(jobs_module, "SPREAD_FROM_FILES", 1)
    monkeypatch.setattr(pipeline, "_read_inventories", interrupted)
    r = run("plan", str(scale_repo), "--format", "json", "--jobs", "2")
    assert r.exit_code == 1 and r.stdout == "" and "Traceback" not in r.stderr
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(("args", "env", "code", "message"), [
    (["--jobs", "0"], None, 2, "--jobs"),
    (["--jobs", "two"], None, 2, "--jobs"),
    ([], "0", 1, "TOPORENDER_JOBS must be a whole number"),
    ([], "many", 1, "TOPORENDER_JOBS must be a whole number"),
], ids=["zero", "not a number", "env zero", "env not a number"])
def test_job_counts_that_are_refused(scale_repo: Path, args: list[str], env: str | None, code: int, message: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if env is not None:
        monkeypatch.setenv("TOPORENDER_JOBS", env)
    r = run("plan", str(scale_repo), *args)
    assert r.exit_code == code and r.stdout == "" and message in r.stderr, r.output


def test_commands_that_start_no_workers_do_not_import_them() -> None:
    """Every command imports the guard that reports a lost worker; the process machinery (about 15 ms of
    imports) is loaded only by a plan that starts workers."""
    import subprocess
    import sys

    script = ("import sys; from toporender.cli import cli; cli.main(['render', sys.argv[1]], standalone_mode=False)\n"
              "print(sorted(m for m in ('multiprocessing', 'concurrent.futures') if m in sys.modules), "
              "file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", script, str(ROOT / "examples/single-rack")], capture_output=True,
                          text=True, check=True, env={**os.environ, "TOPORENDER_NO_CACHE": "1"})
    assert proc.stdout.startswith("apiVersion") or proc.stdout.startswith("---")
    assert proc.stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("tolerated", [True, False])
def test_a_pool_whose_nodes_all_carry_the_gpu_taint(tmp_path: Path, tolerated: bool) -> None:
    """examples/multi-rack-zone with nvidia.com/gpu=present:NoSchedule on every node: with a pod template that
    tolerates it the plan is the example's own; without one each gang says which pod lacks the toleration."""
    import re

    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "multi-rack-zone", repo)
    nodes = repo / "inventory" / "nodes.yaml"
    nodes.write_text(re.sub(r"(\n- name: [^\n]+\n  gpus: \d+\n)",
                            r"\1  taints:\n  - {key: nvidia.com/gpu, value: present, effect: NoSchedule}\n",
                            nodes.read_text()))
    if tolerated:
        config = repo / "toporender.yaml"
        config.write_text(config.read_text().replace("    queue: team-llm\n", "    queue: team-llm\n"
                                                     "    common_pod_template: [gpu-tolerations]\n", 1)
                          + "pod_templates:\n  gpu-tolerations:\n    spec:\n      tolerations:\n"
                            "      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n")
    got = run("plan", str(repo), "--format", "json")
    assert got.exit_code == 0, got.output
    plan = json.loads(got.stdout)
    example = json.loads(run("plan", str(ROOT / "examples" / "multi-rack-zone"), "--format", "json").stdout)
    if tolerated:
        assert plan == example
    else:
        gangs = [g for pool in plan.values() for g in pool["gangs"]]
        assert gangs and not any(g["placed"] for g in gangs)
        assert "does not tolerate the taint nvidia.com/gpu=present:NoSchedule" in json.dumps(plan)
