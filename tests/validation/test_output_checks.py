"""The checks every host runs before writing: their bulk fast paths hide nothing the object-by-object rules find.

``output_problems`` reads Pods as columns and checks each distinct value once, and custom resources through a
compiled gate before jsonschema. Each case damages one node of a valid stream (the fixtures, plus a render of
many Pods) and compares with the same rules applied object by object, without any fast path.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.validation.test_validation_fuzz import STREAMS, VALID, _paths, _replace, _versions, json_values

from toporender.validation import _crd, _cross_object, output_problems, validate_object
from toporender.validation._common import identity
from toporender.validation._koordinator import koordinator_annotations
from toporender.validation._kueue import kueue_pod
from toporender.validation._meta import check_metadata

ROOT = Path(__file__).resolve().parents[2]


def _render(example: str) -> list[dict[str, Any]]:
    from toporender.pipeline import render_repo

    return render_repo(ROOT / "examples" / example).objects


def _is_pod(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1"


def _one_by_one(objs: list[Any], kai: str, monkeypatch: pytest.MonkeyPatch) -> set[tuple[int, str]]:
    """The same rules as :func:`output_problems`, object by object, without its bulk paths."""
    out: set[tuple[int, str]] = set()
    for i, obj in enumerate(objs):
        if _is_pod(obj):
            found = (check_metadata(obj, "", "Pod", "Namespaced", False) + koordinator_annotations(obj, is_pod=True)
                     + kueue_pod(obj))
            out |= {(i, f"{identity(obj)}: {path}: {msg}") for path, msg in found}
        else:
            out |= {(i, p) for p in validate_object(obj, kai_version=kai, core=False)}
    with monkeypatch.context() as m:
        m.setattr(_cross_object, "_regular_pods", lambda *args: None)
        m.setattr(_crd, "_fast_gate", lambda *args: None)
        dicts = [o for o in objs if isinstance(o, dict)]
        index = {id(o): i for i, o in enumerate(objs)}
        out |= {(index[id(o)], f"{identity(o)}: {p}: {m}") for o, p, m in _cross_object.cross_object(dicts, kai)}
    return out


def _fast(objs: list[Any], kai: str) -> set[tuple[int, str]]:
    return set(output_problems(objs, kai_version=kai))


STREAMS_AND_RENDERS = [(s, _versions(p)[0]) for s, p in zip(STREAMS, VALID) if _versions(p)[1] == "main"] + [
    (_render("multi-rack-zone"), "main"),
    (_render("koordinator-spine"), "main"),
    (_render("kueue-spine-blocks"), "main"),
    (_render("volcano-hypernodes"), "main"),
]


@pytest.mark.parametrize("index", range(len(STREAMS_AND_RENDERS)))
def test_valid_streams_pass(index: int) -> None:
    stream, kai = STREAMS_AND_RENDERS[index]
    assert _fast(stream, kai) == set()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data(), value=json_values)
def test_damage_is_found_as_object_by_object(data: st.DataObject, value: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    stream, kai = data.draw(st.sampled_from(STREAMS_AND_RENDERS))
    stream = copy.deepcopy(stream)
    obj_index = data.draw(st.integers(min_value=0, max_value=len(stream) - 1))
    path = data.draw(st.sampled_from(_paths(stream[obj_index])))
    stream[obj_index] = _replace(stream[obj_index], path, value)
    assert _fast(stream, kai) == _one_by_one(stream, kai, monkeypatch)


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
       "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}


def _pods(n: int, **meta: Any) -> list[dict[str, Any]]:
    pods = []
    for i in range(n):
        pod = copy.deepcopy(POD)
        pod["metadata"].update(copy.deepcopy(meta))
        pod["metadata"]["name"] = f"p-{i}"
        pods.append(pod)
    return pods


# Damage to one Pod among many, the cases a bulk check could miss: (field of the last Pod's metadata, value).
PER_POD_CASES = {
    "name with a capital": ("name", "p-X"),
    "name ends with a dash": ("name", "p-"),
    "name with a dot and a dash": ("name", "p.-q"),
    "name repeated": ("name", "p-0"),
    "name too long": ("name", "p" * 254),
    "namespace with a dot": ("namespace", "m.l"),
    "label value too long": ("labels", {"a": "v" * 64}),
    "label value is a number": ("labels", {"a": 3}),
    "label value is a list": ("labels", {"a": [1]}),
    "label key with two slashes": ("labels", {"a/b/c": "v"}),
    "annotation is a number": ("annotations", {"a": 1}),
    "annotation key with a space": ("annotations", {"a b": "v"}),
    "annotations over 256 KiB": ("annotations", {"a": "é" * 140_000}),
    "bad Koordinator index": ("annotations", {"gang.scheduling.koordinator.sh/network-topology-index": "x"}),
    "finalizer": ("finalizers", ["bad finalizer"]),
    "server-set field": ("uid", "1"),
    "labels not a mapping": ("labels", ["a"]),
    "orphan subgroup label": ("labels", {"kai.scheduler/subgroup-name": "leaf"}),
    "PodGroup not rendered": ("annotations", {"pod-group-name": "missing"}),
}


@pytest.mark.parametrize("case", sorted(PER_POD_CASES))
def test_one_bad_pod_among_many_is_reported(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    field, value = PER_POD_CASES[case]
    pods = _pods(50, labels={"team": "a"}, annotations={"example.com/x": "y"})
    pods[-1]["metadata"][field] = value
    found = _fast(pods, "main")
    assert found, case
    assert found == _one_by_one(pods, "main", monkeypatch)


def test_a_pod_on_the_default_scheduler_in_a_gang_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = copy.deepcopy(_render("multi-rack-zone"))
    pod = next(o for o in stream if _is_pod(o))
    pod["spec"]["schedulerName"] = "default-scheduler"
    found = _fast(stream, "main")
    assert any("must name the KAI scheduler" in msg for _, msg in found)
    assert found == _one_by_one(stream, "main", monkeypatch)


CRD_OBJECTS = [
    (obj, _versions(path))
    for path, stream in zip(VALID, STREAMS)
    for obj in stream
    if isinstance(obj, dict) and "." in str(obj.get("apiVersion"))
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), value=json_values)
def test_compiled_crd_gate_passes_only_what_jsonschema_passes(data: st.DataObject, value: Any) -> None:
    obj, (kai, dra) = data.draw(st.sampled_from(CRD_OBJECTS))
    obj = copy.deepcopy(obj)
    path = data.draw(st.sampled_from(_paths(obj)[1:]))
    obj = _replace(obj, path, value)
    group, _, version = str(obj.get("apiVersion")).rpartition("/")
    doc = _crd.select(group, str(obj.get("kind")), {"scheduling.run.ai/PodGroup": "v0.14.0" if kai != "main"
                                                    else "main", "kai.scheduler/Topology": "v0.14.0"
                                                    if kai != "main" else "main",
                                                    "resource.nvidia.com/ComputeDomain": dra})
    if doc is None or version not in doc.schemas:
        return
    gate = _crd._fast_gate(doc.file, doc.group, doc.kind, doc.variant, version)
    assert gate is not None
    found: list[tuple[str, str]] = []
    gate(obj, (), found)
    reference = _crd.errors_to_problems(_crd._compiled(doc.file, doc.group, doc.kind, doc.variant, version), obj,
                                        "CRD")
    assert (not found) == (not reference), (found, reference)


def test_every_vendored_crd_has_a_compiled_gate() -> None:
    for (group, kind), docs in _crd.registry().items():
        for doc in docs.values():
            for version in doc.schemas:
                assert _crd._fast_gate(doc.file, group, kind, doc.variant, version) is not None, doc.file


def test_streams_with_annotations_to_add_to() -> None:
    assert len(_ANNOTATED) >= 4


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data(), value=st.text(max_size=40), size=st.sampled_from([0, 60_000, 180_000, 270_000]),
       damage=st.none() | json_values, fmt=st.sampled_from(["json", "yaml"]),
       pad=st.sampled_from(["x", "\u2028", "\u00e9"]))
def test_placement_notes_bear_on_no_rule_but_the_annotation_limit(data: st.DataObject, value: str, size: int,
                                                                  damage: Any, fmt: str, pad: str) -> None:
    """What placement adds to a PodGroup's or pod's own non-empty annotations (its keys, any text) changes
    no problem the output check finds, but the annotations' size limit; a stream whose every annotated
    object's text ``annotations_fit`` has the problems it had without the notes."""
    from toporender.emit.stream import dump_chunks
    from toporender.placement.outcomes import PLACEMENT_NOTES
    from toporender.validation import annotations_fit

    stream, kai = data.draw(st.sampled_from(_ANNOTATED))
    stream = copy.deepcopy(stream)
    for obj in stream:  # as built, before placement
        for key in PLACEMENT_NOTES:
            obj.get("metadata", {}).get("annotations", {}).pop(key, None)
    if damage is not None:
        obj_index = data.draw(st.integers(min_value=0, max_value=len(stream) - 1))
        path = data.draw(st.sampled_from(_paths(stream[obj_index])))
        stream[obj_index] = _replace(stream[obj_index], path, damage)
    before = _fast(stream, kai)
    keys = data.draw(st.lists(st.sampled_from(PLACEMENT_NOTES), min_size=1, unique=True))
    fits = True
    annotated = 0
    for obj in stream:
        meta = obj.get("metadata") if isinstance(obj, dict) and obj.get("kind") in ("PodGroup", "Pod") else None
        notes = meta.get("annotations") if isinstance(meta, dict) else None
        if not isinstance(notes, dict) or not notes or any(key in notes for key in PLACEMENT_NOTES):
            continue
        notes.update({key: value + pad * (size // len(pad.encode()) if i == 0 else 0) for i, key in enumerate(keys)})
        annotated += 1
        try:
            fits = fits and annotations_fit(len(b"".join(dump_chunks([obj], fmt))))
        except TypeError:  # a value the YAML writer does not take
            fits = False
    after = _fast(stream, kai)
    if fits:
        assert after == before
    else:
        assert all("exceeds the limit" in problem for _, problem in after - before), after - before
    assert annotated or damage is not None


_ANNOTATED = [(stream, kai) for stream, kai in STREAMS_AND_RENDERS
              if any(isinstance(o.get("metadata", {}).get("annotations"), dict) and o["metadata"]["annotations"]
                     for o in stream if o.get("kind") in ("PodGroup", "Pod"))]
