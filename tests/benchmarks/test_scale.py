"""The 1M-GPU repo generator (``benchmarks/scale/generate.py``) writes a repo that renders and plans, at any
size: here a tiny one, with the whole-process command its benchmark runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, run_cli


def test_a_small_scale_repo_renders_and_every_gang_is_placed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scale" / "generate.py"), str(repo),
                    "--workflows", "6", "--nodes", "216"], check=True, capture_output=True)
    assert len(list((repo / "workflows").iterdir())) == 6
    rendered = run_cli("render", str(repo), "--format", "json", "--no-cache")
    assert rendered.code == 0, rendered.stderr
    pods = [o for o in map(json.loads, rendered.stdout.splitlines()) if o["kind"] == "Pod"]
    assert len(pods) == sum(4 * (6 + w % 3) for w in range(6))
    planned = run_cli("plan", str(repo), "--format", "json")
    assert planned.code == 0, planned.stderr
    assert all(g["placed"] for pool in json.loads(planned.stdout).values() for g in pool["gangs"])
