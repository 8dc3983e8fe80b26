"""Bad input: a clear ``path:line:col`` message, exit 1, nothing on stdout, no traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

import toporender.load.models
from conftest import run_cli

INTERNAL_NAMES = sorted(
    name for name, value in vars(toporender.load.models).items()
    if isinstance(value, type) and issubclass(value, BaseModel) and value is not BaseModel)
"""Class names a message must never show: a user writes YAML, not ``ResourceSpec``."""
LEAKS = re.compile(r"\b(" + "|".join(map(re.escape, INTERNAL_NAMES)) + r")\b|Input should|pydantic|Traceback")

CASES = yaml.safe_load((Path(__file__).parent / "fixtures" / "bad_input" / "cases.yaml").read_text())["cases"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    for rel, text in case["files"].items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
    for command in ("render", "validate"):
        result = run_cli(command, str(tmp_path))
        assert result.code == 1, result.stderr
        assert result.stdout == ""
        assert not LEAKS.search(result.stderr), result.stderr
        assert case["expect"] in result.stderr, result.stderr
        assert re.match(r"^[^\s:]+:\d+:\d+: ", result.stderr), "the first line starts with path:line:col"


def test_internal_names_are_known() -> None:
    assert {"ResourceSpec", "TaskSpec", "TopologyRequirement"} <= set(INTERNAL_NAMES)
