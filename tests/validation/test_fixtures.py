"""Every fixture under fixtures/ validated end to end.

A fixture is a YAML stream. Header comments steer the test:

* ``# options: kai_version=v0.14.0 dra_version=v25.12.0 core=false k8s_minor=1.35 require_namespace=true``
  (``core`` absent: the fixture runs with kubernetes-validate and with the built-in fallback);
* ``# expect: <substring>`` (invalid fixtures): each expected substring must occur in some problem, and every
  problem must contain one of them, so a fixture fails both on a missed rule and on a spurious message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from toporender.validation import validate_objects

HERE = Path(__file__).parent / "fixtures"


def _header(path: Path) -> tuple[dict[str, Any], list[str]]:
    options: dict[str, Any] = {}
    expects: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# options:"):
            for item in line.split(":", 1)[1].split():
                key, value = item.split("=", 1)
                options[key] = {"true": True, "false": False}.get(value, value)
        elif line.startswith("# expect:"):
            expects.append(line.split(":", 1)[1].strip())
    return options, expects


def _cases(kind: str) -> list[Any]:
    cases = []
    for path in sorted((HERE / kind).glob("*.yaml")):
        options, _ = _header(path)
        modes = [options.pop("core")] if "core" in options else [True, False]
        for core in modes:
            cases.append(pytest.param(path, core, id=f"{path.stem}-{'k8s' if core else 'builtin'}"))
    return cases


def _run(path: Path, core: bool) -> list[str]:
    options, _ = _header(path)
    options.pop("core", None)
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    assert docs, f"{path.name} holds no objects"
    return validate_objects(docs, core=core, **options)


@pytest.mark.parametrize(("path", "core"), _cases("valid"))
def test_valid_fixture(path: Path, core: bool) -> None:
    assert _run(path, core) == []


@pytest.mark.parametrize(("path", "core"), _cases("invalid"))
def test_invalid_fixture(path: Path, core: bool) -> None:
    _, expects = _header(path)
    assert expects, f"{path.name} declares no '# expect:' line"
    problems = _run(path, core)
    missing = [e for e in expects if not any(e in p for p in problems)]
    unexpected = [p for p in problems if not any(e in p for e in expects)]
    assert not missing and not unexpected, {"missing": missing, "unexpected": unexpected, "got": problems}


def test_every_fixture_has_a_core_mode_that_ran() -> None:
    assert len(_cases("valid")) >= 8 and len(_cases("invalid")) >= 60
