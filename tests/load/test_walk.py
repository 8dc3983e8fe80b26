"""Workflow discovery: each directory once, links that loop or leave the repo, matches that are not files."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT
from toporender.errors import UserError
from toporender.load import walk
from toporender.load.repo import discover

PATTERNS = ["workflows/**/*.yaml", "workflows/**/*.yml"]


def tree(root: Path, files: list[str]) -> Path:
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x: 1\n")
    return root


def test_links_that_loop_are_entered_once(tmp_path: Path) -> None:
    root = tree(tmp_path, ["workflows/a.yaml", "workflows/sub/b.yaml"])
    (root / "workflows" / "self").symlink_to(".")
    (root / "workflows" / "up").symlink_to("..")
    (root / "workflows" / "sub" / "back").symlink_to("../..")
    start = time.monotonic()
    assert discover(root, PATTERNS, set()) == ["workflows/a.yaml", "workflows/sub/b.yaml"]
    assert time.monotonic() - start < 1


def test_a_render_with_looping_links_finishes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["cp", "-r", str(ROOT / "tests" / "hosts" / "fixtures" / "minimal"), str(repo)], check=True)
    (repo / "workflows" / "a").symlink_to(".")
    (repo / "workflows" / "b").symlink_to(".")
    proc = subprocess.run([sys.executable, "-m", "toporender", "render", str(repo)], capture_output=True, text=True,
                          timeout=20)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("kind: Pod\n") == 1


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: os.mkfifo(p), "is a named pipe"),
    (lambda p: p.symlink_to("missing.yaml"), "points nowhere"),
    (lambda p: p.symlink_to("/etc/hostname"), "points outside the repo"),
])
def test_a_match_that_is_not_a_file_is_an_error(tmp_path: Path, make: object, message: str) -> None:
    root = tree(tmp_path, ["workflows/ok.yaml"])
    make(root / "workflows" / "bad.yaml")  # type: ignore[operator]
    with pytest.raises(UserError) as err:
        discover(root, PATTERNS, set())
    (diag,) = err.value.diagnostics
    assert diag.pos is not None and diag.pos.path == "workflows/bad.yaml"
    assert message in diag.message


def test_a_directory_link_out_of_the_repo_is_an_error(tmp_path: Path) -> None:
    outside = tree(tmp_path / "outside", ["w.yaml"])
    root = tree(tmp_path / "repo", ["workflows/ok.yaml"])
    (root / "workflows" / "ext").symlink_to(outside)
    with pytest.raises(UserError) as err:
        discover(root, PATTERNS, set())
    assert "outside the repo" in str(err.value)


def test_the_walk_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tree(tmp_path, [f"workflows/d{i}/w.yaml" for i in range(30)])
    monkeypatch.setattr(walk, "MAX_ENTRIES", 20)
    with pytest.raises(UserError, match="more than 20 entries"):
        discover(root, PATTERNS, set())


names = st.sampled_from(["a", "b.yaml", "c.yml", ".hidden.yaml", "d", "e.yaml.bak", "f.YAML"])


@settings(max_examples=60, deadline=None)
@given(paths=st.lists(st.lists(names, min_size=1, max_size=4), min_size=1, max_size=12),
       pattern=st.sampled_from(["workflows/**/*.yaml", "workflows/*.yaml", "**/*.yml", "workflows/a/b.yaml",
                                "workflows/*/*.y*ml", "*.yaml", "workflows/[ab]*/**/*.yaml"]))
def test_same_files_as_glob_on_plain_trees(tmp_path_factory: pytest.TempPathFactory, paths: list[list[str]],
                                           pattern: str) -> None:
    root = tmp_path_factory.mktemp("t")
    made = set()
    for parts in paths:
        rel = "/".join(["workflows", *parts])
        if any(rel.startswith(m + "/") or m.startswith(rel + "/") or m == rel for m in made):
            continue
        made.add(rel)
        tree(root, [rel])
        (root / rel).write_text("#" * len(rel))
    expected = sorted(h for h in glob.glob(pattern, root_dir=root, recursive=True) if (root / h).is_file())
    found = walk.find(root, [pattern], set())
    assert sorted(found.files) == expected
    assert found.sizes == {rel: (root / rel).stat().st_size for rel in expected}
    assert all(not (root / rel).is_file() for rel in found.problems)
