"""The render benchmark runs its commands in rounds, so a load change during a sitting reaches every figure alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, load_script

BENCH = load_script(ROOT / "benchmarks" / "render" / "bench.py", "render_bench")


@pytest.mark.parametrize(("k", "runs", "rounds"), [
    (3, 7, {0, 2, 4}),
    (7, 7, set(range(7))),
    (9, 7, set(range(7))),
    (1, 5, {0}),
    (2, 5, {0, 2}),
])
def test_fewer_runs_are_spread_over_the_rounds(k: int, runs: int, rounds: set[int]) -> None:
    assert BENCH.spread(k, runs) == rounds


def test_each_round_runs_every_command_once_after_one_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fake_run_child(argv: list[str], *, stdout_path: Path | None = None, tree: bool = False) -> Any:
        calls.append(argv[0] + ("+tree" if tree else ""))
        return len(calls)

    monkeypatch.setitem(BENCH.in_rounds.__globals__, "run_child", fake_run_child)
    commands = {name: BENCH.Command([name], tree=name == "json") for name in ("json", "kustomize", "cold")}
    samples = BENCH.in_rounds(commands, 4, {"kustomize": 2})
    assert calls == ["json+tree", "kustomize", "cold",  # warm-up; the render's peak is summed over its processes
                     "json+tree", "kustomize", "cold", "json+tree", "cold", "json+tree", "kustomize", "cold",
                     "json+tree", "cold"]
    assert samples == {"json": [4, 7, 9, 12], "kustomize": [5, 10], "cold": [6, 8, 11, 13]}
