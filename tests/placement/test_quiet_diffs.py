"""Appending a workflow that moves nothing changes no byte of the other workflows' objects."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ROOT
from toporender.emit.stream import dump_yaml
from toporender.pipeline import render_repo

APPENDED = """\
workflow:
  name: zz-probe
  tasks:
  - name: probe
    image: busybox
  resources:
    default:
      gpu: 1
"""


def _files(repo: Path) -> dict[str, str]:
    return {f.source: dump_yaml(f.objects) for f in render_repo(repo).files}


def test_an_appended_workflow_leaves_the_others_byte_identical(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "multi-rack-zone", repo)
    before = _files(repo)
    (repo / "workflows" / "zz-probe.yaml").write_text(APPENDED)
    after = _files(repo)
    assert set(after) == set(before) | {"workflows/zz-probe.yaml"}
    for source, text in before.items():
        assert after[source] == text, f"{source} changed when an unrelated workflow was appended"
    assert "toporender.dev/plan-hash" in after["workflows/zz-probe.yaml"]
