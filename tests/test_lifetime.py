"""What the console script holds until it exits (``toporender.lifetime``), and that nobody else holds anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from toporender import lifetime
from toporender.pipeline import render_repo

EXAMPLE = ROOT / "examples" / "nvlink-compute-domain"


def test_library_renders_hold_nothing() -> None:
    """Hosts and tests render many times in one process: their memory must be freed as usual."""
    assert lifetime._held is None
    render_repo(EXAMPLE)
    assert lifetime._held is None


def test_holding_keeps_the_pipeline_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifetime, "_held", None)
    lifetime.hold_until_exit()
    result = render_repo(EXAMPLE)
    held = lifetime._held
    assert held is not None
    kinds = {type(o).__name__ for o in held}
    assert {"Repo", "list"} <= kinds
    rendered = {id(o) for o in result.objects}
    in_built = {id(o) for built in held if isinstance(built, list) for entry in built if isinstance(entry, tuple)
                for objects in entry[1:] for o in objects}
    assert rendered <= in_built


def test_console_script_output_is_the_library_output(tmp_path: Path) -> None:
    """The console script holds its data and ends with os._exit; what it writes is still everything."""
    out = subprocess.run([sys.executable, "-c", "from toporender.cli import main; main()", "render", "--format",
                          "json", str(EXAMPLE)], capture_output=True, check=True).stdout
    from toporender.emit.stream import dump_json

    assert out.decode() == dump_json(render_repo(EXAMPLE).objects)
