"""OSMO workflow fields: rendered where Kubernetes has a meaning for them, refused by name where it has none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli, write_repo
from toporender.load.model_errors import OSMO_UNSUPPORTED
from toporender.load.models import duration_seconds

CONFIG = "namespace: ml\npools:\n  p: {backend: kai}\n"


def repo_with(tmp_path: Path, workflow: dict[str, Any]) -> Path:
    return write_repo(tmp_path, {"toporender.yaml": CONFIG,
                                 "workflows/w.yaml": yaml.safe_dump({"workflow": workflow}, sort_keys=False)})


def task(**fields: Any) -> dict[str, Any]:
    return {"name": "t", "image": "x", **fields}


@pytest.mark.parametrize(("where", "field", "value"), [
    ("task", "inputs", [{"dataset": {"name": "d"}}]),
    ("task", "outputs", [{"url": "s3://b"}]),
    ("task", "credentials", {"s": "x"}),
    ("task", "exitActions", {"RESCHEDULE": "3"}),
    ("task", "privileged", True),
    ("task", "hostNetwork", True),
    ("task", "volumeMounts", ["/data"]),
    ("task", "checkpoint", []),
    ("task", "kpis", []),
    ("group", "barrier", False),
    ("group", "ignoreNonleadStatus", False),
    ("workflow", "backend", "k8s"),
    ("timeout", "queue_timeout", "1h"),
])
def test_osmo_field_without_a_rendering_is_refused_by_name(tmp_path: Path, where: str, field: str,
                                                           value: Any) -> None:
    workflow: dict[str, Any] = {"name": "w", "groups": [{"name": "g", "tasks": [task()]}]}
    if where == "task":
        workflow["groups"][0]["tasks"][0][field] = value
    elif where == "group":
        workflow["groups"][0][field] = value
    elif where == "workflow":
        workflow[field] = value
    else:
        workflow["timeout"] = {field: value}
    result = run_cli("render", str(repo_with(tmp_path, workflow)))
    assert result.code == 1 and result.stdout == ""
    assert result.stderr.startswith("workflows/w.yaml:"), result.stderr
    assert f"OSMO field '{field}' is not supported by toporender: " in result.stderr
    assert "unknown field" not in result.stderr


def test_every_refusal_names_a_field_of_our_models() -> None:
    from toporender.load import models

    for model, field in OSMO_UNSUPPORTED:
        cls = getattr(models, model)
        assert field not in cls.model_fields, (model, field)


@pytest.mark.parametrize(("value", "seconds"), [
    (600, 600), ("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("PT1H30M", 5400), ("P1DT1S", 86401),
])
def test_exec_timeout_is_the_pods_active_deadline(tmp_path: Path, value: Any, seconds: int) -> None:
    assert duration_seconds(value) == seconds
    workflow = {"name": "w", "timeout": {"exec_timeout": value}, "tasks": [task()]}
    result = run_cli("render", "--format", "json", str(repo_with(tmp_path, workflow)))
    assert result.code == 0, result.stderr
    pods = [o for o in map(yaml.safe_load, result.stdout.splitlines()) if o["kind"] == "Pod"]
    assert [p["spec"]["activeDeadlineSeconds"] for p in pods] == [seconds]


@pytest.mark.parametrize("value", [0, -5, "1w", "PT", "P", "10", "1.5h", True])
def test_a_bad_exec_timeout_is_an_input_error(tmp_path: Path, value: Any) -> None:
    workflow = {"name": "w", "timeout": {"exec_timeout": value}, "tasks": [task()]}
    result = run_cli("render", str(repo_with(tmp_path, workflow)))
    assert result.code == 1 and "must be a duration of at least 1 s" in result.stderr, result.stderr


def test_environment_is_the_container_env(tmp_path: Path) -> None:
    workflow = {"name": "w", "tasks": [task(environment={"A": "1", "B": "2"}, env={"B": "2", "C": "3"})]}
    result = run_cli("render", "--format", "json", str(repo_with(tmp_path, workflow)))
    assert result.code == 0, result.stderr
    (pod,) = [o for o in map(yaml.safe_load, result.stdout.splitlines()) if o["kind"] == "Pod"]
    assert pod["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"},
                                                   {"name": "C", "value": "3"}]


def test_environment_and_env_may_not_disagree(tmp_path: Path) -> None:
    workflow = {"name": "w", "tasks": [task(environment={"B": "1"}, env={"B": "2"})]}
    result = run_cli("render", str(repo_with(tmp_path, workflow)))
    assert result.code == 1 and "environment and env give B different values" in result.stderr


def test_nodes_excluded_keep_the_pods_off_those_nodes(tmp_path: Path) -> None:
    workflow = {"name": "w", "groups": [{"name": "g", "tasks": [task(), {"name": "u", "image": "x"}]}],
                "resources": {"default": {"gpu": 1, "nodesExcluded": ["n2", "n1", "n2"]}}}
    result = run_cli("render", "--format", "json", str(repo_with(tmp_path, workflow)))
    assert result.code == 0, result.stderr
    pods = [o for o in map(yaml.safe_load, result.stdout.splitlines()) if o["kind"] == "Pod"]
    assert len(pods) == 2
    for pod in pods:
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n1", "n2"]}]}]


def test_files_become_one_configmap_per_group_mounted_file_by_file(tmp_path: Path) -> None:
    files = [{"path": "/etc/app/config.yaml", "contents": "a: 1\n"},
             {"path": "/opt/blob", "contents": "aGVsbG8=", "base64": True}]
    workflow = {"name": "w", "groups": [{"name": "g", "tasks": [task(files=files), {"name": "u", "image": "x"}]}]}
    repo = repo_with(tmp_path, workflow)
    result = run_cli("render", "--format", "json", str(repo))
    assert result.code == 0, result.stderr
    objects = list(map(yaml.safe_load, result.stdout.splitlines()))
    (cm,) = [o for o in objects if o["kind"] == "ConfigMap"]
    assert list(cm["data"].values()) == ["a: 1\n"] and list(cm["binaryData"].values()) == ["aGVsbG8="]
    pods = {p["metadata"]["name"]: p["spec"] for p in objects if p["kind"] == "Pod"}
    mounts = pods["w-t"]["containers"][0]["volumeMounts"]
    assert [(m["mountPath"], m["readOnly"]) for m in mounts] == [("/etc/app/config.yaml", True), ("/opt/blob", True)]
    assert {m["subPath"] for m in mounts} == set(cm["data"]) | set(cm["binaryData"])
    assert pods["w-t"]["volumes"] == [{"name": "toporender-files", "configMap": {"name": cm["metadata"]["name"]}}]
    assert "volumes" not in pods["w-u"]
    assert run_cli("validate", "--output", str(repo)).code == 0


@pytest.mark.parametrize(("files", "message"), [
    ([{"path": "relative", "contents": "x"}], "files.0.path"),
    ([{"path": "/a", "contents": "x"}, {"path": "/a", "contents": "y"}], "/a is given twice"),
    ([{"path": "/a", "contents": "not base64!", "base64": True}], "not valid base64"),
])
def test_bad_files_are_input_errors(tmp_path: Path, files: list[dict[str, Any]], message: str) -> None:
    result = run_cli("render", str(repo_with(tmp_path, {"name": "w", "tasks": [task(files=files)]})))
    assert result.code == 1 and message in result.stderr, result.stderr
