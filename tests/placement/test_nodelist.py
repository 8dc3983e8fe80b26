"""``inventory import`` of large dumps: read one node at a time, the same nodes and messages as reading whole.

The streamed readers are compared with the whole-file reader on dumps in kubectl's layouts, with blocks and
batches made tiny so that every item straddles a boundary somewhere; the compact YAML writer is compared
with ``yaml.safe_dump``.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.placement.conftest import FIXTURES, ROOT

from toporender.cli import cli
from toporender.errors import UserError
from toporender.placement import nodelist
from toporender.placement.inventory import compact_inventory, inventory_documents, inventory_yaml, nodes_from_documents

_spec = importlib.util.spec_from_file_location("inventory_generate", ROOT / "benchmarks" / "inventory" / "generate.py")
assert _spec is not None and _spec.loader is not None
_generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_generate)
write = _generate.write


def streamed(text: str) -> dict[str, Any]:
    return compact_inventory(nodelist.read_nodes(io.StringIO(text), "dump"))


def whole(text: str) -> dict[str, Any]:
    return compact_inventory(nodes_from_documents(inventory_documents(text, "dump")))


def error(read: Any, text: str) -> list[str]:
    with pytest.raises(UserError) as exc:
        read(text)
    return [str(d) for d in exc.value.diagnostics]


@pytest.fixture(params=[(7, 40), (64, 1), (4096, 300)], ids=["tiny-blocks", "one-item-batches", "small-blocks"])
def small(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    block, batch = request.param
    monkeypatch.setattr(nodelist, "BLOCK_CHARS", block)
    monkeypatch.setattr(nodelist, "BATCH_CHARS", batch)


def dump(tmp_path: Path, suffix: str, nodes: int = 9, lean: bool = False) -> str:
    path = tmp_path / f"nodes{suffix}"
    write(path, nodes, lean, 0)
    return path.read_text()


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize("lean", [False, True], ids=["full", "lean"])
def test_streamed_dump_reads_as_the_whole_file(small: None, tmp_path: Path, suffix: str, lean: bool) -> None:
    text = dump(tmp_path, suffix, lean=lean)
    assert streamed(text) == whole(text)
    assert len(streamed(text)["nodes"]) == 9


LAYOUTS = {
    "indented items": (FIXTURES / "nodelist.yaml").read_text(),
    "comments and blank lines": "apiVersion: v1\n# nodes\nitems:\n\n# first\n- metadata: {name: a}\n\n  status: "
                                "{allocatable: {nvidia.com/gpu: '4'}}\n# second\n- metadata: {name: b}\nkind: List\n",
    "kind before items": "kind: NodeList\napiVersion: v1\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n",
    "document marker first": "---\napiVersion: v1\nitems:\n- metadata: {name: a}\nkind: List\n",
    "json compact": json.dumps({"apiVersion": "v1", "items": [{"metadata": {"name": n}, "status": {
        "allocatable": {"nvidia.com/gpu": 8}}} for n in "ba"], "kind": "List"}),
    "json empty items": '{"kind": "List", "items": []}',
    "compact inventory (read whole)": "apiVersion: toporender.dev/v1alpha1\nkind: NodeInventory\nnodes:\n"
                                      "- {name: a, gpus: 4, labels: {}}\n",
    "single node (read whole)": "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n",
    "empty items (read whole)": "apiVersion: v1\nitems: []\nkind: List\n",
}


@pytest.mark.parametrize("text", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_layouts(small: None, text: str) -> None:
    assert streamed(text) == whole(text)


BAD = {
    "gpus not a number, yaml": ("apiVersion: v1\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n  status:\n"
                                "    allocatable: {nvidia.com/gpu: lots}\nkind: List\n",
                                "dump:6:19: status.allocatable['nvidia.com/gpu'] must be a non-negative integer"),
    "duplicate node, yaml": ("apiVersion: v1\nitems:\n- metadata: {name: a}\n- metadata: {name: a}\nkind: List\n",
                             "dump:4:3: node 'a' is listed twice"),
    "duplicate node, json": ('{"kind": "List", "items": [\n  {"metadata": {"name": "a"}},\n'
                             '  {"metadata": {"name": "a"}}\n]}', "dump:3:3: node 'a' is listed twice"),
    "broken json": ('{"kind": "List", "items": [\n  {"metadata": {"name": "a"}},\n  {"metadata": }\n]}',
                    "dump:3:16: invalid JSON: Expecting value"),
    "not a list": ('{"kind": "Pod", "items": []}', "dump:1:1: expected kind NodeList or List"),
    "broken yaml item": ("apiVersion: v1\nitems:\n- metadata: {name: a}\n- metadata: {name: [b}\nkind: List\n",
                         "dump:4:"),
}


@pytest.mark.parametrize(("text", "expect"), BAD.values(), ids=BAD.keys())
def test_problems_are_positioned_in_the_dump(small: None, text: str, expect: str) -> None:
    messages = error(streamed, text)
    assert any(m.startswith(expect) for m in messages), messages


labels = st.dictionaries(
    st.sampled_from(["zone", "nvidia.com/gpu.clique", "k8s.io/x", "a" * 70, "rack", "x y"]),
    st.sampled_from(["8", "yes", "on", "0777", "1e3", "1.5", "null", "~", "z1", "", "a b", "-x", "'q'", "r-1",
                     "0546fb3d-6b62.1", "12:30", "x" * 70, "true", "NO"]), max_size=4)
nodes = st.lists(st.fixed_dictionaries(
    {"name": st.sampled_from(["n1", "n2", "0777", "yes", "node.with.dots", "n" * 80]),
     "gpus": st.integers(0, 16), "labels": labels},
    optional={"usedGPUs": st.integers(1, 4), "unschedulable": st.just(True),
              "taints": st.lists(st.fixed_dictionaries({"key": st.sampled_from(["k", "nvidia.com/gpu"]),
                                                        "effect": st.sampled_from(["NoSchedule", "NoExecute"])},
                                                       optional={"value": st.sampled_from(["v", "8", "on"])}),
                                 min_size=1, max_size=2)}), max_size=4)


@settings(max_examples=300, deadline=None)
@given(nodes)
def test_inventory_yaml_is_what_pyyaml_writes(node_list: list[dict[str, Any]]) -> None:
    order = ("name", "gpus", "usedGPUs", "labels", "unschedulable", "taints")
    for compact in (False, True):
        if compact:  # the order compact_node writes, which takes the fast path when the strings allow
            node_list = [{k: n[k] for k in order if k in n} for n in node_list]
        inventory = {"apiVersion": "toporender.dev/v1alpha1", "kind": "NodeInventory", "nodes": node_list}
        assert inventory_yaml(inventory) == yaml.safe_dump(inventory, sort_keys=False, default_flow_style=False)


def test_inventory_yaml_of_an_imported_dump_takes_the_fast_path(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yaml, "dump", lambda *a, **k: pytest.fail("fell back to PyYAML"))
    inventory = streamed(dump(tmp_path, ".json"))
    assert inventory_yaml(inventory) == yaml.safe_dump(inventory, sort_keys=False, default_flow_style=False)


def test_import_writes_the_file_only_on_success(tmp_path: Path) -> None:
    out = tmp_path / "inventory" / "nodes.yaml"
    out.parent.mkdir()
    good = CliRunner().invoke(cli, ["inventory", "import", str(FIXTURES / "nodelist.yaml"), "-o", str(out)])
    assert good.exit_code == 0 and good.stdout == "", good.output
    assert out.read_text() == inventory_yaml(whole((FIXTURES / "nodelist.yaml").read_text()))
    before = out.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD["gpus not a number, yaml"][0])
    failed = CliRunner().invoke(cli, ["inventory", "import", str(bad), "-o", str(out)])
    assert failed.exit_code == 1 and out.read_text() == before
    assert [p.name for p in out.parent.iterdir()] == ["nodes.yaml"], "no temp file left behind"


def test_import_refuses_non_utf8_and_directories(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"apiVersion: v1\nitems:\n- metadata: {name: caf\xe9}\nkind: List\n")
    result = CliRunner().invoke(cli, ["inventory", "import", str(bad)])
    assert result.exit_code == 1 and result.stdout == ""
    assert f"{bad}:3:23: file is not valid UTF-8" in result.stderr, "the place, as for any other file"
    result = CliRunner().invoke(cli, ["inventory", "import", str(tmp_path)])
    assert result.exit_code == 1 and "found a directory" in result.stderr


@pytest.mark.parametrize("text", [
    "apiVersion: v1\nitems:\n- metadata: {name: a}\n  note: " + "x" * 5000,
    '{"kind": "List", "items": [{"metadata": {"name": "' + "x" * 5000,
], ids=["yaml", "json"])
def test_a_huge_item_is_refused_not_read_without_end(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(nodelist, "BLOCK_CHARS", 64)
    monkeypatch.setattr(nodelist, "MAX_ITEM_CHARS", 1000)
    messages = error(streamed, text)
    assert any("larger than" in m or "longer than" in m for m in messages), messages


@pytest.fixture(params=[(256, 1), (256, 60)], ids=["one-item-batches", "small-batches"])
def batched(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks large enough that the first one shows the layout, batches small enough to cut between items."""
    block, batch = request.param
    monkeypatch.setattr(nodelist, "BLOCK_CHARS", block)
    monkeypatch.setattr(nodelist, "BATCH_CHARS", batch)


COMPACT = ("apiVersion: toporender.dev/v1alpha1\nkind: NodeInventory\nnodes:\n"
           "- {name: b, gpus: 8, labels: {zone: z1, rack: r1}}\n"
           "- name: a\n  gpus: 4\n  usedGPUs: 2\n  labels:\n    zone: z1\n    rack: r2\n"
           "  taints:\n  - {key: k, effect: NoSchedule}\n"
           "- {name: c, gpus: 8, unschedulable: true, labels: {zone: z2, rack: r1}}\n")


def test_a_compact_inventory_reads_in_batches_as_whole(batched: None, tmp_path: Path) -> None:
    from toporender.placement.inventory import inventory_from_documents, read_inventory_file
    from toporender.placement.nodelist import read_inventory

    path = tmp_path / "nodes.yaml"
    path.write_text(COMPACT)
    streamed_inv = read_inventory(path, "inventory/nodes.yaml")
    whole_inv = inventory_from_documents(read_inventory_file(path, "inventory/nodes.yaml"), "inventory/nodes.yaml")
    assert streamed_inv.nodes == whole_inv.nodes
    assert not isinstance(streamed_inv.positions, type(whole_inv.positions)), "the batched reader was used"
    assert {n: streamed_inv.positions[n] for n in "abc"} == {n: whole_inv.positions[n] for n in "abc"}


@pytest.mark.parametrize(("text", "expect"), [
    (COMPACT.replace("gpus: 4", "gpus: four"), "inventory/nodes.yaml:6:3: gpus must be a non-negative integer"),
    (COMPACT.replace("name: c", "name: b"), "inventory/nodes.yaml:13:3: node 'b' is listed twice"),
    (COMPACT.replace("NodeInventory", "Inventory"), "inventory/nodes.yaml:1:1: expected apiVersion"),
], ids=["bad gpus", "duplicate", "wrong kind"])
def test_compact_inventory_problems_keep_their_positions(batched: None, tmp_path: Path, text: str,
                                                         expect: str) -> None:
    from toporender.placement.nodelist import read_inventory

    path = tmp_path / "nodes.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as exc:
        read_inventory(path, "inventory/nodes.yaml")
    messages = [str(d) for d in exc.value.diagnostics]
    assert any(m.startswith(expect) for m in messages), messages


@pytest.mark.parametrize("extra", [
    "- {name: d, gpus: 8, labels: {zone: z1, rack: r1}}\n",
    "- {name: b, gpus: 8, labels: {zone: z1, rack: r1}}\n",
    "- {name: d, gpus: 8, labels: {zone: z1, rack: 1}}\n",
    "- {name: d, gpus: 8, labels: {zone: {a: b}}}\n",
    "- {name: d, gpus: 8, labels: {zone: [z1]}}\n",
    "- {name: d, gpus: 5000, labels: {}}\n",
    "- {name: '', gpus: 8, labels: {}}\n",
    "- {name: d, gpus: true, labels: {}}\n",
], ids=["labels shared", "plain duplicate", "int label", "mapping label", "list label", "too many GPUs",
        "empty name", "bool GPUs"])
def test_plain_compact_entries_read_as_the_general_reader_reads_them(batched: None, tmp_path: Path,
                                                                     extra: str) -> None:
    """Plain entries skip the general conversion; what they give, or what is wrong with them, is the same."""
    plain, parsed, whole = _outcomes(tmp_path, COMPACT + extra)
    assert plain == parsed == whole


HEADER = "apiVersion: toporender.dev/v1alpha1\nkind: NodeInventory\nnodes:\n"
SCALARS = ["a", "gb200-n1", "node-7", "yes", "no", "on", "Off", "true", "null", "Null", "~", "123", "0777", "0o17",
           "1e3", "1.5", ".5", "-1", "+1", "0x1F", "2026-01-01", "1_000", "'yes'", "'123'", "'a'", "zone.a/b",
           "a b", "a:b", "a#b", "'a'b'", "ñ", "a_b", "'_a'", "1_0"]


def _flow(name: str, gpus: str, labels: list[tuple[str, str]]) -> str:
    pairs = ", ".join(f"{k}: {v}" for k, v in labels)
    return f"- {{name: {name}, gpus: {gpus}, labels: {{{pairs}}}}}\n"


def _block(name: str, gpus: str, labels: list[tuple[str, str]], used: str | None = None, cordoned: bool = False,
           taints: tuple[tuple[str, str | None, str], ...] = ()) -> str:
    lines = "".join(f"    {k}: {v}\n" for k, v in labels)
    out = f"- name: {name}\n  gpus: {gpus}\n" + (f"  usedGPUs: {used}\n" if used is not None else "")
    out += f"  labels:{chr(10) + lines if labels else ' {}' + chr(10)}"
    out += "  unschedulable: true\n" if cordoned else ""
    if taints:
        out += "  taints:\n" + "".join(f"  - key: {k}\n" + (f"    value: {v}\n" if v is not None else "")
                                       + f"    effect: {e}\n" for k, v, e in taints)
    return out


def _outcomes(tmp_path: Path, text: str) -> tuple[Any, Any, Any]:
    """What the batched reader gives with its plain items taken as they are, what it gives with every batch
    parsed as YAML, and what the whole-file reader gives: nodes, or the messages."""
    from toporender.placement.inventory import inventory_from_documents, read_inventory_file
    from toporender.placement.nodelist import read_inventory

    path = tmp_path / "nodes.yaml"
    path.write_text(text)

    def outcome(read: Any) -> Any:
        try:
            return read().nodes
        except UserError as err:
            return [str(d) for d in err.diagnostics]

    plain = outcome(lambda: read_inventory(path, "inventory/nodes.yaml"))
    original = nodelist._plain_batch
    nodelist._plain_batch = lambda text, collector: False  # type: ignore[assignment]
    try:
        parsed = outcome(lambda: read_inventory(path, "inventory/nodes.yaml"))
    finally:
        nodelist._plain_batch = original
    whole = outcome(lambda: inventory_from_documents(read_inventory_file(path, "inventory/nodes.yaml"),
                                                     "inventory/nodes.yaml"))
    return plain, parsed, whole


@pytest.mark.parametrize("item", [_flow, _block], ids=["flow", "block"])
@pytest.mark.parametrize(("name", "gpus", "labels"), [
    ("a", "4", [("zone", "z1"), ("rack", "r1")]),
    ("'yes'", "0", []),
    ("yes", "4", []),
    ("a", "4", [("zone", "yes")]),
    ("a", "4", [("zone", "'123'")]),
    ("a", "4", [("zone", "123")]),
    ("a", "4", [("on", "z")]),
    ("a", "4", [("zone", "2026-01-01")]),
    ("a", "4", [("zone", "z1"), ("zone", "z2")]),
    ("a", "4096", []),
    ("a", "4097", []),
    ("a", "007", []),
    ("a", "4", [("zone", "z1 z2")]),
    ("1e3", "4", [("k", ".5")]),
], ids=["plain", "quoted name", "bool name", "bool label", "quoted int label", "int label", "bool key",
        "timestamp label", "key twice", "most GPUs", "too many GPUs", "octal GPUs", "space", "exponent"])
def test_plain_items_read_as_the_yaml_reader_reads_them(tmp_path: Path, item: Any, name: str, gpus: str,
                                                        labels: list[tuple[str, str]]) -> None:
    text = HEADER + item("b", "8", [("zone", "z1")]) + item(name, gpus, labels) + item("c", "8", [("zone", "z1")])
    plain, parsed, whole = _outcomes(tmp_path, text)
    assert plain == parsed == whole


@pytest.mark.parametrize(("used", "cordoned", "taints"), [
    ("2", False, ()),
    ("8", True, ()),
    ("9", False, ()),
    (None, True, (("nvidia.com/gpu", None, "NoSchedule"),)),
    (None, False, (("b", "x", "NoExecute"), ("a", "'true'", "PreferNoSchedule"), ("a", None, "NoSchedule"))),
    (None, False, (("k", "true", "NoSchedule"),)),
    (None, False, (("k", "v", "Sometimes"),)),
    (None, False, (("k", "v", "'NoSchedule'"),)),
    ("0", True, (("k", "1", "NoSchedule"),)),
], ids=["used", "all used, cordoned", "more used than there are", "taint without value", "taints sorted",
        "bool taint value", "unknown effect", "quoted effect", "int taint value"])
def test_cordons_taints_and_used_gpus_read_as_the_yaml_reader_reads_them(
        tmp_path: Path, used: str | None, cordoned: bool, taints: tuple[tuple[str, str | None, str], ...]) -> None:
    text = HEADER + _block("a", "8", [("zone", "z1")]) + _block("b", "8", [("zone", "z1")], used, cordoned, taints)
    plain, parsed, whole = _outcomes(tmp_path, text)
    assert plain == parsed == whole


_GPU_COUNTS = st.sampled_from(["0", "4", "8", "4097", "08", "true"])
_TAINTS = st.lists(st.tuples(st.sampled_from(SCALARS), st.none() | st.sampled_from(SCALARS),
                             st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule", "Never"])), max_size=2)
_EXTRAS = st.tuples(st.none() | _GPU_COUNTS, st.booleans(), _TAINTS)


@settings(max_examples=80, deadline=None)
@given(items=st.lists(st.tuples(st.sampled_from(SCALARS), _GPU_COUNTS,
                                st.lists(st.tuples(st.sampled_from(SCALARS), st.sampled_from(SCALARS)), max_size=3),
                                st.none() | _EXTRAS), max_size=6),
       extra=st.sampled_from(["", "  usedGPUs: 2\n", "  # note\n", "\n"]))
def test_generated_inventories_read_the_same_either_way(
        items: list[tuple[str, str, list[tuple[str, str]], tuple[str | None, bool, list[Any]] | None]],
        extra: str) -> None:
    """Flow items (no extras), block items with or without used GPUs, a cordon and taints, and a line that
    breaks the layout somewhere: with and without the plain reader, and as the whole file reads them."""
    import tempfile

    body = "".join(_flow(name, gpus, labels) if extras is None else _block(name, gpus, labels, extras[0], extras[1],
                                                                           tuple(extras[2]))
                   for name, gpus, labels, extras in items)
    cut = body.find("- ", 1)
    text = HEADER + (body[:cut] + extra + body[cut:] if cut > 0 else body)
    with tempfile.TemporaryDirectory() as tmp:
        plain, parsed, whole = _outcomes(Path(tmp), text)
    assert plain == parsed
    if isinstance(whole, tuple):  # a YAML error in a batch may be worded otherwise than in the whole file
        assert plain == whole


def test_what_inventory_import_writes_is_read_without_a_yaml_parser(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from toporender.placement.inventory import Node, Taint, compact_inventory
    from toporender.placement.nodelist import read_inventory

    taints = (Taint("nvidia.com/gpu", None, "NoSchedule"), Taint("pool", "train", "NoExecute"))
    nodes = [Node(f"gpu-{i:03d}", {"topology.kubernetes.io/zone": f"z{i % 2}", "nvidia.com/gpu.count": "8",
                                   "ready": "true"}, 8, used_gpus=2 * (i % 3 == 1), unschedulable=i % 7 == 3,
                  taints=taints[:i % 3]) for i in range(50)]
    path = tmp_path / "nodes.yaml"
    path.write_text(inventory_yaml(compact_inventory(nodes)))
    taken: list[bool] = []
    original = nodelist._plain_batch
    monkeypatch.setattr(nodelist, "_plain_batch", lambda text, c: taken.append(original(text, c)) or taken[-1])
    inventory = read_inventory(path, "inventory/nodes.yaml")
    assert taken == [True]
    assert list(inventory.nodes) == nodes
    assert inventory.nodes[0].labels is inventory.nodes[2].labels, "nodes with the same labels share them"


def test_what_the_plain_reader_remembers_is_bounded_not_a_result(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Remembered label sets and strings are dropped past a bound (a hostname label differs on every node);
    batch after batch, the nodes stay the same."""
    from toporender.placement.inventory import Node, compact_inventory
    from toporender.placement.nodelist import read_inventory

    nodes = [Node(f"gpu-{i:03d}", {"kubernetes.io/hostname": f"gpu-{i:03d}", "zone": f"z{i % 3}"}, 8)
             for i in range(40)]
    path = tmp_path / "nodes.yaml"
    path.write_text(inventory_yaml(compact_inventory(nodes)))
    whole = read_inventory(path, "inventory/nodes.yaml").nodes
    monkeypatch.setattr(nodelist, "_MAX_REMEMBERED", 2)
    monkeypatch.setattr(nodelist, "BLOCK_CHARS", 256)
    monkeypatch.setattr(nodelist, "BATCH_CHARS", 300)
    taken: list[bool] = []
    original = nodelist._plain_batch
    monkeypatch.setattr(nodelist, "_plain_batch", lambda text, c: taken.append(original(text, c)) or taken[-1])
    assert read_inventory(path, "inventory/nodes.yaml").nodes == whole == tuple(nodes)
    assert len(taken) > 3 and all(taken)
