"""``toporender diff`` over a scripted repo history: each step reports exactly what it changed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from hostutil import PROJECT, tool_env, toporender

EXAMPLE = PROJECT / "examples" / "multi-rack-zone"
ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=tool_env(ENV), check=True, capture_output=True)


def diff(repo: Path, *args: str) -> tuple[int, dict[str, object]]:
    proc = toporender("diff", "--format", "json", *args, cwd=repo)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def test_each_step_of_a_history(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    git(repo, "init", "-q")
    commit(repo, "three workflows")
    assert diff(repo)[1] == {"added": [], "removed": [], "edited": [], "moved": [], "unplaceable": {},
                             "replaced": [], "capacity": []}

    wf = repo / "workflows" / "eval.yaml"
    wf.write_text(wf.read_text().replace("command: [python, eval.py]", "command: [python, eval.py, --fast]"))
    code, report = diff(repo)
    assert code == 0 and report["edited"] == ["eval/evaluate-group"] and not report["added"]
    assert sorted(str(o).split("/")[0] for o in report["replaced"]) == ["Pod", "PodGroup"]  # type: ignore[union-attr]
    commit(repo, "edit args")

    (repo / "workflows" / "zz.yaml").write_text("workflow:\n  name: zz\n  tasks:\n  - name: probe\n"
                                               "    image: busybox\n  resources:\n    default: {gpu: 1}\n")
    code, report = diff(repo)
    assert report["added"] == ["zz/probe-group"] and not report["edited"] and not report["moved"]
    assert report["capacity"], "the new gang takes GPUs from some domain"
    commit(repo, "append")

    wf.unlink()
    code, report = diff(repo)
    assert report["removed"] == ["eval/evaluate-group"] and not report["added"] and not report["edited"]
    commit(repo, "delete")

    zz = repo / "workflows" / "zz.yaml"
    zz.write_text(zz.read_text().replace("workflow:\n", "workflow:\n  run: 2\n"))
    code, report = diff(repo)
    assert report["added"] == ["zz-r2/probe-group"] and report["removed"] == ["zz/probe-group"]


def test_fail_on_gates_and_markdown(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    git(repo, "init", "-q")
    commit(repo, "base")
    (repo / "workflows" / "big.yaml").write_text("workflow:\n  name: big\n  tasks:\n  - name: p\n    image: x\n"
                                                "  resources:\n    default: {gpu: 64}\n")
    code, report = diff(repo, "--fail-on", "unplaceable")
    assert code == 1 and "needs 64 GPUs on one node" in str(report["unplaceable"])
    assert diff(repo, "--fail-on", "moved")[0] == 0
    md = toporender("diff", "--format", "markdown", cwd=repo)
    assert md.stdout.startswith("### toporender diff") and "| added | `big/p-group` |" in md.stdout
    bad = toporender("diff", "no-such-revision", cwd=repo)
    assert bad.returncode == 1 and bad.stdout == "" and "git archive" in bad.stderr
