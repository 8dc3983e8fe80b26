"""Fuzzing: generated valid and near-valid repos either render objects that pass the
output validator, or fail with a clean UserError; no other exception may escape.

The number of generated cases and of distinct error messages is printed in the pytest summary.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bad_input import LEAKS

from toporender.errors import UserError
from toporender.load.yaml_source import load_text
from toporender.pipeline import render_documents
from toporender.validation import validate_objects

STATS: dict[str, Any] = {"cases": 0, "rendered": 0, "errors": set()}

LEVELS = [("zone", "topology.kubernetes.io/zone"), ("spine", "example.com/spine"),
          ("rack", "example.com/rack"), ("clique", "nvidia.com/gpu.clique")]
names = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
weird = st.sampled_from(["", " ", "-x", "x_", "Upper_Case", "a" * 70, "ü", "a.b", "1", "true", "null", "x:y", "{{x}}"])


@st.composite
def pools(draw: st.DrawFn) -> dict[str, Any]:
    backend = draw(st.sampled_from(["kai", "kai", "koordinator", "kueue", "volcano", "kube"]))
    keys = draw(st.lists(st.sampled_from(LEVELS), unique=True, max_size=4))
    keys.sort(key=LEVELS.index)
    pool: dict[str, Any] = {"backend": backend}
    if keys and backend != "kube":
        pool["topology_keys"] = [{"key": k, "label": lab} for k, lab in keys]
    if draw(st.booleans()):
        pool["render_pool_objects"] = True
    if draw(st.booleans()):
        pool["kai_version"] = draw(st.sampled_from(["v0.14", "v0.15"]))
    if backend == "kueue":
        pool["kueue_version"] = draw(st.sampled_from(["v0.15", "v0.19"]))
        if draw(st.booleans()):
            pool["node_selector"] = {"example.com/pool": "gpu"}
    return pool


@st.composite
def workflows(draw: st.DrawFn, keys: list[str]) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for i in range(draw(st.integers(1, 3))):
        topo = []
        for key in draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys))) if keys else []:
            topo.append({"key": key, "group": draw(st.sampled_from(["a", "b", "default"])),
                         "requirementType": draw(st.sampled_from(["required", "preferred"]))})
        resources[f"r{i}"] = {"gpu": draw(st.integers(0, 8)), "cpu": draw(st.integers(1, 64)), "topology": topo}
    groups = []
    task_no = 0
    for g in range(draw(st.integers(1, 3))):
        tasks = []
        for _ in range(draw(st.integers(1, 5))):
            tasks.append({"name": f"t{task_no}", "resource": draw(st.sampled_from(sorted(resources)))})
            task_no += 1
        groups.append({"name": f"g{g}", "tasks": tasks})
    return {"workflow": {"name": draw(names), "groups": groups, "resources": resources}}


def mutate(draw: st.DrawFn, doc: Any) -> Any:
    """Apply one random near-miss edit somewhere in the document."""
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in list(node):
                paths.append((node, k))
                walk(node[k])
        elif isinstance(node, list):
            for i in range(len(node)):
                paths.append((node, i))
                walk(node[i])

    walk(doc)
    if not paths:
        return doc
    parent, key = draw(st.sampled_from(paths))
    action = draw(st.sampled_from(["delete", "type", "unknown", "weird", "number", "duplicate"]))
    if action == "delete" and isinstance(parent, dict):
        del parent[key]
    elif action == "type":
        parent[key] = draw(st.sampled_from([[], {}, 3, "x", None, True, 2.5]))
    elif action == "unknown" and isinstance(parent, dict):
        parent[draw(weird) or "unknownField"] = 1
    elif action == "weird":
        parent[key] = draw(weird)
    elif action == "number":
        parent[key] = draw(st.sampled_from([-1, 0, 10**12, 2**31, -(2**63)]))
    elif action == "duplicate" and isinstance(parent, list):
        parent.append(parent[key])
    return doc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_render_is_valid_or_a_clean_error(data: st.DataObject) -> None:
    pool = data.draw(pools())
    keys = [k["key"] for k in pool.get("topology_keys", [])]
    config: Any = {"namespace": "fuzz", "pools": {"p": pool}}
    wfs: list[Any] = [data.draw(workflows(keys)) for _ in range(data.draw(st.integers(1, 2)))]
    if data.draw(st.booleans()):
        target = data.draw(st.sampled_from(["config", "workflow"]))
        if target == "config":
            config = mutate(data.draw, config)
        else:
            wfs[0] = mutate(data.draw, wfs[0])
    STATS["cases"] += 1
    try:
        config_doc = load_text(yaml.safe_dump(config), "toporender.yaml")[0]
        docs = [load_text(yaml.safe_dump(w), f"workflows/w{i}.yaml")[0] for i, w in enumerate(wfs)]
        result = render_documents(config_doc, docs)
    except UserError as err:
        for d in err.diagnostics:
            assert d.message and "Traceback" not in d.message
            assert not LEAKS.search(d.message), d.message
            assert d.pos is None or d.pos.line >= 1
            STATS["errors"].add(re.sub(r"'[^']*'|\d+", "_", d.message)[:120])
        return
    STATS["rendered"] += 1
    assert validate_objects(result.objects, core=False) == []


GROUP_NAMES = st.sampled_from(["a", "b", "a-b", "b-c", "A_b", "a_B", "default", "x" * 63, "x" * 62 + "-y",
                               "r1", "R1", "r-1", "r_1", "z" * 40 + "-" + "z" * 22])


@st.composite
def requirement_trees(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A KAI pool with 2-4 levels, coarsest first, and a workflow whose resources walk random paths through them
    with adversarial group names."""
    levels = sorted(draw(st.lists(st.sampled_from(LEVELS), unique=True, min_size=2, max_size=4)), key=LEVELS.index)
    pool = {"backend": "kai", "kai_version": draw(st.sampled_from(["v0.14", "v0.15"])),
            "topology_keys": [{"key": k, "label": lab} for k, lab in levels]}
    resources: dict[str, Any] = {}
    used = draw(st.lists(st.sampled_from([k for k, _ in levels]), unique=True, min_size=1))
    for i in range(draw(st.integers(1, 4))):
        resources[f"r{i}"] = {"gpu": draw(st.integers(0, 8)), "topology": [
            {"key": key, "group": draw(GROUP_NAMES),
             "requirementType": draw(st.sampled_from(["required", "preferred"]))} for key in used]}
    tasks = [{"name": f"t{n}", "image": "x", "resource": draw(st.sampled_from(sorted(resources)))}
             for n in range(draw(st.integers(1, 8)))]
    workflow = {"workflow": {"name": draw(names), "groups": [{"name": "g", "tasks": tasks}], "resources": resources}}
    return {"namespace": "fuzz", "pools": {"p": pool}}, workflow


POSITIONED = re.compile(r"^\S+:\d+:\d+: \S")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(repo=requirement_trees())
def test_generated_trees_render_valid_output_or_a_positioned_error(repo: tuple[dict[str, Any], dict[str, Any]],
                                                                   tmp_path_factory: Any) -> None:
    """The render contract: exit 1 with path:line:col messages and nothing on stdout, or a stream the output
    checks accept; never a third outcome."""
    from conftest import run_cli, write_repo

    config, workflow = repo
    root = write_repo(tmp_path_factory.mktemp("tree"), {"toporender.yaml": yaml.safe_dump(config),
                                                        "workflows/w.yaml": yaml.safe_dump(workflow)})
    result = run_cli("render", "--format", "json", str(root))
    if result.code == 1:
        assert result.stdout == ""
        lines = [ln for ln in result.stderr.splitlines() if ln and not ln.startswith("warning")]
        assert lines and all(POSITIONED.match(ln) for ln in lines), result.stderr
        return
    assert result.code == 0, result.stderr
    objects = [yaml.safe_load(line) for line in result.stdout.splitlines()]
    assert validate_objects(objects, kai_version="main" if config["pools"]["p"]["kai_version"] == "v0.15"
                            else "v0.14.0", core=False) == []
