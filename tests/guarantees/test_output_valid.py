"""Every example and golden file validates against the upstream schemas and admission rules."""

from __future__ import annotations

import pytest
import yaml

from conftest import ROOT, run_cli
from toporender.validation import core_backend, validate_objects

EXAMPLES = sorted(p.parent.name for p in (ROOT / "examples").glob("*/toporender.yaml"))
GOLDEN = sorted((ROOT / "golden").glob("*.yaml"))


@pytest.mark.parametrize("golden", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden_file_is_schema_valid(golden: object) -> None:
    objects = [o for o in yaml.safe_load_all(golden.read_text()) if o is not None]  # type: ignore[attr-defined]
    assert objects
    assert validate_objects(objects, require_namespace=True) == []


@pytest.mark.parametrize("example", EXAMPLES)
def test_validate_output_command(example: str) -> None:
    result = run_cli("validate", "--output", str(ROOT / "examples" / example))
    assert result.code == 0, result.stderr
    assert result.stdout == ""


def test_core_kinds_use_the_kubernetes_schema() -> None:
    """The test extra installs kubernetes-validate, so Pods and Services meet the real Kubernetes schema."""
    assert core_backend().startswith("kubernetes-validate ")
