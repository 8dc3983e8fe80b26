"""Pods by task shape (``toporender.build.pod_shapes``): exactly the general path's output, or the general path itself.

Every case renders a repo twice, once as the CLI does and once with the shape builder switched off, and
compares the JSON text (so key order counts too), the warnings and the errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from conftest import ROOT
from toporender.build import pod_shapes as podshape
from toporender.build.backends import backend_for
from toporender.build.templates.apply import group_variables
from toporender.errors import DiagnosticSink, UserError
from toporender.expand.gangs import expand
from toporender.load.models import ResourceSpec, TaskSpec
from toporender.load.repo import load_config, load_workflow
from toporender.load.yaml_source import load_text
from toporender.pipeline import Repo, render_documents, render_repo

CASES = yaml.safe_load((Path(__file__).resolve().parent / "fixtures" / "podshape" / "cases.yaml").read_text())


def _config(templates: Any) -> str:
    """A repo config whose pool applies ``templates`` (one, or a list in order)."""
    templates = templates if isinstance(templates, list) else [templates]
    return yaml.safe_dump({
        "namespace": "ns",
        "submitted_by": "ci",
        "pools": {"p": {"topology_keys": [{"key": "rack", "label": "example.com/rack"}],
                        "node_selector": {"example.com/pool": "p"},
                        "common_pod_template": [f"t{i}" for i in range(len(templates))]}},
        "pod_templates": {f"t{i}": t for i, t in enumerate(templates)},
    }, sort_keys=False)


def _workflow(tasks: list[dict[str, Any]]) -> str:
    return yaml.safe_dump({
        "workflow": {"name": "wf", "groups": [{"name": "g", "tasks": tasks}],
                     "resources": {"default": {"cpu": 2, "gpu": 1, "memory": "8Gi",
                                               "topology": [{"key": "rack", "group": "a"}]},
                                   "other": {"cpu": 2, "gpu": 1, "memory": "8Gi",
                                             "topology": [{"key": "rack", "group": "b"}]}}},
    }, sort_keys=False)


TASKS = [
    {"name": "lead", "lead": True, "image": "img:1", "args": ["--rank=0"], "env": {"RANK": "0"}},
    {"name": "w1", "image": "img:1", "args": ["--rank=1"], "env": {"RANK": "1"}},
    {"name": "w_2", "image": "img:1", "args": ["--rank=2"], "env": {"RANK": "2"}, "resource": "other"},
    {"name": "W3", "image": "img:1", "args": ["--rank=3"], "env": {"RANK": "3"}},
]


def _outcome(config: str, workflow: str) -> tuple[str, list[str]]:
    """The rendered objects as JSON text and the messages, or the error messages."""
    try:
        result = render_documents(load_text(config, "toporender.yaml")[0], [load_text(workflow, "workflows/w.yaml")[0]])
    except UserError as err:
        return "error", [str(d) for d in err.diagnostics]
    return json.dumps(result.objects), [str(w) for w in result.warnings]


def _general_path_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch the shape builder off: every pod is built the general way."""
    monkeypatch.setattr(podshape.PodShapes, "pod", lambda self, index: None)


def _both(config: str, workflow: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    shaped = _outcome(config, workflow)
    with monkeypatch.context() as m:
        _general_path_only(m)
        general = _outcome(config, workflow)
    return shaped, general


def _shape_of(templates: Any) -> Any:
    """Build the shape of the second task directly: a PodShape, or the Undecided raised."""
    config = load_text(_config(templates), "toporender.yaml")[0]
    workflow = load_text(_workflow(TASKS), "workflows/w.yaml")[0]
    cfg = load_config(config)
    repo = Repo(None, config, cfg, (load_workflow(workflow),))
    gang = expand(repo, sink=DiagnosticSink())[0]
    objects = backend_for(gang.pool).render_gang(gang)
    try:
        return podshape.build_shape(gang, 1, cfg, objects.scheduler_name, objects.pod_labels["w1"],
                                    objects.pod_annotations["w1"], lambda: group_variables(gang, cfg))
    except podshape.Undecided as exc:
        return exc


@pytest.mark.parametrize("name", sorted(CASES["decided"]))
def test_decided_shape_renders_what_the_general_path_renders(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    template = CASES["decided"][name]
    assert isinstance(_shape_of(template), podshape.PodShape)
    shaped, general = _both(_config(template), _workflow(TASKS), monkeypatch)
    assert shaped == general
    assert shaped[0] != "error"


@pytest.mark.parametrize("name", sorted(CASES["undecided"]))
def test_undecided_shape_falls_back_to_the_general_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES["undecided"][name]
    templates = case.get("templates", case.get("template"))
    outcome = _shape_of(templates)
    assert isinstance(outcome, podshape.Undecided)
    assert case["reason"] in str(outcome)
    shaped, general = _both(_config(templates), _workflow(TASKS), monkeypatch)
    assert shaped == general


@pytest.mark.parametrize(("value", "reason"), [
    ((1, 2), "not a plain YAML value"),
    ({1, 2}, "not a plain YAML value"),
    ([[[[0]]]] * 1, None),
    ({"k": [{"k": [{"k": [{"k": [{"k": [{"k": [0]}]}]}]}]}]}, None),
])
def test_compile_shape_accepts_plain_values_only(value: Any, reason: str | None) -> None:
    """Loaded YAML holds nothing else, but a value from elsewhere must not be shared between pods unseen."""
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"x": value}}
    if reason is None:
        shape = podshape._compile_shape(pod)
        built = shape.build(shape.constants, {}, None, {}, {}, None)
        assert built == pod
        assert built["spec"]["x"] is not value
    else:
        with pytest.raises(podshape.Undecided, match=reason):
            podshape._compile_shape(pod)


def test_compile_shape_refuses_what_one_expression_cannot_hold() -> None:
    deep: Any = 0
    for _ in range(podshape._MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(podshape.Undecided, match="too large or too deep"):
        podshape._compile_shape({"spec": deep})
    with pytest.raises(podshape.Undecided, match="too large or too deep"):
        podshape._compile_shape({"spec": list(range(podshape._MAX_NODES + 1))})


def test_shape_key_covers_every_task_and_resource_field() -> None:
    """A new TaskSpec or ResourceSpec field must be added to ``shape_key`` (or said to reach pods only as a slot
    or through the backend's labels) before pods can depend on it."""
    # environment is folded into env by the model; a task with files is always built the general way
    assert set(TaskSpec.model_fields) == {"name", "resource", "image", "command", "args", "env", "environment",
                                          "lead", "files"}
    assert set(ResourceSpec.model_fields) == {"cpu", "gpu", "memory", "storage", "platform", "nodesExcluded",
                                              "topology"}


def test_benchmark_shaped_repo_is_built_by_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example with a ComputeDomain builds its workers by shape, and that gives the general path's bytes."""
    calls: list[int] = []
    real = podshape.build_shape

    def counting(*args: Any, **kwargs: Any) -> Any:
        shape = real(*args, **kwargs)
        calls.append(1)
        return shape

    monkeypatch.setattr(podshape, "build_shape", counting)
    shaped = json.dumps(render_repo(ROOT / "examples" / "nvlink-compute-domain").objects)
    assert calls
    _general_path_only(monkeypatch)
    assert json.dumps(render_repo(ROOT / "examples" / "nvlink-compute-domain").objects) == shaped


# Generated templates and tasks: the shape builder must either decide exactly or give up.
VALUES = st.sampled_from([
    "plain", "", "x{y", 7, 1.5, True, None, "{{WF_GROUP_UUID}}", "{{ USER_CONTAINER_NAME }}", "{{WF_TASK_NAME}}",
    "a-{{WF_POD_NAME}}-{{WF_GROUP_NAME}}", "{{ TASKS|length }}", "{{ WF_TASK_NAME|upper }}", "{{ MISSING }}",
    "{{USER_GPU}}", "{{WF_HOSTNAME}}", "{{ WF_TASK_UUID }}",
])
NAMES = st.sampled_from(["{{USER_CONTAINER_NAME}}", "{{WF_TASK_NAME}}", "sidecar", "w1", "lead", "{{WF_HOSTNAME}}"])
LABEL_KEYS = st.sampled_from(["team", "app", "toporender.dev/task", "kai.scheduler/queue", "example.com/x"])
CONTAINERS = st.lists(st.fixed_dictionaries({"name": NAMES}, optional={
    "image": VALUES, "args": st.lists(VALUES, max_size=2),
    "env": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["RANK", "A", "{{WF_TASK_NAME}}"]),
                                           "value": VALUES}), max_size=2),
    "resources": st.fixed_dictionaries({"claims": st.lists(st.fixed_dictionaries({"name": NAMES}), max_size=2)}),
}), max_size=2)
SPECS = st.fixed_dictionaries({}, optional={
    "containers": CONTAINERS,
    "tolerations": st.lists(st.fixed_dictionaries({"key": VALUES, "operator": st.just("Exists")}), max_size=2),
    "nodeSelector": st.none() | st.dictionaries(st.sampled_from(["a", "b"]), VALUES, max_size=2),
    "hostname": VALUES,
    "restartPolicy": st.sampled_from(["Never", "OnFailure"]),
})
TEMPLATES = st.fixed_dictionaries({}, optional={
    "metadata": st.fixed_dictionaries({}, optional={
        "labels": st.dictionaries(LABEL_KEYS, VALUES, max_size=2),
        "annotations": st.dictionaries(LABEL_KEYS, VALUES, max_size=2),
    }),
    "spec": SPECS,
})
TASK_LISTS = st.lists(st.fixed_dictionaries({
    "name": st.sampled_from(["a", "b_c", "B-d", "d", "e", "f"]),
    "args": st.lists(st.sampled_from(["x", "{{WF_TASK_NAME}}", "--r=1"]), min_size=1, max_size=1),
    "env": st.fixed_dictionaries({"RANK": st.sampled_from(["0", "1", "{x}"])}),
}, optional={"lead": st.booleans(), "image": st.sampled_from(["i:1", "i:2"]),
             "resource": st.sampled_from(["default", "other"])}),
    min_size=2, max_size=6, unique_by=lambda t: str(t["name"]).lower().replace("_", "-"))


@settings(max_examples=250, deadline=None)
@given(TEMPLATES, TASK_LISTS)
def test_generated_templates_render_what_the_general_path_renders(template: dict[str, Any],
                                                                  tasks: list[dict[str, Any]]) -> None:
    outcomes: list[str] = []
    real = podshape.build_shape

    def recording(*args: Any, **kwargs: Any) -> Any:
        try:
            shape = real(*args, **kwargs)
        except podshape.Undecided as exc:
            outcomes.append(f"undecided: {exc}")
            raise
        outcomes.append("decided")
        return shape

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(podshape, "build_shape", recording)
        shaped, general = _both(_config(template), _workflow(tasks), monkeypatch)
    for outcome in sorted(set(outcomes)) or ["no shared shape"]:
        event(outcome)
    assert shaped == general
