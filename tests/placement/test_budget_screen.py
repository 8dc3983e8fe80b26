"""The budget screen (``benchmarks/placement/budgets.py``): it flags a pack whose left-out gang's exact search ran
out of steps, packs with the repair's budgets scaled, and leaves them as they were."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT
from toporender.placement import repair


def _budgets() -> dict[str, object]:
    from budgets import BUDGETS

    return {**{name: getattr(repair, name) for name in BUDGETS}, "side": dict(repair.SIDE_RUN_STEPS),
            "region": repair.RegionSearch}


@pytest.mark.parametrize(("seed", "times", "gpus", "flagged"), [
    (107, 1, 145, False),
    (107, 0.001, 119, True),  # a thousandth of the steps: g00007's search of the pool runs out of them
    (290, 0.001, 171, True),  # g00003's exact search runs out, and no GPU is lost (as 171 with the full steps)
])
def test_scaled_packs_are_flagged_by_their_reasons(seed: int, times: float, gpus: int, flagged: bool) -> None:
    from budgets import packed, scaled_budgets

    steps, late = repair.EXACT_STEPS, repair.EXACT_LATE_STEPS
    with scaled_budgets(times):
        assert repair.EXACT_STEPS == int(steps * times)
        assert repair.RegionSearch(0, []).late_left == int(late * times)
        got, open_, _ = packed("varied", seed)
    assert (got, open_) == (gpus, flagged)


def test_the_budgets_are_restored_after_an_error() -> None:
    from budgets import scaled_budgets

    before = _budgets()
    with pytest.raises(RuntimeError), scaled_budgets(10):
        assert repair.SIDE_RUN_STEPS["node"] == 10 * before["side"]["node"]  # type: ignore[index]
        raise RuntimeError
    assert _budgets() == before


def test_the_screen_prints_each_seed_packed_again_and_a_total() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "placement" / "budgets.py"), "--family",
                          "varied", "--first", "106", "--seeds", "2", "--times", "0.001", "--every"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert [line.split(" (")[0] for line in out[:2]] == ["seed 106: 72 GPUs, 72 with 0.001x the steps",
                                                         "seed 107: 145 GPUs, 119 with 0.001x the steps"]
    assert out[2].startswith("2 seeds 106..107: 2 packed again, 0 place more GPUs with 0.001x the steps; CPU")
