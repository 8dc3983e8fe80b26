"""A workflow repo's history, step by step, as a platform team lives it: commit 1 with three workflows, an
edit of one task's args, an appended workflow, a deletion, a run-key bump. At each step the golden diff
(``toporender golden``) holds only what the step changes, ``toporender diff`` reports exactly that, and an
imitation of Argo CD's apply (``argoapply``) syncs it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from argoapply import Cluster
from hostutil import PROJECT, tool_env, toporender

from toporender.pipeline import render_repo

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com"}
THIRD = ("workflow:\n  name: probe\n  tasks:\n  - name: check\n    image: busybox\n  resources:\n"
         "    default: {gpu: 1}\n")
PLACEMENT_KEYS = ("toporender.dev/intended-", "toporender.dev/placement:", "toporender.dev/plan-hash:")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=tool_env(ENV), check=True, capture_output=True,
                          text=True).stdout


def step(repo: Path, cluster: Cluster) -> tuple[dict[str, object], dict[str, list[str]]]:
    """Run golden, diff and a sync for the working tree; commit it. Returns the diff report and the golden
    files' changed lines (placement annotations apart) by file."""
    report = json.loads(toporender("diff", "--format", "json", cwd=repo).stdout)
    toporender("golden", cwd=repo)
    git(repo, "add", "-A")
    changed: dict[str, list[str]] = {}
    for line in git(repo, "diff", "--cached", "-U0", "--", "golden").splitlines():
        if line.startswith("+++ b/") or line.startswith("--- a/"):
            name = line[6:]
            changed.setdefault(name, [])
        elif line[:1] in "+-" and not line.startswith(("+++", "---")):
            if not any(k in line for k in PLACEMENT_KEYS):
                changed.setdefault(name, []).append(line)
    sync = cluster.sync(render_repo(repo).objects)
    assert sync.ok, sync.errors
    git(repo, "commit", "-qm", "step", "--allow-empty")
    return report, {k: v for k, v in changed.items() if v}


def test_a_repo_history(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(PROJECT / "examples" / "multi-rack-zone", repo)
    (repo / "workflows" / "probe.yaml").write_text(THIRD)
    git(repo, "init", "-q")
    toporender("golden", cwd=repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "commit 1: three workflows")
    cluster = Cluster()
    assert cluster.sync(render_repo(repo).objects).ok

    eval_wf = repo / "workflows" / "eval.yaml"
    eval_wf.write_text(eval_wf.read_text().replace("command: [python, eval.py]",
                                                   "command: [python, eval.py, --fast]"))
    report, golden = step(repo, cluster)
    assert report["edited"] == ["eval/evaluate-group"] and not report["added"] and not report["removed"]
    assert set(golden) == {"golden/workflows/eval.yaml"}

    (repo / "workflows" / "zz-append.yaml").write_text(THIRD.replace("name: probe", "name: zz-append"))
    report, golden = step(repo, cluster)
    assert report["added"] == ["zz-append/check-group"] and not report["edited"] and not report["removed"]
    assert set(golden) == {"golden/workflows/zz-append.yaml"}

    (repo / "workflows" / "probe.yaml").unlink()
    report, golden = step(repo, cluster)
    assert report["removed"] == ["probe/check-group"] and not report["edited"] and not report["added"]
    assert set(golden) == {"golden/workflows/probe.yaml"}

    zz = repo / "workflows" / "zz-append.yaml"
    zz.write_text(zz.read_text().replace("workflow:\n", "workflow:\n  run: 2\n"))
    report, golden = step(repo, cluster)
    assert report["added"] == ["zz-append-r2/check-group"] and report["removed"] == ["zz-append/check-group"]
    assert set(golden) == {"golden/workflows/zz-append.yaml"}
