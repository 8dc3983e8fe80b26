"""Group and pod templates: rendering, typed values, merge rules, refusals, errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT, run_cli, write_repo
from toporender.build.templates.engine import TemplateFailure, _jinja_string, compiled, render_value
from toporender.build.templates.merge import merge_patch, merge_pod
from toporender.pipeline import render_repo

T = Path(__file__).resolve().parent / "fixtures" / "templates"
RFC = yaml.safe_load((T / "merge_patch_rfc7386.yaml").read_text())
POD_MERGE = yaml.safe_load((T / "merge_pod.yaml").read_text())
ERRORS = yaml.safe_load((T / "errors.yaml").read_text())["cases"]
WORKFLOW = "workflow:\n  name: wf\n  groups:\n  - name: g\n    tasks:\n    - name: a\n    - name: b\n"


@pytest.mark.parametrize("case", RFC, ids=[f"rfc7386-{i}" for i in range(len(RFC))])
def test_merge_patch_rfc7386(case: dict[str, Any]) -> None:
    assert merge_patch(case["target"], case["patch"]) == case["result"]


@pytest.mark.parametrize("case", RFC, ids=[f"roundtrip-{i}" for i in range(len(RFC))])
def test_merge_patch_round_trips_through_json_patch(case: dict[str, Any]) -> None:
    """The change a merge patch makes, expressed as an RFC 6902 patch, reproduces the same document."""
    merged = merge_patch(case["target"], case["patch"])
    as_json_patch = jsonpatch.make_patch(case["target"], merged)
    assert as_json_patch.apply(case["target"]) == merged
    assert merge_patch(merged, case["patch"]) == merged


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=2),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text("abc", max_size=2), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(json_values, json_values)
def test_merge_patch_properties(target: Any, patch: Any) -> None:
    merged = merge_patch(target, patch)
    assert merge_patch(merged, patch) == merged
    if isinstance(patch, dict):
        for key, value in patch.items():
            if value is None:
                assert key not in merged
            elif not isinstance(value, dict):
                assert merged[key] == value
        if isinstance(target, dict):
            for key in set(target) - set(patch):
                assert merged[key] == target[key]
    else:
        assert merged == patch


@pytest.mark.parametrize("name", sorted(POD_MERGE))
def test_merge_pod(name: str) -> None:
    case = POD_MERGE[name]
    assert merge_pod(case["base"], case["patch"]) == case["result"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{{ TASKS|length }}", 2),
        ("{{ TASKS|length > 1 }}", True),
        ("  {{ WF_GROUP_NAME }} ", "g"),
        ("n{{ TASKS|length }}", "n2"),
        ("{{ TASKS|map(attribute='WF_TASK_NAME')|list }}", ["a", "b"]),
        ("{{ NUMERIC_NAME }}", "123"),
        ("plain", "plain"),
        ("{{ '{' }}", "{"),
    ],
)
def test_typed_values(value: str, expected: Any) -> None:
    variables = {"TASKS": [{"WF_TASK_NAME": "a"}, {"WF_TASK_NAME": "b"}], "WF_GROUP_NAME": "g", "NUMERIC_NAME": "123"}
    assert render_value(value, variables) == expected


LENGTH_VARIABLES = {"TASKS": [{"WF_TASK_NAME": "a"}, {"WF_TASK_NAME": "b"}], "NONE": [], "TEXT": "abc",
                    "MAP": {"k": 1}, "NUMBER": 7, "NOTHING": None}


@pytest.mark.parametrize("value", [
    "{{ TASKS|length }}", "{{TASKS|length}}", "  {{ TASKS | length }}  ", "{{ NONE|length }}", "{{ TEXT|length }}",
    "{{ MAP|length }}", "{{ NUMBER|length }}", "{{ NOTHING|length }}", "{{ MISSING|length }}", "n{{ TASKS|length }}",
    "{{ TASKS|length }}{{ TEXT|length }}", "{{ TASKS|length + 1 }}",
])
def test_length_shortcut_renders_what_jinja_renders(value: str) -> None:
    """``{{ NAME|length }}`` skips Jinja (compiled templates and single values alike); value or message must be
    Jinja's own."""
    def outcome(render: Any) -> Any:
        try:
            return render()
        except TemplateFailure as exc:
            return ("error", exc.message)

    jinja = outcome(lambda: _jinja_string(value, LENGTH_VARIABLES, ("v",)))
    for fast in (outcome(lambda: compiled({"v": value})(LENGTH_VARIABLES)["v"]),
                 outcome(lambda: render_value(value, LENGTH_VARIABLES, ("v",)))):
        assert fast == jinja
        assert type(fast) is type(jinja)


def test_compute_domain_example_renders_without_importing_jinja() -> None:
    """The usual templates (names and ``TASKS|length``) never pay for importing Jinja."""
    code = ("import sys; from pathlib import Path; from toporender.pipeline import render_repo; "
            "render_repo(Path('examples/nvlink-compute-domain')); print('jinja2' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_nvlink_example_one_compute_domain_per_group_and_pods_join_it() -> None:
    objects = render_repo(ROOT / "examples" / "nvlink-compute-domain").objects
    domains = [o for o in objects if o["kind"] == "ComputeDomain"]
    podgroups = [o for o in objects if o["kind"] == "PodGroup"]
    assert len(domains) == len(podgroups) == 2
    for cd, pg in zip(domains, podgroups):
        group_uuid = pg["metadata"]["name"]
        assert cd["metadata"]["name"] == f"compute-domain-{group_uuid}"
        assert cd["metadata"]["namespace"] == pg["metadata"]["namespace"]
        claim_template = cd["spec"]["channel"]["resourceClaimTemplate"]["name"]
        assert cd["spec"]["channel"]["allocationMode"] == "All"
        pods = [o for o in objects
                if o["kind"] == "Pod" and o["metadata"]["annotations"]["pod-group-name"] == group_uuid]
        assert cd["spec"]["numNodes"] == len(pods)
        for pod in pods:
            assert pod["spec"]["resourceClaims"] == [
                {"name": "compute-domain-channel", "resourceClaimTemplateName": claim_template}]
            container = pod["spec"]["containers"][0]
            assert container["resources"]["claims"] == [{"name": "compute-domain-channel"}]
            assert len(pod["spec"]["containers"]) == 1
    assert objects.index(domains[0]) < objects.index(podgroups[0])


def test_namespace_equal_to_target_is_ignored_with_a_warning(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, {
        "toporender.yaml": "namespace: ml\npools:\n  gpu:\n    common_group_templates: [cm]\n"
                           "group_templates:\n  cm:\n    apiVersion: v1\n    kind: ConfigMap\n"
                           "    metadata: {name: 'cm-{{WF_GROUP_UUID}}', namespace: ml}\n",
        "workflows/wf.yaml": WORKFLOW,
    })
    result = run_cli("render", str(repo))
    assert result.code == 0
    assert "warning: group template 'cm' sets metadata.namespace; it is ignored" in result.stderr
    cm = next(yaml.safe_load_all(result.stdout))
    assert cm["metadata"]["namespace"] == "ml"


STRING_FIELDS = """\
namespace: ml
pools:
  gpu:
    common_group_templates: [cm]
    common_pod_template: [counts]
group_templates:
  cm:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: 'cm-{{WF_GROUP_UUID}}', labels: {size: '{{ TASKS|length }}'}}
    data: {size: '{{ TASKS|length }} tasks'}
pod_templates:
  counts:
    metadata:
      labels: {multi: '{{ TASKS|length > 1 }}'}
      annotations: {example.com/size: '{{ TASKS|length }}'}
    spec:
      containers:
      - name: '{{USER_CONTAINER_NAME}}'
        env: [{name: WORLD_SIZE, value: '{{ TASKS|length }}'}]
"""


def test_numbers_in_string_fields_are_written_as_strings(tmp_path: Path) -> None:
    """Labels, annotations and env values are strings to the API server, even where a value is one number."""
    repo = write_repo(tmp_path, {"toporender.yaml": STRING_FIELDS, "workflows/wf.yaml": WORKFLOW})
    objects = render_repo(repo).objects
    cm = next(o for o in objects if o["kind"] == "ConfigMap")
    assert cm["metadata"]["labels"]["size"] == "2" and cm["data"]["size"] == "2 tasks"
    for pod in (o for o in objects if o["kind"] == "Pod"):
        assert pod["metadata"]["labels"]["multi"] == "true"
        assert pod["metadata"]["annotations"]["example.com/size"] == "2"
        assert {"name": "WORLD_SIZE", "value": "2"} in pod["spec"]["containers"][0]["env"]


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_template_errors(name: str, tmp_path: Path) -> None:
    case = ERRORS[name]
    repo = write_repo(tmp_path, {"toporender.yaml": case["config"], "workflows/wf.yaml": WORKFLOW})
    result = run_cli("render", str(repo))
    assert result.code == 1, result.stdout
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert case["expect"] in result.stderr, result.stderr


def test_pool_show_parsed_lists_merged_unrendered_templates() -> None:
    result = run_cli("pool", "show", "gb200-nvlink", "--dir", str(ROOT / "examples" / "nvlink-compute-domain"),
                     "--parsed")
    assert result.code == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    [cd] = shown["parsed_group_templates"]
    assert cd["metadata"]["name"] == "compute-domain-{{WF_GROUP_UUID}}"
    assert cd["spec"]["channel"] == {"resourceClaimTemplate": {"name": "compute-domain-{{WF_GROUP_UUID}}-rct"},
                                     "allocationMode": "All"}
    assert shown["parsed_pod_template"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
