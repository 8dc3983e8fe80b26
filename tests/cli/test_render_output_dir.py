"""``render -o DIR``: one file per workflow, written atomically, and nothing at all on bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from conftest import ROOT, run_cli


def test_output_dir_matches_the_stream_and_failed_renders_write_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "multi-rack-zone", repo)
    out = tmp_path / "out"
    first = run_cli("render", str(repo), "-o", str(out))
    assert first.code == 0 and first.stdout == ""
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.yaml"))
    assert files == ["toporender.yaml", "workflows/dual-model.yaml", "workflows/eval.yaml"]
    streamed = [o for o in yaml.safe_load_all(run_cli("render", str(repo)).stdout)]
    written = [o for f in files for o in yaml.safe_load_all((out / f).read_text())]
    assert written == streamed

    before = {f: (out / f).read_bytes() for f in files}
    mtimes = {f: (out / f).stat().st_mtime_ns for f in files}
    again = run_cli("render", str(repo), "-o", str(out))
    assert again.code == 0 and "wrote" not in again.stderr
    assert {f: (out / f).stat().st_mtime_ns for f in files} == mtimes

    (repo / "workflows" / "eval.yaml").write_text("workflow:\n  name: eval\n  tasks: [\n")
    broken = run_cli("render", str(repo), "-o", str(out))
    assert broken.code == 1
    assert {f: (out / f).read_bytes() for f in files} == before
    assert not [p for p in out.rglob("*") if p.is_file() and p.relative_to(out).as_posix() not in files]
