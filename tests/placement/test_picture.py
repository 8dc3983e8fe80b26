"""The plan picture: every placed GPU drawn once, by gang, and big pools aggregated to fewer cells."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

from conftest import ROOT
from toporender.expand.levels import LevelConstraint
from toporender.pipeline import plan_repo
from toporender.placement import picture
from toporender.placement.demand import GangDemand, PodDemand
from toporender.placement.inventory import Inventory, Node
from toporender.placement.packer import pack

NS = {"s": "http://www.w3.org/2000/svg"}


def _marks(svg: str, cls: str) -> list[ET.Element]:
    return [e for e in ET.fromstring(svg).iter(f"{{{NS['s']}}}rect") if e.get("class") == cls]


def test_every_placed_gpu_is_drawn_once_in_its_gangs_color() -> None:
    plans = plan_repo(ROOT / "examples" / "multi-rack-zone")
    svg = picture.plan_svg(plans)
    drawn = Counter()
    for rect in _marks(svg, "gang"):
        drawn[rect.get("data-gang")] += int(rect.get("data-gpus", "0"))
    expected = {key: g.gpus for _, plan in plans for key, g in plan.gangs.items() if g.placed}
    assert dict(drawn) == expected
    free = sum(int(r.get("data-gpus", "0")) for r in _marks(svg, "free"))
    assert free == sum(d.free for _, plan in plans for d in plan.domains_at(plan.levels[-1]))


def _pool(zones: int, racks: int, nodes: int) -> Inventory:
    return Inventory.of([Node(f"z{z}-r{r}-n{n}", {"zone": f"z{z}", "rack": f"z{z}-r{r}"}, 8)
                         for z in range(zones) for r in range(racks) for n in range(nodes)], "generated", {})


def test_ten_thousand_nodes_are_drawn_as_fewer_cells() -> None:
    inv = _pool(4, 250, 10)
    gangs = [GangDemand(f"g{i}", f"g{i}", LevelConstraint("rack"), (),
                        tuple(PodDemand(f"p{j}", 8) for j in range(4))) for i in range(50)]
    gangs.append(GangDemand("huge", "huge", LevelConstraint("rack"), (),
                            tuple(PodDemand(f"p{j}", 8) for j in range(20))))
    plan = pack(inv, ["zone", "rack"], gangs)
    svg = picture.plan_svg([("big", plan)])
    cells = [e for e in ET.fromstring(svg).iter(f"{{{NS['s']}}}g") if e.get("class") == "domain"]
    assert len(cells) == 4, "1,000 racks are more than a picture holds: the zones are the cells"
    assert not _marks(svg, "node-gang") and not _marks(svg, "node-free"), "10,000 nodes are not drawn one by one"
    assert sum(int(r.get("data-gpus", "0")) for r in _marks(svg, "gang")) == 50 * 32
    unplaceable = [e for e in ET.fromstring(svg).iter(f"{{{NS['s']}}}text") if e.get("class") == "unplaceable"]
    assert [e.get("data-gang") for e in unplaceable] == ["huge"]
    assert "needs 160 GPUs in one rack" in (unplaceable[0].text or "")


def test_small_pools_show_their_finest_domains() -> None:
    plan = pack(_pool(1, 3, 2), ["zone", "rack"], [GangDemand("g", "g", LevelConstraint("rack"), (),
                                                             (PodDemand("p", 8),))])
    svg = picture.plan_svg([("small", plan)])
    paths = [e.get("data-path") for e in ET.fromstring(svg).iter(f"{{{NS['s']}}}g") if e.get("class") == "domain"]
    assert paths == ["z0/z0-r0", "z0/z0-r1", "z0/z0-r2"]
    nodes = [e.get("data-node") for e in ET.fromstring(svg).iter(f"{{{NS['s']}}}g") if e.get("class") == "node"]
    assert len(nodes) == 6, "a small pool shows every node, sized by its GPUs"
    assert sum(int(r.get("data-gpus", "0")) for r in _marks(svg, "node-gang")) == 8
    assert picture.plan_html(svg, "t").startswith("<!doctype html>") and "<script" not in svg
