"""Kueue backend: the pod group links, TAS annotations and ranks for each shape of topology requirement,
the pool objects, and what it refuses.

Each case in ``fixtures/kueue/cases.yaml`` is rendered through the public pipeline and compared field for field;
every rendered stream must also pass the vendored Kueue CRD schemas and the Kueue admission rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import render_pool_case, run_cli, write_repo
from toporender.build.backends.kueue import GROUP_LABEL, INDEX_LABEL, PREFIX, QUEUE_LABEL, KueueBackend
from toporender.load.models import PoolConfig
from toporender.pipeline import RenderResult
from toporender.validation import validate_objects

CASES = yaml.safe_load((Path(__file__).parent / "fixtures" / "kueue" / "cases.yaml").read_text())["cases"]
IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"


def render(case: dict[str, Any]) -> RenderResult:
    result: RenderResult = render_pool_case("kueue", case, IMAGE)
    return result


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_pod_group_annotations_and_ranks(case: dict[str, Any]) -> None:
    result = render(case)
    objects = result.objects
    assert not [o for o in objects if o["kind"] == "PodGroup"]
    pods = {p["metadata"]["labels"]["toporender.dev/task"]: p for p in objects if p["kind"] == "Pod"}
    assert set(pods) == set(case["index"])
    groups = {p["metadata"]["labels"][GROUP_LABEL] for p in pods.values()}
    assert len(groups) == 1
    for task, index in case["index"].items():
        meta = pods[task]["metadata"]
        kueue = {k: v for k, v in meta["annotations"].items() if k.startswith(PREFIX)}
        assert kueue == case["annotations"], task
        assert meta["labels"][QUEUE_LABEL] == "pool-a"
        assert meta["labels"][INDEX_LABEL] == index, task
        assert "schedulerName" not in pods[task]["spec"]
    messages = [w.message for w in result.warnings]
    assert len(messages) == len(case["warnings"]), messages
    for expected in case["warnings"]:
        assert any(expected in m for m in messages), (expected, messages)
    assert validate_objects(objects, require_namespace=True) == []


def test_pool_objects_chain_topology_flavor_and_local_queue() -> None:
    pool = PoolConfig.model_validate({
        "backend": "kueue", "queue": "team", "queue_settings": {"parent": "research"},
        "node_selector": {"nvidia.com/gpu.product": "H100"},
        "topology_keys": [{"key": "zone", "label": "topology.kubernetes.io/zone"},
                          {"key": "host", "label": "kubernetes.io/hostname"}]})
    topology, flavor, queue = KueueBackend().pool_objects("pool-a", pool, "ml")
    assert topology["apiVersion"] == flavor["apiVersion"] == queue["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert topology["spec"]["levels"] == [{"nodeLabel": "topology.kubernetes.io/zone"},
                                          {"nodeLabel": "kubernetes.io/hostname"}]
    assert flavor["spec"] == {"nodeLabels": {"nvidia.com/gpu.product": "H100"}, "topologyName": "pool-a-topology"}
    assert queue["metadata"] == {"name": "team", "namespace": "ml", "labels": {"toporender.dev/pool": "pool-a"}}
    assert queue["spec"] == {"clusterQueue": "research"}
    assert validate_objects([topology, flavor, queue], require_namespace=True) == []


def test_flavor_without_node_labels_is_what_the_crd_rejects() -> None:
    """The CEL rule the pool check stands in for: a TAS flavor needs nodeLabels."""
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"},
              "spec": {"topologyName": "t"}}
    assert validate_objects([flavor]) != []


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ("    render_pool_objects: true\n    topology_keys:\n    - {key: zone, label: topology.kubernetes.io/zone}\n",
         "toporender.yaml:6:5: pool 'p': a Kueue ResourceFlavor with a topologyName needs at least one node label"),
        ("    topology_keys:\n    - {key: host, label: kubernetes.io/hostname}\n"
         "    - {key: zone, label: topology.kubernetes.io/zone}\n",
         "toporender.yaml:6:7: pool 'p': Kueue's Topology takes kubernetes.io/hostname only as the last level"),
        ("    pin: hard\n", "toporender.yaml:5:5: pool 'p': Kueue picks the domains itself"),
    ],
)
def test_pool_settings_kueue_cannot_honour_are_errors(tmp_path: Path, pool: str, message: str) -> None:
    repo = write_repo(tmp_path, {
        "toporender.yaml": f"namespace: ml\npools:\n  p:\n    backend: kueue\n{pool}",
        "workflows/a.yaml": "workflow:\n  name: a\n  tasks:\n  - {name: t, image: busybox}\n"})
    result = run_cli("render", str(repo))
    assert result.code == 1 and result.stdout == ""
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
