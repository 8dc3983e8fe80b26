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


def _broken(example: str, kind: str, breaks: object) -> list[str]:
    """``validate --output``'s messages for an example whose first ``kind`` object was damaged after the render."""
    from toporender.load.repo import load_repo
    from toporender.pipeline import check_rendered, render

    repo = load_repo(ROOT / "examples" / example)
    result = render(repo)
    obj = next(o for o in result.objects if o["kind"] == kind)
    breaks(obj)  # type: ignore[operator]
    return [str(d) for d in check_rendered(repo, result)]


def _line_of(path: str, text: str) -> int:
    return next(i for i, line in enumerate((ROOT / path).read_text().splitlines(), 1) if text in line)


def test_validate_output_points_a_pod_problem_at_its_task() -> None:
    def bad_image(pod: dict) -> None:  # type: ignore[type-arg]
        pod["spec"]["containers"][0]["image"] = 5

    [message] = _broken("single-rack", "Pod", bad_image)
    line = _line_of("examples/single-rack/workflows/llama-sft.yaml", "- name: shard-0")
    assert message.startswith(f"workflows/llama-sft.yaml:{line}:7: Pod/"), message
    assert "containers[0].image" in message or "containers.0.image" in message


def test_validate_output_points_a_template_object_at_the_template() -> None:
    def bad_spec(cd: dict) -> None:  # type: ignore[type-arg]
        cd["spec"]["numNodes"] = "two"

    [message] = _broken("nvlink-compute-domain", "ComputeDomain", bad_spec)
    assert message.startswith("toporender.yaml:"), message
    assert "group template" in message and "numNodes" in message
