"""The floor benchmark (``benchmarks/render/floor.py``) runs end to end and its floor is the sum of its steps."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT

ROWS = ("python -c pass", "imports", "parse", "write", "floor (the four above)",
        "toporender render --format json", "render minus floor")


def test_floor_is_the_sum_of_its_steps_next_to_a_render() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "render" / "floor.py"), "--runs", "1",
         str(ROOT / "examples" / "single-rack")],
        capture_output=True, text=True, check=True,
    ).stdout
    rows = {line[:32].strip(): float(line[32:].split()[0]) for line in out.splitlines()}
    assert tuple(rows) == ROWS
    # one run: each figure is that run's value, printed to the millisecond
    assert rows["floor (the four above)"] == pytest.approx(sum(rows[k] for k in ROWS[:4]), abs=0.003)
    assert rows["render minus floor"] == pytest.approx(
        rows["toporender render --format json"] - rows["floor (the four above)"], abs=0.002)
    assert rows["python -c pass"] > 0 and rows["imports"] > 0
