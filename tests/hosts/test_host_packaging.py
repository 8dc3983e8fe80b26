"""Packaging of the hosts (sidecar patch, images, wrappers) and self-tests of the cmp-server imitation."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cmpserver import App, CmpError, generate_manifests, split_manifests
from hostutil import PROJECT, by_identity, render_cli, require_tool, tool_env

ARGOCD = PROJECT / "argocd"
KUSTOMIZE = PROJECT / "kustomize"

UPSTREAM_REPO_SERVER = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: argocd-repo-server
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: argocd-repo-server}
  template:
    metadata:
      labels: {app.kubernetes.io/name: argocd-repo-server}
    spec:
      initContainers:
      - name: copyutil
        image: argocd:v3
        command: [/bin/cp, -n, /usr/local/bin/argocd, /var/run/argocd/argocd-cmp-server]
        volumeMounts: [{name: var-files, mountPath: /var/run/argocd}]
      containers:
      - name: argocd-repo-server
        image: argocd:v3
        volumeMounts:
        - {name: plugins, mountPath: /home/argocd/cmp-server/plugins}
        - {name: tmp, mountPath: /tmp}
      volumes:
      - {name: var-files, emptyDir: {}}
      - {name: plugins, emptyDir: {}}
      - {name: tmp, emptyDir: {}}
"""


def test_repo_server_component_adds_the_sidecar(tmp_path: Path) -> None:
    kubectl = require_tool("kubectl")
    (tmp_path / "argocd-install.yaml").write_text(UPSTREAM_REPO_SERVER)
    rel = os.path.relpath(ARGOCD, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [argocd-install.yaml]\ncomponents: [{rel}]\n"
        "images: [{name: toporender-cmp, newName: registry.invalid/toporender-cmp, newTag: '1.2.3'}]\n")
    proc = subprocess.run([kubectl, "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    dep = yaml.safe_load(proc.stdout)
    spec = dep["spec"]["template"]["spec"]
    names = [c["name"] for c in spec["containers"]]
    assert names == ["toporender", "argocd-repo-server"] or names == ["argocd-repo-server", "toporender"]
    side = next(c for c in spec["containers"] if c["name"] == "toporender")
    assert side["command"] == ["/var/run/argocd/argocd-cmp-server"]
    assert side["image"] == "registry.invalid/toporender-cmp:1.2.3"
    assert side["securityContext"]["runAsUser"] == 999 and side["securityContext"]["runAsNonRoot"] is True
    mounts = {m["mountPath"]: m["name"] for m in side["volumeMounts"]}
    assert mounts == {"/var/run/argocd": "var-files", "/home/argocd/cmp-server/plugins": "plugins",
                      "/tmp": "toporender-tmp", "/var/cache/toporender": "toporender-cache"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert {"var-files", "plugins", "toporender-tmp", "tmp"} <= set(volumes), "own /tmp, upstream volumes kept"
    env = {e["name"]: e["value"] for e in side["env"]}
    assert env["TOPORENDER_CACHE_DIR"] == "/var/cache/toporender", "the render cache lives on its own volume"
    limit = volumes["toporender-cache"]["emptyDir"]["sizeLimit"]
    assert limit == "1Gi" and int(env["TOPORENDER_CACHE_MAX_MB"]) < 1024, "the cache stays under the sizeLimit"


def _dockerfile(path: Path) -> list[tuple[str, str]]:
    lines, buf = [], ""
    for raw in path.read_text().splitlines():
        if raw.strip().startswith("#") or not raw.strip():
            continue
        buf += raw.rstrip("\\").strip() + " "
        if not raw.endswith("\\"):
            op, _, rest = buf.strip().partition(" ")
            lines.append((op.upper(), rest))
            buf = ""
    return lines


def test_sidecar_dockerfile_contract() -> None:
    ins = _dockerfile(ARGOCD / "Dockerfile")
    users = [v for op, v in ins if op == "USER"]
    assert users and users[-1].split(":")[0] == "999", "Argo CD requires the sidecar to run as uid 999"
    copies = [v for op, v in ins if op == "COPY"]
    assert any(v.endswith("argocd/plugin.yaml /home/argocd/cmp-server/config/plugin.yaml") for v in copies)
    envs = " ".join(v for op, v in ins if op == "ENV")
    assert "HOME=/home/argocd" in envs and "PIP_NO_INDEX=1" in envs
    runs = " ".join(v for op, v in ins if op == "RUN")
    assert "pip install /src" in runs and "useradd --uid 999" in runs and "chown -R 999:999 /home/argocd" in runs
    for op, v in ins:
        if op == "COPY":  # every source exists in the build context (the repo root)
            for src in v.replace("--chown=999:999", "").split()[:-1]:
                assert (PROJECT / src).exists() or src == "README.md", src


def test_container_function_dockerfile_contract() -> None:
    ins = _dockerfile(KUSTOMIZE / "container-function" / "Dockerfile")
    assert [v for op, v in ins if op == "USER"][-1].startswith("65534"), "functions run as nobody"
    assert [v for op, v in ins if op == "ENTRYPOINT"] == ['["toporender", "krm"]']
    fn = yaml.safe_load((KUSTOMIZE / "container-function" / "render.yaml").read_text())
    spec = yaml.safe_load(fn["metadata"]["annotations"]["config.kubernetes.io/function"])
    assert set(spec) == {"container"} and set(spec["container"]) <= {"image", "network", "mounts", "envs"}


def test_container_function_as_kustomize_runs_it(tmp_path: Path) -> None:
    """No docker engine here: run the image's entrypoint the way `docker run` would (no network when the
    sandbox allows a network namespace, only the -e env, cwd /), fed the transformer ResourceList kustomize
    builds. (uid nobody is not imitated: this interpreter lives where nobody cannot read it.)"""
    unshare = shutil.which("unshare")
    inputs = [d for d in yaml.safe_load_all((KUSTOMIZE / "container-function" / "inputs.yaml").read_text()) if d]
    items = []
    for i, item in enumerate(inputs):  # kustomize's transformer input: sorted keys + id/index annotations
        ann = item["metadata"].setdefault("annotations", {})
        ann["kustomize.config.k8s.io/id"] = yaml.safe_dump(
            {"group": "toporender.dev", "kind": item["kind"], "name": item["metadata"]["name"], "version": "v1alpha1"})
        for key in ("config.kubernetes.io/index", "internal.config.kubernetes.io/index",
                    "internal.config.kubernetes.io/annotations-migration-resource-id"):
            ann[key] = str(i)
        ann["internal.config.kubernetes.io/id"] = ann["config.k8s.io/id"] = str(i + 1)
        items.append(item)
    fn = yaml.safe_load((KUSTOMIZE / "container-function" / "render.yaml").read_text())
    fn["metadata"]["annotations"]["config.kubernetes.io/local-config"] = "true"
    rl = yaml.safe_dump({"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": items,
                         "functionConfig": fn}, sort_keys=True)
    exe = shutil.which("toporender", path=tool_env()["PATH"])
    assert exe
    argv = [exe, "krm"]
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        argv = [unshare, "-n", *argv]  # --network none
    env = {"PATH": tool_env()["PATH"], "HOME": "/tmp", "LOG_TO_STDERR": "true", "STRUCTURED_RESULTS": "true"}
    proc = subprocess.run(argv, input=rl, capture_output=True, text=True, cwd="/", env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = yaml.safe_load(proc.stdout)
    assert by_identity(out["items"]) == by_identity(render_cli(PROJECT / "examples" / "single-rack"))


def test_legacy_plugin_as_a_transformer(tmp_path: Path) -> None:
    """Legacy plugins used under `transformers:` get the resources as a plain YAML stream on stdin."""
    cfg = tmp_path / "kust-plugin-config-1"
    cfg.write_text("apiVersion: toporender.dev/v1alpha1\nkind: Toporender\nmetadata:\n  name: t\nspec: {}\n")
    stream = (KUSTOMIZE / "kpt" / "inputs.yaml").read_text() + (
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep  # comment\n"
        "  annotations:\n    kustomize.config.k8s.io/id: |\n      kind: ConfigMap\n      name: keep\n"
        "      version: v1\ndata: {a: 'yes'}\n")
    plugin = KUSTOMIZE / "legacy-plugin" / "plugins" / "toporender.dev" / "v1alpha1" / "toporender" / "Toporender"
    proc = subprocess.run(["sh", str(plugin), str(cfg)], input=stream, capture_output=True, text=True,
                          cwd=tmp_path, env=tool_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    assert docs[0]["metadata"]["name"] == "keep" and docs[0]["data"] == {"a": "yes"}
    assert "# comment" in proc.stdout
    assert docs[1:] == render_cli(PROJECT / "examples" / "single-rack")


# ---------------------------------------------------------------------------------------------
# The imitation itself


@pytest.mark.parametrize(
    ("stdout", "kinds"),
    [
        ("", []),
        ("\n---\nnull\n---\n", []),
        ("kind: A\n---\n# comment only\n---\nkind: B\n", ["A", "B"]),
        ('{"kind":"A"}\n{"kind":"B"}\n', ["A", "B"]),
        ("apiVersion: v1\nkind: List\nitems:\n- {kind: A}\n- {kind: B}\n", ["A", "B"]),
        ("apiVersion: v1\nkind: PodList\nitems: null\n", []),
    ],
)
def test_split_manifests_accepts(stdout: str, kinds: list[str]) -> None:
    assert [o["kind"] for o in split_manifests(stdout)] == kinds


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("- {kind: A}\n", "cannot unmarshal list"),
        ('[{"kind":"A"}]', "cannot unmarshal list"),
        ("apiVersion: v1\nmetadata: {name: x}\n", "Object 'Kind' is missing"),
        ("values: {a: 1}\n", "Object 'Kind' is missing"),
        ('{"kind":"A"} {"kind":', "failed to unmarshal"),
    ],
)
def test_split_manifests_rejects(stdout: str, message: str) -> None:
    with pytest.raises(CmpError, match=message):
        split_manifests(stdout)


def test_harness_deadline_kills_the_process_group(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.yaml"
    plugin.write_text("apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata: {name: slow}\n"
                      "spec:\n  discover: {fileName: toporender.yaml}\n  generate:\n"
                      "    command: [sh, -c]\n    args: ['sleep 30 & sleep 30']\n  lockRepo: true\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "toporender.yaml").write_text("pools: {}\n")
    with pytest.raises(CmpError, match="timeout"):
        generate_manifests(plugin, repo, App(plugin=None), tmp_path / "work", sidecar_env=tool_env(), deadline_s=1.0)


def test_harness_rejects_invalid_plugin_configs(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.yaml"
    for text, message in (
        ("kind: ConfigManagementPlugin\nmetadata: {}\nspec: {generate: {command: [x]}}\n", "metadata.name"),
        ("kind: Other\nmetadata: {name: a}\nspec: {generate: {command: [x]}}\n", "kind must be"),
        ("kind: ConfigManagementPlugin\nmetadata: {name: a}\nspec: {generate: {args: [x]}}\n", "generate.command"),
    ):
        plugin.write_text(text)
        with pytest.raises(CmpError, match=message):
            generate_manifests(plugin, PROJECT / "argocd", App(), tmp_path / "w")


def test_missing_tool_fails_on_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_tool("no-such-tool-for-toporender")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        require_tool("no-such-tool-for-toporender")
