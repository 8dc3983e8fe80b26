"""A run key gives every object of one workflow new identities and leaves the others alone."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from conftest import ROOT
from toporender.pipeline import render_repo


def _identity(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def _by_file(repo: Path) -> dict[str, list[dict[str, Any]]]:
    return {f.source: f.objects for f in render_repo(repo).files}


def _set_run(path: Path, run: int | None) -> None:
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("  run:")]
    at = lines.index("workflow:") + 1
    if run is not None:
        lines.insert(at, f"  run: {run}")
    path.write_text("\n".join(lines) + "\n")


def test_bumping_the_run_key_renews_one_workflow_only(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "multi-rack-zone", repo)
    first = sorted((repo / "workflows").glob("*.yaml"))[0]
    before = _by_file(repo)
    _set_run(first, 1)
    assert _by_file(repo) == before, "run: 1 is the default, also for the gang revision"
    _set_run(first, 2)
    after = _by_file(repo)
    rel = first.relative_to(repo).as_posix()
    old_ids = {_identity(o) for o in before[rel]}
    new_ids = {_identity(o) for o in after[rel]}
    assert old_ids.isdisjoint(new_ids), "every object of the re-run has a new name"
    assert all(o["metadata"]["labels"]["toporender.dev/run"] == "2" for o in after[rel]
               if o["kind"] in ("Pod", "PodGroup"))
    for source, objects in before.items():
        if source not in (rel, "toporender.yaml"):
            assert after[source] == objects, source
