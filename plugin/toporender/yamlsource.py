"""Safe YAML loading that remembers where every value came from.

Users' files are untrusted: we build plain data straight from the parser's event stream
(no Python tags, no object construction), with an explicit stack so deep nesting cannot crash
the interpreter, a bound on alias expansion (billion laughs), duplicate keys as errors, and a
size limit. Every mapping key, sequence item and value gets a position so later stages can say
``path:line:col``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml import events as ev

from toporender.errors import Diagnostic, Position, UserError, fail

MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_NODES = 500_000
MAX_DEPTH = 100

Loc = tuple[str | int, ...]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_STR = "tag:yaml.org,2002:str"
_SCALAR_TAGS = {
    "tag:yaml.org,2002:null": _CONSTRUCTOR.construct_yaml_null,
    "tag:yaml.org,2002:bool": _CONSTRUCTOR.construct_yaml_bool,
    "tag:yaml.org,2002:int": _CONSTRUCTOR.construct_yaml_int,
    "tag:yaml.org,2002:float": _CONSTRUCTOR.construct_yaml_float,
}
# Timestamps stay strings: Kubernetes treats them as strings and JSON has no date type.
_STRING_TAGS = {_STR, "tag:yaml.org,2002:timestamp", "!"}
_MAP_TAGS = {"tag:yaml.org,2002:map", None, "!"}
_SEQ_TAGS = {"tag:yaml.org,2002:seq", None, "!"}


@dataclass
class Document:
    """One YAML document: plain data plus the position of every value in it."""

    source: str
    index: int
    data: Any
    marks: dict[Loc, tuple[int, int]] = field(default_factory=dict)

    def pos(self, loc: Loc = ()) -> Position:
        """Position of ``loc`` or of its nearest ancestor that has one."""
        loc = tuple(loc)
        while loc and loc not in self.marks:
            loc = loc[:-1]
        line, col = self.marks.get(loc, (1, 1))
        return Position(self.source, line, col)


class _Builder:
    """Turns parser events into plain data with an explicit stack."""

    def __init__(self, source: str, max_nodes: int = MAX_NODES) -> None:
        self.source = source
        self.max_nodes = max_nodes
        self.nodes = 0
        self.anchors: dict[str, tuple[Any, dict[Loc, tuple[int, int]]]] = {}

    def err(self, message: str, mark: Any) -> UserError:
        return fail(message, Position(self.source, mark.line + 1, mark.column + 1))

    def count(self, n: int, mark: Any) -> None:
        self.nodes += n
        if self.nodes > self.max_nodes:
            raise self.err(
                f"document expands to more than {self.max_nodes} values (alias bomb or oversized file); "
                "remove the aliases or split the file",
                mark,
            )

    def scalar(self, event: ev.ScalarEvent) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            if event.implicit[0] and tag is None:
                tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)
            else:
                tag = _STR
        if tag in _STRING_TAGS:
            return event.value
        construct = _SCALAR_TAGS.get(tag)
        if construct is None:
            raise self.err(f"unsupported YAML tag {tag!r}; use plain YAML values", event.start_mark)
        try:
            return construct(yaml.ScalarNode(tag, event.value))
        except (ValueError, yaml.YAMLError) as exc:
            kind = tag.rsplit(":", 1)[-1]
            raise self.err(f"cannot read {event.value!r} as {kind}: {exc}", event.start_mark) from None

    def documents(self, stream: Iterator[ev.Event]) -> Iterator[tuple[Any, dict[Loc, tuple[int, int]]]]:
        for event in stream:
            if isinstance(event, ev.DocumentStartEvent):
                self.anchors = {}
                yield self.document(stream)

    def document(self, stream: Iterator[ev.Event]) -> tuple[Any, dict[Loc, tuple[int, int]]]:
        marks: dict[Loc, tuple[int, int]] = {}
        # Stack frames: [container, loc, pending_key, anchor, start_mark, key_mark, anchor_marks_start]
        stack: list[list[Any]] = []
        root: Any = None
        have_root = False

        def attach(value: Any, mark: Any, sub_marks: dict[Loc, tuple[int, int]] | None = None) -> Loc:
            nonlocal root, have_root
            if not stack:
                root, have_root = value, True
                loc: Loc = ()
            else:
                frame = stack[-1]
                container = frame[0]
                if isinstance(container, list):
                    loc = frame[1] + (len(container),)
                    container.append(value)
                else:
                    key = frame[2]
                    if key is _NO_KEY:
                        raise self.err("a mapping key must be a plain scalar", mark)
                    loc = frame[1] + (key,)
                    container[key] = value
                    frame[2] = _NO_KEY
                    # Errors about a field read best at its key.
                    marks[loc] = frame[5]
                    if sub_marks is not None:
                        for sub, m in sub_marks.items():
                            if sub:
                                marks[loc + sub] = m
                    return loc
            marks.setdefault(loc, (mark.line + 1, mark.column + 1))
            if sub_marks is not None:
                for sub, m in sub_marks.items():
                    marks.setdefault(loc + sub, m)
            return loc

        def add_key(event: ev.Event) -> bool:
            """If the top frame is a mapping waiting for a key, consume ``event`` as that key."""
            if isinstance(event, ev.MappingEndEvent) or not stack:
                return False
            if not isinstance(stack[-1][0], dict) or stack[-1][2] is not _NO_KEY:
                return False
            frame = stack[-1]
            if not isinstance(event, ev.ScalarEvent):
                if isinstance(event, ev.AliasEvent):
                    raise self.err("aliases cannot be used as mapping keys", event.start_mark)
                raise self.err("a mapping key must be a plain scalar, not a list or mapping", event.start_mark)
            key = event.value
            if key == "<<" and event.implicit[0] and event.tag is None:
                frame[2] = _MERGE
            else:
                if key in frame[6]:
                    first = frame[6].get(key)
                    where = f" (first at line {first[0]})" if first else ""
                    raise self.err(f"duplicate key {key!r}{where}; each key may appear once", event.start_mark)
                frame[2] = key
            mark = event.start_mark
            frame[5] = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            frame[6][key] = frame[5]
            return True

        def finish(value: Any, mark: Any, anchor: str | None) -> None:
            if stack and stack[-1][2] is _MERGE:
                self.merge(stack[-1], value, mark)
                return
            loc = attach(value, mark)
            if anchor is not None:
                prefix = len(loc)
                sub = {k[prefix:]: v for k, v in marks.items() if k[:prefix] == loc}
                self.anchors[anchor] = (value, sub)

        for event in stream:
            if isinstance(event, ev.DocumentEndEvent):
                return root if have_root else None, marks
            if add_key(event):
                continue
            self.count(1, event.start_mark)
            if isinstance(event, ev.ScalarEvent):
                finish(self.scalar(event), event.start_mark, event.anchor)
            elif isinstance(event, ev.AliasEvent):
                if event.anchor not in self.anchors:
                    raise self.err(f"unknown alias *{event.anchor}", event.start_mark)
                value, sub = self.anchors[event.anchor]
                self.count(len(sub), event.start_mark)
                if stack and stack[-1][2] is _MERGE:
                    self.merge(stack[-1], value, event.start_mark)
                else:
                    attach(copy.deepcopy(value), event.start_mark, sub)
            elif isinstance(event, (ev.MappingStartEvent, ev.SequenceStartEvent)):
                is_map = isinstance(event, ev.MappingStartEvent)
                if event.tag not in (_MAP_TAGS if is_map else _SEQ_TAGS):
                    raise self.err(f"unsupported YAML tag {event.tag!r}; use plain YAML values", event.start_mark)
                if len(stack) >= MAX_DEPTH:
                    raise self.err(f"nesting deeper than {MAX_DEPTH} levels; flatten the document", event.start_mark)
                parent_loc: Loc = ()
                if stack:
                    top = stack[-1]
                    if isinstance(top[0], list):
                        parent_loc = top[1] + (len(top[0]),)
                    elif top[2] is not _MERGE:
                        parent_loc = top[1] + (top[2],)
                stack.append([{} if is_map else [], parent_loc, _NO_KEY, event.anchor, event.start_mark, None, {}])
            elif isinstance(event, (ev.MappingEndEvent, ev.SequenceEndEvent)):
                frame = stack.pop()
                finish(frame[0], frame[4], frame[3])
        raise fail("unexpected end of YAML stream", Position(self.source))

    def merge(self, frame: list[Any], value: Any, mark: Any) -> None:
        frame[2] = _NO_KEY
        sources = value if isinstance(value, list) else [value]
        for src in sources:
            if not isinstance(src, dict):
                raise self.err("'<<' merge needs a mapping or a list of mappings", mark)
            for k, v in src.items():
                frame[0].setdefault(k, copy.deepcopy(v))


_NO_KEY = object()
_MERGE = object()


def load_text(text: str, source: str, *, max_bytes: int = MAX_FILE_BYTES,
              max_nodes: int = MAX_NODES) -> list[Document]:
    """Parse every document of ``text``; ``source`` is the path shown in messages."""
    if len(text) > max_bytes:
        raise fail(f"file is larger than {_size(max_bytes)}; split it", Position(source))
    builder = _Builder(source, max_nodes)
    docs: list[Document] = []
    try:
        for i, (data, marks) in enumerate(builder.documents(yaml.parse(text, Loader=_Loader))):
            docs.append(Document(source, i, data, marks))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = Position(source, mark.line + 1, mark.column + 1) if mark else Position(source)
        problem = exc.problem or exc.context or "invalid YAML"
        raise UserError(Diagnostic(f"invalid YAML: {problem}", pos)) from None
    except yaml.YAMLError as exc:
        raise fail(f"invalid YAML: {exc}", Position(source)) from None
    return docs


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def read_text(path: Path, source: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """Read a user file as UTF-8 with clear errors for the usual ways this goes wrong."""
    try:
        if path.is_dir():
            raise fail("expected a file but found a directory", Position(source))
        size = path.stat().st_size
        if size > max_bytes:
            raise fail(f"file is larger than {_size(max_bytes)}; split it", Position(source))
        raw = path.read_bytes()
    except FileNotFoundError:
        raise fail("file not found", Position(source)) from None
    except OSError as exc:
        raise fail(f"cannot read file: {exc.strerror or exc}", Position(source)) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise fail("file is not valid UTF-8; save it as UTF-8", Position(source, line, col)) from None


def load_file(path: Path, source: str | None = None, *, max_bytes: int = MAX_FILE_BYTES,
              max_nodes: int = MAX_NODES) -> list[Document]:
    """Load every YAML document in ``path``."""
    shown = source if source is not None else str(path)
    return load_text(read_text(path, shown, max_bytes), shown, max_bytes=max_bytes, max_nodes=max_nodes)
