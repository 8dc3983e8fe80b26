"""Render options a host passes in: namespace validation and the placement lock kept by golden."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ROOT, run_cli, write_repo

WF = "workflow:\n  name: wf\n  tasks:\n  - name: t\n"


def test_invalid_namespace_option_is_an_error(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"toporender.yaml": "pools:\n  p: {}\n", "workflows/a.yaml": WF})
    bad = run_cli("render", "--namespace", "Bad_NS", str(repo))
    assert bad.code == 1 and bad.stdout == ""
    assert "namespace 'Bad_NS' is not a valid Kubernetes namespace" in bad.stderr
    good = run_cli("render", "--namespace", "team-a", str(repo))
    assert good.code == 0 and "namespace: team-a" in good.stdout


def test_golden_maintains_the_arrival_order_lock(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "multi-rack-zone", repo)
    first = run_cli("golden", str(repo))
    assert first.code == 1 and "created" in first.stdout
    lock = (repo / "toporender.lock").read_text()
    assert lock.index("workflows/dual-model.yaml#train") < lock.index("workflows/eval.yaml#evaluate-group")
    (repo / "workflows" / "a-new.yaml").write_text(
        "workflow:\n  name: a-new\n  tasks:\n  - name: x\n  resources:\n    default: {gpu: 1}\n")
    second = run_cli("golden", str(repo))
    assert second.code == 1
    keys = [line for line in (repo / "toporender.lock").read_text().splitlines() if line.startswith("- ")]
    assert keys == ['- "workflows/dual-model.yaml#train"', '- "workflows/eval.yaml#evaluate-group"',
                    '- "workflows/a-new.yaml#x-group"']
    assert run_cli("golden", "--check", str(repo)).code == 0
