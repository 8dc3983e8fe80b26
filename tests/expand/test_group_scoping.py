"""Topology groups are named inside their parent domain, as OSMO's tree builder names them (by path)."""

from __future__ import annotations

from typing import Any

import yaml

from toporender.load.yaml_source import load_text
from toporender.pipeline import render_documents
from toporender.validation import validate_objects

CONFIG = """
namespace: ml
pools:
  p:
    backend: kai
    kai_version: v0.15
    topology_keys:
    - {key: zone, label: topology.kubernetes.io/zone}
    - {key: rack, label: topology.kubernetes.io/rack}
"""


def render(tasks: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """One group; each task has its own resource placing it in (zone group, rack group)."""
    resources = {f"r-{t}": {"gpu": 1, "topology": [{"key": "zone", "group": z}, {"key": "rack", "group": r}]}
                 for t, (z, r) in tasks.items()}
    workflow = yaml.safe_dump({"workflow": {
        "name": "w",
        "groups": [{"name": "g", "tasks": [{"name": t, "resource": f"r-{t}", "image": "x"} for t in tasks]}],
        "resources": resources,
    }})
    result = render_documents(load_text(CONFIG, "toporender.yaml")[0], [load_text(workflow, "workflows/w.yaml")[0]])
    assert validate_objects(result.objects, kai_version="main") == []
    (pg,) = [o for o in result.objects if o["kind"] == "PodGroup"]
    pods = {p["metadata"]["labels"]["toporender.dev/task"]: p["metadata"]["labels"].get("kai.scheduler/subgroup-name")
            for p in result.objects if p["kind"] == "Pod"}
    return {"spec": pg["spec"], "pods": pods}


def test_one_rack_name_under_two_zones_is_two_racks() -> None:
    """OSMO's topology.rst shape: rack group r1 in zone za and rack group r1 in zone zb."""
    got = render({"a": ("za", "r1"), "b": ("za", "r1"), "c": ("zb", "r1"), "d": ("zb", "r2")})
    names = {sg["name"]: sg for sg in got["spec"]["subGroups"]}
    assert set(names) == {"za-r1", "zb", "zb-r1", "zb-r2"}
    assert names["zb-r1"]["parent"] == "zb" and names["zb-r2"]["parent"] == "zb"
    assert names["za-r1"]["topologyConstraint"]["requiredTopologyLevel"] == "topology.kubernetes.io/rack"
    assert got["pods"] == {"a": "za-r1", "b": "za-r1", "c": "zb-r1", "d": "zb-r2"}


def test_same_path_is_one_domain() -> None:
    got = render({"a": ("za", "r1"), "b": ("za", "r1"), "c": ("zb", "r1"), "d": ("zb", "r1")})
    assert [sg["name"] for sg in got["spec"]["subGroups"]] == ["za-r1", "zb-r1"]
    assert got["pods"] == {"a": "za-r1", "b": "za-r1", "c": "zb-r1", "d": "zb-r1"}
