"""Every install and usage command the docs promise runs as written, in a fresh copy of the repo.

A shell block preceded by ``<!-- runnable -->`` (optionally ``<!-- runnable: prints "TEXT" -->``) runs with
``bash -euo pipefail`` in a temporary copy of the repo's tracked files, with this interpreter's ``bin``
directory first on PATH (so ``toporender`` is the one under test) and must exit 0 (and print TEXT). A block
that installs anything must be marked either runnable or ``<!-- not runnable: REASON -->``, so no install
instruction goes untested by accident. The README's test command is what ``.ci/run`` runs, so CI runs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
MARK = re.compile(r"<!--\s*(runnable|not runnable)(?::\s*(.*?))?\s*-->\s*\n$")
SHELLS = {"sh", "bash", "shell", "console"}


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    lang: str
    code: str
    mark: str | None
    note: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _tracked() -> list[str]:
    proc = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        return []
    return sorted({p for p in proc.stdout.split("\0") if p})


def _blocks() -> list[Block]:
    docs = sorted(p for p in _tracked() if p.endswith(".md")) or ["README.md"]
    out = []
    for doc in docs:
        text = (ROOT / doc).read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            before = text[max(0, m.start() - 300):m.start()]
            mark = MARK.search(before)
            out.append(Block(doc, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2),
                             mark.group(1) if mark else None, (mark.group(2) or "") if mark else ""))
    return out


BLOCKS = _blocks()
RUNNABLE = [b for b in BLOCKS if b.mark == "runnable"]


def test_the_quick_start_and_the_install_blocks_are_runnable() -> None:
    readme = [b for b in RUNNABLE if b.doc == "README.md"]
    assert readme and "pip install -e ." in readme[0].code, "the README's first command is a runnable quick start"
    assert any(b.doc == "kustomize/README.md" and "pip install" in b.code for b in RUNNABLE)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in SHELLS], ids=lambda b: b.id)
def test_every_install_block_is_marked(block: Block) -> None:
    if re.search(r"\bpip install\b", block.code):
        assert block.mark is not None, f"{block.id}: mark the block <!-- runnable --> or <!-- not runnable: why -->"
    if block.mark == "not runnable":
        assert block.note, f"{block.id}: say why the block is not runnable"


def test_the_readme_test_command_is_what_ci_runs() -> None:
    [block] = [b for b in BLOCKS if b.doc == "README.md" and b.note.startswith("run by .ci/run")]
    command = block.code.strip()
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()


README_MAX_BYTES = 12_000
"""The README is for users: a quick start, concepts, commands and the latest figures; diaries go elsewhere."""


def test_the_readme_stays_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, f"README.md has {size} bytes; move detail to docs/ or benchmarks/LOG.md"


def _copy_of_repo(dest: Path) -> Path:
    for rel in _tracked():
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_runnable_block(block: Block, tmp_path: Path) -> None:
    if not _tracked():
        pytest.skip("not a git checkout: the docs test copies the tracked files")
    for tool in re.findall(r"^\s*(kpt|kubectl|pre-commit)\b", block.code, re.M):
        if shutil.which(tool) is None and os.environ.get("CI") != "true":
            pytest.skip(f"{tool} is not installed")
    repo = _copy_of_repo(tmp_path / "toporender")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPORENDER_", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"{block.id} failed:\n{block.code}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    expect = re.fullmatch(r'prints "(.*)"', block.note)
    if expect:
        assert expect.group(1) in proc.stdout, f"{block.id} should print {expect.group(1)!r}:\n{proc.stdout[-2000:]}"
