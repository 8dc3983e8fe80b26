"""A workflow repo over its life, synced by an imitation of Argo CD's apply step (``argoapply``).

Edits replace the edited gang as a whole (``on_change: replace``, the default) and nothing else; with
``on_change: keep`` an edited Pod fails to sync, as in Argo CD; appending, deleting and re-running a workflow
touch only that workflow's objects, and the golden diff of each step holds only what changed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from argoapply import Cluster, identity
from hostutil import PROJECT

from toporender.emit.stream import dump_yaml
from toporender.pipeline import render_repo

EXAMPLE = PROJECT / "examples" / "multi-rack-zone"


def _render(repo: Path) -> tuple[list[dict[str, object]], dict[str, str]]:
    result = render_repo(repo)
    return result.objects, {f.source: dump_yaml(f.objects) for f in result.files}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _changed_lines(old: str, new: str) -> list[str]:
    import difflib

    return [ln for ln in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def _placement_line(line: str) -> bool:
    return any(key in line for key in ("toporender.dev/intended-", "toporender.dev/placement:",
                                       "toporender.dev/plan-hash:"))


def _gang_of(obj: dict[str, object]) -> tuple[str, str]:
    labels = obj["metadata"].get("labels", {})  # type: ignore[attr-defined]
    return labels.get("toporender.dev/workflow", ""), labels.get("toporender.dev/group", "")


def test_a_repo_history_syncs_step_by_step(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    cluster = Cluster()

    objects, files = _render(repo)
    first = cluster.sync(objects)
    assert first.ok and len(first.created) == len(objects)

    # 2. one task's args change: its gang is replaced as a whole, nothing else is touched
    _edit(repo / "workflows" / "eval.yaml", "command: [python, eval.py]", "command: [python, eval.py, --fast]")
    objects2, files2 = _render(repo)
    assert {k for k in files2 if files2[k] != files[k]} == {"workflows/eval.yaml"}
    second = cluster.sync(objects2)
    assert second.ok, second.errors
    touched = {k for k in second.replaced + second.updated + second.created}
    eval_objects = {identity(o) for o in objects2 if _gang_of(o)[0] == "eval"}
    assert touched == {k for k in eval_objects if k[1] != "Service"}, "the edited gang, and only it, is replaced"

    # 3. a workflow is appended: only its objects are created
    (repo / "workflows" / "zz-probe.yaml").write_text(
        "workflow:\n  name: zz-probe\n  tasks:\n  - name: probe\n    image: busybox\n"
        "  resources:\n    default: {gpu: 1}\n")
    objects3, files3 = _render(repo)
    assert {k for k in files3 if files3.get(k) != files2.get(k)} == {"workflows/zz-probe.yaml"}
    third = cluster.sync(objects3)
    assert third.ok and not third.replaced and not third.updated
    assert {k[3] for k in third.created} >= {"zz-probe-probe"}

    # 4. a workflow is deleted: its objects are pruned, no other object changes
    (repo / "workflows" / "eval.yaml").unlink()
    objects4, files4 = _render(repo)
    fourth = cluster.sync(objects4)
    assert fourth.ok and not fourth.replaced and not fourth.updated and not fourth.created
    assert {k for k in fourth.pruned} == eval_objects
    # the freed GPUs may move later gangs' intended placement: only those annotations change elsewhere
    for source in files4:
        changed = [ln for ln in _changed_lines(files3[source], files4[source]) if not _placement_line(ln)]
        assert not changed, (source, changed)

    # 5. the run key is bumped: the workflow's objects are new, the old ones pruned, the others untouched
    _edit(repo / "workflows" / "zz-probe.yaml", "workflow:\n", "workflow:\n  run: 2\n")
    objects5, _ = _render(repo)
    fifth = cluster.sync(objects5)
    assert fifth.ok and not fifth.replaced and not fifth.updated
    assert {k[3] for k in fifth.created} >= {"zz-probe-r2-probe"}
    assert {k[3] for k in fifth.pruned} >= {"zz-probe-probe"}


def test_keep_leaves_an_edited_pod_out_of_sync(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    _edit(repo / "toporender.yaml", "    backend: kai\n", "    backend: kai\n    on_change: keep\n")
    cluster = Cluster()
    assert cluster.sync(_render(repo)[0]).ok
    _edit(repo / "workflows" / "eval.yaml", "command: [python, eval.py]", "command: [python, eval.py, --fast]")
    result = cluster.sync(_render(repo)[0])
    assert not result.ok
    assert "pod updates may not change fields other than" in result.errors[0]
