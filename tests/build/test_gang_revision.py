"""A gang's revision hashes what it is rendered from as toporender reads it: lists whose order means nothing
(a resource's topology requirements, its excluded nodes) give one revision in any order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli, write_repo

CONFIG = ("namespace: ml\npools:\n  p:\n    backend: kai\n    topology_keys:\n"
          "    - {key: zone, label: example.com/zone}\n    - {key: rack, label: example.com/rack}\n")


def workflow(topology: str, excluded: str = "[]", gpu: int = 4) -> str:
    return ("workflow:\n  name: w\n  groups:\n  - name: g\n    tasks:\n    - {name: t0, resource: r}\n"
            f"    - {{name: t1, resource: r}}\n  resources:\n    r:\n      gpu: {gpu}\n"
            f"      nodesExcluded: {excluded}\n      topology: {topology}\n")


SORTED = "[{key: rack, group: r}, {key: zone, group: job}]"
REVERSED = "[{key: zone, group: job}, {key: rack, group: r}]"


def revision(tmp_path: Path, text: str) -> str:
    repo = write_repo(tmp_path / "repo", {"toporender.yaml": CONFIG, "workflows/w.yaml": text})
    result = run_cli("render", "--no-cache", "--format", "json", str(repo))
    assert result.code == 0, result.stderr
    pods = [o for o in map(json.loads, result.stdout.splitlines()) if o["kind"] == "Pod"]
    found = {p["metadata"]["annotations"]["toporender.dev/gang-revision"] for p in pods}
    assert len(found) == 1
    return found.pop()


@pytest.mark.parametrize(("text", "same"), [
    (workflow(SORTED, "[n1, n2]"), True),
    (workflow(REVERSED, "[n1, n2]"), True),
    (workflow(SORTED, "[n2, n1, n2]"), True),
    (workflow(REVERSED, "[n2, n1]"), True),
    (workflow(SORTED, "[n1]"), False),
    (workflow(SORTED, "[n1, n2]", gpu=2), False),
    (workflow("[{key: rack, group: r}, {key: zone, group: job, requirementType: preferred}]", "[n1, n2]"), False),
], ids=["as written", "topology reversed", "excluded twice", "both reordered", "excluded fewer", "gpus",
        "requirement type"])
def test_order_that_means_nothing_keeps_the_revision(tmp_path: Path, text: str, same: bool) -> None:
    base = revision(tmp_path / "base", workflow(SORTED, "[n1, n2]"))
    assert (revision(tmp_path / "other", text) == base) is same
