"""The KRM function and the legacy kustomize exec plugin, alone and under the REAL kpt / kubectl."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hostutil import (
    FIXTURE_REPO,
    PROJECT,
    by_identity,
    copy_repo,
    example_ids,
    example_repos,
    render_cli,
    require_tool,
    strip_build_annotations,
    tool_env,
    toporender,
    tree_snapshot,
)

KUSTOMIZE_DIR = PROJECT / "kustomize"
OURS = ("toporender.dev/workflow", "toporender.dev/pool")

PASSTHROUGH = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: unrelated   # this comment must survive
  annotations:
    config.kubernetes.io/index: '0'
    kustomize.config.k8s.io/id: |
      kind: ConfigMap
      name: unrelated
      version: v1
data:
  enabled: 'on'
  count: "3"
"""


def export(repo: Path) -> list[dict[str, Any]]:
    proc = toporender("krm", "--export", str(repo))
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def resource_list(items: list[dict[str, Any]], fn: dict[str, Any] | None = None, extra: str = "") -> str:
    """A ResourceList as text; ``extra`` is an item given verbatim (with comments) in front of ``items``."""
    body = yaml.safe_dump({"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "functionConfig": fn},
                          sort_keys=False) + "items:\n"
    if extra:
        body += "".join(("- " if i == 0 else "  ") + line + "\n" for i, line in enumerate(extra.splitlines()))
    if items:
        body += yaml.safe_dump(items, sort_keys=False)
    elif not extra:
        body = body.replace("items:\n", "items: []\n")
    return body


def generated(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [strip_build_annotations(o) for o in objs
            if any(k in ((o.get("metadata") or {}).get("labels") or {}) for k in OURS)]


FN = {"apiVersion": "toporender.dev/v1alpha1", "kind": "Toporender", "metadata": {"name": "fn"}, "spec": {}}


# ---------------------------------------------------------------------------------------------
# The function alone


@pytest.mark.parametrize("example", example_repos(), ids=example_ids())
def test_items_in_objects_out(example: Path) -> None:
    text = resource_list(export(example), FN, extra=PASSTHROUGH)
    proc = toporender("krm", stdin=text)
    assert proc.returncode == 0, proc.stderr
    assert "# this comment must survive" in proc.stdout
    out = yaml.safe_load(proc.stdout)
    assert out["kind"] == "ResourceList"
    assert all(r["severity"] == "warning" for r in out.get("results", [])), out["results"]
    items = out["items"]
    assert items[0] == yaml.safe_load(PASSTHROUGH)  # unchanged, first, quoting intact
    assert not [i for i in items if i["apiVersion"].startswith("toporender.dev/")], "inputs are consumed"
    assert items[1:] == render_cli(example)  # same objects, same order


def test_spec_path_mode_and_rerun_replaces_own_objects(tmp_path: Path) -> None:
    repo = copy_repo(FIXTURE_REPO, tmp_path / "repo")
    fn = {**FN, "spec": {"path": "repo", "namespace": "team-a"}}
    first = toporender("krm", cwd=tmp_path, stdin=resource_list([], fn, extra=PASSTHROUGH))
    assert first.returncode == 0, first.stderr
    items = yaml.safe_load(first.stdout)["items"]
    assert items[1:] == render_cli(repo, "--namespace", "team-a")
    # Feeding the output back (a second function run in a pipeline) must not duplicate objects.
    again = toporender("krm", cwd=tmp_path, stdin=resource_list(items[1:], fn, extra=PASSTHROUGH))
    assert again.returncode == 0, again.stderr
    assert yaml.safe_load(again.stdout)["items"] == items


def test_error_results_and_exit_code() -> None:
    items = export(FIXTURE_REPO)
    wf = next(i for i in items if i["kind"] == "Workflow")
    wf["spec"]["workflow"]["groups"][0]["tasks"][0]["imagee"] = "typo"
    wf["metadata"]["annotations"]["config.kubernetes.io/path"] = "workflows/train.yaml"
    wf["metadata"]["annotations"]["config.kubernetes.io/index"] = "2"
    proc = toporender("krm", stdin=resource_list(items, FN, extra=PASSTHROUGH))
    assert proc.returncode == 1
    out = yaml.safe_load(proc.stdout)
    assert len(out["items"]) == len(items) + 1, "items are returned unchanged on failure"
    [res] = out["results"]
    assert res["severity"] == "error" and "imagee" in res["message"]
    assert res["resourceRef"] == {"apiVersion": "toporender.dev/v1alpha1", "kind": "Workflow", "name": "train"}
    assert res["file"] == {"path": "workflows/train.yaml", "index": 2}
    assert "imagee" in proc.stderr and "Traceback" not in proc.stderr


def _break(items: list[dict[str, Any]], kind: str, change: Any) -> list[dict[str, Any]]:
    item = next(i for i in items if i["kind"] == kind)
    change(item["spec"] if kind in ("Workflow", "RepoConfig") else item)
    item["metadata"].setdefault("annotations", {}).update(
        {"config.kubernetes.io/path": f"inputs/{kind.lower()}.yaml", "config.kubernetes.io/index": "1"})
    return items


def _set(path: str, value: Any) -> Any:
    """A change that sets ``value`` at a dotted ``path`` (numbers index lists)."""
    def change(data: Any) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        for p in parents:
            data = data[p]
        data[last] = value
    return change


ITEM_ERRORS = [
    ("Workflow", _set("workflow.groups.0.tasks.0.imagee", "x"), "spec.workflow.groups[0].tasks[0].imagee",
     "unknown field 'imagee' (did you mean 'image'?)"),
    ("Workflow", _set("workflow.resources.default.gpu", "lots"), "spec.workflow.resources.default.gpu",
     "expected a whole number, found 'lots'"),
    ("Workflow", _set("workflow.resources.default.memory", "16GB"), "spec.workflow.resources.default.memory",
     "'16GB' is not a Kubernetes quantity (did you mean '16Gi'?)"),
    ("RepoConfig", _set("pools.dgx.topology_key", []), "spec.pools.dgx.topology_key",
     "unknown field 'topology_key' (did you mean 'topology_keys'?)"),
]


@pytest.mark.parametrize(("kind", "change", "field", "message"), ITEM_ERRORS,
                         ids=[c[2] for c in ITEM_ERRORS])
def test_item_errors_name_file_index_and_field(kind: str, change: Any, field: str, message: str) -> None:
    items = _break(export(FIXTURE_REPO), kind, change)
    proc = toporender("krm", stdin=resource_list(items, FN))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    [res] = yaml.safe_load(proc.stdout)["results"]
    assert res["file"] == {"path": f"inputs/{kind.lower()}.yaml", "index": 1}
    assert res["field"] == {"path": field}
    assert res["message"].startswith(message), res["message"]
    assert f"inputs/{kind.lower()}.yaml (document 1): {field}: {message}" in proc.stderr


def test_repo_errors_name_file_line_and_field(tmp_path: Path) -> None:
    repo = copy_repo(FIXTURE_REPO, tmp_path / "repo")
    train = repo / "workflows" / "train.yaml"
    train.write_text(train.read_text().replace("gpu: 4", "gpu: lots", 1))
    fn = {**FN, "spec": {"path": "repo"}}
    proc = toporender("krm", cwd=tmp_path, stdin=resource_list([], fn))
    assert proc.returncode == 1
    [res] = yaml.safe_load(proc.stdout)["results"]
    line = next(i for i, text in enumerate(train.read_text().splitlines(), 1) if "gpu: lots" in text)
    assert res["file"] == {"path": "repo/workflows/train.yaml", "index": 0}
    assert res["field"]["path"].endswith(".gpu") and res["field"]["path"].startswith("workflow.resources.")
    assert res["message"].startswith(f"repo/workflows/train.yaml:{line}:"), res["message"]
    assert proc.stderr.startswith(f"repo/workflows/train.yaml:{line}:")


def test_function_config_errors_name_the_field() -> None:
    fn = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "annotations": {
        "config.kubernetes.io/path": "fn-config.yaml"}}, "data": {"poool": "a"}}
    proc = toporender("krm", stdin=resource_list([], fn))
    assert proc.returncode == 1
    [res] = yaml.safe_load(proc.stdout)["results"]
    assert res["field"] == {"path": "data.poool"} and res["file"]["path"] == "fn-config.yaml"


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("", "exactly one ResourceList"),
        ("apiVersion: v1\nkind: List\nitems: []\n", "exactly one ResourceList"),
        ("kind: ResourceList\napiVersion: config.kubernetes.io/v1\nitems: [{a: 1}]\n", "needs 'kind'"),
        ("kind: ResourceList\napiVersion: config.kubernetes.io/v1\nitems:\n- !!python/object:os.system {}\n",
         "unsupported YAML tag"),
        ("kind: ResourceList\napiVersion: config.kubernetes.io/v1\nitems: []\n", "no input"),
        ("kind: ResourceList\napiVersion: config.kubernetes.io/v1\nfunctionConfig: {apiVersion: v1, kind: ConfigMap,"
         " metadata: {name: x}, data: {poool: a}}\nitems: []\n", "unknown functionConfig field data.poool"),
    ],
)
def test_bad_input_is_a_clean_error(stdin: str, message: str) -> None:
    proc = toporender("krm", stdin=stdin)
    assert proc.returncode == 1
    assert message in proc.stderr and "Traceback" not in proc.stderr
    out = yaml.safe_load(proc.stdout)
    assert out["results"][0]["severity"] == "error"


def test_export_of_shipped_packages_is_current() -> None:
    want = toporender("krm", "--export", str(PROJECT / "examples" / "single-rack"))
    if want.returncode != 0:
        pytest.skip("examples/single-rack is not present")
    for pkg in ("kpt", "container-function"):
        assert (KUSTOMIZE_DIR / pkg / "inputs.yaml").read_text() == want.stdout, (
            f"kustomize/{pkg}/inputs.yaml is stale: run toporender krm --export examples/single-rack")


# ---------------------------------------------------------------------------------------------
# kpt


def make_kpt_package(tmp_path: Path, example: Path) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "Kptfile").write_text(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n  annotations:\n"
        "    config.kubernetes.io/local-config: \"true\"\npipeline:\n  mutators:\n  - exec: toporender krm\n")
    (pkg / "inputs.yaml").write_text(yaml.safe_dump_all(export(example), sort_keys=False))
    (pkg / "unrelated.yaml").write_text(PASSTHROUGH.replace("    config.kubernetes.io/index: '0'\n", ""))
    return pkg


@pytest.mark.parametrize("example", example_repos(), ids=example_ids())
def test_kpt_fn_eval_exec(tmp_path: Path, example: Path) -> None:
    kpt = require_tool("kpt")
    pkg = make_kpt_package(tmp_path, example)
    exe = shutil.which("toporender", path=tool_env()["PATH"])
    proc = subprocess.run([kpt, "fn", "eval", str(pkg), "--exec", f"{exe} krm", "-o", "stdout"],
                          capture_output=True, text=True, env=tool_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    items = yaml.safe_load(proc.stdout)["items"]
    assert generated(items) == render_cli(example)
    unrelated = next(i for i in items if i["kind"] == "ConfigMap" and i["metadata"]["name"] == "unrelated")
    assert strip_build_annotations(unrelated)["data"] == {"enabled": "on", "count": "3"}
    # Inputs come from package files, so they are kept (removing them would delete the user's files).
    assert [i["kind"] for i in items if i["apiVersion"] == "toporender.dev/v1alpha1"][:1] == ["RepoConfig"]


def test_kpt_fn_eval_failure_is_a_failure(tmp_path: Path) -> None:
    kpt = require_tool("kpt")
    pkg = make_kpt_package(tmp_path, FIXTURE_REPO)
    (pkg / "inputs.yaml").write_text((pkg / "inputs.yaml").read_text().replace("gpu: 4", "gpu: -1"))
    before = tree_snapshot(pkg)
    proc = subprocess.run([kpt, "fn", "eval", str(pkg), "--exec", "toporender krm", "--results-dir",
                           str(tmp_path / "results")], capture_output=True, text=True, env=tool_env(), timeout=120)
    assert proc.returncode != 0
    assert "[FAIL]" in proc.stderr and "gpu" in proc.stderr
    assert tree_snapshot(pkg) == before
    [run] = yaml.safe_load((tmp_path / "results" / "results.yaml").read_text())["items"]
    [result] = run["results"]
    assert result["file"] == {"path": "inputs.yaml", "index": 1}
    assert result["field"] == {"path": "spec.workflow.resources.default.gpu"}
    assert result["message"].startswith("expected at least 0, found -1")


@pytest.mark.parametrize("example", example_repos(), ids=example_ids())
def test_kpt_fn_render_pipeline(tmp_path: Path, example: Path) -> None:
    kpt = require_tool("kpt")
    pkg = make_kpt_package(tmp_path, example)
    proc = subprocess.run([kpt, "fn", "render", str(pkg), "--allow-exec"], capture_output=True, text=True,
                          env=tool_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    objs = [d for f in sorted((pkg / "generated").rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    assert by_identity(generated(objs)) == by_identity(render_cli(example))
    assert "# this comment must survive" in (pkg / "unrelated.yaml").read_text()
    assert (pkg / "inputs.yaml").exists()
    snap = tree_snapshot(pkg)
    again = subprocess.run([kpt, "fn", "render", str(pkg), "--allow-exec"], capture_output=True, text=True,
                           env=tool_env(), timeout=120)
    assert again.returncode == 0, again.stderr
    assert tree_snapshot(pkg) == snap, "a second render changes nothing"


def test_shipped_kpt_package(tmp_path: Path) -> None:
    kpt = require_tool("kpt")
    pkg = tmp_path / "kpt"
    shutil.copytree(KUSTOMIZE_DIR / "kpt", pkg)
    proc = subprocess.run([kpt, "fn", "render", str(pkg), "--allow-exec"], capture_output=True, text=True,
                          env=tool_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    objs = [d for f in sorted((pkg / "generated").rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    assert by_identity(objs) == by_identity(render_cli(PROJECT / "examples" / "single-rack"))


# ---------------------------------------------------------------------------------------------
# kubectl kustomize


def legacy_plugin_home(tmp_path: Path) -> Path:
    home = tmp_path / "plugins"
    target = home / "toporender.dev" / "v1alpha1" / "toporender" / "Toporender"
    target.parent.mkdir(parents=True)
    shutil.copyfile(KUSTOMIZE_DIR / "legacy-plugin" / "plugins" / "toporender.dev" / "v1alpha1" / "toporender"
                    / "Toporender", target)
    target.chmod(0o755)
    return home


@pytest.mark.parametrize("example", example_repos(), ids=example_ids())
def test_kubectl_kustomize_legacy_plugin(tmp_path: Path, example: Path) -> None:
    kubectl = require_tool("kubectl")
    copy_repo(example, tmp_path / "app" / "repo")
    (tmp_path / "app" / "generator.yaml").write_text(
        "apiVersion: toporender.dev/v1alpha1\nkind: Toporender\nmetadata:\n  name: gen\nspec:\n  path: repo\n")
    (tmp_path / "app" / "kustomization.yaml").write_text("generators:\n- generator.yaml\n")
    env = tool_env({"KUSTOMIZE_PLUGIN_HOME": str(legacy_plugin_home(tmp_path))})
    proc = subprocess.run([kubectl, "kustomize", "--enable-alpha-plugins", str(tmp_path / "app")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert by_identity(yaml.safe_load_all(proc.stdout)) == by_identity(render_cli(example))


def test_kubectl_kustomize_legacy_plugin_error(tmp_path: Path) -> None:
    kubectl = require_tool("kubectl")
    repo = copy_repo(FIXTURE_REPO, tmp_path / "app" / "repo")
    (repo / "workflows" / "train.yaml").write_text("workflow: {name: x}\n")
    (tmp_path / "app" / "generator.yaml").write_text(
        "apiVersion: toporender.dev/v1alpha1\nkind: Toporender\nmetadata:\n  name: gen\nspec:\n  path: repo\n")
    (tmp_path / "app" / "kustomization.yaml").write_text("generators:\n- generator.yaml\n")
    env = tool_env({"KUSTOMIZE_PLUGIN_HOME": str(legacy_plugin_home(tmp_path))})
    proc = subprocess.run([kubectl, "kustomize", "--enable-alpha-plugins", str(tmp_path / "app")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and proc.stdout == ""
    assert "workflows/train.yaml:1:" in proc.stderr


def test_shipped_legacy_plugin_example(tmp_path: Path) -> None:
    kubectl = require_tool("kubectl")
    if not (PROJECT / "examples" / "single-rack").is_dir():
        pytest.skip("examples/single-rack is not present")
    plugin = KUSTOMIZE_DIR / "legacy-plugin" / "plugins" / "toporender.dev" / "v1alpha1" / "toporender" / "Toporender"
    assert plugin.stat().st_mode & stat.S_IXUSR, "the shipped plugin must be executable (git keeps the bit)"
    env = tool_env({"KUSTOMIZE_PLUGIN_HOME": str(KUSTOMIZE_DIR / "legacy-plugin" / "plugins")})
    proc = subprocess.run([kubectl, "kustomize", "--enable-alpha-plugins", str(KUSTOMIZE_DIR / "legacy-plugin")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert by_identity(yaml.safe_load_all(proc.stdout)) == by_identity(render_cli(PROJECT / "examples" / "single-rack"))


def test_kubectl_silently_skips_exec_functions() -> None:
    """The documented trap: kubectl kustomize has no --enable-exec and drops exec KRM functions silently."""
    kubectl = require_tool("kubectl")
    exec_dir = KUSTOMIZE_DIR / "exec-function"
    assert os.access(exec_dir / "toporender-krm", os.X_OK)
    proc = subprocess.run([kubectl, "kustomize", "--enable-alpha-plugins", str(exec_dir)],
                          capture_output=True, text=True, env=tool_env(), timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() in ("", "{}")  # nothing generated, no error
    flag = subprocess.run([kubectl, "kustomize", "--enable-alpha-plugins", "--enable-exec", str(exec_dir)],
                          capture_output=True, text=True, env=tool_env(), timeout=120)
    assert flag.returncode != 0 and "unknown flag: --enable-exec" in flag.stderr


def test_exec_function_like_kustomize_calls_it() -> None:
    """What kustomize build --enable-exec sends a generator: items = [the config], cwd = the kustomization."""
    exec_dir = KUSTOMIZE_DIR / "exec-function"
    cfg = yaml.safe_load((exec_dir / "generator.yaml").read_text())
    cfg["metadata"]["annotations"]["config.kubernetes.io/local-config"] = "true"
    proc = subprocess.run([str(exec_dir / "toporender-krm")], cwd=exec_dir, input=resource_list([cfg], cfg),
                          capture_output=True, text=True, env=tool_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    items = yaml.safe_load(proc.stdout)["items"]
    assert items == render_cli(PROJECT / "examples" / "single-rack")


def test_generated_file_names_in_a_package() -> None:
    items = export(FIXTURE_REPO)
    wf = next(i for i in items if i["kind"] == "Workflow")
    del wf["metadata"]["annotations"]["toporender.dev/source"]
    second = yaml.safe_load(yaml.safe_dump(wf).replace("train", "eval"))
    items.append(second)
    for i, item in enumerate(items):  # config in its own file, both workflows in one file
        ann = item["metadata"]["annotations"]
        ann["config.kubernetes.io/path"] = "repo.yaml" if item["kind"] == "RepoConfig" else "wf/all.yaml"
        ann["config.kubernetes.io/index"] = str(i)
    proc = toporender("krm", stdin=resource_list(items, FN))
    assert proc.returncode == 0, proc.stderr
    out = yaml.safe_load(proc.stdout)["items"]
    kept = [i for i in out if i["apiVersion"] == "toporender.dev/v1alpha1"]
    assert len(kept) == 3, "inputs from package files are kept"
    paths = {(o["kind"], o["metadata"]["annotations"]["config.kubernetes.io/path"]) for o in out if o not in kept}
    assert paths == {("PodGroup", "generated/workflows/train.yaml"), ("Pod", "generated/workflows/train.yaml"),
                     ("PodGroup", "generated/workflows/eval.yaml"), ("Pod", "generated/workflows/eval.yaml")}
    # keepInputs: false overrides the package rule.
    proc = toporender("krm", stdin=resource_list(items, {**FN, "spec": {"keepInputs": False}}))
    assert not [i for i in yaml.safe_load(proc.stdout)["items"] if i["apiVersion"] == "toporender.dev/v1alpha1"]


def test_bad_namespace_in_function_config() -> None:
    fn = {**FN, "spec": {"namespace": "Not/A/Namespace"}}
    proc = toporender("krm", stdin=resource_list(export(FIXTURE_REPO), fn))
    assert proc.returncode == 1
    [res] = yaml.safe_load(proc.stdout)["results"]
    assert "not a valid namespace" in res["message"] and res["resourceRef"]["kind"] == "Toporender"


@pytest.mark.parametrize("args", [(), ("plugin-config.yaml",), ("--export", str(FIXTURE_REPO))],
                         ids=["function", "legacy", "export"])
def test_internal_error_exits_3_with_nothing_on_stdout(args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A bug is no input error: every mode exits 3 under the shared guard, with one line and no output."""
    import toporender.cli.krm as krm_cli
    from toporender.cli import main

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    for name in ("run_function", "run_legacy", "export_items"):
        monkeypatch.setattr(krm_cli, name, boom)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.delenv("TOPORENDER_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["krm", *args])
    assert exited.value.code == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert "toporender krm: internal error: RuntimeError: boom" in err and "Traceback" not in err
