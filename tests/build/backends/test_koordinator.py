"""Koordinator backend: gang groups, gather strategies, indices, pool objects, validation.

The seed's examples are compared as exact expected output: the website's PodGroups live in
``fixtures/seed/*.yaml`` under the website's names, and each test maps those names to the rendered
(uuid-derived) ones, so annotations and specs must match field for field. Every rendered stream is also
checked against the vendored Koordinator v1.8.0 CRDs (raw jsonschema) and the project's validator.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from toporender.build.backends.koordinator import (
    KoordinatorBackend,
    check_pool,
    default_layer,
    gang_warnings,
    gather_plan,
    pool_problems,
    schedule_timeout,
)
from toporender.errors import DiagnosticSink, UserError
from toporender.expand.gangs import Gang, expand
from toporender.load.models import PoolConfig
from toporender.load.repo import Repo, load_config, load_workflow
from toporender.load.yaml_source import load_text
from toporender.pipeline import RenderResult, render_documents, render_repo
from toporender.validation import validate_objects

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
SEED = FIXTURES / "seed"
EXAMPLE = HERE.parents[2] / "examples" / "koordinator-spine"
IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"

GROUPS = "gang.scheduling.koordinator.sh/groups"
SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
INDEX = "gang.scheduling.koordinator.sh/network-topology-index"
PG_LABEL = "pod-group.scheduling.sigs.k8s.io"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

CONFIG = (FIXTURES / "toporender.yaml").read_text()


# ---- helpers --------------------------------------------------------------------------------------------


def render_text(config: str, *workflows: str) -> RenderResult:
    """Through the public pipeline, exactly as the KRM function calls it."""
    docs = [load_text(text, f"workflows/wf{i}.yaml")[0] for i, text in enumerate(workflows)]
    return render_documents(load_text(config, "toporender.yaml")[0], docs)


def gangs_of(config: str, workflow: str) -> list[Gang]:
    cfg_doc = load_text(config, "toporender.yaml")[0]
    wf = load_workflow(load_text(workflow, "workflows/wf.yaml")[0])
    sink = DiagnosticSink()
    gangs = expand(Repo(None, cfg_doc, load_config(cfg_doc), (wf,)), sink=sink)
    sink.raise_if_errors()
    return gangs


def kinds(objects: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def pod(objects: list[dict[str, Any]], task: str) -> dict[str, Any]:
    return next(p for p in kinds(objects, "Pod") if p["metadata"]["labels"]["toporender.dev/task"] == task)


def seed(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SEED / name).read_text()) if d]


def crd_validator(filename: str) -> Draft202012Validator:
    doc = json.loads(resources.files("toporender").joinpath("schemas").joinpath(filename).read_text())
    return Draft202012Validator(doc["versions"][0]["schema"])


CRDS = {
    ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup"):
        crd_validator("koordinator-v1.8.0_scheduling.sigs.k8s.io_podgroups.json"),
    ("scheduling.koordinator.sh/v1alpha1", "ClusterNetworkTopology"):
        crd_validator("koordinator-v1.8.0_scheduling.koordinator.sh_clusternetworktopologies.json"),
}


def assert_valid(objects: list[dict[str, Any]]) -> None:
    """Every Koordinator object against its upstream CRD schema, and the whole stream against our validator."""
    checked = 0
    for obj in objects:
        validator = CRDS.get((obj["apiVersion"], obj["kind"]))
        if validator is not None:
            errors = [e.message for e in validator.iter_errors(obj)]
            assert errors == [], (obj["metadata"]["name"], errors)
            checked += 1
    assert checked > 0
    assert validate_objects(objects, require_namespace=True) == []


def workflow(tasks: list[tuple[str, str]], res: dict[str, list[tuple[str, str, str]]], name: str = "wf",
             group: str = "g") -> str:
    """A one-group workflow: tasks as (name, resource), resources as [(key, group, requirementType)]."""
    return yaml.safe_dump({
        "workflow": {
            "name": name,
            "groups": [{"name": group, "tasks": [{"name": t, "resource": r, "image": IMAGE} for t, r in tasks]}],
            "resources": {
                rname: {"gpu": 1, "topology": [{"key": k, "group": g, "requirementType": t} for k, g, t in reqs]}
                for rname, reqs in res.items()
            },
        }
    }, sort_keys=False)


def name_map(objects: list[dict[str, Any]], seed_names: dict[str, str]) -> dict[str, str]:
    """Website PodGroup name -> rendered name, via a task known to belong to it."""
    return {seed_name: pod(objects, task)["metadata"]["labels"][PG_LABEL] for seed_name, task in seed_names.items()}


def assert_matches_seed(objects: list[dict[str, Any]], seed_file: str, seed_names: dict[str, str]) -> None:
    names = name_map(objects, seed_names)
    rendered = {pg["metadata"]["name"]: pg for pg in kinds(objects, "PodGroup")}
    expected = seed(seed_file)
    assert len(rendered) == len(expected)
    for exp in expected:
        got = rendered[names[exp["metadata"]["name"]]]
        assert got["apiVersion"] == exp["apiVersion"]
        assert got["kind"] == exp["kind"]
        assert got["metadata"]["namespace"] == exp["metadata"]["namespace"]
        assert got["spec"] == exp["spec"]
        exp_ann, got_ann = exp["metadata"].get("annotations", {}), got["metadata"].get("annotations", {})
        assert set(got_ann) == set(exp_ann)
        if GROUPS in exp_ann:
            want = [f"{m.split('/')[0]}/{names[m.split('/')[1]]}" for m in json.loads(exp_ann[GROUPS])]
            assert json.loads(got_ann[GROUPS]) == sorted(want)
        if SPEC in exp_ann:
            assert json.loads(got_ann[SPEC]) == json.loads(exp_ann[SPEC])
            # compact, so the annotation is one line and identical on every member
            assert got_ann[SPEC] == json.dumps(json.loads(exp_ann[SPEC]), separators=(",", ":"))


# ---- the seed's examples --------------------------------------------------------------------------------


SEED_CASES = [
    ("gang-group.yaml", {"gang-example1": "master", "gang-example2": "worker-1"}),
    ("spine-must-gather.yaml", {"gang-master": "master", "gang-worker": "worker-1"}),
    ("prefer-gather.yaml", {"gang-master": "master", "gang-worker": "worker-1"}),
]


@pytest.mark.parametrize(("fixture", "seed_names"), SEED_CASES, ids=[c[0] for c in SEED_CASES])
def test_seed_podgroups_exact(fixture: str, seed_names: dict[str, str]) -> None:
    objects = render_text(CONFIG, (FIXTURES / fixture).read_text()).objects
    assert_matches_seed(objects, fixture, seed_names)
    # identical groups and spec on every member of the bundle
    anns = [pg["metadata"]["annotations"] for pg in kinds(objects, "PodGroup")]
    assert len({a[GROUPS] for a in anns}) == 1
    assert len({a.get(SPEC) for a in anns}) == 1
    # each pod in its own PodGroup, workers share one
    assert pod(objects, "worker-1")["metadata"]["labels"][PG_LABEL] == \
        pod(objects, "worker-2")["metadata"]["labels"][PG_LABEL]
    assert pod(objects, "master")["metadata"]["labels"][PG_LABEL] != \
        pod(objects, "worker-1")["metadata"]["labels"][PG_LABEL]
    assert_valid(objects)


def test_seed_pod_index() -> None:
    objects = render_text(CONFIG, (FIXTURES / "index.yaml").read_text()).objects
    (pg,) = kinds(objects, "PodGroup")
    assert pg["spec"] == {"minMember": 2}
    assert "annotations" not in pg["metadata"]  # one gang: no groups bundle, no topology
    for exp in seed("index.yaml"):
        got = pod(objects, exp["metadata"]["name"])
        assert got["metadata"]["annotations"][INDEX] == exp["metadata"]["annotations"][INDEX]
        assert got["metadata"]["labels"][PG_LABEL] == pg["metadata"]["name"]
        assert got["spec"]["schedulerName"] == exp["spec"]["schedulerName"]
    assert_valid(objects)


def test_seed_cluster_network_topology() -> None:
    pool = load_config(load_text(CONFIG, "toporender.yaml")[0]).pools["fabric"]
    (cnt,) = KoordinatorBackend().pool_objects("fabric", pool, "default")
    (exp,) = seed("cluster-network-topology.yaml")
    assert cnt["apiVersion"] == exp["apiVersion"]
    assert cnt["kind"] == exp["kind"]
    assert cnt["metadata"]["name"] == "default"
    assert "namespace" not in cnt["metadata"]  # cluster-scoped
    assert cnt["spec"] == exp["spec"]
    assert_valid([cnt])


# ---- gather strategies: tables --------------------------------------------------------------------------

R, P = "required", "preferred"
TWO = [("a", "ra"), ("b", "rb")]

Reqs = dict[str, list[tuple[str, str, str]]]
PLANS: list[tuple[str, Reqs, list[tuple[str, str]], list[tuple[str, str]]]] = [
    # (id, per-resource requirements, expected rules, expected unexpressed levels)
    ("spine-required", {"ra": [("spine", "x", R)], "rb": [("spine", "x", R)]},
     [("SpineLayer", "MustGather")], []),
    ("block-preferred", {"ra": [("block", "x", P)], "rb": [("block", "x", P)]},
     [("BlockLayer", "PreferGather")], []),
    ("required-then-preferred", {"ra": [("spine", "x", R), ("block", "y", P)],
                                 "rb": [("spine", "x", R), ("block", "y", P)]},
     [("SpineLayer", "MustGather"), ("BlockLayer", "PreferGather")], []),
    # a coarser preference is implied by a finer requirement
    ("preferred-above-required", {"ra": [("spine", "x", P), ("block", "y", R)],
                                  "rb": [("spine", "x", P), ("block", "y", R)]},
     [("BlockLayer", "MustGather")], []),
    # only the finest requirement is a MustGather: koord-scheduler enforces the lowest one anyway
    ("two-required", {"ra": [("spine", "x", R), ("block", "y", R)], "rb": [("spine", "x", R), ("block", "y", R)]},
     [("BlockLayer", "MustGather")], []),
    ("all-preferred", {"ra": [("spine", "x", P), ("block", "y", P), ("accelerator", "z", P)],
                       "rb": [("spine", "x", P), ("block", "y", P), ("accelerator", "z", P)]},
     [("SpineLayer", "PreferGather"), ("BlockLayer", "PreferGather"), ("AcceleratorLayer", "PreferGather")], []),
    ("split-required", {"ra": [("spine", "x", R), ("block", "b1", R)], "rb": [("spine", "x", R), ("block", "b2", R)]},
     [("SpineLayer", "MustGather")], [("block", "required")]),
    ("split-only", {"ra": [("block", "b1", P)], "rb": [("block", "b2", P)]}, [], [("block", "preferred")]),
    ("split-mixed", {"ra": [("block", "b1", R)], "rb": [("block", "b2", P)]}, [], [("block", "required")]),
    ("node-required", {"ra": [("host", "n", R)], "rb": [("host", "n", R)]},
     [("NodeTopologyLayer", "MustGather")], []),
    ("none", {"ra": [], "rb": []}, [], []),
]


@pytest.mark.parametrize(("res", "rules", "unexpressed"), [p[1:] for p in PLANS], ids=[p[0] for p in PLANS])
def test_gather_plan(res: dict[str, list[tuple[str, str, str]]], rules: list[tuple[str, str]],
                     unexpressed: list[tuple[str, str]]) -> None:
    (gang,) = gangs_of(CONFIG, workflow(TWO, res))
    plan = gather_plan(gang)
    assert list(plan.rules) == rules
    assert list(plan.unexpressed) == unexpressed
    objects = render_text(CONFIG, workflow(TWO, res)).objects
    specs = {pg["metadata"].get("annotations", {}).get(SPEC) for pg in kinds(objects, "PodGroup")}
    expected = (json.dumps({"gatherStrategy": [{"layer": la, "strategy": s} for la, s in rules]},
                           separators=(",", ":")) if rules else None)
    assert specs == {expected}
    assert_valid(objects)


@pytest.mark.parametrize(("res", "rules", "unexpressed"), [p[1:] for p in PLANS], ids=[p[0] for p in PLANS])
def test_plan_agrees_with_backend_neutral_constraint(res: dict[str, list[tuple[str, str, str]]],
                                                     rules: list[tuple[str, str]],
                                                     unexpressed: list[tuple[str, str]]) -> None:
    """The MustGather layer is the gang's top-level required level, the finest PreferGather its preferred."""
    (gang,) = gangs_of(CONFIG, workflow(TWO, res))
    layer_by_label = {k.label: default_layer(k.label) for k in gang.pool.topology_keys}
    top = gang.topology.constraint
    must = [la for la, s in rules if s == "MustGather"]
    prefer = [la for la, s in rules if s == "PreferGather"]
    assert must == ([layer_by_label[top.required]] if top.required else [])
    assert prefer[-1:] == ([layer_by_label[top.preferred]] if top.preferred else [])


WARNINGS = [
    ("spine-required", []),
    ("required-then-preferred", []),
    ("block-preferred", ["PreferGather, which current Koordinator accepts but ignores"]),
    ("all-preferred", ["only preferred topology (SpineLayer, BlockLayer, AcceleratorLayer)"]),
    ("split-required", ["tasks name different 'block' groups", "own 'block' domain (required)", "is NOT enforced"]),
    ("split-only", ["tasks name different 'block' groups", "own 'block' domain (preferred)", "is not passed on"]),
    ("none", []),
]


@pytest.mark.parametrize(("case", "fragments"), WARNINGS, ids=[w[0] for w in WARNINGS])
def test_gang_warnings(case: str, fragments: list[str]) -> None:
    res = next(p[1] for p in PLANS if p[0] == case)
    (gang,) = gangs_of(CONFIG, workflow(TWO, res))
    text = "\n".join(gang_warnings(gang))
    if not fragments:
        assert text == ""
    for fragment in fragments:
        assert fragment in text


# ---- pods, names, bundles -------------------------------------------------------------------------------


def test_pods_join_their_podgroup_with_rank_in_task_order() -> None:
    tasks = [("w0", "rb"), ("m", "ra"), ("w1", "rb"), ("w2", "rb")]
    res = {"ra": [("spine", "s", R), ("block", "m", P)], "rb": [("spine", "s", R), ("block", "w", P)]}
    objects = render_text(CONFIG, workflow(tasks, res)).objects
    pgs = {pg["metadata"]["name"]: pg for pg in kinds(objects, "PodGroup")}
    assert sorted(pg["spec"]["minMember"] for pg in pgs.values()) == [1, 3]
    for rank, (task, _) in enumerate(tasks, start=1):
        p = pod(objects, task)
        assert p["metadata"]["annotations"][INDEX] == str(rank)
        assert p["spec"]["schedulerName"] == "koord-scheduler"
        assert p["metadata"]["labels"][PG_LABEL] in pgs
    members = {name: sum(1 for p in kinds(objects, "Pod") if p["metadata"]["labels"][PG_LABEL] == name)
               for name in pgs}
    assert members == {name: pg["spec"]["minMember"] for name, pg in pgs.items()}
    assert_valid(objects)


def test_names_are_stable_short_and_distinct() -> None:
    long = "x" * 60
    res = {"ra": [("block", long + "-a", P)], "rb": [("block", long + "-b", P)]}
    first = render_text(CONFIG, workflow(TWO, res, name="w" * 60, group="g" * 60)).objects
    again = render_text(CONFIG, workflow(TWO, res, name="w" * 60, group="g" * 60)).objects
    names = [pg["metadata"]["name"] for pg in kinds(first, "PodGroup")]
    assert names == [pg["metadata"]["name"] for pg in kinds(again, "PodGroup")]
    assert len(set(names)) == 2
    for name in names:
        assert len(name) <= 63 and DNS_LABEL.match(name), name
        assert re.search(r"-[0-9a-f]{8}$", name), name  # cut, so hash-suffixed
    groups = json.loads(kinds(first, "PodGroup")[0]["metadata"]["annotations"][GROUPS])
    assert groups == sorted(f"default/{n}" for n in names)
    assert_valid(first)


def test_groups_annotation_is_sorted_not_in_subgroup_order() -> None:
    res = {"ra": [("block", "zz", P)], "rb": [("block", "aa", P)]}
    objects = render_text(CONFIG, workflow(TWO, res)).objects
    pgs = kinds(objects, "PodGroup")
    assert [pg["metadata"]["name"].rsplit("-", 1)[-1] for pg in pgs] == ["zz", "aa"]  # leaf order
    (value,) = {pg["metadata"]["annotations"][GROUPS] for pg in pgs}
    assert json.loads(value) == [f"default/{pgs[1]['metadata']['name']}", f"default/{pgs[0]['metadata']['name']}"]


def test_nested_subgroups_give_one_podgroup_per_leaf() -> None:
    tasks = [("t0", "r0"), ("t1", "r1"), ("t2", "r2"), ("t3", "r3")]
    res = {
        "r0": [("spine", "s1", R), ("block", "b1", R)],
        "r1": [("spine", "s1", R), ("block", "b2", R)],
        "r2": [("spine", "s2", R), ("block", "b3", R)],
        "r3": [("spine", "s2", R), ("block", "b4", R)],
    }
    (gang,) = gangs_of(CONFIG, workflow(tasks, res))
    leaves = [sg for sg in gang.topology.subgroups if sg.is_leaf]
    assert len(leaves) == 4 and len(gang.topology.subgroups) == 6
    objects = render_text(CONFIG, workflow(tasks, res)).objects
    pgs = kinds(objects, "PodGroup")
    assert [pg["spec"]["minMember"] for pg in pgs] == [1, 1, 1, 1]
    assert all(SPEC not in pg["metadata"]["annotations"] for pg in pgs)
    assert len({pg["metadata"]["annotations"][GROUPS] for pg in pgs}) == 1
    assert len(gang_warnings(gang)) == 2  # spine and block both differ inside the gang
    assert_valid(objects)


# ---- gang settings --------------------------------------------------------------------------------------

SETTINGS = [
    ({}, {}, {}),
    ({"mode": "NonStrict"}, {"gang.scheduling.koordinator.sh/mode": "NonStrict"}, {}),
    ({"match_policy": "waiting-and-running"},
     {"gang.scheduling.koordinator.sh/match-policy": "waiting-and-running"}, {}),
    ({"schedule_timeout_seconds": 300}, {}, {"scheduleTimeoutSeconds": 300}),
    # a CR gang ignores the pods' waiting-time annotation: the wait goes to the PodGroup, rounded up
    ({"waiting_time": "90s"}, {}, {"scheduleTimeoutSeconds": 90}),
    ({"waiting_time": "1m30.5s"}, {}, {"scheduleTimeoutSeconds": 91}),
    ({"waiting_time": "250ms"}, {}, {"scheduleTimeoutSeconds": 1}),
    ({"waiting_time": "10m", "schedule_timeout_seconds": 600}, {}, {"scheduleTimeoutSeconds": 600}),
]


def pool_config(gang: dict[str, Any] | None = None, keys: list[dict[str, str]] | None = None,
                **extra: Any) -> str:
    pool: dict[str, Any] = {"backend": "koordinator", "on_change": "keep", **extra}
    if gang:
        pool["gang"] = gang
    pool["topology_keys"] = keys if keys is not None else [
        {"key": "spine", "label": "network.topology.nvidia.com/spine"},
        {"key": "block", "label": "network.topology.nvidia.com/block"},
    ]
    return yaml.safe_dump({"namespace": "default", "pools": {"p": pool}}, sort_keys=False)


@pytest.mark.parametrize(("gang", "annotations", "spec"), SETTINGS, ids=[str(s[0]) for s in SETTINGS])
def test_gang_settings(gang: dict[str, Any], annotations: dict[str, str], spec: dict[str, int]) -> None:
    config = pool_config(gang)
    objects = render_text(config, workflow(TWO, {"ra": [("spine", "s", R)], "rb": [("spine", "s", R)]})).objects
    (pg,) = kinds(objects, "PodGroup")
    assert pg["spec"] == {"minMember": 2, **spec}
    ann = dict(pg["metadata"]["annotations"])
    assert ann.pop(SPEC) == '{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"}]}'
    assert ann == annotations
    for p in kinds(objects, "Pod"):
        assert "gang.scheduling.koordinator.sh/waiting-time" not in p["metadata"]["annotations"]
    pool = load_config(load_text(config, "toporender.yaml")[0]).pools["p"]
    assert check_pool("p", pool) == []
    assert schedule_timeout(pool) == spec.get("scheduleTimeoutSeconds")
    assert_valid(objects)


def test_scheduler_name_override() -> None:
    objects = render_text(pool_config(scheduler_name="koord-scheduler-gpu"),
                          workflow(TWO, {"ra": [], "rb": []})).objects
    assert {p["spec"]["schedulerName"] for p in kinds(objects, "Pod")} == {"koord-scheduler-gpu"}


# ---- layers, pool checks, pool objects ------------------------------------------------------------------

DEFAULT_LAYERS = [
    ("network.topology.nvidia.com/accelerator", "AcceleratorLayer"),
    ("network.topology.kubernetes.io/accelerator", "AcceleratorLayer"),
    ("nvidia.com/gpu.clique", "AcceleratorLayer"),
    ("network.topology.nvidia.com/block", "BlockLayer"),
    ("example.com/leaf", "BlockLayer"),
    ("example.com/rack", "BlockLayer"),
    ("network.topology.nvidia.com/spine", "SpineLayer"),
    ("network.topology.nvidia.com/datacenter", "DatacenterLayer"),
    ("topology.kubernetes.io/zone", "DatacenterLayer"),
    ("kubernetes.io/hostname", "NodeTopologyLayer"),
    ("topology.kubernetes.io/region", None),
    ("example.com/network-tier-1", None),
    ("example.com/blocks", None),
]


@pytest.mark.parametrize(("label", "layer"), DEFAULT_LAYERS, ids=[d[0] for d in DEFAULT_LAYERS])
def test_default_layer(label: str, layer: str | None) -> None:
    assert default_layer(label) == layer


def K(key: str, label: str, layer: str | None = None) -> dict[str, str]:  # noqa: N802 - table shorthand
    return {"key": key, "label": label, **({"layer": layer} if layer else {})}


POOL_CHECKS: list[tuple[str, list[dict[str, str]], dict[str, Any], list[str]]] = [
    ("defaults", [K("s", "a/spine"), K("b", "a/block"), K("n", "kubernetes.io/hostname")], {}, []),
    ("explicit", [K("r", "example.com/region", "RegionLayer"), K("s", "a/spine")], {}, []),
    ("no-layer", [K("r", "topology.kubernetes.io/region")], {},
     ["topology key 'r' (node label 'topology.kubernetes.io/region') has no Koordinator layer"]),
    ("same-layer", [K("b", "a/block"), K("l", "a/leaf")], {}, ["'b' and 'l' both map to layer BlockLayer"]),
    ("cluster-layer", [K("c", "a/cluster", "ClusterTopologyLayer")], {}, ["uses layer ClusterTopologyLayer"]),
    ("node-not-last", [K("n", "kubernetes.io/hostname"), K("b", "a/block")], {},
     ["maps to NodeTopologyLayer", "is listed after 'n' (NodeTopologyLayer)"]),
    ("wrong-order", [K("b", "a/block"), K("s", "a/spine")], {},
     ["'s' (SpineLayer) is listed after 'b' (BlockLayer)"]),
    ("zero-wait", [], {"waiting_time": "0s"}, ["gang.waiting_time '0s' must be positive"]),
    ("wait-disagrees", [], {"waiting_time": "90s", "schedule_timeout_seconds": 60}, ["disagree"]),
]


@pytest.mark.parametrize(("keys", "gang", "fragments"), [c[1:] for c in POOL_CHECKS], ids=[c[0] for c in POOL_CHECKS])
def test_check_pool(keys: list[dict[str, str]], gang: dict[str, Any], fragments: list[str]) -> None:
    pool = load_config(load_text(pool_config(gang, keys), "toporender.yaml")[0]).pools["p"]
    errors = check_pool("p", pool)
    assert len(errors) == len(fragments), errors
    for err, fragment in zip(errors, fragments):
        assert err.startswith("pool 'p': ")
        assert fragment in err


def test_pool_problems_point_at_the_field() -> None:
    keys = [K("b", "a/block"), K("l", "a/leaf"), K("r", "x/region"), K("s", "a/spine", "SpineLayer")]
    pool = load_config(load_text(pool_config({"waiting_time": "0s"}, keys), "toporender.yaml")[0]).pools["p"]
    locs = [loc for loc, _ in pool_problems(pool)]
    assert locs == [("topology_keys", 1, "label"), ("topology_keys", 2, "label"), ("topology_keys", 3),
                    ("gang", "waiting_time")]


def test_check_pool_ignores_other_backends() -> None:
    assert check_pool("k", PoolConfig(backend="kai", topology_keys=[{"key": "r", "label": "x/region"}])) == []


def test_unresolvable_layer_is_a_user_error_even_unchecked() -> None:
    config = pool_config(keys=[K("r", "topology.kubernetes.io/region")])
    wf = workflow(TWO, {"ra": [("r", "x", R)], "rb": [("r", "x", R)]})
    with pytest.raises(UserError, match="has no Koordinator layer"):
        render_text(config, wf)


POOL_OBJECTS = [
    ("node-key", [K("b", "a/block"), K("n", "kubernetes.io/hostname")],
     [{"labelKey": ["a/block"], "topologyLayer": "BlockLayer"},
      {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"}]),
    ("explicit", [K("r", "example.com/region", "RegionLayer"), K("z", "topology.kubernetes.io/zone")],
     [{"labelKey": ["example.com/region"], "topologyLayer": "RegionLayer"},
      {"labelKey": ["topology.kubernetes.io/zone"], "parentTopologyLayer": "RegionLayer",
       "topologyLayer": "DatacenterLayer"},
      {"parentTopologyLayer": "DatacenterLayer", "topologyLayer": "NodeTopologyLayer"}]),
    ("only-node", [K("n", "kubernetes.io/hostname")], [{"topologyLayer": "NodeTopologyLayer"}]),
]


@pytest.mark.parametrize(("keys", "entries"), [c[1:] for c in POOL_OBJECTS], ids=[c[0] for c in POOL_OBJECTS])
def test_pool_objects(keys: list[dict[str, str]], entries: list[dict[str, Any]]) -> None:
    result = render_text(pool_config(keys=keys, render_pool_objects=True), workflow(TWO, {"ra": [], "rb": []}))
    (cnt,) = kinds(result.objects, "ClusterNetworkTopology")
    assert cnt["metadata"] == {"name": "default", "labels": {"toporender.dev/pool": "p"}}
    assert cnt["spec"] == {"networkTopologySpec": entries}
    assert_valid(result.objects)


def test_no_pool_objects_without_keys() -> None:
    assert KoordinatorBackend().pool_objects("p", PoolConfig(backend="koordinator"), "default") == []


def test_every_gather_layer_is_declared_in_the_cluster_network_topology() -> None:
    objects = render_text(CONFIG, (FIXTURES / "prefer-gather.yaml").read_text(),
                          (FIXTURES / "spine-must-gather.yaml").read_text().replace("gang-example", "other")).objects
    (cnt,) = kinds(objects, "ClusterNetworkTopology")
    declared = {e["topologyLayer"] for e in cnt["spec"]["networkTopologySpec"]}
    for pg in kinds(objects, "PodGroup"):
        for rule in json.loads(pg["metadata"]["annotations"][SPEC])["gatherStrategy"]:
            assert rule["layer"] in declared
    assert_valid(objects)


# ---- same intent on KAI and Koordinator -----------------------------------------------------------------

KAI_VS_KOORD = [
    ("spine-required", [("a", "r"), ("b", "r"), ("c", "r")], {"r": [("spine", "s", R), ("block", "b", P)]}),
    ("split-blocks", [("a", "r1"), ("b", "r1"), ("c", "r2"), ("d", "r2")],
     {"r1": [("spine", "s", R), ("block", "b1", R)], "r2": [("spine", "s", R), ("block", "b2", R)]}),
    ("master-worker", [("m", "rm"), ("w0", "rw"), ("w1", "rw")],
     {"rm": [("block", "x", P), ("accelerator", "m", R)], "rw": [("block", "x", P), ("accelerator", "w", R)]}),
]


@pytest.mark.parametrize(("tasks", "res"), [c[1:] for c in KAI_VS_KOORD], ids=[c[0] for c in KAI_VS_KOORD])
def test_same_tasks_same_domains_on_kai_and_koordinator(tasks: list[tuple[str, str]],
                                                        res: dict[str, list[tuple[str, str, str]]]) -> None:
    """The gang split (KAI leaf subgroups <-> Koordinator PodGroups) and the whole-gang levels agree."""
    wf = workflow(tasks, res)
    koord = render_text(CONFIG, wf).objects
    kai = render_text(CONFIG.replace("backend: koordinator", "backend: kai"), wf).objects
    task_names = [t for t, _ in tasks]

    def partition(objs: list[dict[str, Any]], label: str) -> set[frozenset[str]]:
        by: dict[str, set[str]] = {}
        for t in task_names:
            by.setdefault(pod(objs, t)["metadata"]["labels"].get(label, ""), set()).add(t)
        return {frozenset(v) for v in by.values()}

    assert partition(koord, PG_LABEL) == partition(kai, "kai.scheduler/subgroup-name")

    (kai_pg,) = kinds(kai, "PodGroup")
    top = kai_pg["spec"].get("topologyConstraint", {})
    pool = load_config(load_text(CONFIG, "toporender.yaml")[0]).pools["fabric"]
    layer = {k.label: default_layer(k.label) for k in pool.topology_keys}
    rules = json.loads(kinds(koord, "PodGroup")[0]["metadata"]["annotations"].get(SPEC, '{"gatherStrategy":[]}'))
    must = [r["layer"] for r in rules["gatherStrategy"] if r["strategy"] == "MustGather"]
    prefer = [r["layer"] for r in rules["gatherStrategy"] if r["strategy"] == "PreferGather"]
    assert must == ([layer[top["requiredTopologyLevel"]]] if "requiredTopologyLevel" in top else [])
    assert prefer[-1:] == ([layer[top["preferredTopologyLevel"]]] if "preferredTopologyLevel" in top else [])
    assert_valid(koord)


# ---- the example repo -----------------------------------------------------------------------------------


def test_example_repo() -> None:
    objects = render_repo(EXAMPLE).objects
    assert_valid(objects)
    (cnt,) = kinds(objects, "ClusterNetworkTopology")
    assert [e["topologyLayer"] for e in cnt["spec"]["networkTopologySpec"]] == \
        ["SpineLayer", "BlockLayer", "AcceleratorLayer", "NodeTopologyLayer"]
    pgs = kinds(objects, "PodGroup")
    assert [pg["spec"]["minMember"] for pg in pgs] == [5]
    for pg in pgs:
        ann = pg["metadata"]["annotations"]
        assert json.loads(ann[SPEC]) == {"gatherStrategy": [
            {"layer": "SpineLayer", "strategy": "MustGather"}, {"layer": "BlockLayer", "strategy": "PreferGather"}]}
        assert pg["spec"]["scheduleTimeoutSeconds"] == 900
        assert ann["gang.scheduling.koordinator.sh/mode"] == "Strict"
    config = load_config(load_text((EXAMPLE / "toporender.yaml").read_text(), "toporender.yaml")[0])
    assert all(check_pool(name, pool) == [] for name, pool in config.pools.items())
