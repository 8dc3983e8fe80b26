"""The ``plan`` table fits 100 columns (long domain names elided in the middle, notes wrapped); ``--wide`` keeps
every name whole on one line per gang."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.placement.conftest import ROOT

from toporender.cli import cli
from toporender.placement.report import WIDTH, _table

HUGE = """\
workflow:
  name: a-workflow-with-a-rather-long-name-for-its-table-row
  groups:
  - name: much-too-large-for-one-nvlink-domain
    tasks:
{tasks}
  resources:
    big:
      gpu: 4
      topology:
      - {{key: gpu-clique, group: a-subgroup-with-a-long-name-as-well}}
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plan") / "repo"
    shutil.copytree(ROOT / "examples" / "multi-rack-zone", root)
    tasks = "\n".join(f"    - {{name: t{i}, resource: big{', lead: true' if i == 0 else ''}}}" for i in range(30))
    (root / "workflows" / "huge.yaml").write_text(HUGE.format(tasks=tasks))
    return root


def _plan(*args: str) -> str:
    result = CliRunner().invoke(cli, ["plan", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_table_fits_the_width_and_keeps_subgroups_apart(repo: Path) -> None:
    out = _plan(str(repo))
    assert max(map(len, out.splitlines())) <= WIDTH, out
    assert "UNPLACEABLE" in out
    assert "ca-a=" in out and "ca-b=" in out, "subgroups that differ at the end stay apart"
    assert "0546fb3d-6b62-5e77-8986-9b72b927f52b.1" in out, "the per-domain table has room for whole names"


def test_wide_keeps_every_name_whole(repo: Path) -> None:
    out = _plan(str(repo), "--wide")
    assert max(map(len, out.splitlines())) > WIDTH
    row = next(line for line in out.splitlines() if line.startswith("dual-model/train"))
    assert "job-replica-a=0546fb3d-6b62-5e77-8986-9b72b927f52b.1; job-replica-b=" in row
    reason = next(line for line in out.splitlines() if "UNPLACEABLE" in line)
    assert reason.rstrip().endswith(reason.rstrip().split("  ")[-1]) and len(reason) > WIDTH


@pytest.mark.parametrize(("rows", "width", "expect"), [
    ([["a", ["x=" + "v" * 40]]], 30, ["h1  h2", "--  " + "-" * 26, "a   x=" + "v" * 11 + ".." + "v" * 11]),
    ([["a", "word " * 8]], 24, ["h1  h2", "--  " + "-" * 20, "a   word word word word", "    word word word word"]),
    ([["a", "short"]], 10, ["h1  h2", "--  -----", "a   short"]),
    ([["a", ["long-subgroup-name-here=value"]]], 24, ["h1  h2", "--  " + "-" * 20, "a   long-s..e-here=value"]),
])
def test_squeezed_columns(rows: list[list[object]], width: int, expect: list[str]) -> None:
    assert _table(["h1", "h2"], rows, width, squeeze=(1,)) == expect
