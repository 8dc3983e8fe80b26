"""A render leaves nothing of its own to the cyclic collector, which the CLI turns off.

With the collector off, whatever a render leaves in a reference cycle stays until the process exits: in the
console and in each of its workers. A recursive closure is such a cycle (the function's cell holds the
function), so the walks that recurse (a group's subgroups, a pod's expression, the packer's searches) break
theirs when they end.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from conftest import ROOT
from toporender.pipeline import render_repo

EXAMPLES = sorted(p.name for p in (ROOT / "examples").iterdir() if (p / "toporender.yaml").is_file())


def _left_by(root: Path) -> list[str]:
    """The functions of toporender that a render of ``root`` leaves in unreachable cycles."""
    render_repo(root)  # modules imported on first use make cycles of their own
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        result = render_repo(root)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = sorted({f"{o.__module__}.{o.__qualname__}" for o in gc.garbage
                       if callable(o) and getattr(o, "__module__", "").startswith("toporender")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert result.objects
    return left


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("example", EXAMPLES)
def test_render_leaves_no_cycles(example: str) -> None:
    assert _left_by(ROOT / "examples" / example) == []
