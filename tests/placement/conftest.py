"""Shared helpers: the benchmark module with instance generators, the oracle and the BestFit baseline; what a
search leaves to the cyclic collector."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "placement"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def cyclic_garbage(run: Callable[[], object]) -> list[object]:
    """What the cyclic collector finds after ``run``, the collector paused meanwhile as ``pack`` pauses it: state
    a search left in reference cycles, which a paused collector keeps until it runs again."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        run()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
