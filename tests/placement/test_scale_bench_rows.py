"""The packer-scale benchmark turns measured cases into table rows with the right verdicts (target 3)."""

from __future__ import annotations

import pytest

from conftest import ROOT, load_script

BENCH = load_script(ROOT / "benchmarks" / "placement" / "bench.py", "placement_bench")


def _cases(t100k: float, t1m: float | list[float], t2m: float | list[float], rss1m: float) -> list:
    out = {"placed": 1, "requested": 2, "hash": "h"}
    case = BENCH.Case
    w1m = t1m if isinstance(t1m, list) else [t1m]
    w2m = t2m if isinstance(t2m, list) else [t2m]
    return [
        case(10_000, 100, "ours", [0.3, 0.4, 0.35], [0.3], [20.0], out),
        case(10_000, 100, "baseline", [0.2], [0.2], [19.0], out),
        case(100_000, 1_000, "ours", [t100k, t100k + 0.05, t100k - 0.05], [t100k], [38.0], out),
        case(100_000, 1_000, "baseline", [6.0], [6.0], [30.0], out),
        case(1_000_000, 10_000, "ours", w1m, w1m, [rss1m], out),
        case(2_000_000, 20_000, "ours", w2m, w2m, [400.0], out),
    ]


@pytest.mark.parametrize(("t100k", "t1m", "t2m", "rss1m", "failing"), [
    (0.8, 4.0, 8.0, 210.0, []),
    (1.2, 4.0, 8.0, 210.0, ["100,000 GPUs"]),
    (0.8, 11.0, 20.0, 210.0, ["1,000,000 GPUs / 10,000 gangs, placed"]),
    (0.8, 4.0, 8.0, 3000.0, ["peak RSS"]),
    (0.8, 4.0, 9.0, 210.0, ["doubling"]),
    # the machine slowed after the first round: two rounds of three doubled, though the medians are 2.22x apart
    (0.8, [4.0, 5.0, 4.5], [8.0, 10.0, 10.5], 210.0, []),
    (0.8, [4.0, 4.0, 4.0], [8.0, 9.2, 9.0], 210.0, ["doubling"]),
])
def test_scale_rows_give_each_target_its_verdict(t100k: float, t1m: float | list[float], t2m: float | list[float],
                                                 rss1m: float, failing: list[str]) -> None:
    lines, ok = BENCH.rows(_cases(t100k, t1m, t2m, rss1m))
    failed = [line for line in lines if line.endswith("| FAIL |")]
    assert ok == (not failing)
    assert len(failed) == len(failing)
    for fragment, line in zip(failing, failed, strict=True):
        assert fragment in line
    targets = [line for line in lines if not line.endswith("| info |")]
    assert len(targets) == 4  # 100k time, 1M time, 1M memory, doubling
    assert all(line.startswith("| 3. packer") and line.count("|") == 6 for line in lines)
    assert "scan-all-domains BestFit: 6.000 s" in next(line for line in lines if "100,000 GPUs" in line)


def test_scale_cases_run_in_rounds_so_load_changes_reach_every_case(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int, str]] = []

    def fake_measure(gpus: int, gangs: int, algo: str) -> object:
        calls.append((gpus, gangs, algo))
        wall = len(calls) / 10
        out = f'{{"placed": 1, "requested": 2, "hash": "{gpus}"}}'.encode()
        return BENCH.measure_cases.__globals__["Child"](wall, 10.0, wall, out)

    monkeypatch.setitem(BENCH.measure_cases.__globals__, "measure", fake_measure)
    cases = [(10_000, 100), (100_000, 1_000), (1_000_000, 10_000)]
    measured = BENCH.measure_cases(3, cases)
    one_round = [(10_000, 100, "ours"), (10_000, 100, "baseline"), (100_000, 1_000, "ours"),
                 (100_000, 1_000, "baseline"), (1_000_000, 10_000, "ours")]
    assert calls == one_round * 3
    assert [(c.gpus, c.gangs, c.algo) for c in measured] == one_round
    # each case keeps its own runs, one from each round
    assert [c.walls for c in measured][0] == [0.1, 0.6, 1.1]


def test_doubling_is_the_median_of_round_by_round_ratios() -> None:
    lines, _ = BENCH.rows(_cases(0.8, [4.0, 5.0, 4.5], [8.0, 10.0, 10.5], 210.0))
    line = next(line for line in lines if "doubling" in line)
    assert "2.000x, median of 3 rounds (2.000–2.333)" in line
    assert "ratio of the medians 2.222x" in line
