"""Unit tests of the validator's parts: vendored data, routing, CEL inventory, fallbacks, parsers, speed."""

from __future__ import annotations

import importlib
import json
import time
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import load_script
from toporender.validation import _builtin_kinds, _crd, core_backend, validate_object, validate_objects
from toporender.validation._builtin_kinds import parse_quantity
from toporender.validation._common import format_path, identity
from toporender.validation._kai import kai_schema_variant
from toporender.validation._koordinator import parse_go_duration

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "vendor_schemas.py"
SHARED = ROOT.parent / "shared" / "schemas"

EXPECTED_CRDS = {
    ("scheduling.run.ai", "PodGroup", "main"),
    ("scheduling.run.ai", "PodGroup", "v0.14.0"),
    ("kai.scheduler", "Topology", "main"),
    ("kai.scheduler", "Topology", "v0.14.0"),
    ("scheduling.run.ai", "Queue", "main"),
    ("resource.nvidia.com", "ComputeDomain", "main"),
    ("resource.nvidia.com", "ComputeDomain", "v25.12.0"),
    ("scheduling.sigs.k8s.io", "PodGroup", "v1.8.0"),
    ("scheduling.koordinator.sh", "ClusterNetworkTopology", "v1.8.0"),
    ("kueue.x-k8s.io", "Topology", "v0.19.2"),
    ("kueue.x-k8s.io", "ResourceFlavor", "v0.19.2"),
    ("kueue.x-k8s.io", "LocalQueue", "v0.19.2"),
    ("scheduling.volcano.sh", "PodGroup", "v1.15.1"),
    ("topology.volcano.sh", "HyperNode", "v1.15.1"),
}

SKIPPED_CEL = {
    "self == oldSelf",
    "self.map(l, l.nodeLabel) == oldSelf.map(l, l.nodeLabel)",
    # Kueue ResourceFlavor: a TAS flavor's labels, tolerations and topology are immutable
    "!has(oldSelf.topologyName) || (has(self.nodeLabels) == has(oldSelf.nodeLabels) && (!has(self.nodeLabels) || "
    "self.nodeLabels == oldSelf.nodeLabels))",
    "!has(oldSelf.topologyName) || (has(self.tolerations) == has(oldSelf.tolerations) && (!has(self.tolerations) || "
    "self.tolerations == oldSelf.tolerations))",
    "!has(oldSelf.topologyName) || (has(self.topologyName) && self.topologyName == oldSelf.topologyName)",
}


UNIQUE_ITEMS = "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0"
FLAVOR_TAS = "!has(self.topologyName) || self.nodeLabels.size() >= 1"
TAINT_EFFECT = "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
SELECTOR_ANY = "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)"
SELECTOR_ONE = "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + (has(self.labelMatch) ? 1 : 0) <= 1"


def _load_tool() -> Any:
    return load_script(TOOLS, "vendor_schemas")


def _walk_keys(node: Any) -> set[str]:
    keys: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key != "properties":
                keys.add(key)
            keys |= _walk_keys(value) if key != "properties" else set().union(*(_walk_keys(v) for v in value.values()))
    elif isinstance(node, list):
        for value in node:
            keys |= _walk_keys(value)
    return keys


def test_vendored_set_is_complete_and_self_describing() -> None:
    docs = [d for variants in _crd.registry().values() for d in variants.values()]
    assert {(d.group, d.kind, d.variant) for d in docs} == EXPECTED_CRDS
    for entry in resources.files("toporender").joinpath("schemas").iterdir():
        if not entry.name.endswith(".json"):
            continue
        raw = json.loads(entry.read_text(encoding="utf-8"))
        assert raw["license"] == "Apache-2.0", entry.name
        assert raw["source"]["repo"].startswith("github.com/") and raw["source"]["path"], entry.name
        assert len(raw["source"]["commit"]) == 40, entry.name
        assert raw["scope"] in ("Namespaced", "Cluster")
        keys = _walk_keys(raw["versions"])
        assert "description" not in keys, entry.name
        assert entry.read_text(encoding="utf-8") == json.dumps(raw, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def test_only_transition_cel_rules_are_skipped() -> None:
    skipped = {r for variants in _crd.registry().values() for d in variants.values() for r in d.skipped_rules()}
    assert skipped == SKIPPED_CEL


def test_registry_refuses_an_unimplemented_cel_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_crd, "CEL_RULES", {})
    _crd.registry.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="CEL rules without a Python equivalent"):
            _crd.registry()
    finally:
        monkeypatch.undo()
        _crd.registry.cache_clear()
        _crd.registry()


@pytest.mark.parametrize(
    ("rule", "value", "ok"),
    [
        (UNIQUE_ITEMS, [{"nodeLabel": "a"}, {"nodeLabel": "b"}], True),
        (UNIQUE_ITEMS, [{"nodeLabel": "a"}, {"nodeLabel": "a"}], False),
        (
            "size(self.filter(i, size(self.filter(j, j.nodeLabel == i.nodeLabel)) > 1)) == 0",
            [{"nodeLabel": "a", "alias": "x"}, {"nodeLabel": "a", "alias": "y"}],
            False,
        ),
        (
            "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0 || "
            "self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'",
            [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}],
            True,
        ),
        (
            "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0 || "
            "self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'",
            [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}],
            False,
        ),
        # Kueue v0.19.2 ResourceFlavor; an absent field a rule reads is a CEL error, i.e. the rule fails
        (FLAVOR_TAS, {"topologyName": "t", "nodeLabels": {"a": "b"}}, True),
        (FLAVOR_TAS, {"topologyName": "t"}, False),
        (FLAVOR_TAS, {"nodeLabels": {}}, True),
        (TAINT_EFFECT, [{"key": "k", "effect": "NoSchedule"}], True),
        (TAINT_EFFECT, [{"key": "k"}], False),
        ("self.all(x, !has(x.key) ? x.operator == 'Exists' : true)", [{"operator": "Exists"}, {"key": "k"}], True),
        ("self.all(x, !has(x.key) ? x.operator == 'Exists' : true)", [{"value": "v"}], False),
        ("self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)",
         [{"operator": "Exists", "value": "v"}], False),
        ("self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)",
         [{"tolerationSeconds": 1, "effect": "NoExecute"}], True),
        ("self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)", [{"tolerationSeconds": 1}], False),
        ("self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])", [{"operator": "In"}], False),
        ("self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])", [{}], True),
        # Volcano v1.15.1 HyperNode member selector
        (SELECTOR_ANY, {"labelMatch": {}}, True),
        (SELECTOR_ANY, {}, False),
        (SELECTOR_ONE, {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}}, False),
        (SELECTOR_ONE, {"regexMatch": {"pattern": "b"}}, True),
    ],
)
def test_cel_equivalents(rule: str, value: Any, ok: bool) -> None:
    assert _crd.CEL_RULES[rule](value) is ok


def test_generator_is_deterministic_and_strips(tmp_path: Path) -> None:
    tool = _load_tool()
    src = tmp_path / "crd.yaml"
    src.write_text(
        "# Upstream: github.com/example/proj, path crds/x.yaml @ tag v1.0.0 "
        "(0123456789abcdef0123456789abcdef01234567); license Apache-2.0\n"
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "spec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n"
        "  versions:\n"
        "  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n"
        "        description: top\n        type: object\n        properties:\n"
        "          description: {type: string, description: a field named description}\n"
        "          spec: {type: object, title: t, x-kubernetes-validations: [{rule: 'self.a > 0', message: m}]}\n"
        "  - name: v0\n    served: false\n    storage: false\n    schema: {openAPIV3Schema: {type: object}}\n",
        encoding="utf-8",
    )
    doc = tool.convert(src, "v1.0.0")
    assert [v["name"] for v in doc["versions"]] == ["v1"]
    schema = doc["versions"][0]["schema"]
    assert schema == {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "spec": {"type": "object", "x-kubernetes-validations": [{"rule": "self.a > 0", "message": "m"}]},
        },
    }
    assert doc["source"] == {
        "repo": "github.com/example/proj",
        "path": "crds/x.yaml",
        "tag": "v1.0.0",
        "ref": "tag v1.0.0 (0123456789abcdef0123456789abcdef01234567)",
        "commit": "0123456789abcdef0123456789abcdef01234567",
    }
    assert tool.dump(doc) == tool.dump(tool.convert(src, "v1.0.0"))


@pytest.mark.parametrize(
    "present", [SHARED.is_dir()], ids=["shared-schemas-present" if SHARED.is_dir() else "shared-schemas-absent"]
)
def test_vendored_files_match_upstream_when_available(present: bool) -> None:
    """With the upstream CRDs beside the repo (as in CI), regenerating must give the committed files byte for byte."""
    tool = _load_tool()
    if present:
        assert tool.main([str(SHARED), "--check"]) == 0
    else:
        assert all((ROOT / "plugin" / "toporender" / "schemas" / dst).is_file() for _, dst, _ in tool.SOURCES)


def test_crd_kinds_never_reach_kubernetes_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a CRD kind was routed to kubernetes-validate")

    monkeypatch.setattr(_builtin_kinds, "_kv_schema", boom)
    koord = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {"minMember": 1},
    }
    assert validate_object(koord, core=True, k8s_minor="1.35") == []


def test_builtin_fallback_without_kubernetes_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_builtin_kinds, "kubernetes_validate_version", lambda: None)
    assert core_backend() == "builtin"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x", "comand": ["sh"]}]},
    }
    assert validate_object(pod, core=True) == [
        "Pod/p: spec.containers[0].comand: unknown field (not in the built-in Pod/Service schema; the API server "
        "would drop or reject it)"
    ]


def test_core_backend_names_kubernetes_validate_when_installed() -> None:
    """kubernetes-validate is in the test extra, so the tests exercise the real Kubernetes schemas."""
    assert core_backend(True).startswith("kubernetes-validate ")
    assert core_backend(False) == "builtin"


def test_unsupported_kubernetes_minor_is_a_usage_error() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    with pytest.raises(ValueError, match="no schemas for Kubernetes 1.99"):
        validate_object(pod, k8s_minor="1.99")


@pytest.mark.parametrize(
    ("given", "variant"),
    [("main", "main"), ("v0.14.0", "v0.14.0"), ("0.14.3", "v0.14.0"), ("v0.15.2", "main"), ("v1.0", "main")],
)
def test_kai_version_mapping(given: str, variant: str) -> None:
    assert kai_schema_variant(given) == variant


@pytest.mark.parametrize("bad", ["v0.13.0", "latest", "0"])
def test_kai_version_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        kai_schema_variant(bad)


def test_unknown_dra_version_is_a_usage_error() -> None:
    cd = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "cd"},
        "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "x"}}},
    }
    with pytest.raises(ValueError, match="no vendored ComputeDomain"):
        validate_object(cd, dra_version="v24.1.0")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("600s", 600.0),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
        ("0", 0.0),
        ("300ms", 0.3),
        ("-5s", -5.0),
        ("600", None),
        ("5 s", None),
        ("", None),
        ("1d", None),
    ],
)
def test_go_duration(text: str, seconds: float | None) -> None:
    assert parse_go_duration(text) == (pytest.approx(seconds) if seconds is not None else None)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", 0.5),
        ("4Gi", 4 * 2**30),
        ("8", 8),
        (8, 8),
        ("1e3", 1000),
        ("1.5k", 1500),
        ("4GB", None),
        (True, None),
        ("", None),
    ],
)
def test_quantity(text: Any, value: float | None) -> None:
    parsed = parse_quantity(text)
    assert (float(parsed) if parsed is not None else None) == value


def test_paths_and_identity() -> None:
    assert format_path(["spec", "subGroups", 1, "name"]) == "spec.subGroups[1].name"
    assert format_path(["metadata", "labels", "kai.scheduler/queue"]) == "metadata.labels['kai.scheduler/queue']"
    assert format_path([]) == "(root)"
    assert identity({"kind": "PodGroup", "metadata": {"name": "a", "namespace": "ml"}}) == "PodGroup/ml/a"
    assert identity({"kind": "Topology", "metadata": {"name": "t"}}) == "Topology/t"
    assert identity(["not", "a", "dict"]) == "<not an object>"


@pytest.mark.parametrize(
    "junk",
    [
        None,
        3,
        "text",
        [],
        {"apiVersion": 5},
        {"apiVersion": "v1"},
        {"apiVersion": "v1", "kind": "Pod", "metadata": "x", "spec": []},
        {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {}, "spec": {"subGroups": "abc"}},
    ],
)
def test_malformed_objects_give_problems_not_exceptions(junk: Any) -> None:
    problems = validate_objects([junk, junk])
    assert problems and all(isinstance(p, str) and ": " in p for p in problems)


def test_golden_outputs_validate() -> None:
    """Every committed golden stream passes, with kubernetes-validate and with the built-in fallback."""
    files = sorted((ROOT / "golden").glob("*.yaml"))
    assert files
    for path in files:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
        for core in (True, False):
            assert validate_objects(docs, core=core) == [], (path.name, core)


def test_fast_enough_for_large_renders() -> None:
    """Budget: the built-in path stays well under 1 ms per Pod (measured ~0.3-0.4 ms on a 2-core machine)."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ml",
            "annotations": {"pod-group-name": "pg"},
            "labels": {"kai.scheduler/queue": "q", "toporender.dev/task": "t"},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "restartPolicy": "Never",
            "hostname": "t",
            "subdomain": "s",
            "containers": [
                {
                    "name": "t",
                    "image": "img",
                    "command": ["a"],
                    "args": ["b"],
                    "resources": {
                        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 8},
                        "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 8},
                    },
                }
            ],
        },
    }
    pods = [{**pod, "metadata": {**pod["metadata"], "name": f"p-{i}"}} for i in range(2000)]
    pg = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"minMember": 2000, "queue": "q"},
    }
    validate_objects([pg, pods[0]], core=False)
    start = time.perf_counter()
    assert validate_objects([pg, *pods], core=False) == []
    per_pod = (time.perf_counter() - start) / len(pods)
    assert per_pod < 2e-3, f"{per_pod * 1e3:.2f} ms per Pod"


def test_builtin_field_names_match_kubernetes_1_32() -> None:
    """The fallback knows exactly the PodSpec/Container/ServiceSpec/ServicePort fields of Kubernetes 1.32."""
    utils = importlib.import_module("kubernetes_validate.utils")
    defs = utils.schema_contents("kubernetes-json-schema/v1.32.0-local-strict/_definitions.json", "1.32")["$defs"]
    pod_spec = _builtin_kinds._BUILTIN["Pod"]["properties"]["spec"]
    svc_spec = _builtin_kinds._BUILTIN["Service"]["properties"]["spec"]
    ours = {
        "PodSpec": pod_spec,
        "Container": pod_spec["properties"]["containers"]["items"],
        "ServiceSpec": svc_spec,
        "ServicePort": svc_spec["properties"]["ports"]["items"],
    }
    for name, schema in ours.items():
        assert set(schema["properties"]) == set(defs[f"io.k8s.api.core.v1.{name}"]["properties"]), name
