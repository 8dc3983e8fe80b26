"""KAI backend: the PodGroup spec and the pod links for each shape of topology requirement.

Each case in ``fixtures/kai/cases.yaml`` is rendered through the public pipeline and compared field for field;
every rendered stream must also pass the vendored KAI CRD schemas and admission rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from toporender.build.backends.kai import PODGROUP_ANNOTATION, QUEUE_LABEL, SUBGROUP_LABEL, KaiBackend
from toporender.load.models import PoolConfig
from toporender.load.yaml_source import load_text
from toporender.pipeline import render_documents
from toporender.validation import validate_objects

CASES = yaml.safe_load((Path(__file__).parent / "fixtures" / "kai" / "cases.yaml").read_text())["cases"]
IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"


def render(case: dict[str, Any]) -> list[dict[str, Any]]:
    pool = {"backend": "kai", **case["pool"]}
    config = yaml.safe_dump({"namespace": "ml", "default_pool": "pool-a", "pools": {"pool-a": pool}})
    tasks = [{"image": IMAGE, **t} for t in case["tasks"]]
    workflow = yaml.safe_dump({"workflow": {"name": "wf", "groups": [{"name": "g", "tasks": tasks}],
                                            "resources": case["resources"]}})
    result = render_documents(load_text(config, "toporender.yaml")[0],
                              [load_text(workflow, "workflows/wf.yaml")[0]])
    return result.objects


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_podgroup_spec_and_pod_links(case: dict[str, Any]) -> None:
    objects = render(case)
    (podgroup,) = [o for o in objects if o["kind"] == "PodGroup"]
    assert podgroup["apiVersion"] == "scheduling.run.ai/v2alpha2"
    assert podgroup["spec"] == case["spec"]
    assert podgroup["metadata"]["labels"][QUEUE_LABEL] == case["spec"]["queue"]
    pods = {p["metadata"]["labels"]["toporender.dev/task"]: p for p in objects if p["kind"] == "Pod"}
    assert set(pods) == set(case["pod_subgroups"])
    for task, subgroup in case["pod_subgroups"].items():
        meta = pods[task]["metadata"]
        assert meta["annotations"][PODGROUP_ANNOTATION] == podgroup["metadata"]["name"]
        assert meta["labels"][QUEUE_LABEL] == case["spec"]["queue"]
        assert meta["labels"].get(SUBGROUP_LABEL) == subgroup
        assert pods[task]["spec"]["schedulerName"] == "kai-scheduler"
    version = "v0.14.0" if case["pool"].get("kai_version", "v0.14") == "v0.14" else "main"
    assert validate_objects(objects, kai_version=version) == []


@pytest.mark.parametrize(
    ("pool", "kinds"),
    [
        ({}, ["Queue"]),
        ({"topology_keys": [{"key": "zone", "label": "topology.kubernetes.io/zone"},
                            {"key": "clique", "label": "nvidia.com/gpu.clique"}]}, ["Topology", "Queue"]),
    ],
)
def test_pool_objects(pool: dict[str, Any], kinds: list[str]) -> None:
    objects = KaiBackend().pool_objects("pool-a", PoolConfig.model_validate({"backend": "kai", **pool}), "ml")
    assert [o["kind"] for o in objects] == kinds
    if "Topology" in kinds:
        levels = objects[0]["spec"]["levels"]
        assert levels == [{"nodeLabel": k["label"]} for k in pool["topology_keys"]]
        assert objects[0]["metadata"]["name"] == "pool-a-topology"
    assert objects[-1]["metadata"]["name"] == "pool-a"
    assert validate_objects(objects, kai_version="v0.14.0") == []
