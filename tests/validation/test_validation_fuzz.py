"""Property tests: the validator never raises on arbitrary damage to real objects, and damage is noticed.

Each case takes a valid fixture stream, replaces one node (anywhere, including keys' values deep inside
annotations and subgroups) with an arbitrary JSON value, and validates with both core backends.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toporender.validation import _builtin_kinds, validate_objects
from toporender.validation._crd import errors_to_problems

VALID = sorted((Path(__file__).parent / "fixtures" / "valid").glob("*.yaml"))
STREAMS = [[d for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d is not None] for p in VALID]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=12,
)


def _versions(path: Path) -> tuple[str, str]:
    """The KAI and DRA versions a valid fixture is written for (from its '# options:' header)."""
    head = path.read_text(encoding="utf-8").splitlines()[0]
    kai = "v0.14.0" if "kai_version=v0.14.0" in head else "main"
    dra = "v25.12.0" if "dra_version=v25.12.0" in head else "main"
    return kai, dra


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.extend(_paths(value, (*prefix, i)))
    return out


def _replace(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = root
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return root


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), value=json_values, core=st.booleans())
def test_damaged_objects_never_raise(data: st.DataObject, value: Any, core: bool) -> None:
    stream_index = data.draw(st.integers(min_value=0, max_value=len(STREAMS) - 1))
    stream = copy.deepcopy(STREAMS[stream_index])
    obj_index = data.draw(st.integers(min_value=0, max_value=len(stream) - 1))
    path = data.draw(st.sampled_from(_paths(stream[obj_index])))
    stream[obj_index] = _replace(stream[obj_index], path, value)
    kai, dra = _versions(VALID[stream_index])
    problems = validate_objects(stream, core=core, kai_version=kai, dra_version=dra)
    assert all(isinstance(p, str) and p for p in problems)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), core=st.booleans())
def test_removing_a_required_or_typed_value_is_reported(data: st.DataObject, core: bool) -> None:
    """Replacing a string leaf with a non-string of another JSON type is always reported somewhere."""
    stream_index = data.draw(st.integers(min_value=0, max_value=len(STREAMS) - 1))
    stream = copy.deepcopy(STREAMS[stream_index])
    obj_index = data.draw(st.integers(min_value=0, max_value=len(stream) - 1))
    candidates = [p for p in _paths(stream[obj_index]) if p and p[0] in ("apiVersion", "kind", "metadata", "spec")]
    strings = []
    for p in candidates:
        node: Any = stream[obj_index]
        for step in p:
            node = node[step]
        if isinstance(node, str):
            strings.append(p)
    if not strings:
        return
    path = data.draw(st.sampled_from(strings))
    stream[obj_index] = _replace(stream[obj_index], path, data.draw(st.sampled_from([{"x": 1}, [1, 2], True])))
    kai, dra = _versions(VALID[stream_index])
    assert validate_objects(stream, core=core, kai_version=kai, dra_version=dra), (VALID[stream_index].name, path)


CORE_OBJECTS = [
    obj
    for path in sorted((Path(__file__).parent / "fixtures").glob("*/*.yaml"))
    for obj in yaml.safe_load_all(path.read_text(encoding="utf-8"))
    if isinstance(obj, dict) and obj.get("apiVersion") == "v1" and obj.get("kind") in ("Pod", "Service")
]


def _both(obj: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    kind = obj["kind"]
    check = _builtin_kinds._kv_check("1.32", kind, "v1")
    validator = _builtin_kinds.kv_jsonschema_validator("1.32", kind, "v1")
    assert check is not None and validator is not None
    fast: list[tuple[str, str]] = []
    check(obj, (), fast)
    return sorted(set(fast)), errors_to_problems(validator, obj, "Kubernetes 1.32")


def test_compiled_kubernetes_schema_agrees_with_jsonschema_on_fixtures() -> None:
    assert len(CORE_OBJECTS) > 50
    for obj in CORE_OBJECTS:
        fast, reference = _both(obj)
        assert fast == reference, obj.get("metadata")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), value=json_values)
def test_compiled_kubernetes_schema_agrees_with_jsonschema_on_damage(data: st.DataObject, value: Any) -> None:
    obj = copy.deepcopy(data.draw(st.sampled_from(CORE_OBJECTS)))
    path = data.draw(st.sampled_from(_paths(obj)[1:]))
    obj = _replace(obj, path, value)
    if not isinstance(obj.get("kind"), str) or obj["kind"] not in ("Pod", "Service"):
        return
    fast, reference = _both(obj)
    assert fast == reference
