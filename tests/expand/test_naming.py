"""Subgroup names: readable, stable, valid DNS labels, and distinct for distinct group paths whatever the names."""

from __future__ import annotations

import json

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from toporender.expand.naming import DNS_LABEL, unique_names
from toporender.load.yaml_source import load_text
from toporender.pipeline import render_documents
from toporender.validation import validate_objects

# Names that collide once joined, sanitised or cut: dashes inside names, case and '_' variants, long names.
PIECE = st.sampled_from(["a", "b", "a-b", "b-c", "c", "A", "a_b", "A-B", "x" * 40, "x" * 62, "-", "a--b", "0"])
NAME = st.lists(PIECE, min_size=1, max_size=3).map("".join)
PATHS = st.lists(st.lists(NAME, min_size=1, max_size=4).map(tuple), min_size=1, max_size=12, unique=True)


@settings(max_examples=300, deadline=None)
@given(paths=PATHS)
def test_distinct_paths_get_distinct_valid_names(paths: list[tuple[str, ...]]) -> None:
    names = unique_names(["-".join(p) for p in paths], [json.dumps(p) for p in paths])
    assert len(set(names)) == len(names)
    for name in names:
        assert len(name) <= 63 and DNS_LABEL.match(name), name


@settings(max_examples=100, deadline=None)
@given(paths=PATHS)
def test_names_do_not_depend_on_the_order(paths: list[tuple[str, ...]]) -> None:
    named = dict(zip(paths, unique_names(["-".join(p) for p in paths], [json.dumps(p) for p in paths])))
    back = list(reversed(paths))
    again = dict(zip(back, unique_names(["-".join(p) for p in back], [json.dumps(p) for p in back])))
    assert named == again


def test_a_valid_name_is_kept_as_it_is() -> None:
    assert unique_names(["job-ra", "job-rb"]) == ["job-ra", "job-rb"]


def test_sanitising_collisions_keep_their_historical_suffixes() -> None:
    """``A_b`` and ``a-b`` were told apart by a hash of their text; they keep those names."""
    names = unique_names(["A_b", "a-b"])
    assert len(set(names)) == 2 and all(n.startswith("a-b-") for n in names)
    assert names == unique_names(["A_b", "a-b"], ["one", "two"])


CONFIG = """
namespace: ml
pools:
  p:
    backend: kai
    kai_version: v0.15
    topology_keys:
    - {key: zone, label: topology.kubernetes.io/zone}
    - {key: clique, label: nvidia.com/gpu.clique}
"""


def test_paths_that_join_to_one_text_render_two_subgroups() -> None:
    """Zone ``a-b`` with clique ``c``, and zone ``a`` with clique ``b-c``: both join to ``a-b-c``."""
    workflow = yaml.safe_dump({"workflow": {
        "name": "w",
        "groups": [{"name": "g", "tasks": [{"name": "t1", "resource": "r1", "image": "x"},
                                           {"name": "t2", "resource": "r2", "image": "x"}]}],
        "resources": {"r1": {"gpu": 1, "topology": [{"key": "zone", "group": "a-b"}, {"key": "clique", "group": "c"}]},
                      "r2": {"gpu": 1, "topology": [{"key": "zone", "group": "a"}, {"key": "clique", "group": "b-c"}]}},
    }})
    result = render_documents(load_text(CONFIG, "toporender.yaml")[0], [load_text(workflow, "workflows/w.yaml")[0]])
    (pg,) = [o for o in result.objects if o["kind"] == "PodGroup"]
    names = [sg["name"] for sg in pg["spec"]["subGroups"]]
    assert len(names) == len(set(names)) == 2
    assert validate_objects(result.objects, kai_version="main") == []
