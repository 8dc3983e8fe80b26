"""Misspelt template fields are refused when the config is read: once per template, at the field's line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli, write_repo
from toporender.build.templates.fields import group_template_fields, pod_template_fields

WORKFLOW = ("workflow:\n  name: w\n  groups:\n  - name: g\n    tasks:\n"
            "    - {name: a, image: x}\n    - {name: b, image: x}\n")
CD = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
      "metadata": {"name": "cd-{{WF_GROUP_UUID}}"},
      "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "cd-{{WF_GROUP_UUID}}-rct"}}}}


@pytest.mark.parametrize(("template", "path", "suggestion"), [
    ({"spec": {"nodeSelectr": {"a": "b"}}}, ("spec", "nodeSelectr"), "nodeSelector"),
    ({"spec": {"containers": [{"name": "{{USER_CONTAINER_NAME}}", "volumeMount": []}]}},
     ("spec", "containers", 0, "volumeMount"), "volumeMounts"),
    ({"spec": {"containers": [{"name": "c", "resources": {"limit": {}}}]}},
     ("spec", "containers", 0, "resources", "limit"), "limits"),
    ({"spec": {"toleration": []}}, ("spec", "toleration"), "tolerations"),
])
def test_pod_template_typos(template: dict[str, Any], path: tuple[Any, ...], suggestion: str) -> None:
    ((where, message),) = pod_template_fields(template)
    assert where == path and f"did you mean '{suggestion}'?" in message


@pytest.mark.parametrize("template", [
    {"spec": {"nodeSelector": {"a": "b"}, "affinity": {"anything": {"goes": 1}}, "securityContext": {"x": 1}}},
    {"spec": {"containers": [{"name": "c", "resources": {"claims": [{"name": "x"}]}, "lifecycle": {}}]}},
    {"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/x"}}], "dnsPolicy": "None"}},
    {"metadata": {"labels": {"a": "b"}}},
])
def test_valid_pod_templates_pass(template: dict[str, Any]) -> None:
    assert pod_template_fields(template) == []


@pytest.mark.parametrize(("template", "path", "words"), [
    ({"spec": {"nodeSelector": {"gpu": True}}}, ("spec", "nodeSelector", "gpu"), "boolean"),
    ({"spec": {"nodeSelector": {"rank": 3}}}, ("spec", "nodeSelector", "rank"), "quote it"),
    ({"spec": {"restartPolicy": "Sometimes"}}, ("spec", "restartPolicy"), "not one of"),
    ({"spec": {"hostNetwork": "yes"}}, ("spec", "hostNetwork"), "wants boolean"),
    ({"spec": {"containers": [{"name": "c", "command": "python train.py"}]}}, ("spec", "containers", 0, "command"),
     "wants array"),
    ({"spec": {"activeDeadlineSeconds": "1h"}}, ("spec", "activeDeadlineSeconds"), "wants integer"),
])
def test_pod_template_values_of_the_wrong_type(template: dict[str, Any], path: tuple[Any, ...], words: str) -> None:
    ((where, message),) = pod_template_fields(template)
    assert where == path and words in message, message


@pytest.mark.parametrize("template", [
    {"spec": {"nodeSelector": {"gpu": "{{ USER_GPU }}"}, "activeDeadlineSeconds": "{{ TASKS|length * 60 }}"}},
    {"spec": {"containers": [{"name": "{{USER_CONTAINER_NAME}}", "command": "{{ COMMAND }}",
                              "resources": {"limits": {"nvidia.com/gpu": 4, "memory": "8Gi"}}}]}},
])
def test_templated_values_stand_for_any_type(template: dict[str, Any]) -> None:
    assert pod_template_fields(template) == []


def test_group_template_value_of_the_wrong_type() -> None:
    bad = {**CD, "spec": {"numNodes": "four", "channel": {"allocationMode": "Some",
                                                          "resourceClaimTemplate": {"name": "x"}}}}
    assert group_template_fields(bad) == [
        (("spec", "numNodes"), "'four' is a string, but the field wants integer"),
        (("spec", "channel", "allocationMode"), "'Some' is not one of 'All', 'Single'"),
    ]


def test_group_template_typo_in_a_crd_kind() -> None:
    typo = {**CD, "spec": {"numNodes": 0, "channel": {"allocationMod": "All",
                                                       "resourceClaimTemplate": {"name": "x"}}}}
    ((where, message),) = group_template_fields(typo)
    assert where == ("spec", "channel", "allocationMod") and "did you mean 'allocationMode'?" in message
    assert group_template_fields(CD) == []
    assert group_template_fields({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
                                  "dataa": {}}) == []  # no schema here for built-in kinds but Pod


def test_a_typo_is_reported_once_at_its_line(tmp_path: Path) -> None:
    config = {"namespace": "ml", "pools": {"p": {"backend": "kai", "common_pod_template": ["t"]}},
              "pod_templates": {"t": {"spec": {"nodeSelectr": {"a": "b"}}}}}
    repo = write_repo(tmp_path, {"toporender.yaml": yaml.safe_dump(config, sort_keys=False),
                                 "workflows/w.yaml": WORKFLOW})
    for command in ("render", "validate"):
        result = run_cli(command, str(repo))
        assert result.code == 1 and result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("toporender.yaml:10:7: pod template 't': spec.nodeSelectr: unknown field "
                                   "'nodeSelectr'; did you mean 'nodeSelector'?"), lines[0]
