"""Group templates are identified by kind and name, and their objects carry who and what they belong to."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from toporender.errors import UserError
from toporender.load.yaml_source import load_text
from toporender.pipeline import render_documents

WORKFLOW = "workflow:\n  name: train\n  groups:\n  - name: g\n    tasks:\n    - {name: t, image: x}\n"


def render(extra: dict[str, Any], templates: dict[str, Any]) -> list[dict[str, Any]]:
    config = {"namespace": "ml", **extra,
              "pools": {"p": {"backend": "kai", "common_group_templates": list(templates)}},
              "group_templates": templates}
    result = render_documents(load_text(yaml.safe_dump(config), "toporender.yaml")[0],
                              [load_text(WORKFLOW, "workflows/train.yaml")[0]])
    return [o for o in result.objects if o["kind"] not in ("PodGroup", "Pod", "Service")]


def cd(version: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("channel", {"resourceClaimTemplate": {"name": "imex"}})
    return {"apiVersion": f"resource.nvidia.com/{version}", "kind": "ComputeDomain",
            "metadata": {"name": "cd-{{WF_GROUP_UUID}}"}, "spec": spec}


def test_one_kind_and_name_in_two_versions_is_one_object_with_the_later_version() -> None:
    channel = {"allocationMode": "All", "resourceClaimTemplate": {"name": "imex"}}
    (obj,) = render({}, {"old": cd("v1beta2", numNodes=0, channel={}), "new": cd("v1beta1", channel=channel)})
    assert obj["apiVersion"] == "resource.nvidia.com/v1beta1"
    assert obj["spec"] == {"numNodes": 0, "channel": channel}


def test_an_object_the_cluster_rejects_is_the_templates_error() -> None:
    with pytest.raises(UserError) as err:
        render({}, {"old": cd("v1beta1", numNodes=0), "new": cd("v1beta2", numNodes=1)})
    (diag,) = err.value.diagnostics
    assert diag.pos is not None and diag.pos.path == "toporender.yaml"
    assert diag.message.startswith("group template 'new' renders an object the cluster would reject: ")
    assert "resource.nvidia.com/v1beta2 is not served for ComputeDomain" in diag.message
    assert "bug" not in diag.message


def test_different_kinds_with_one_name_stay_two_objects() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cd-{{WF_GROUP_UUID}}"}, "data": {}}
    assert [o["kind"] for o in render({}, {"cd": cd("v1beta1", numNodes=0), "cm": cm})] == ["ComputeDomain",
                                                                                         "ConfigMap"]


@pytest.mark.parametrize(("extra", "expected", "absent"), [
    ({}, {"toporender.dev/workflow": "train", "toporender.dev/group": "g"},
     ["toporender.dev/submitted-by", "osmo.group_uuid"]),
    ({"submitted_by": "alice@example.com"}, {"toporender.dev/submitted-by": "alice"}, ["osmo.submitted_by"]),
    ({"submitted_by": "alice", "osmo_labels": True},
     {"osmo.workflow_id": "train", "osmo.group_name": "g", "osmo.submitted_by": "alice"}, []),
])
def test_template_objects_carry_the_gangs_labels(extra: dict[str, Any], expected: dict[str, str],
                                                 absent: list[str]) -> None:
    (obj,) = render(extra, {"cd": cd("v1beta1", numNodes=0)})
    labels = obj["metadata"]["labels"]
    assert labels.items() >= expected.items()
    group_uuid = obj["metadata"]["name"].removeprefix("cd-")
    assert labels["toporender.dev/group-uuid"] == group_uuid
    assert len(labels["toporender.dev/workflow-uuid"]) == 36
    if extra.get("osmo_labels"):
        assert labels["osmo.group_uuid"] == group_uuid
        assert labels["osmo.workflow_uuid"] == labels["toporender.dev/workflow-uuid"]
    for key in absent:
        assert key not in labels
