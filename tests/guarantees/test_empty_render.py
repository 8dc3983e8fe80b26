"""Rendering no workflow at all is an error unless asked for: hosts prune with an empty stream."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, write_repo
from toporender.errors import UserError
from toporender.load.yaml_source import load_text
from toporender.pipeline import render_documents

CONFIG = "namespace: ml\npools:\n  p: {backend: kai}\n"
WORKFLOW = "workflow:\n  name: w\n  tasks:\n  - {name: t, image: x}\n"


@pytest.mark.parametrize("files", [
    {},                                                  # all deleted
    {"workflows/w.json": '{"workflow": {"name": "w"}}'},  # the wrong file type
    {"jobs/w.yaml": WORKFLOW},                           # the wrong folder
])
@pytest.mark.parametrize("command", ["render", "validate", "golden"])
def test_no_workflow_is_an_error_at_the_config(tmp_path: Path, files: dict[str, str], command: str) -> None:
    repo = write_repo(tmp_path, {"toporender.yaml": CONFIG, **files})
    result = run_cli(command, str(repo))
    assert result.code == 1 and result.stdout == ""
    assert result.stderr.startswith("toporender.yaml:1:1: no file of the repo matches 'workflows/**/*.yaml', "
                                    "'workflows/**/*.yml'"), result.stderr
    assert "allow_empty: true" in result.stderr


def test_the_message_points_at_the_workflows_setting(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"toporender.yaml": CONFIG + "workflows: [flows/*.yaml]\n", "jobs/w.yaml": WORKFLOW})
    result = run_cli("render", str(repo))
    assert result.code == 1 and result.stderr.startswith("toporender.yaml:4:1: no file of the repo matches "
                                                         "'flows/*.yaml'"), result.stderr


def test_allow_empty_renders_nothing_on_purpose(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {"toporender.yaml": CONFIG + "allow_empty: true\n"})
    result = run_cli("render", str(repo))
    assert result.code == 0 and result.stdout == ""


def test_no_workflow_item_given_to_the_krm_function_is_an_error() -> None:
    with pytest.raises(UserError, match="no Workflow item was given"):
        render_documents(load_text(CONFIG, "toporender.yaml")[0], [])
    assert render_documents(load_text(CONFIG + "allow_empty: true\n", "toporender.yaml")[0], []).objects == []
