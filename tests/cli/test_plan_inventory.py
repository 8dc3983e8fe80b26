"""``toporender plan --inventory``: a path inside the repo works; one outside it is a clean input error."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ROOT, run_cli


def test_inventory_outside_the_repo_is_an_input_error(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "multi-rack-zone", repo)
    outside = tmp_path / "nodes.yaml"
    shutil.copy(repo / "inventory" / "nodes.yaml", outside)
    result = run_cli("plan", str(repo), "--inventory", str(outside))
    assert result.code == 1 and result.stdout == ""
    assert "is outside the repo" in result.stderr and "Traceback" not in result.stderr
    inside = run_cli("plan", str(repo), "--inventory", str(repo / "inventory" / "nodes.yaml"))
    assert inside.code == 0 and "gangs 2/2 placed" in inside.stdout
