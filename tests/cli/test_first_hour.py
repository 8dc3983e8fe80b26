"""Small things a new user meets first: the repo directory as an argument everywhere, plain counts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "single-rack"


@pytest.mark.parametrize("args", [["gb200", str(EXAMPLE)], ["gb200", "--dir", str(EXAMPLE)],
                                  ["gb200", str(EXAMPLE), "--dir", str(EXAMPLE)]])
def test_pool_show_takes_the_repo_like_every_command(args: list[str]) -> None:
    result = run_cli("pool", "show", *args)
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("---\nname: gb200\n")


def test_pool_show_refuses_two_different_repos() -> None:
    result = run_cli("pool", "show", "gb200", str(EXAMPLE), "--dir", str(ROOT / "examples" / "multi-rack-zone"))
    assert result.code == 2 and "give the repo directory once" in result.stderr


def test_validate_counts_in_words() -> None:
    result = run_cli("validate", str(EXAMPLE))
    assert result.code == 0 and "from 1 file\n" in result.stderr


def test_plan_says_a_cpu_only_gang_has_no_gpus_to_place(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "multi-rack-zone", repo)
    (repo / "workflows" / "prep.yaml").write_text("workflow:\n  name: prep\n  tasks:\n  - name: fetch\n"
                                                  "    image: busybox\n  resources:\n    default: {cpu: 2}\n")
    result = run_cli("plan", str(repo))
    assert result.code == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("prep/"))
    assert line.endswith("no GPUs to place")
