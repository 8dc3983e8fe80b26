"""Bad input: a clear ``path:line:col`` message, exit 1, nothing on stdout, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import run_cli

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
        assert "Traceback" not in result.stderr
        assert case["expect"] in result.stderr, result.stderr
