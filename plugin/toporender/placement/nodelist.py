"""Node lists of any size read one node at a time: ``inventory import`` of kubectl dumps, and the pack stage's
read of a committed compact inventory.

``kubectl get nodes -o json`` of a cluster of a million GPUs is well over 100 MB. Read whole, its nodes
take several GiB as Python objects, while the compact inventory keeps a few labels per node. So the dump
is read in blocks: ``-o json`` item by item with the JSON decoder, ``-o yaml`` in batches of items cut at
the lines where kubectl starts an item, each batch read like any YAML file (so it gets the same YAML 1.1
rules and messages). Only each node's compact form is kept, with its label strings shared. Memory is
then the compact inventory plus one block, whatever the size of the dump. A compact inventory
(``nodes:``) is read the same way, in batches.

Any other layout (single Node documents, a list written some other way, an empty one) is read whole, within
the inventory size limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from toporender.errors import Diagnostic, Position, UserError, fail
from toporender.load.yaml_fast import plain_is_string
from toporender.load.yaml_source import Document, Loc, load_text
from toporender.placement.inventory import (
    API_VERSION,
    EFFECTS,
    KIND,
    MAX_INVENTORY_BYTES,
    MAX_NODE_GPUS,
    Inventory,
    Node,
    Taint,
    _compact_node,
    _k8s_node,
    _read,
    inventory_documents,
    inventory_from_documents,
    nodes_from_documents,
    plain_fields,
    read_inventory_file,
    sorted_taints,
    value_budget,
)

BLOCK_CHARS = 4 * 1024 * 1024
"""Characters read at a time."""
MAX_ITEM_CHARS = 64 * 1024 * 1024
"""A single Node larger than this is not a Node kubectl printed; refuse it rather than grow without end."""
MAX_ERRORS = 100
"""Stop collecting problems after this many: a dump with a systematic fault repeats it on every node."""
_LIST_KINDS = ("List", "NodeList")


def _moved(pos: Position, first_line: int, indent: int) -> Position:
    """A position in a batch moved to where the batch sits in the file (its items were dedented by ``indent``)."""
    return Position(pos.path, pos.line + first_line - 1, pos.col + indent, pos.data_path)


def _lines_moved(message: str, first_line: int) -> str:
    """A batch's message with the lines it names (``first at line N``) moved to where they are in the file."""
    return re.sub(r"(?<=\(first at line )\d+(?=\))", lambda m: str(int(m[0]) + first_line - 1), message)


class _Excerpt(Document):
    """A batch of a larger file: positions are moved to where the batch sits in the file."""

    def __init__(self, doc: Document, first_line: int, indent: int) -> None:
        super().__init__(doc.source, doc.index, doc.data, doc.marks, doc.text)
        self._inner, self._first_line, self._indent = doc, first_line, indent

    def pos(self, loc: Loc = ()) -> Position:
        return _moved(self._inner.pos(loc), self._first_line, self._indent)


@dataclass
class _Collector:
    """Nodes in reading order, duplicate names refused, label strings shared between nodes."""

    display: str
    nodes: list[Node] = field(default_factory=list)
    seen: dict[str, Position | None] = field(default_factory=dict)
    errors: list[Diagnostic] = field(default_factory=list)
    strings: dict[str, str] = field(default_factory=dict)
    key: str = "items"
    """The list of the document that holds the nodes."""
    convert: Callable[[Document, Loc, Any, list[Diagnostic]], Node | None] = _k8s_node
    """One list item to a node, problems appended."""
    compact: bool = False
    """Items are compact entries: the plain ones (name, GPUs, string labels) are taken without ``convert``,
    which sees only the others (and a plain one whose name was seen, for the message)."""
    label_sets: dict[str, dict[str, str] | None] = field(default_factory=dict)
    """The labels written out in a plain batch (:func:`_plain_batch`) -> their mapping (None: not plain); nodes
    with the same labels share one mapping."""
    scalars: dict[str, str | None] = field(default_factory=dict)
    """A string as a plain batch writes it -> the string it reads as, shared (None: not a string)."""

    def result(self) -> list[Node]:
        """The nodes, or every problem found (and that it stopped looking, past :data:`MAX_ERRORS`)."""
        if self.errors:
            more = len(self.errors) >= MAX_ERRORS
            raise UserError(self.errors + ([Diagnostic(f"stopped after {MAX_ERRORS} problems",
                                                       Position(self.display))] if more else []))
        return self.nodes

    def add(self, doc: Document, loc: Loc, raw: Any) -> None:
        if len(self.errors) >= MAX_ERRORS:
            return
        if self.compact and self._add_plain(raw):
            return
        node = self.convert(doc, loc, raw, self.errors)
        if node is None:
            return
        if node.name in self.seen:
            self.errors.append(Diagnostic(f"node {node.name!r} is listed twice", doc.pos(loc)))
            return
        self.seen[node.name] = None
        share = self.strings.setdefault
        labels = {share(k, k): share(v, v) for k, v in node.labels.items()}
        self.nodes.append(Node(node.name, labels, node.gpus, node.used_gpus, node.unschedulable, node.taints))

    def _add_plain(self, raw: Any) -> bool:
        """Take a compact entry that is plainly valid (as :func:`_plain_compact_node` judges) and not seen
        before, making its node once; False, having taken nothing, for anything else."""
        fields = plain_fields(raw)
        if fields is None or fields[0] in self.seen:
            return False
        name, labels, gpus = fields
        share = self.strings.setdefault
        shared = {}
        for k, v in labels.items():  # one pass that checks the types and shares the strings
            if type(k) is not str or type(v) is not str:
                return False
            shared[share(k, k)] = share(v, v)
        self.seen[name] = None
        self.nodes.append(Node(name, shared, gpus))
        return True


def read_nodes(stream: IO[str], display: str) -> list[Node]:
    """Every node of the dump in ``stream`` (JSON or YAML), all problems raised at once."""
    head = stream.read(BLOCK_CHARS)
    start = head.lstrip()[:1]
    collector = _Collector(display)
    streamed = (_json_items(head, stream, collector) if re.match(r'\s*\{\s*"', head)
                else _yaml_items(head, stream, collector) if start and start not in "[{" else False)
    if not streamed:
        text = head + stream.read(MAX_INVENTORY_BYTES + 1 - len(head))
        if len(text) > MAX_INVENTORY_BYTES:
            raise fail(f"an inventory that is not a kubectl NodeList may be at most {MAX_INVENTORY_BYTES // 2**20} "
                       "MiB; import the cluster's 'kubectl get nodes -o json' instead", Position(display))
        return nodes_from_documents(inventory_documents(text, display))
    return collector.result()


# ---------------------------------------------------------------------------------------------
# JSON


class _JsonBlocks:
    """The text of a stream as a window that grows at its end and is cut at its start."""

    def __init__(self, head: str, stream: IO[str], display: str) -> None:
        self.buf, self.stream, self.display = head, stream, display
        self.pos = 0
        self.eof = False
        self.line = 1
        self.line_start = 0
        self.counted = 0
        self.decoder = json.JSONDecoder()

    def more(self) -> bool:
        if self.eof:
            return False
        block = self.stream.read(BLOCK_CHARS)
        if not block:
            self.eof = True
            return False
        self.where(self.pos)
        self.buf = self.buf[self.pos:] + block
        self.counted -= self.pos
        self.line_start -= self.pos
        self.pos = 0
        return True

    def where(self, index: int) -> Position:
        """The line and column of ``buf[index]``; lines are counted once, as the window moves on."""
        if index > self.counted:
            newlines = self.buf.count("\n", self.counted, index)
            if newlines:
                self.line += newlines
                self.line_start = self.buf.rindex("\n", self.counted, index) + 1
            self.counted = index
        return Position(self.display, self.line, index - self.line_start + 1)

    def skip_space(self) -> str:
        """The next significant character (not consumed), or '' at the end."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf) or not self.more():
                return self.buf[self.pos:self.pos + 1]

    def expect(self, chars: str, what: str) -> str:
        found = self.skip_space()
        if not found or found not in chars:
            raise fail(f"invalid JSON: expected {what}", self.where(self.pos))
        self.pos += 1
        return found

    def value(self) -> tuple[Any, Position]:
        """The next JSON value and where it starts."""
        self.skip_space()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_ITEM_CHARS:
                    raise fail(f"a value larger than {MAX_ITEM_CHARS // 2**20} MiB", self.where(self.pos)) from None
                if self.more():
                    continue
                raise fail(f"invalid JSON: {exc.msg}", self.where(exc.pos)) from None
            if end < len(self.buf) or not self.more():  # a number may go on in the next block
                where = self.where(self.pos)
                self.pos = end
                return value, where


def _json_items(head: str, stream: IO[str], collector: _Collector) -> bool:
    blocks = _JsonBlocks(head, stream, collector.display)
    blocks.expect("{", "'{'")
    top: dict[str, Any] = {}
    items_seen = False
    if blocks.skip_space() == "}":
        blocks.pos += 1
    else:
        while True:
            key, key_pos = blocks.value()
            if not isinstance(key, str):
                raise fail("invalid JSON: expected a key", key_pos)
            blocks.expect(":", "':'")
            if key == "items" and not items_seen:
                items_seen = True
                blocks.expect("[", "the list of items")
                index = 0
                if blocks.skip_space() == "]":
                    blocks.pos += 1
                else:
                    while True:
                        raw, where = blocks.value()
                        doc = Document(collector.display, 0, raw, {(): (where.line, where.col)})
                        collector.add(doc, (), raw)
                        index += 1
                        if blocks.expect(",]", "',' or ']' after an item") == "]":
                            break
            elif key in top or key == "items":
                raise fail(f"duplicate key {key!r}", key_pos)
            else:
                top[key], _ = blocks.value()
            if blocks.expect(",}", "',' or '}'") == "}":
                break
    if blocks.skip_space():
        raise fail("invalid JSON: more after the end of the document", blocks.where(blocks.pos))
    _check_list(top, items_seen, Position(collector.display))
    return True


def _check_list(top: dict[str, Any], items_seen: bool, pos: Position) -> None:
    if top.get("kind") not in _LIST_KINDS:
        raise fail(f"expected kind NodeList or List (what 'kubectl get nodes' prints), got {top.get('kind')!r}", pos)
    if not items_seen:
        raise fail("the NodeList has no 'items'", pos)


# ---------------------------------------------------------------------------------------------
# YAML

def _layout(key: str) -> re.Pattern[str]:
    """The line ``KEY:`` at the top level, then (past blank and comment lines) the first item's ``- ``."""
    return re.compile(rf"^{key}:[ \t]*\n(?:[ \t]*(?:#[^\n]*)?\n)*( *)- ", re.M)
BATCH_CHARS = 1024 * 1024
"""YAML items are parsed a batch of about this many characters at a time: large enough that the per-parse
overhead vanishes, small enough to stay a block's worth of memory."""


def _yaml_items(head: str, stream: IO[str], collector: _Collector) -> bool:
    """Read a kubectl-style YAML NodeList (``items:`` at the top, then one ``- `` line per item) batch by
    batch; False, having read nothing beyond ``head``, when ``head`` shows another layout.

    The item lines are found in whole blocks by regular expressions: an item starts at a line that begins
    with the marker (``- `` at the items' indentation), and the items end at the first line that is neither
    an item's start, nor indented into an item, nor blank or a comment."""
    layout = _layout(collector.key).search(head)
    if layout is None or re.search(r"^(?:---|\.\.\.|%)", head[:layout.start()], re.M):
        return False
    indent = len(layout.group(1))
    marker = " " * indent + "- "
    # a line is found by its newline (a literal, which the regex engine scans for fast); the batch's first
    # line is always an item's start, so it needs no look
    items_end = re.compile(rf"\n(?!{re.escape(marker)}| {{{indent + 2}}}|[ \t]*(?:#|\n|$))")
    before = head[:layout.start()]
    body = head.index("\n", layout.start()) + 1
    buf, line = head[body:], before.count("\n") + 2
    eof = False
    after = ""
    scanned = 0
    while True:
        complete = len(buf) if eof else buf.rfind("\n") + 1
        if len(buf) - complete > MAX_ITEM_CHARS:
            raise fail(f"a line longer than {MAX_ITEM_CHARS // 2**20} MiB", Position(collector.display, line))
        end = items_end.search(buf, scanned, complete)
        scanned = max(complete - 1, 0)
        if end is not None or eof:
            stop = end.start() + 1 if end is not None else len(buf)
            _yaml_batch(buf[:stop], line, indent, collector)
            after = buf[stop:]
            break
        if complete >= BATCH_CHARS:
            cut = buf.rfind("\n" + marker, 0, complete) + 1
            if cut > 0:
                _yaml_batch(buf[:cut], line, indent, collector)
                line += buf.count("\n", 0, cut)
                buf = buf[cut:]
                scanned = max(scanned - cut, 0)
            elif len(buf) > MAX_ITEM_CHARS:
                raise fail(f"a node item larger than {MAX_ITEM_CHARS // 2**20} MiB", Position(collector.display, line))
        block = stream.read(BLOCK_CHARS)
        eof = not block
        buf += block
    after += stream.read(MAX_INVENTORY_BYTES + 1 - len(after))
    if len(after) > MAX_INVENTORY_BYTES or re.search(rf"^(?:{collector.key}:|---|\.\.\.)", after, re.M):
        raise fail("the NodeList has more after its items than a NodeList holds (another 'items', or another "
                   "document); give one NodeList", Position(collector.display, line))
    docs = load_text(before + after, collector.display)
    top = docs[0].data if docs and isinstance(docs[0].data, dict) else {}
    if collector.key == "items":
        _check_list(top, True, Position(collector.display, 1))
    elif top.get("kind") != KIND or top.get("apiVersion") != API_VERSION:
        raise fail(f"expected apiVersion {API_VERSION} and kind {KIND} beside 'nodes'", Position(collector.display, 1))
    return True


def _yaml_batch(text: str, first_line: int, indent: int, collector: _Collector) -> None:
    if not text.strip():
        return
    if indent:
        text = re.sub("^" + " " * indent, "", text, flags=re.M)
    if collector.compact and _plain_batch(text, collector):
        return
    try:
        docs = load_text(text, collector.display, max_bytes=MAX_INVENTORY_BYTES, max_nodes=value_budget(len(text)))
    except UserError as err:
        raise UserError([Diagnostic(_lines_moved(d.message, first_line), _moved(d.pos, first_line, indent))
                         if d.pos and d.pos.path == collector.display else d for d in err.diagnostics]) from None
    if not docs:
        return
    doc = _Excerpt(docs[0], first_line, indent)
    if not isinstance(doc.data, list):
        raise fail("expected a list of Node items", doc.pos())
    for i, raw in enumerate(doc.data):
        collector.add(doc, (i,), raw)


_SCALAR = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = rf"{_SCALAR}|'{_SCALAR}'"
_PAIR = rf"(?:{_VALUE}): (?:{_VALUE})"
_GPUS = r"0|[1-9][0-9]{0,3}"
_TAINT = rf"  - key: (?:{_VALUE})\n(?:    value: (?:{_VALUE})\n)?    effect: (?:{_VALUE})\n"
_OTHER_LINE = r"[^\n]+\n?|\n"
_PLAIN_ITEMS = {
    "{": re.compile(rf"- \{{name: ({_VALUE}), gpus: ({_GPUS})(), labels: \{{((?:{_PAIR}(?:, {_PAIR})*)?)\}}\}}\n()()"
                    rf"|{_OTHER_LINE}"),
    "n": re.compile(rf"- name: ({_VALUE})\n  gpus: ({_GPUS})\n(?:  usedGPUs: ({_GPUS})\n)?"
                    rf"  labels:(?: \{{\}}\n|\n((?:    {_PAIR}\n)+))(  unschedulable: true\n)?"
                    rf"(?:  taints:\n((?:{_TAINT})+))?"
                    rf"|{_OTHER_LINE}"),
}
"""A compact inventory's items as ``inventory import`` writes them (block style: name, GPUs, used GPUs, labels,
cordon, taints) and as one flow mapping per line (name, GPUs, labels), every string plain or single-quoted of
the characters names and labels use; any other line matches the last alternative, whose groups are empty.
Groups: name, GPUs, used GPUs, labels, cordon, taints."""


def _plain_batch(text: str, collector: _Collector) -> bool:
    """Take every node of a batch of compact items without a YAML parser, when every line is a plain item
    (:data:`_PLAIN_ITEMS`) that the YAML reader would take without a problem; False, having taken nothing, for
    anything else, which the YAML reader then reads and reports on.

    A 1,000,000-GPU inventory has 216,000 such items; parsing them as YAML, checking what the parser read and
    taking each node one by one made :func:`read_inventory` take 2.8 s, and 0.9 s this way. The result is the
    same: the grammar admits only strings the exact loader reads as themselves
    (:func:`~toporender.load.yaml_fast.plain_is_string`), whole numbers of GPUs in range with no more used
    than there are, known taint effects, no name twice and no label key twice, within the same value
    budget."""
    pattern = _PLAIN_ITEMS.get(text[2:3])
    if pattern is None or collector.errors or not text.endswith("\n") or len(text) > MAX_INVENTORY_BYTES:
        return False
    items = pattern.findall(text)
    values = 2 + 6 * len(items)
    seen, label_sets, strings = collector.seen, collector.label_sets, collector.strings
    for cache in (label_sets, collector.scalars):
        if len(cache) > _MAX_REMEMBERED:  # labels that differ on every node (a hostname) are not worth keeping
            cache.clear()
    taint_sets: dict[str, tuple[tuple[Taint, ...], int] | None] = {}
    names: dict[str, None] = {}
    nodes = []
    for name, gpus, used_gpus, written, cordoned, tainted in items:
        labels = label_sets.get(written, _UNREAD)
        if labels is _UNREAD:
            labels = label_sets[written] = _plain_labels(written, collector.scalars, strings)
        if labels is None or not name:
            return False
        if name[0] == "'":
            name = name[1:-1]
        elif not plain_is_string(name):
            return False
        count, used = int(gpus), int(used_gpus or 0)
        if count > MAX_NODE_GPUS or used > count or name in seen or name in names:
            return False
        names[name] = None
        values += len(labels) + bool(used_gpus) + bool(cordoned)
        taints: tuple[Taint, ...] = ()
        if tainted:
            found = taint_sets.get(tainted, _UNREAD)
            if found is _UNREAD:
                found = taint_sets[tainted] = _plain_taints(tainted, collector.scalars, strings)
            if found is None:
                return False
            taints, taint_values = found
            values += taint_values
        nodes.append(Node(name, labels, count, used, bool(cordoned), taints))
    if values > value_budget(len(text)):
        return False
    seen.update(names)
    collector.nodes.extend(nodes)
    return True


_UNREAD: Any = object()
_MAX_REMEMBERED = 65_536
"""Label sets and strings a reading remembers at most (then it starts again): a bound on memory, not a result."""


def _plain_string(written: str, scalars: dict[str, str | None], strings: dict[str, str]) -> str | None:
    """A plain or single-quoted string of :data:`_PLAIN_ITEMS` as the exact loader reads it, shared; None when a
    plain one reads as something else (a number, a boolean, null). Remembered in ``scalars``."""
    text = written[1:-1] if written[0] == "'" else written if plain_is_string(written) else None
    got = scalars[written] = None if text is None else strings.setdefault(text, text)
    return got


def _plain_labels(written: str, scalars: dict[str, str | None], strings: dict[str, str]) -> dict[str, str] | None:
    """The labels of a plain item as :data:`_PLAIN_ITEMS` captured them (``k: v, k: v`` or ``    k: v`` lines),
    their strings shared; None when a plain string would not read as itself or a key is written twice."""
    pairs = written.split(", ") if written[:4] != "    " else written[4:-1].split("\n    ")
    known = scalars.get
    labels: dict[str, str] = {}
    for pair in pairs if written else ():
        written_key, _, written_value = pair.partition(": ")
        key = known(written_key, _UNREAD)
        if key is _UNREAD:
            key = _plain_string(written_key, scalars, strings)
        value = known(written_value, _UNREAD)
        if value is _UNREAD:
            value = _plain_string(written_value, scalars, strings)
        if key is None or value is None or key in labels:
            return None
        labels[key] = value
    return labels


def _plain_taints(written: str, scalars: dict[str, str | None], strings: dict[str, str]
                  ) -> tuple[tuple[Taint, ...], int] | None:
    """The taints of a plain item as :data:`_PLAIN_ITEMS` captured them, in the order the YAML reader gives them,
    and how many values they count; None when a string would not read as itself or an effect is unknown."""
    taints = []
    values = 2
    for item in written.split("  - key: ")[1:]:
        lines = item[:-1].split("\n")
        key = _plain_string(lines[0], scalars, strings)
        effect = _plain_string(lines[-1][len("    effect: "):], scalars, strings)
        valued = len(lines) == 3
        value = _plain_string(lines[1][len("    value: "):], scalars, strings) if valued else None
        if key is None or (valued and value is None) or effect not in EFFECTS:
            return None
        taints.append(Taint(key, value, effect))
        values += len(lines) + 2
    return sorted_taints(taints), values


def read_compact(stream: IO[str], display: str) -> list[Node] | None:
    """The nodes of a compact inventory (``nodes:`` then one item per node) read batch by batch, or None,
    having read only the first block, when ``stream`` holds another layout (read it whole then).

    A render of a 1M-GPU repo reads its 216,000-node inventory on every run: read whole, 35 MB of YAML become
    400 MiB of dicts kept alive for positions; in batches only the nodes stay, their label strings shared."""
    head = stream.read(BLOCK_CHARS)
    collector = _Collector(display, key="nodes", convert=_compact_node, compact=True)
    if not _yaml_items(head, stream, collector):
        return None
    return collector.result()


class FilePositions(Mapping[str, Position]):
    """Node name -> where the node is written, for an inventory read without keeping its documents: the file is
    read again, whole, the first time a message asks (a message is rare; keeping every node's raw data
    alive for it cost a 216,000-node inventory 400 MiB)."""

    def __init__(self, path: Path, display: str, names: Iterable[str]) -> None:
        self._path, self._display, self._names = path, display, frozenset(names)
        self._found: Mapping[str, Position] | None = None

    def __getitem__(self, name: str) -> Position:
        if name not in self._names:
            raise KeyError(name)
        if self._found is None:
            try:
                self._found = _read(read_inventory_file(self._path, self._display))[1]
            except UserError:
                self._found = {}
        return self._found.get(name, Position(self._display))

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names))

    def __len__(self) -> int:
        return len(self._names)


def read_inventory(path: Path, display: str) -> Inventory:
    """The inventory in the file at ``path``: a compact inventory batch by batch (its nodes only, see
    :func:`read_compact`), anything else whole."""
    nodes = None
    try:
        if path.is_file() and path.stat().st_size <= MAX_INVENTORY_BYTES:
            with path.open(encoding="utf-8-sig") as stream:
                nodes = read_compact(stream, display)
    except (OSError, UnicodeDecodeError):
        nodes = None  # the whole-file reader says what is wrong, at its position
    if nodes is None:
        return inventory_from_documents(read_inventory_file(path, display), display)
    return Inventory.of(nodes, display, FilePositions(path, display, (n.name for n in nodes)))
