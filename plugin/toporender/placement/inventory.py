"""Node inventory: the committed snapshot of the cluster the packer plans against.

Two input shapes are accepted: the compact ``NodeInventory`` form that ``toporender inventory import`` writes
(sorted, small, reviewable in a pull request) and a raw ``kubectl get nodes -o yaml|json`` dump (``List`` /
``NodeList``). Both become the same immutable :class:`Inventory`; every problem is reported at its
``path:line:col``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from toporender.errors import Diagnostic, Position, UserError, fail

if TYPE_CHECKING:
    # only for annotations: the YAML reader is imported where a file is read, so packing an inventory built in
    # memory does not pay for loading it
    from toporender.load.yaml_source import Document, Loc

API_VERSION = "toporender.dev/v1alpha1"
KIND = "NodeInventory"
GPU_RESOURCE = "nvidia.com/gpu"
HARD_EFFECTS = ("NoSchedule", "NoExecute")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Labels that node-feature-discovery and legacy kubelets add by the hundred; they never carry topology.
NOISY_LABEL_PREFIXES = ("feature.node.kubernetes.io/", "beta.kubernetes.io/")


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint; only NoSchedule and NoExecute keep pods away."""

    key: str
    value: str | None
    effect: str

    def __str__(self) -> str:
        """As ``kubectl describe node`` writes it: ``key=value:effect``, or ``key:effect`` without a value."""
        return f"{self.key}{'' if self.value is None else '=' + self.value}:{self.effect}"


@dataclass(slots=True, unsafe_hash=True)
class Node:
    """One node as the packer sees it.

    Never changed once read (mypy holds its ``Final`` fields to that), but not a frozen dataclass: building one
    costs four times as long, and a 1M-GPU inventory has 216,000 nodes."""

    name: Final[str]
    labels: Final[Mapping[str, str]]
    gpus: Final[int]
    used_gpus: Final[int] = 0
    unschedulable: Final[bool] = False
    taints: Final[tuple[Taint, ...]] = ()

    @property
    def free_gpus(self) -> int:
        return max(0, self.gpus - self.used_gpus)

    @property
    def flavor(self) -> str | None:
        """GPU flavor: ``gpu.flavor`` if set, else the GPU feature discovery product label."""
        return self.labels.get("gpu.flavor") or self.labels.get("nvidia.com/gpu.product")


@dataclass(frozen=True)
class Inventory:
    """All nodes, sorted by name (the order never influences a plan)."""

    nodes: tuple[Node, ...]
    source: str = ""
    positions: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def of(nodes: Iterable[Node], source: str = "", positions: Mapping[str, Position] | None = None) -> Inventory:
        return Inventory(tuple(sorted(nodes, key=lambda n: n.name)), source, positions if positions is not None else {})


class NodePositions(Mapping[str, Position]):
    """Node name -> where the node is written, worked out only when a message asks.

    A position needs the exact YAML loader's second pass over the file; an inventory of tens of
    thousands of nodes should not pay for it when nothing is wrong.
    """

    def __init__(self) -> None:
        self._where: dict[str, tuple[Document, Loc]] = {}

    def add(self, name: str, doc: Document, loc: Loc) -> None:
        self._where[name] = (doc, loc)

    def __getitem__(self, name: str) -> Position:
        doc, loc = self._where[name]
        return doc.pos(loc)

    def __contains__(self, name: object) -> bool:
        return name in self._where

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def tolerates(tolerations: Iterable[tuple[str, str | None, str | None]], taint: Taint) -> bool:
    """Kubernetes toleration matching: an empty key with operator Exists tolerates everything."""
    for key, value, effect in tolerations:
        if effect not in (None, "", taint.effect):
            continue
        if key == "" and value is None:
            return True
        if key != taint.key:
            continue
        if value is None or value == (taint.value or ""):
            return True
    return False


def _str_map(doc: Document, loc: Loc, value: Any, what: str, diags: list[Diagnostic]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        diags.append(Diagnostic(f"{what} must be a mapping of strings", doc.pos(loc)))
        return {}
    out: dict[str, str] = {}
    for k, v in value.items():
        if isinstance(v, bool) or v is None or isinstance(v, (dict, list)):
            diags.append(Diagnostic(f"{what} value for {k!r} must be a string", doc.pos(loc + (k,))))
            continue
        out[str(k)] = str(v)
    return out


def _int(doc: Document, loc: Loc, value: Any, what: str, diags: list[Diagnostic], default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        diags.append(Diagnostic(f"{what} must be a non-negative integer, got {value!r}", doc.pos(loc)))
        return default
    if value > MAX_NODE_GPUS:
        diags.append(Diagnostic(f"{what} {value} is more than any node has (at most {MAX_NODE_GPUS}); fix the "
                                "count", doc.pos(loc)))
        return default
    return value


def _taints(doc: Document, loc: Loc, value: Any, diags: list[Diagnostic]) -> tuple[Taint, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        diags.append(Diagnostic("taints must be a list of {key, value?, effect}", doc.pos(loc)))
        return ()
    out = []
    for i, t in enumerate(value):
        if not isinstance(t, dict) or not isinstance(t.get("key"), str):
            diags.append(Diagnostic("each taint needs a string 'key'", doc.pos(loc + (i,))))
            continue
        effect = t.get("effect")
        if effect not in EFFECTS:
            diags.append(Diagnostic(f"taint effect must be one of {', '.join(EFFECTS)}", doc.pos(loc + (i, "effect"))))
            continue
        v = t.get("value")
        out.append(Taint(t["key"], None if v is None else str(v), effect))
    return sorted_taints(out)


def sorted_taints(taints: Iterable[Taint]) -> tuple[Taint, ...]:
    """A node's taints in the one order every reader gives them (by key, value, effect), so that equal nodes
    compare equal however their taints were written."""
    return tuple(sorted(taints, key=lambda t: (t.key, t.value or "", t.effect)))


_COMPACT_FIELDS = frozenset(("name", "gpus", "usedGPUs", "labels", "unschedulable", "taints"))
_PLAIN_FIELDS = frozenset(("name", "gpus", "labels"))


def _plain_compact_node(raw: Any) -> Node | None:
    """The node of a compact entry that is plainly valid (name, GPUs, string labels, nothing else), else None.

    Nearly every entry of a committed inventory has this shape; reading it needs none of the checks, copies
    and source positions that :func:`_compact_node` spends on the general case, and the labels mapping read
    from the file is taken as it is.
    """
    fields = plain_fields(raw)
    if fields is None or not _all_strings(fields[1]):
        return None
    return Node(*fields)


def plain_fields(raw: Any) -> tuple[str, dict[str, Any], int] | None:
    """(name, labels, GPUs) of a compact entry with just those fields, each of its plain type, else None; the
    labels' keys and values are for the caller to check (:func:`_all_strings`)."""
    if type(raw) is not dict or raw.keys() - _PLAIN_FIELDS:
        return None
    name = raw.get("name")
    gpus = raw.get("gpus")
    labels = raw.get("labels")
    if (type(name) is not str or not name or type(gpus) is not int or not 0 <= gpus <= MAX_NODE_GPUS
            or type(labels) is not dict):
        return None
    return name, labels, gpus


def _all_strings(mapping: dict[Any, Any]) -> bool:
    """Whether every key and value is a ``str`` (so :func:`_str_map` would rebuild the same mapping)."""
    return all(type(k) is str for k in mapping) and all(type(v) is str for v in mapping.values())


def _compact_node(doc: Document, loc: Loc, raw: Any, diags: list[Diagnostic]) -> Node | None:
    if not isinstance(raw, dict):
        diags.append(Diagnostic("each node must be a mapping with name, gpus and labels", doc.pos(loc)))
        return None
    unknown = sorted(set(raw) - _COMPACT_FIELDS)
    for k in unknown:
        diags.append(Diagnostic(f"unknown node field {k!r} (allowed: name, gpus, usedGPUs, labels, "
                                "unschedulable, taints)", doc.pos(loc + (k,))))
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        diags.append(Diagnostic("node needs a non-empty string 'name'", doc.pos(loc)))
        return None
    gpus = _int(doc, loc + ("gpus",), raw.get("gpus"), "gpus", diags)
    used = _int(doc, loc + ("usedGPUs",), raw.get("usedGPUs"), "usedGPUs", diags)
    if used > gpus:
        diags.append(Diagnostic(f"usedGPUs ({used}) exceeds gpus ({gpus})", doc.pos(loc + ("usedGPUs",))))
    unsched = raw.get("unschedulable", False)
    if not isinstance(unsched, bool):
        diags.append(Diagnostic("unschedulable must be true or false", doc.pos(loc + ("unschedulable",))))
        unsched = False
    labels = _str_map(doc, loc + ("labels",), raw.get("labels"), "labels", diags)
    taints = _taints(doc, loc + ("taints",), raw.get("taints"), diags)
    return Node(name, labels, gpus, min(used, gpus), unsched, taints)


def _k8s_node(doc: Document, loc: Loc, raw: Any, diags: list[Diagnostic]) -> Node | None:
    if not isinstance(raw, dict) or raw.get("kind", "Node") != "Node":
        diags.append(Diagnostic("expected a Node object", doc.pos(loc)))
        return None
    meta = raw.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        diags.append(Diagnostic("Node needs metadata.name", doc.pos(loc + ("metadata",))))
        return None
    labels = _str_map(doc, loc + ("metadata", "labels"), meta.get("labels"), "metadata.labels", diags)
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    alloc = status.get("allocatable") or {} if isinstance(status, dict) else {}
    gpus = _int(doc, loc + ("status", "allocatable", GPU_RESOURCE), alloc.get(GPU_RESOURCE),
                f"status.allocatable[{GPU_RESOURCE!r}]", diags)
    unsched = bool(spec.get("unschedulable", False)) if isinstance(spec, dict) else False
    taints = _taints(doc, loc + ("spec", "taints"), spec.get("taints") if isinstance(spec, dict) else None, diags)
    return Node(name, labels, gpus, 0, unsched, taints)


def nodes_from_documents(documents: Iterable[Document]) -> list[Node]:
    """Read nodes from compact inventories, NodeLists or single Node documents; raise all problems at once."""
    return _read(documents)[0]


def inventory_from_documents(documents: Iterable[Document], display: str) -> Inventory:
    """An inventory read from documents that remembers where each node is written, for messages about it."""
    nodes, positions = _read(documents)
    return Inventory.of(nodes, display, positions)


def _read(documents: Iterable[Document]) -> tuple[list[Node], NodePositions]:
    positions = NodePositions()
    diags: list[Diagnostic] = []
    nodes: list[Node] = []
    for doc in documents:
        data = doc.data
        if data is None:
            continue
        if not isinstance(data, dict):
            diags.append(Diagnostic("expected a NodeInventory, NodeList or Node document", doc.pos()))
            continue
        kind = data.get("kind")
        found: list[tuple[Loc, Node | None]] = []
        if kind == KIND:
            if data.get("apiVersion") != API_VERSION:
                diags.append(Diagnostic(f"apiVersion must be {API_VERSION}", doc.pos(("apiVersion",))))
            items = data.get("nodes")
            if not isinstance(items, list):
                diags.append(Diagnostic("'nodes' must be a list", doc.pos(("nodes",))))
                continue
            found = [(("nodes", i), _plain_compact_node(n) or _compact_node(doc, ("nodes", i), n, diags))
                     for i, n in enumerate(items)]
        elif kind in ("List", "NodeList"):
            items = data.get("items")
            if not isinstance(items, list):
                diags.append(Diagnostic("'items' must be a list", doc.pos(("items",))))
                continue
            found = [(("items", i), _k8s_node(doc, ("items", i), n, diags)) for i, n in enumerate(items)]
        elif kind == "Node":
            found = [((), _k8s_node(doc, (), data, diags))]
        else:
            diags.append(Diagnostic(f"expected kind {KIND}, NodeList, List or Node, got {kind!r}",
                                    doc.pos(("kind",))))
            continue
        for loc, node in found:
            if node is None:
                continue
            if node.name in positions:
                diags.append(Diagnostic(f"node {node.name!r} is listed twice", doc.pos(loc)))
                continue
            positions.add(node.name, doc, loc)
            nodes.append(node)
    if diags:
        raise UserError(diags)
    return nodes, positions


MAX_INVENTORY_BYTES = 256 * 1024 * 1024
MAX_NODE_GPUS = 4096
"""More GPUs than any node has; a larger count is a typo (and would size the packer's tables)."""


def value_budget(size: int) -> int:
    """How many YAML values an inventory file of ``size`` bytes may hold once its aliases are expanded.

    A node takes at least a few bytes per value even in the compact form (about 8 in practice), so a
    quarter of the size leaves room for every real inventory, a 1,000,000-GPU one included, while a small
    file of nested aliases (a billion laughs) is refused after a few thousand values instead of gigabytes."""
    return size // 4 + 10_000


def inventory_documents(text: str, display: str) -> list[Document]:
    """The documents of an inventory's text, within the inventory's size and alias budget."""
    from toporender.load.yaml_source import load_text

    return load_text(text, display, max_bytes=MAX_INVENTORY_BYTES, max_nodes=value_budget(len(text)))


def read_inventory_file(path: Path, display: str) -> list[Document]:
    """The documents of an inventory file, within the inventory's size and alias budget."""
    from toporender.load.yaml_source import read_text

    return inventory_documents(read_text(path, display, MAX_INVENTORY_BYTES), display)


def load_inventory(path: Path, display: str) -> Inventory:
    """Load an inventory file; ``display`` is the path shown in messages."""
    docs = read_inventory_file(path, display)
    nodes, positions = _read(docs)
    if not nodes:
        raise fail("inventory lists no nodes", docs[0].pos() if docs else Position(display))
    return Inventory.of(nodes, display, positions)


def compact_node(node: Node) -> dict[str, Any]:
    """The compact, diff-friendly form of one node (defaults omitted, keys sorted)."""
    out: dict[str, Any] = {"name": node.name, "gpus": node.gpus}
    if node.used_gpus:
        out["usedGPUs"] = node.used_gpus
    labels = {k: node.labels[k] for k in sorted(node.labels) if not k.startswith(NOISY_LABEL_PREFIXES)}
    out["labels"] = labels
    if node.unschedulable:
        out["unschedulable"] = True
    if node.taints:
        out["taints"] = [
            {"key": t.key, **({"value": t.value} if t.value is not None else {}), "effect": t.effect}
            for t in node.taints
        ]
    return out


def import_inventory(documents: Iterable[Document]) -> dict[str, Any]:
    """Turn a live ``kubectl get nodes`` dump (or an inventory) into the compact, sorted form."""
    return compact_inventory(nodes_from_documents(documents))


def compact_inventory(nodes: Iterable[Node]) -> dict[str, Any]:
    """The compact inventory of ``nodes``, sorted by name."""
    ordered = sorted(nodes, key=lambda n: n.name)
    return {"apiVersion": API_VERSION, "kind": KIND, "nodes": [compact_node(n) for n in ordered]}


_COMPACT_ORDER = ("name", "gpus", "usedGPUs", "labels", "unschedulable", "taints")
_SIMPLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
"""Strings written the way labels and node names are; PyYAML writes them plain or single-quoted."""


def inventory_yaml(inventory: dict[str, Any]) -> str:
    """``yaml.safe_dump(inventory, sort_keys=False)``, byte for byte, in a fraction of its time.

    PyYAML writes a 200,000-node inventory in minutes. Its output for the compact form is regular:
    block mappings and sequences, and each string plain unless the YAML 1.1 resolver reads it as another
    type, when it is single-quoted. That is what this writes, for strings of the characters labels and
    names use; any other string, where PyYAML's quoting rules are subtler, sends the whole inventory to
    PyYAML (its C emitter when libyaml is there)."""
    import yaml

    resolver = yaml.resolver.Resolver()
    seen: dict[str, str] = {}

    def scalar(text: str) -> str:
        out = seen.get(text)
        if out is None:
            if not _SIMPLE.fullmatch(text) or len(text) > 64:
                raise ValueError(text)
            tag = resolver.resolve(yaml.ScalarNode, text, (True, False))
            out = seen[text] = text if tag == "tag:yaml.org,2002:str" else f"'{text}'"
        return out

    try:
        lines = [f"apiVersion: {scalar(inventory['apiVersion'])}", f"kind: {scalar(inventory['kind'])}"]
        nodes = inventory["nodes"]
        lines.append("nodes:" if nodes else "nodes: []")
        for node in nodes:
            if list(node) != [k for k in _COMPACT_ORDER if k in node] or len(node) != len(node.keys() & _COMPACT_ORDER):
                raise ValueError("not in compact_node's order")
            lines.append(f"- name: {scalar(node['name'])}")
            lines.append(f"  gpus: {int(node['gpus'])}")
            if "usedGPUs" in node:
                lines.append(f"  usedGPUs: {int(node['usedGPUs'])}")
            labels = node["labels"]
            lines.append("  labels:" if labels else "  labels: {}")
            lines.extend(f"    {scalar(k)}: {scalar(v)}" for k, v in labels.items())
            if "unschedulable" in node:
                if node["unschedulable"] is not True:
                    raise ValueError("compact_node writes unschedulable only when it is true")
                lines.append("  unschedulable: true")
            taints = node.get("taints") or []
            if taints:
                lines.append("  taints:")
            for taint in taints:
                if list(taint) not in (["key", "value", "effect"], ["key", "effect"]):
                    raise ValueError("not in compact_node's order")
                lines.append(f"  - key: {scalar(taint['key'])}")
                if "value" in taint:
                    lines.append(f"    value: {scalar(taint['value'])}")
                lines.append(f"    effect: {scalar(taint['effect'])}")
    except ValueError:
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        return yaml.dump(inventory, Dumper=dumper, sort_keys=False, default_flow_style=False)
    return "\n".join(lines) + "\n"
