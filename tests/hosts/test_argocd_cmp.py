"""The Argo CD sidecar plugin, driven through an imitation of the cmp-server (cmpserver.py)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from cmpserver import App, CmpError, Response, build_env, generate_manifests, load_plugin_config
from hostutil import (
    PROJECT,
    by_identity,
    copy_repo,
    example_ids,
    example_repos,
    render_cli,
    tool_env,
    toporender,
    tree_snapshot,
)

from toporender.hosts.argocd import SETTINGS, param_env_name

PLUGIN_YAML = PROJECT / "argocd" / "plugin.yaml"
GIT_SHA = "89abcdef0123456789abcdef0123456789abcdef"


def make_git_repo(tmp_path: Path, example: Path, sub: str = "apps/training") -> Path:
    """A checkout like the repo-server's: the example below a sub-directory, with a .git dir."""
    repo = tmp_path / "checkout"
    copy_repo(example, repo / sub)
    (repo / "README.md").write_text("unrelated file at the repo root\n")
    env = tool_env({"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                    "GIT_COMMITTER_EMAIL": "t@example.com"})
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=repo, env=env, check=True)
    return repo


def app_for(sub: str = "apps/training", **kw: object) -> App:
    # A non-default Application namespace: ARGOCD_APP_NAME becomes "<ns>_<name>"; no cluster info.
    base: dict[str, object] = dict(name="training", app_namespace="team-ml", control_plane_namespace="argocd",
                                   dest_namespace="ml-prod", source_path=sub, revision=GIT_SHA,
                                   kube_version="", api_versions=[], plugin={"name": "toporender-v1"})
    base.update(kw)
    return App(**base)  # type: ignore[arg-type]


def request(tmp_path: Path, repo: Path, app: App) -> Response:
    return generate_manifests(PLUGIN_YAML, repo, app, tmp_path / "cmp-tmp", sidecar_env=tool_env())


def expected_objects(example: Path, namespace: str, *args: str) -> list[dict[str, object]]:
    return render_cli(example, "--namespace", namespace, *args)


# ---------------------------------------------------------------------------------------------


def test_plugin_yaml_is_a_valid_cmp_config() -> None:
    cfg = load_plugin_config(PLUGIN_YAML)
    assert cfg.socket_name == "toporender-v1"
    assert cfg.discover_file_name == "toporender.yaml"
    assert cfg.generate.argv == ["toporender", "argocd", "generate"]
    assert not cfg.preserve_file_mode, "we must not rely on exec bits"
    # Static announcements are exactly the settings the command understands.
    assert cfg.static_parameters == [s.announcement() for s in SETTINGS]
    for ann in cfg.static_parameters:
        assert ann["collectionType"] == "string"


def test_documented_parameters_are_the_ones_the_plugin_reads() -> None:
    from toporender.hosts.argocd import parameter_table

    readme = (PROJECT / "argocd" / "README.md").read_text()
    assert parameter_table() in readme, "regenerate the table: toporender argocd parameters --format markdown"
    delivery = (PROJECT / "docs" / "delivery.md").read_text()
    assert all(f"`{s.name}`" in delivery for s in SETTINGS)


@pytest.mark.parametrize("example", example_repos(), ids=example_ids())
def test_generate_matches_render(tmp_path: Path, example: Path) -> None:
    repo = make_git_repo(tmp_path, example)
    resp = request(tmp_path, repo, app_for())
    assert resp.manifests, resp.stderr
    assert by_identity(resp.manifests) == by_identity(expected_objects(example, "ml-prod"))
    # Order matters for appliers that do not sort: same stream order as `toporender render`.
    assert resp.manifests == expected_objects(example, "ml-prod")
    assert resp.seconds < 10, f"generate took {resp.seconds:.1f}s; the repo-server deadline is 60s"


def test_app_namespace_is_used_when_config_sets_none(tmp_path: Path) -> None:
    example = PROJECT / "tests" / "hosts" / "fixtures" / "minimal"
    repo = make_git_repo(tmp_path, example)
    resp = request(tmp_path, repo, app_for(dest_namespace="team-zeta"))
    namespaces = {m["metadata"].get("namespace") for m in resp.manifests}
    assert namespaces == {"team-zeta"}


def test_json_output_parses_to_the_same_objects(tmp_path: Path) -> None:
    example = example_repos()[0]
    repo = make_git_repo(tmp_path, example)
    app = app_for(plugin={"name": "toporender-v1", "parameters": [{"name": "output-format", "string": "json"}]})
    resp = request(tmp_path, repo, app)
    assert resp.stdout.startswith("{")
    assert resp.manifests == expected_objects(example, "ml-prod")


def test_discovery_without_plugin_name(tmp_path: Path) -> None:
    example = example_repos()[0]
    repo = make_git_repo(tmp_path, example)
    resp = request(tmp_path, repo, app_for(plugin=None))
    assert resp.manifests
    # Discovery is relative to the app path: the repo root has no toporender.yaml.
    with pytest.raises(CmpError, match="could not find plugin"):
        request(tmp_path, repo, app_for(sub=".", plugin=None))
    with pytest.raises(CmpError, match="supporting the given repository"):
        request(tmp_path, repo, app_for(sub="."))


def test_parameters_and_env_reach_the_render(tmp_path: Path) -> None:
    example = PROJECT / "tests" / "hosts" / "fixtures" / "minimal"
    repo = make_git_repo(tmp_path, example)
    plain = request(tmp_path, repo, app_for()).manifests
    assert not [m for m in plain if m["kind"] in ("Topology", "Queue")]
    app = app_for(plugin={"name": "toporender-v1",
                          "env": [{"name": "TOPORENDER_POOL_OBJECTS", "value": "true"}],
                          "parameters": [{"name": "output-format", "string": "json"}]})
    with_env = request(tmp_path, repo, app).manifests
    kinds = [m["kind"] for m in with_env]
    assert "Topology" in kinds, kinds
    assert with_env == expected_objects(example, "ml-prod", "--pool-objects")
    # A parameter beats plugin.env.
    app = app_for(plugin={"name": "toporender-v1",
                          "env": [{"name": "TOPORENDER_POOL_OBJECTS", "value": "true"}],
                          "parameters": [{"name": "pool-objects", "string": "false"}]})
    assert request(tmp_path, repo, app).manifests == plain


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        ({"name": "toporender-v1", "parameters": [{"name": "stric", "string": "true"}]},
         "unknown plugin parameter 'stric'; did you mean 'strict'?"),
        ({"name": "toporender-v1", "parameters": [{"name": "strict", "string": "maybe"}]}, "must be true or false"),
        ({"name": "toporender-v1", "parameters": [{"name": "pool", "array": ["a"]}]}, "single string value"),
        ({"name": "toporender-v1", "parameters": [{"name": "inventory", "string": "../../etc/passwd"}]},
         "stays inside it"),
        ({"name": "toporender-v1", "parameters": [{"name": "output-format", "string": "xml"}]}, "yaml or json"),
        ({"name": "toporender-v1", "env": [{"name": "TOPORENDER_POLL", "value": "x"}]}, "unknown plugin env"),
    ],
)
def test_bad_settings_fail_readably(tmp_path: Path, plugin: dict[str, object], message: str) -> None:
    repo = make_git_repo(tmp_path, example_repos()[0])
    with pytest.raises(CmpError) as exc:
        request(tmp_path, repo, app_for(plugin=plugin))
    text = str(exc.value)
    assert "failed exit status 1" in text and message in text
    assert "Traceback" not in text


def test_broken_workflow_fails_with_position_and_no_manifests(tmp_path: Path) -> None:
    example = PROJECT / "tests" / "hosts" / "fixtures" / "minimal"
    repo = make_git_repo(tmp_path, example)
    wf = repo / "apps/training/workflows/train.yaml"
    wf.write_text(wf.read_text().replace("gpu: 4", "gpu: lots"))
    with pytest.raises(CmpError) as exc:
        request(tmp_path, repo, app_for())
    text = str(exc.value)
    assert "`toporender argocd generate` failed exit status 1:" in text
    assert "workflows/train.yaml:" in text and "gpu" in text
    assert "Traceback" not in text and len(text) < 2000
    # Same through the command directly: nothing at all on stdout.
    proc = toporender("argocd", "generate", cwd=repo / "apps/training")
    assert proc.returncode == 1 and proc.stdout == ""


def test_invalid_yaml_fails(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path, PROJECT / "tests" / "hosts" / "fixtures" / "minimal")
    (repo / "apps/training/workflows/bad.yaml").write_text("workflow: [unclosed\n")
    with pytest.raises(CmpError, match=r"workflows/bad.yaml:\d+:\d+: invalid YAML"):
        request(tmp_path, repo, app_for())


def test_empty_render_fails_the_request_so_nothing_is_pruned(tmp_path: Path) -> None:
    """Workflows deleted by mistake (or moved, or renamed .json) must not turn into an empty manifest list."""
    repo = make_git_repo(tmp_path, PROJECT / "tests" / "hosts" / "fixtures" / "minimal")
    (repo / "apps/training/workflows/train.yaml").unlink()
    with pytest.raises(CmpError, match=r"toporender.yaml:\d+:\d+: no file of the repo matches .*allow_empty: true"):
        request(tmp_path, repo, app_for())


def test_empty_render_on_purpose_warns_about_prune(tmp_path: Path) -> None:
    """``allow_empty: true`` retires a repo: an empty list, with a warning that Argo CD prunes with it."""
    repo = make_git_repo(tmp_path, PROJECT / "tests" / "hosts" / "fixtures" / "minimal")
    (repo / "apps/training/workflows/train.yaml").unlink()
    config = repo / "apps/training/toporender.yaml"
    config.write_text(config.read_text() + "allow_empty: true\n")
    resp = request(tmp_path, repo, app_for())
    assert resp.manifests == [] and resp.stdout == ""
    assert "prune" in resp.stderr


def test_out_of_tree_symlink_fails_the_request(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path, PROJECT / "tests" / "hosts" / "fixtures" / "minimal")
    outside = tmp_path / "secret.yaml"
    outside.write_text("x: 1\n")
    os.symlink(outside, repo / "apps/training/workflows/leak.yaml")
    with pytest.raises(CmpError, match="illegal filepath in symlink"):
        request(tmp_path, repo, app_for())


def test_modes_are_reset_and_repo_is_not_written(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path, PROJECT / "tests" / "hosts" / "fixtures" / "minimal")
    before = tree_snapshot(repo)
    resp = generate_manifests(PLUGIN_YAML, repo, app_for(), tmp_path / "cmp-tmp", sidecar_env=tool_env(),
                              keep_workdir=True)
    work = resp.workdir
    modes = {p.stat().st_mode & 0o777 for p in work.rglob("*") if not p.is_symlink()}
    assert modes <= {0o644, 0o755}
    after = tree_snapshot(work)
    # The command wrote nothing into its copy (no caches, no golden files).
    assert set(after) == set(before)
    assert tree_snapshot(repo) == before


def test_parallel_requests_are_identical(tmp_path: Path) -> None:
    example = example_repos()[0]
    repo = make_git_repo(tmp_path, example)
    app_dir = repo / "apps/training"
    before = tree_snapshot(repo)
    env = build_env(app_for(), tool_env())

    def run(_: int) -> str:
        # Both run in the SAME directory (worst case: no per-request copy).
        proc = subprocess.run(["toporender", "argocd", "generate"], cwd=app_dir, env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(run, range(4)))
    assert len(set(outs)) == 1 and outs[0]
    assert tree_snapshot(repo) == before


def test_harness_env_contract(tmp_path: Path) -> None:
    """The env the harness builds is the one Argo CD's cmpserver builds (guards the imitation itself)."""
    app = app_for(plugin={"name": "toporender-v1",
                          "env": [{"name": "FOO", "value": "$ARGOCD_APP_NAMESPACE-$$-$HOME"}],
                          "parameters": [{"name": "output-format", "string": "json"},
                                         {"name": "a.b-c", "map": {"k.1": "v"}, "array": ["x"]}]})
    env = build_env(app, {"HOME": "/home/argocd", "PATH": "/bin"})
    assert env["ARGOCD_APP_NAME"] == "team-ml_training"
    assert env["KUBE_VERSION"] == "" and env["KUBE_API_VERSIONS"] == ""
    assert env["ARGOCD_ENV_FOO"] == "ml-prod-$-"  # build env only: the sidecar's HOME is not visible
    params = json.loads(env["ARGOCD_APP_PARAMETERS"])
    assert list(params[1]) == ["array", "map", "name"]
    assert env["PARAM_A_B_C_K_1"] == "v" and env["PARAM_A_B_C_0"] == "x"
    assert env[param_env_name("output-format")] == "json"
    assert build_env(app_for(plugin={"name": "toporender-v1"}), {})["ARGOCD_APP_PARAMETERS"] == "null"
    assert "ARGOCD_APP_PARAMETERS" not in build_env(app_for(plugin=None), {})


def test_null_and_empty_parameter_lists(tmp_path: Path) -> None:
    example = PROJECT / "tests" / "hosts" / "fixtures" / "minimal"
    want = yaml.safe_dump_all(expected_objects(example, "x"))
    for params in ("null", "[]"):
        proc = toporender("argocd", "generate", cwd=example,
                          env={"ARGOCD_APP_NAMESPACE": "x", "ARGOCD_APP_PARAMETERS": params})
        assert proc.returncode == 0, proc.stderr
        assert yaml.safe_dump_all(list(yaml.safe_load_all(proc.stdout))) == want
    # PARAM_* is used only when the JSON variable is absent (hand runs).
    proc = toporender("argocd", "generate", cwd=example,
                      env={"ARGOCD_APP_NAMESPACE": "x", "PARAM_OUTPUT_FORMAT": "json"})
    assert proc.returncode == 0 and proc.stdout.startswith("{")


def test_sync_waves_order_podgroups_before_pods(tmp_path: Path) -> None:
    example = PROJECT / "tests" / "hosts" / "fixtures" / "minimal"
    repo = make_git_repo(tmp_path, example)
    cfg = repo / "apps/training/toporender.yaml"
    cfg.write_text(cfg.read_text() + "sync_waves: true\n")
    resp = request(tmp_path, repo, app_for(plugin={"name": "toporender-v1",
                                                   "parameters": [{"name": "pool-objects", "string": "true"}]}))
    waves = {m["kind"]: int(m["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for m in resp.manifests}
    assert waves["Topology"] < waves["PodGroup"] < waves["Pod"], waves


def test_plugin_yaml_parsing_is_lenient(tmp_path: Path) -> None:
    """Like Go's non-strict json.Unmarshal: unknown keys ignored, keys matched case-insensitively."""
    plugin = tmp_path / "plugin.yaml"
    plugin.write_text(PLUGIN_YAML.read_text().replace("  generate:", "  lockRepo: true\n  allowConcurrency: true\n"
                                                      "  Generate:").replace("fileName:", "filename:"))
    cfg = load_plugin_config(plugin)
    assert cfg.generate.argv == ["toporender", "argocd", "generate"] and cfg.discover_file_name == "toporender.yaml"


def test_hostile_request_values_are_clean_errors(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path, PROJECT / "tests" / "hosts" / "fixtures" / "minimal")
    with pytest.raises(CmpError, match="'Bad_NS' is not a valid namespace"):
        request(tmp_path, repo, app_for(dest_namespace="Bad_NS"))
    app_dir = PROJECT / "tests" / "hosts" / "fixtures" / "minimal"
    for raw in ("[" * 20000 + "]" * 20000, "{not json", '{"name": "pool"}', '[{"string": "x"}]'):
        proc = toporender("argocd", "generate", cwd=app_dir, env={"ARGOCD_APP_PARAMETERS": raw})
        assert proc.returncode == 1 and proc.stdout == "", raw[:20]
        assert "ARGOCD_APP_PARAMETERS" in proc.stderr and "internal error" not in proc.stderr


def test_foreign_parameters_are_ignored_with_a_warning(tmp_path: Path) -> None:
    """Parameters meant for other plugins (shared Application templates) do not break the render."""
    example = PROJECT / "tests" / "hosts" / "fixtures" / "minimal"
    repo = make_git_repo(tmp_path, example)
    app = app_for(plugin={"name": "toporender-v1", "parameters": [
        {"name": "values-files", "array": ["values-dev.yaml"]},
        {"name": "helm-parameters", "map": {"image.tag": "v1.2.3"}}]})
    resp = request(tmp_path, repo, app)
    assert resp.manifests == expected_objects(example, "ml-prod")
    assert "ignoring plugin parameter 'values-files'" in resp.stderr
