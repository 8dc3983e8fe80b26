"""Golden files: ``golden/<example>.yaml`` is exactly what ``toporender render examples/<example>`` prints.

A stale golden file fails here; regenerate with ``toporender render examples/<example> > golden/<example>.yaml``
and review the diff.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

EXAMPLES = sorted(p.parent.name for p in (ROOT / "examples").glob("*/toporender.yaml"))


def test_every_example_has_a_golden_file() -> None:
    assert EXAMPLES, "no examples found"
    golden = sorted(p.stem for p in (ROOT / "golden").glob("*.yaml"))
    assert golden == EXAMPLES


@pytest.mark.parametrize("example", EXAMPLES)
def test_golden_file_is_fresh(example: str) -> None:
    result = run_cli("render", str(ROOT / "examples" / example))
    assert result.code == 0, result.stderr
    assert result.stderr == "", f"a bundled example should render cleanly, without warnings:\n{result.stderr}"
    expected = (ROOT / "golden" / f"{example}.yaml").read_text()
    if result.stdout != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), result.stdout.splitlines(True),
                                            f"golden/{example}.yaml", "rendered"))
        pytest.fail(f"golden/{example}.yaml is stale; regenerate it with "
                    f"'toporender render examples/{example} > golden/{example}.yaml'\n{diff}")


@pytest.mark.parametrize("example", EXAMPLES)
def test_render_is_deterministic_across_hash_seeds(example: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    outs = set()
    for seed in ("0", "1", "12345"):
        proc = subprocess.run([sys.executable, "-m", "toporender", "render", str(ROOT / "examples" / example)],
                              capture_output=True, text=True, env={"PYTHONHASHSEED": seed, "PATH": ""}, check=True)
        outs.add(proc.stdout)
    assert len(outs) == 1
