"""``toporender golden``, atomic writes, and the REAL pre-commit running our hook via try-repo."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hostutil import (
    FIXTURE_REPO,
    PROJECT,
    copy_repo,
    example_ids,
    example_repos,
    render_cli,
    require_tool,
    tool_env,
    toporender,
    tree_snapshot,
)

from toporender.emit.atomic import atomic_write, is_temp_name, remove_stale_temps
from toporender.hosts.golden import HEADER, existing_golden


def golden_objects(repo: Path) -> list[dict[str, object]]:
    return [d for f in sorted((repo / "golden").rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]


@pytest.mark.parametrize("example", example_repos(), ids=example_ids())
def test_golden_lifecycle(tmp_path: Path, example: Path) -> None:
    repo = copy_repo(example, tmp_path / "repo")
    first = toporender("golden", str(repo))
    assert first.returncode == 1, first.stderr
    workflows = sorted(p.relative_to(repo).as_posix() for p in (repo / "workflows").rglob("*.y*ml"))
    pool_level = any("toporender.dev/pool" in (o["metadata"].get("labels") or {}) for o in render_cli(repo))
    expected = sorted(workflows + (["toporender.yaml"] if pool_level else []))  # + pool-level objects file
    lines = first.stdout.splitlines()
    uses_inventory = "inventory:" in (repo / "toporender.yaml").read_text()
    lock_lines = [line for line in lines if line.endswith("/toporender.lock")]
    assert lock_lines == ([f"created {repo.as_posix()}/toporender.lock"] if uses_inventory else [])
    golden_lines = [line for line in lines if line not in lock_lines]
    assert sorted(line.split("/golden/", 1)[1] for line in golden_lines) == expected
    assert all(line.startswith("created ") for line in lines)
    assert sorted(map(lambda o: str(o), golden_objects(repo))) == sorted(map(str, render_cli(repo)))
    for wf in workflows:  # one file per workflow, content = that workflow's render
        assert (repo / "golden" / wf).is_file()

    mtimes = {p: p.stat().st_mtime_ns for p in (repo / "golden").rglob("*")}
    time.sleep(0.01)
    second = toporender("golden", str(repo))
    assert second.returncode == 0 and second.stdout == ""
    assert {p: p.stat().st_mtime_ns for p in (repo / "golden").rglob("*")} == mtimes, "unchanged files untouched"
    assert toporender("golden", str(repo), "--check").returncode == 0


def test_update_delete_and_check(tmp_path: Path) -> None:
    repo = copy_repo(FIXTURE_REPO, tmp_path / "repo")
    (repo / "workflows" / "team").mkdir()
    (repo / "workflows" / "team" / "eval.yaml").write_text(
        (repo / "workflows" / "train.yaml").read_text().replace("name: train", "name: eval"))
    assert toporender("golden", str(repo)).returncode == 1

    wf = repo / "workflows" / "train.yaml"
    wf.write_text(wf.read_text().replace("gpu: 4", "gpu: 8"))
    (repo / "workflows" / "team" / "eval.yaml").unlink()
    (repo / "workflows" / "team").rmdir()
    before = tree_snapshot(repo)
    check = toporender("golden", str(repo), "--check")
    assert check.returncode == 1
    assert "--- a/golden/workflows/train.yaml" in check.stdout and "+        nvidia.com/gpu: 8" in check.stdout
    assert "+++ /dev/null" in check.stdout  # the deleted workflow's golden file
    assert "out of date" in check.stderr
    assert tree_snapshot(repo) == before, "--check writes nothing"

    run = toporender("golden", str(repo))
    assert run.returncode == 1
    assert run.stdout.splitlines() == [f"updated {repo}/golden/workflows/train.yaml",
                                       f"deleted {repo}/golden/workflows/team/eval.yaml"]
    assert not (repo / "golden" / "workflows" / "team").exists(), "emptied golden sub-directories are removed"
    assert toporender("golden", str(repo)).returncode == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
@pytest.mark.parametrize("pipe", ["toporender.yaml", "inventory/nodes.yaml"])
@pytest.mark.parametrize("args", [("golden", "--check"), ("golden",), ("render",), ("plan",)])
def test_an_input_that_is_a_named_pipe_is_refused_not_waited_on(tmp_path: Path, pipe: str,
                                                                 args: tuple[str, ...]) -> None:
    """Opening a named pipe for reading waits until someone writes to it: ``golden`` read the config that way and
    hung. Every command refuses the pipe by name, at once."""
    repo = copy_repo(PROJECT / "examples" / "multi-rack-zone", tmp_path / "repo")
    (repo / pipe).unlink()
    os.mkfifo(repo / pipe)
    proc = toporender(*args, str(repo), timeout=60)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    assert "named pipe" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("toporender.yaml:"), proc.stderr


def test_golden_dir_setting_and_errors(tmp_path: Path) -> None:
    repo = copy_repo(FIXTURE_REPO, tmp_path / "repo")
    cfg = repo / "toporender.yaml"
    cfg.write_text(cfg.read_text() + "golden_dir: snapshots/rendered\n")
    (repo / "snapshots" / "rendered").mkdir(parents=True)
    (repo / "snapshots" / "rendered" / "README.md").write_text("not ours\n")
    (repo / "snapshots" / "rendered" / "stale.yaml").write_text(HEADER.format(source="gone.yaml") + "kind: Old\n")
    (repo / "snapshots" / "rendered" / "notes.yaml").write_text("kind: Mine\n")
    proc = toporender("golden", cwd=repo)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == ["created snapshots/rendered/workflows/train.yaml",
                                        "deleted snapshots/rendered/stale.yaml"]
    assert (repo / "snapshots" / "rendered" / "README.md").exists()
    assert (repo / "snapshots" / "rendered" / "notes.yaml").exists(), "a file without the header is never deleted"
    assert "snapshots/rendered/notes.yaml was not written by toporender" in proc.stderr

    cfg.write_text(cfg.read_text().replace("golden_dir: snapshots/rendered", "golden_dir: ../outside"))
    bad = toporender("golden", str(repo))
    assert bad.returncode == 1 and "toporender.yaml" in bad.stderr and "inside" in bad.stderr
    wf = repo / "workflows" / "train.yaml"
    cfg.write_text(cfg.read_text().replace("golden_dir: ../outside", "golden_dir: golden"))
    wf.write_text("workflow: {name: train, groups: []\n")
    before = tree_snapshot(repo)
    broken = toporender("golden", str(repo))
    assert broken.returncode == 1 and "workflows/train.yaml:" in broken.stderr and broken.stdout == ""
    assert "Traceback" not in broken.stderr
    assert tree_snapshot(repo) == before, "a failed render writes and deletes nothing"


WRITER = """
import sys, time
from pathlib import Path
from toporender.emit.atomic import atomic_write

def chunks():
    yield b"NEW-CONTENT-" * 1000
    print("started", flush=True)
    while True:          # the writer is stuck mid-file until it is killed
        time.sleep(0.05)
        yield b"more"

atomic_write(Path(sys.argv[1]), chunks())
"""


def test_killed_writer_leaves_old_file_intact(tmp_path: Path) -> None:
    target = tmp_path / "golden" / "train.yaml"
    target.parent.mkdir()
    atomic_write(target, "old: content\n")
    target.chmod(0o640)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True,
                            env=tool_env())
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    temps = [p for p in target.parent.iterdir() if is_temp_name(p.name)]
    assert temps and temps[0].stat().st_size >= 12000, "the writer really was mid-write"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert target.read_text() == "old: content\n"
    # The leftover temp file is invisible to golden and cleaned up at once: its writer is gone.
    assert existing_golden(tmp_path, "golden") == ([], ["golden/train.yaml"])
    assert remove_stale_temps(target.parent) == temps
    # A completed write replaces the file and keeps its mode.
    atomic_write(target, "new: content\n")
    assert target.read_text() == "new: content\n" and target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in target.parent.iterdir()] == ["train.yaml"]


def test_failed_write_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "f.yaml"
    target.write_text("old\n")

    def boom() -> object:
        yield b"partial"
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, boom())  # type: ignore[arg-type]
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["f.yaml"]


# ---------------------------------------------------------------------------------------------
# The real pre-commit


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = tool_env({"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                    "GIT_COMMITTER_EMAIL": "t@example.com"})
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)


def test_pre_commit_try_repo(tmp_path: Path) -> None:
    pre_commit = require_tool("pre-commit")
    if not (PROJECT / ".git").exists():
        pytest.fail("the project is not a git checkout; pre-commit try-repo needs one")
    example = example_repos()[0]
    repo = copy_repo(example, tmp_path / "wfrepo")
    git(repo, "init", "-q")
    assert toporender("golden", str(repo)).returncode == 1
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "workflows with golden files")
    wf = sorted((repo / "workflows").rglob("*.yaml"))[0]
    text = wf.read_text()
    assert "image:" in text
    wf.write_text(text.replace("image:", "image: changed-", 1).replace("image: changed- ", "image: changed-", 1))
    git(repo, "add", ".")
    golden_file = repo / "golden" / wf.relative_to(repo)
    old_golden = golden_file.read_text()

    env = tool_env({"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PRE_COMMIT_COLOR": "never"})

    def try_repo(*hook: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([pre_commit, "try-repo", str(PROJECT), *hook, "--all-files"],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=900)

    def status(out: str, name: str) -> str:
        line = next(ln for ln in out.splitlines() if ln.startswith(name))
        return line.rsplit(".", 1)[-1].strip()

    first = try_repo()  # both hooks
    assert first.returncode == 1, first.stdout + first.stderr
    assert status(first.stdout, "toporender golden files") == "Failed"
    assert status(first.stdout, "toporender validate") == "Passed", first.stdout
    assert f"updated golden/{wf.relative_to(repo).as_posix()}" in first.stdout
    assert golden_file.read_text() != old_golden and "changed-" in golden_file.read_text()
    git(repo, "add", ".")
    second = try_repo()
    assert second.returncode == 0, second.stdout + second.stderr
    assert status(second.stdout, "toporender golden files") == "Passed"

    # A new workflow only creates an untracked golden file: pre-commit alone would not notice, our exit 1 does.
    new_wf = text.replace("name:", "name: new-", 1).replace("name: new- ", "name: new-", 1)
    (repo / "workflows" / "new.yaml").write_text(new_wf)
    git(repo, "add", ".")
    third = try_repo("toporender-golden")
    assert third.returncode == 1 and "created golden/workflows/new.yaml" in third.stdout

    # A broken workflow: validate fails with the position, golden fails and writes nothing.
    (repo / "workflows" / "new.yaml").write_text(new_wf + "bogus_key: 1\n")
    git(repo, "add", ".")
    before = tree_snapshot(repo / "golden")
    fourth = try_repo()
    assert fourth.returncode == 1
    assert status(fourth.stdout, "toporender validate") == "Failed"
    assert "workflows/new.yaml:" in fourth.stdout and "bogus_key" in fourth.stdout
    assert tree_snapshot(repo / "golden") == before


@pytest.mark.parametrize(("golden_dir", "extra", "words"), [
    ("workflows", "", "holds the workflow folder 'workflows'"),
    ("./workflows", "", "holds the workflow folder 'workflows'"),
    ("workflows/golden", "", "is where the workflow pattern 'workflows/**/*.yaml' looks"),
    ("inventory", "inventory: inventory/nodes.yaml\n", "overlaps the input 'inventory/nodes.yaml'"),
    ("snap", "workflows: ['**/train.yaml']\n", "is where the workflow pattern '**/train.yaml' looks"),
    ("toporender.lock", "", "overlaps the input 'toporender.lock'"),
])
def test_a_golden_dir_that_overlaps_an_input_is_refused_and_nothing_changes(
        tmp_path: Path, golden_dir: str, extra: str, words: str) -> None:
    repo = copy_repo(FIXTURE_REPO, tmp_path / "repo")
    (repo / "inventory").mkdir()
    (repo / "inventory" / "nodes.yaml").write_text("apiVersion: toporender.dev/v1alpha1\nkind: NodeInventory\n"
                                                   "nodes: [{name: n1, gpus: 8, labels: {nvidia.com/gpu.clique: c}}]\n")
    cfg = repo / "toporender.yaml"
    cfg.write_text(cfg.read_text() + f"golden_dir: {golden_dir}\n" + extra)
    before = tree_snapshot(repo)
    proc = toporender("golden", str(repo))
    assert proc.returncode == 1 and proc.stdout == ""
    assert "toporender.yaml:" in proc.stderr and words in proc.stderr, proc.stderr
    assert tree_snapshot(repo) == before


def test_a_killed_golden_run_leaves_no_temp_files_after_the_next(tmp_path: Path) -> None:
    repo = copy_repo(FIXTURE_REPO, tmp_path / "repo")
    assert toporender("golden", str(repo)).returncode == 1
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = repo / "golden" / "workflows" / f".toporender-train.yaml.{dead.stdout.strip()}.abc123.tmp"
    leftover.write_text("half")
    assert toporender("golden", str(repo)).returncode == 0
    assert not leftover.exists()
