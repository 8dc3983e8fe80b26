"""The code base stays ruff- and mypy-clean (both are in the test extra)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "plugin", "tests", "benchmarks", "tools"],
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff", "mypy"],
)
def test_lint(command: list[str]) -> None:
    if shutil.which(command[0]) is None:
        pytest.fail(f"{command[0]} not found")
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
