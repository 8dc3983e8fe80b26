"""The workflows of OSMO's own documentation render and pass the output checks.

From OSMO's ``docs/user_guide/resource_pools/scheduling/topology.rst`` (its pool from
``docs/deployment_guide/advanced_config/pool.rst``) and the ComputeDomain group and pod templates of
``docs/deployment_guide/advanced_config/group_template.rst``. The docs elide each task's details with ``...``;
here every task gets the docs' image and a command. ``resources`` sits beside ``workflow:`` as in the docs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli, write_repo

IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"
POOL = {
    "namespace": "osmo",
    "pools": {"my-pool": {"backend": "kai", "topology_keys": [
        {"key": "zone", "label": "topology.kubernetes.io/zone"},
        {"key": "spine", "label": "topology.kubernetes.io/spine"},
        {"key": "rack", "label": "topology.kubernetes.io/rack"},
        {"key": "gpu-clique", "label": "nvidia.com/gpu-clique"}]}},
}


def tasks(spec: dict[str, str | None]) -> list[dict[str, Any]]:
    """Task name -> resource (None: the default resource); the first task leads."""
    out = []
    for i, (name, resource) in enumerate(spec.items()):
        task: dict[str, Any] = {"name": name, "image": IMAGE, "command": ["torchrun", "train.py"]}
        if resource:
            task["resource"] = resource
        if i == 0:
            task["lead"] = True
        out.append(task)
    return out


def req(key: str, group: str | None = None, kind: str | None = None) -> dict[str, str]:
    out = {"key": key}
    if group:
        out["group"] = group
    if kind:
        out["requirementType"] = kind
    return out


SHARDS = {f"model{m}-shard{s}": f"model-{m}" for m in (1, 2) for s in range(1, 5)}
EXAMPLES: dict[str, tuple[dict[str, Any], dict[str, Any], list[str]]] = {
    "single-nvl72-rack": (
        {"name": "single-nvl72-rack", "groups": [{"name": "group1", "tasks": tasks(
            {f"model1-shard{s}": None for s in range(1, 5)})}]},
        {"default": {"gpu": 8, "topology": [req("gpu-clique")]}},
        []),
    "multiple-nvl72-racks": (
        {"name": "multiple-nvl72-racks", "groups": [{"name": "group1", "tasks": tasks(SHARDS)}]},
        {f"model-{m}": {"gpu": 8, "topology": [req("gpu-clique", f"model-{m}-group")]} for m in (1, 2)},
        ["model-1-group", "model-2-group"]),
    "multiple-nvl72-same-zone": (
        {"name": "multiple-nvl72-same-zone", "groups": [{"name": "group1", "tasks": tasks(SHARDS)}]},
        {f"model-{m}": {"gpu": 8, "topology": [req("gpu-clique", f"model-{m}-group"), req("zone", "workflow-group")]}
         for m in (1, 2)},
        ["workflow-group-model-1-group", "workflow-group-model-2-group"]),
    "best-effort-topology": (
        {"name": "best-effort-topology", "groups": [{"name": "group1", "tasks": tasks(SHARDS)}]},
        {f"model-{m}": {"gpu": 8, "topology": [req("rack", f"model-{m}-group", "preferred"),
                                               req("spine", "workflow-group", "preferred")]} for m in (1, 2)},
        ["workflow-group-model-1-group", "workflow-group-model-2-group"]),
    "scoped-group-example": (
        {"name": "scoped-group-example", "groups": [{"name": "group1", "tasks": tasks(
            {"task-1": "rack-a", "task-2": "rack-a", "task-3": "rack-b1", "task-4": "rack-b2"})}]},
        {"rack-a": {"gpu": 8, "topology": [req("zone", "zone-a"), req("rack", "rack-group-1")]},
         "rack-b1": {"gpu": 8, "topology": [req("zone", "zone-b"), req("rack", "rack-group-1")]},
         "rack-b2": {"gpu": 8, "topology": [req("zone", "zone-b"), req("rack", "rack-group-2")]}},
        ["zone-a-rack-group-1", "zone-b", "zone-b-rack-group-1", "zone-b-rack-group-2"]),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_topology_doc_example_renders_valid_output(name: str, tmp_path: Path) -> None:
    workflow, resources, subgroups = EXAMPLES[name]
    repo = write_repo(tmp_path, {
        "toporender.yaml": yaml.safe_dump(POOL, sort_keys=False),
        "workflows/wf.yaml": yaml.safe_dump({"workflow": workflow, "resources": resources}, sort_keys=False),
    })
    result = run_cli("render", "--format", "json", str(repo))
    assert result.code == 0, result.stderr
    (pg,) = [o for o in map(yaml.safe_load, result.stdout.splitlines()) if o["kind"] == "PodGroup"]
    assert [sg["name"] for sg in pg["spec"].get("subGroups", [])] == subgroups
    checked = run_cli("validate", "--output", str(repo))
    assert checked.code == 0, checked.stderr


def test_group_template_doc_example_renders_valid_output(tmp_path: Path) -> None:
    config = {
        "namespace": "osmo",
        "pools": {"my-pool": {"backend": "kai", "common_pod_template": ["use-compute-domain"],
                              "common_group_templates": ["compute-domain"]}},
        "group_templates": {"compute-domain": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
            "metadata": {"name": "compute-domain-{{WF_GROUP_UUID}}"},
            "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {
                "name": "compute-domain-{{WF_GROUP_UUID}}-rct"}}}}},
        "pod_templates": {"use-compute-domain": {"spec": {
            "containers": [{"name": "{{USER_CONTAINER_NAME}}",
                            "resources": {"claims": [{"name": "compute-domain-channel"}]}}],
            "resourceClaims": [{"name": "compute-domain-channel",
                                "resourceClaimTemplateName": "compute-domain-{{WF_GROUP_UUID}}-rct"}]}}},
    }
    workflow = EXAMPLES["single-nvl72-rack"][0]
    resources = {"default": {"gpu": 8}}
    repo = write_repo(tmp_path, {
        "toporender.yaml": yaml.safe_dump(config, sort_keys=False),
        "workflows/wf.yaml": yaml.safe_dump({"workflow": workflow, "resources": resources}, sort_keys=False),
    })
    result = run_cli("render", "--format", "json", str(repo))
    assert result.code == 0, result.stderr
    objects = list(map(yaml.safe_load, result.stdout.splitlines()))
    (cd,) = [o for o in objects if o["kind"] == "ComputeDomain"]
    claim = cd["spec"]["channel"]["resourceClaimTemplate"]["name"]
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 4 and all(p["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == claim for p in pods)
    checked = run_cli("validate", "--output", str(repo))
    assert checked.code == 0, checked.stderr
