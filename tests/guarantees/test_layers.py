"""The import-linter contracts in pyproject.toml hold, and they would catch a lower stage importing a higher one.

The contracts are the pipeline's layers (load < expand < placement < build < emit < pipeline < hosts < cli), a
validation package that imports none of the renderer, and no import cycles between sibling modules.
"""

from __future__ import annotations

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
