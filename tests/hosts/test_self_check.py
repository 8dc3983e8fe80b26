"""Every host checks its own output before writing a byte.

A ``sitecustomize`` module on ``PYTHONPATH`` plants a bug in the KAI backend of the real console script: its
PodGroups gain a field the upstream CRD does not have. Each host must then exit 1, say that this is a bug in
toporender with the object, the rule and the workflow position, and write nothing: no stream on stdout, no
golden file, no ResourceList items that were not there before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hostutil import FIXTURE_REPO, copy_repo, toporender, tree_snapshot

PLANTED = """\
from toporender.build.backends import kai

_render_gang = kai.KaiBackend.render_gang


def render_gang(self, gang):
    objects = _render_gang(self, gang)
    for obj in objects.objects:
        if obj.get("kind") == "PodGroup":
            obj["spec"]["planted"] = 1
    return objects


kai.KaiBackend.render_gang = render_gang
"""
EXPECTED = "spec.planted: unknown field"


@pytest.fixture
def bug(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(PLANTED)
    return {"PYTHONPATH": str(site)}


def _says_bug(stderr: str) -> None:
    assert EXPECTED in stderr, stderr
    assert "This is a bug in toporender" in stderr
    assert "workflows/train.yaml:" in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize("args", [("render",), ("render", "--format", "json"), ("validate",)])
def test_render_and_validate_write_nothing(args: tuple[str, ...], tmp_path: Path, bug: dict[str, str]) -> None:
    repo = copy_repo(FIXTURE_REPO, tmp_path / "repo")
    assert toporender(*args, str(repo)).returncode == 0, "the repo renders without the planted bug"
    proc = toporender(*args, str(repo), env=bug)
    assert proc.returncode == 1 and proc.stdout == ""
    _says_bug(proc.stderr)


def test_render_to_a_directory_writes_no_file(tmp_path: Path, bug: dict[str, str]) -> None:
    repo = copy_repo(FIXTURE_REPO, tmp_path / "repo")
    out = tmp_path / "out"
    proc = toporender("render", str(repo), "-o", str(out), env=bug)
    assert proc.returncode == 1
    assert not out.exists() or not any(out.rglob("*"))
    _says_bug(proc.stderr)


def test_golden_writes_nothing(tmp_path: Path, bug: dict[str, str]) -> None:
    repo = copy_repo(FIXTURE_REPO, tmp_path / "repo")
    before = tree_snapshot(repo)
    proc = toporender("golden", str(repo), env=bug)
    assert proc.returncode == 1
    assert tree_snapshot(repo) == before
    _says_bug(proc.stderr)


def test_argocd_generate_writes_nothing(tmp_path: Path, bug: dict[str, str]) -> None:
    repo = copy_repo(FIXTURE_REPO, tmp_path / "repo")
    proc = toporender("argocd", "generate", cwd=repo, env=bug)
    assert proc.returncode == 1 and proc.stdout == ""
    _says_bug(proc.stderr)


def test_krm_function_returns_its_input_with_an_error(tmp_path: Path, bug: dict[str, str]) -> None:
    export = toporender("krm", "--export", str(FIXTURE_REPO))
    assert export.returncode == 0, export.stderr
    items = [d for d in yaml.safe_load_all(export.stdout) if d]
    stdin = yaml.safe_dump({"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": items})
    proc = toporender("krm", stdin=stdin, env=bug)
    assert proc.returncode == 1
    out = yaml.safe_load(proc.stdout)
    assert [i["kind"] for i in out["items"]] == [i["kind"] for i in items]
    assert any(r["severity"] == "error" and EXPECTED in r["message"] for r in out["results"])
    _says_bug(proc.stderr)
