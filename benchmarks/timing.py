"""What every ``bench.py`` shares: a figure with its range, a table row, a verdict, compiled bytecode.

Not a benchmark itself (``benchmarks/run.py`` runs folders only); a ``bench.py`` puts this folder on
``sys.path`` and imports it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass
class Figure:
    samples: list[float]
    unit: str

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def text(self) -> str:
        fmt = "{:.3f}" if self.unit == "s" else "{:.0f}"
        lo, hi = min(self.samples), max(self.samples)
        return f"{fmt.format(self.median)} {self.unit} ({fmt.format(lo)}–{fmt.format(hi)})"


def row(target: str, measured: str, baseline: str, ratio: str, result: str) -> str:
    return f"| {target} | {measured} | {baseline} | {ratio} | {result} |"


def verdict(value: float, limit: float) -> str:
    return "pass" if value <= limit else "FAIL"


def precompile() -> None:
    """Give the installed package its bytecode, as a wheel install or the warm-up run would.

    Python caches compiled modules after their first import, except where PYTHONDONTWRITEBYTECODE
    is set (as in some CI images); an editable install there would recompile all of toporender in
    every timed run, a cost no installed copy pays.
    """
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("toporender")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)
