"""The pack stage inside render: intended domains on PodGroups and Pods, strictness, pinning,
arrival order from toporender.lock, and backend-independent placement (KAI, Koordinator, Kueue, Volcano)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import ROOT, run_cli, write_repo
from toporender.pipeline import RenderOptions, render_repo

EXAMPLE = ROOT / "examples" / "multi-rack-zone"


def inventory_nodes() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load((EXAMPLE / "inventory" / "nodes.yaml").read_text())
    return {n["name"]: n for n in doc["nodes"]}


def rack_repo(tmp_path: Path, *, pin: str = "none", strict: bool = False, backend: str = "kai",
              workflows: dict[str, str] | None = None) -> Path:
    nodes = []
    for rack in range(2):
        for n in range(4):
            nodes.append({"name": f"r{rack}-n{n}", "gpus": 4,
                          "labels": {"example.com/zone": "z1", "example.com/rack": f"rack{rack}"}})
    nodes[0]["usedGPUs"] = 4
    inventory = yaml.safe_dump({"apiVersion": "toporender.dev/v1alpha1", "kind": "NodeInventory", "nodes": nodes})
    koord = backend == "koordinator"
    config = (f"namespace: ml\ninventory: nodes.yaml\npools:\n  p:\n    backend: {backend}\n    pin: {pin}\n"
              f"    strict: {str(strict).lower()}\n    topology_keys:\n"
              f"    - {{key: zone, label: example.com/zone{', layer: DatacenterLayer' if koord else ''}}}\n"
              f"    - {{key: rack, label: example.com/rack{', layer: BlockLayer' if koord else ''}}}\n")
    files = {"toporender.yaml": config, "nodes.yaml": inventory}
    files.update(workflows or {"workflows/a.yaml": job("a", replicas=2, per_replica=2)})
    return write_repo(tmp_path, files)


def job(name: str, replicas: int, per_replica: int, gpu: int = 4) -> str:
    tasks = "".join(f"    - {{name: r{r}-{i}, resource: rep{r}}}\n"
                    for r in range(replicas) for i in range(per_replica))
    res = "".join(f"    rep{r}:\n      gpu: {gpu}\n      topology:\n      - {{key: rack, group: rep{r}}}\n"
                  f"      - {{key: zone, group: job}}\n" for r in range(replicas))
    return f"workflow:\n  name: {name}\n  groups:\n  - name: g\n    tasks:\n{tasks}  resources:\n{res}"


def intended(objects: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    out = {}
    for pod in (o for o in objects if o["kind"] == "Pod"):
        ann = pod["metadata"]["annotations"]
        out[pod["metadata"]["labels"]["toporender.dev/task"]] = (ann["toporender.dev/intended-domain"],
                                                                  ann["toporender.dev/intended-node"])
    return out


def domains(objects: list[dict[str, Any]]) -> dict[str, tuple[str | None, str | None]]:
    """Like :func:`intended` by pod name, with None for pods of a gang that does not fit."""
    return {p["metadata"]["name"]: (p["metadata"]["annotations"].get(INTENDED_DOMAIN),
                                                            p["metadata"]["annotations"].get(INTENDED_NODE))
            for p in objects if p["kind"] == "Pod"}


INTENDED_DOMAIN, INTENDED_NODE = "toporender.dev/intended-domain", "toporender.dev/intended-node"


def test_example_pods_get_intended_nodes_within_capacity() -> None:
    objects = render_repo(EXAMPLE).objects
    nodes = inventory_nodes()
    used: Counter[str] = Counter()
    for pod in (o for o in objects if o["kind"] == "Pod"):
        ann = pod["metadata"]["annotations"]
        node = nodes[ann["toporender.dev/intended-node"]]
        assert not node.get("unschedulable")
        label, _, value = ann["toporender.dev/intended-domain"].partition("=")
        assert node["labels"][label] == value
        used[node["name"]] += pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    for name, gpus in used.items():
        assert gpus + nodes[name].get("usedGPUs", 0) <= nodes[name]["gpus"]
    [pg] = [o for o in objects
            if o["kind"] == "PodGroup" and o["metadata"]["labels"]["toporender.dev/group"] == "train"]
    placement = json.loads(pg["metadata"]["annotations"]["toporender.dev/placement"])
    zone = placement[""]["topology.kubernetes.io/zone"]
    assert {p["topology.kubernetes.io/zone"] for p in placement.values()} == {zone}
    assert len(pg["metadata"]["annotations"]["toporender.dev/plan-hash"]) == 64


def test_subgroups_stay_in_one_rack_and_the_gang_in_one_zone(tmp_path: Path) -> None:
    objects = render_repo(rack_repo(tmp_path)).objects
    placed = intended(objects)
    assert {placed["r0-0"][0], placed["r0-1"][0]} == {placed["r0-0"][0]}
    assert {placed["r1-0"][0], placed["r1-1"][0]} == {placed["r1-0"][0]}
    assert len({node for _, node in placed.values()}) == 4


def test_unplaceable_gang_warns_and_strict_fails(tmp_path: Path) -> None:
    big = {"workflows/a.yaml": job("big", replicas=1, per_replica=5)}
    repo = rack_repo(tmp_path / "lax", workflows=big)
    result = run_cli("render", str(repo))
    assert result.code == 0
    assert "warning: group 'g' cannot be placed" in result.stderr
    assert "needs 20 GPUs" in result.stderr and "example.com/rack" in result.stderr
    pg = next(o for o in yaml.safe_load_all(result.stdout) if o["kind"] == "PodGroup")
    assert pg["metadata"]["annotations"]["toporender.dev/placement"] == "unplaceable"
    assert "needs 20 GPUs" in pg["metadata"]["annotations"]["toporender.dev/unplaceable-reason"]
    strict = run_cli("render", str(rack_repo(tmp_path / "strict", workflows=big, strict=True)))
    assert strict.code == 1 and strict.stdout == ""
    assert "workflows/a.yaml:4:5: group 'g' cannot be placed" in strict.stderr
    assert run_cli("render", "--no-strict", str(rack_repo(tmp_path / "override", workflows=big, strict=True))).code == 0


@pytest.mark.parametrize("pin", ["soft", "hard"])
def test_pin_adds_node_affinity_to_the_intended_domain(pin: str, tmp_path: Path) -> None:
    objects = render_repo(rack_repo(tmp_path, pin=pin)).objects
    pod = next(o for o in objects if o["kind"] == "Pod")
    domain = pod["metadata"]["annotations"]["toporender.dev/intended-domain"]
    key, _, value = domain.partition("=")
    expr = {"key": key, "operator": "In", "values": [value]}
    affinity = pod["spec"]["affinity"]["nodeAffinity"]
    if pin == "hard":
        assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
            {"matchExpressions": [expr]}]
    else:
        assert affinity["preferredDuringSchedulingIgnoredDuringExecution"] == [
            {"weight": 100, "preference": {"matchExpressions": [expr]}}]


def test_lock_file_keeps_earlier_gangs_in_place_when_a_new_workflow_sorts_first(tmp_path: Path) -> None:
    repo = rack_repo(tmp_path, workflows={"workflows/m.yaml": job("m", replicas=1, per_replica=2)})
    before = intended(render_repo(repo).objects)
    (repo / "toporender.lock").write_text('version: 1\norder:\n- "workflows/m.yaml#g"\n')
    (repo / "workflows" / "a.yaml").write_text(job("a", replicas=1, per_replica=2))
    after = intended(render_repo(repo).objects)
    assert {k: after[k] for k in before} == before


@pytest.mark.parametrize("backend", ["koordinator", "kueue", "volcano"])
def test_every_backend_places_the_same_tasks_in_the_same_domains_as_kai(tmp_path: Path, backend: str) -> None:
    kai = intended(render_repo(rack_repo(tmp_path / "kai", backend="kai")).objects)
    other = intended(render_repo(rack_repo(tmp_path / backend, backend=backend)).objects)
    assert len(kai) == 4 and all(domain for domain, _ in kai.values())
    assert other == kai


def test_intended_domains_identical_for_all_four_backends_with_uneven_gangs(tmp_path: Path) -> None:
    """Several gangs of different shapes, one of them too big for a rack: the packer is the same for all."""
    workflows = {"workflows/a.yaml": job("a", replicas=2, per_replica=2),
                 "workflows/b.yaml": job("b", replicas=1, per_replica=3),
                 "workflows/c.yaml": job("c", replicas=1, per_replica=1, gpu=2)}
    results = {b: domains(render_repo(rack_repo(tmp_path / b, backend=b, workflows=workflows)).objects)
               for b in ("kai", "koordinator", "kueue", "volcano")}
    assert len(results["kai"]) == 8 and None in {d for d, _ in results["kai"].values()}
    assert results["koordinator"] == results["kai"]
    assert results["kueue"] == results["kai"]
    assert results["volcano"] == results["kai"]


def test_inventory_override_and_missing_inventory(tmp_path: Path) -> None:
    repo = rack_repo(tmp_path)
    shutil.copy(repo / "nodes.yaml", repo / "other.yaml")
    assert render_repo(repo, RenderOptions(inventory="other.yaml")).objects == render_repo(repo).objects
    result = run_cli("render", "--inventory", "missing.yaml", str(repo))
    assert result.code == 1 and "inventory file 'missing.yaml' not found" in result.stderr
    escape = run_cli("render", "--inventory", "../nodes.yaml", str(repo))
    assert escape.code == 1 and "must be a path inside the repo" in escape.stderr


@pytest.mark.parametrize("toleration", [
    None,
    "{key: example.com/gpu, operator: Exists, effect: NoSchedule}",
    "{key: example.com/task, operator: Equal, value: '{{ WF_TASK_NAME }}', effect: NoSchedule}",
    "{key: '{{ WF_POD_NAME }}', operator: Exists}",
])
def test_plan_reads_the_demands_the_rendered_pods_have(tmp_path: Path, toleration: str | None) -> None:
    """``toporender plan`` lets tasks of one pod shape share a Pod when their tolerations cannot differ; a
    toleration written with a task's own value must still reach the packer per task."""
    from toporender.build.objects import build_gang
    from toporender.errors import DiagnosticSink
    from toporender.expand.gangs import expand
    from toporender.load.repo import load_repo
    from toporender.placement.stage import gang_demand

    root = rack_repo(tmp_path, workflows={"workflows/a.yaml": job("a", replicas=2, per_replica=3, gpu=1)})
    if toleration:
        config = root / "toporender.yaml"
        config.write_text(config.read_text() + "    common_pod_template: [tol]\npod_templates:\n  tol:\n"
                          f"    spec:\n      tolerations:\n      - {toleration}\n")
    repo = load_repo(root)
    sink = DiagnosticSink()
    (gang,) = expand(repo, sink=sink)
    rendered = gang_demand(gang, build_gang(gang, repo, sink, set())[1])
    planned = gang_demand(gang, build_gang(gang, repo, sink, set(), delivery=False)[1])
    assert not sink.errors
    assert planned == rendered
    assert len({p.tolerations for p in rendered.pods}) == (6 if toleration and "{{" in toleration else 1)
