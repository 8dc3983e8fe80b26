"""Shared helpers: the benchmark module with instance generators, the oracle and the BestFit baseline."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "placement"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"
