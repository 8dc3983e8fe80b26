"""Inputs that once ended in an internal error or a message without a position."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli, write_repo
from toporender.load.repo import bare_group_name

CONFIG = "namespace: ml\npools:\n  gpu: {}\n"


@pytest.mark.parametrize("length", [1, 57, 58, 60, 63])
def test_a_bare_task_of_any_valid_length_renders(length: int, tmp_path: Path) -> None:
    name = "t" * length
    repo = write_repo(tmp_path, {"toporender.yaml": CONFIG,
                                 "workflows/a.yaml": f"workflow:\n  name: wf\n  tasks:\n  - name: {name}\n"})
    result = run_cli("validate", "--output", str(repo))
    assert result.code == 0, result.stderr
    assert len(bare_group_name(name)) <= 63


def test_long_bare_task_names_get_distinct_groups() -> None:
    a, b = "x" * 60 + "a", "x" * 60 + "b"
    assert bare_group_name(a) != bare_group_name(b)
    assert bare_group_name("short") == "short-group"


def test_a_repeated_pod_names_both_tasks(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {
        "toporender.yaml": CONFIG,
        "workflows/a.yaml": "workflow:\n  name: w\n  groups:\n  - name: g\n    tasks:\n    - name: f-a\n",
        "workflows/b.yaml": "workflow:\n  name: w-f\n  groups:\n  - name: g\n    tasks:\n    - name: a\n",
    })
    result = run_cli("render", str(repo))
    assert result.code == 1 and result.stdout == ""
    expected = "workflows/b.yaml:6:7: Pod 'w-f-a' is rendered twice: also from workflows/a.yaml:6:7"
    assert expected in result.stderr, result.stderr


def test_inventory_import_of_non_utf8_stdin_is_an_input_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "toporender", "inventory", "import", "-"],
                          input=b"nodes: [\xff]\n", capture_output=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == b""
    assert b"not valid UTF-8" in proc.stderr and b"Traceback" not in proc.stderr
