"""The import-linter contracts in pyproject.toml hold, and they would catch a lower stage importing a higher one.

The contracts are the pipeline's layers (load < expand < placement < build < emit < pipeline < hosts < cli), a
validation package that imports none of the renderer, and no import cycles between sibling modules. A package and
its own modules are no siblings, so a last test looks for cycles between any two modules with grimp, the graph
library under import-linter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the package under ``project/plugin``, with that project's contracts."""
    env = {**os.environ, "PYTHONPATH": str(project / "plugin")}
    script = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", script, "--no-cache"], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120)


def copy_project(dest: Path) -> Path:
    shutil.copytree(ROOT / "plugin" / "toporender", dest / "plugin" / "toporender",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_contracts_hold() -> None:
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 3 kept, 0 broken." in proc.stdout


@pytest.mark.parametrize(
    ("module", "bad_import", "broken"),
    [
        ("load/repo.py", "from toporender.pipeline import render_repo", "Pipeline stages are layered"),
        ("expand/topology.py", "from toporender.build.pods import base_pod", "Pipeline stages are layered"),
        ("placement/tree.py", "from toporender.cli.guard import guarded", "Pipeline stages are layered"),
        ("validation/_common.py", "from toporender.errors import Diagnostic", "Validation stands apart"),
        ("placement/inventory.py", "from toporender.placement.tree import Tree", "No import cycles"),
    ],
)
def test_a_bad_import_breaks_a_contract(tmp_path: Path, module: str, bad_import: str, broken: str) -> None:
    project = copy_project(tmp_path)
    path = project / "plugin" / "toporender" / module
    path.write_text(path.read_text() + f"\n{bad_import}  # noqa\n")
    proc = lint_imports(project)
    assert proc.returncode != 0, proc.stdout
    report = proc.stdout.split("Broken contracts", 1)[-1]
    assert broken in report, proc.stdout


def module_cycles(project: Path) -> list[list[str]]:
    """Groups of modules that import each other in a ring (lazy imports inside functions included)."""
    script = """
import json, sys
import grimp
graph = grimp.build_graph("toporender", cache_dir=None)
modules = sorted(graph.modules)
edges = {m: sorted(set(graph.find_modules_directly_imported_by(m)) & set(modules)) for m in modules}
index, low, stack, on, found = {}, {}, [], set(), []
def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        ring = []
        while True:
            w = stack.pop()
            on.discard(w)
            ring.append(w)
            if w == v:
                break
        if len(ring) > 1:
            found.append(sorted(ring))
sys.setrecursionlimit(10_000)
for m in modules:
    if m not in index:
        visit(m)
print(json.dumps(sorted(found)))
"""
    env = {**os.environ, "PYTHONPATH": str(project / "plugin")}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def test_no_module_imports_itself_through_others(tmp_path: Path) -> None:
    assert module_cycles(ROOT) == []
    project = copy_project(tmp_path)
    path = project / "plugin" / "toporender" / "build" / "backends" / "interface.py"
    path.write_text(path.read_text() + "\nfrom toporender.build.backends import backend_for  # noqa\n")
    planted = {"toporender.build.backends", "toporender.build.backends.interface"}
    assert any(planted <= set(ring) for ring in module_cycles(project))
