"""The exact YAML loader: plain data and the position of every value, from PyYAML's event stream.

:mod:`toporender.load.yaml_source` reads most files with the fast reader (:mod:`toporender.load.yaml_fast`)
and comes here only for what the fast reader cannot vouch for, for positions when a message needs one, and
for a plain scalar that may read as something other than a string. So PyYAML, about 25 ms of imports, is
loaded only then.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import yaml
from yaml import events as ev

from toporender.errors import Diagnostic, Position, UserError, fail
from toporender.load.yaml_limits import MAX_DEPTH, MAX_NODES, Loc

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
_NUMBER_TAGS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
# Timestamps stay strings: Kubernetes treats them as strings and JSON has no date type.
_STRING_TAGS = {_STR, "tag:yaml.org,2002:timestamp", "!"}
_MAP_TAGS = {"tag:yaml.org,2002:map", None, "!"}
_SEQ_TAGS = {"tag:yaml.org,2002:seq", None, "!"}


_NO_KEY = object()
_MERGE = object()


class _Frame:
    """An open mapping or sequence: where it goes, and (for mappings) the key waiting for its value."""

    __slots__ = ("container", "loc", "is_map", "key", "key_mark", "keys", "anchor", "mark")

    def __init__(self, is_map: bool, loc: Loc, anchor: str | None, mark: Any) -> None:
        self.container: Any = {} if is_map else []
        self.loc = loc
        self.is_map = is_map
        self.key: Any = _NO_KEY
        self.key_mark: tuple[int, int] = (1, 1)
        self.keys: dict[str, tuple[int, int]] = {}
        self.anchor = anchor
        self.mark = mark


class _Builder:
    """Turns parser events into plain data with an explicit stack.

    This loop runs once per event of every file (a quarter of a million for a large repo), so
    the common cases (a key, a scalar value, a collection opening or closing) are written out
    inline; aliases, anchors and merge keys take the general path.
    """

    def __init__(self, source: str, max_nodes: int = MAX_NODES) -> None:
        self.source = source
        self.max_nodes = max_nodes
        self.nodes = 0
        self.anchors: dict[str, tuple[Any, dict[Loc, tuple[int, int]]]] = {}
        # Plain scalars repeat ("64", "true", image names...): resolve each text once. The
        # results (str, int, float, bool, None) are immutable, so sharing them is safe.
        self.plain: dict[str, Any] = {}

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
        if tag is None:
            if not event.implicit[0]:
                return event.value
            value = self.plain.get(event.value, _NO_KEY)
            if value is not _NO_KEY:
                return value
            resolved = _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)
            if resolved in _NUMBER_TAGS and ":" in event.value:
                raise self.err(
                    f"{event.value!r} is a YAML 1.1 base-60 number (it would read as "
                    f"{self.construct(resolved, event)}); quote it if you mean text, or write the number",
                    event.start_mark,
                )
            value = self.construct(resolved, event)
            self.plain[event.value] = value
            return value
        if tag == "!":
            return event.value
        return self.construct(tag, event)

    def construct(self, tag: str, event: ev.ScalarEvent) -> Any:
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
        except (IndexError, KeyError):
            # PyYAML's constructors assume the resolver vetted the text; an explicit tag skips that.
            kind = tag.rsplit(":", 1)[-1]
            raise self.err(f"cannot read {event.value!r} as {kind}", event.start_mark) from None

    def documents(self, next_event: Callable[[], Any]) -> Iterator[tuple[Any, dict[Loc, tuple[int, int]]]]:
        for event in iter(next_event, None):
            if isinstance(event, ev.DocumentStartEvent):
                self.anchors = {}
                yield self.document(next_event)

    def document(self, next_event: Callable[[], Any]) -> tuple[Any, dict[Loc, tuple[int, int]]]:
        marks: dict[Loc, tuple[int, int]] = {}
        stack: list[_Frame] = []
        top: _Frame | None = None
        root: list[Any] = []
        plain = self.plain
        scalar_event, mapping_start, mapping_end = ev.ScalarEvent, ev.MappingStartEvent, ev.MappingEndEvent
        sequence_start, sequence_end = ev.SequenceStartEvent, ev.SequenceEndEvent

        event: Any
        for event in iter(next_event, None):
            cls = event.__class__
            if top is not None and top.key is _NO_KEY and top.is_map and cls is not mapping_end:
                if cls is not scalar_event or event.tag is not None or event.value == "<<" or event.value in top.keys:
                    self.key(top, event)
                else:
                    key = event.value
                    mark = event.start_mark
                    top.key = key
                    top.key_mark = top.keys[key] = (mark.line + 1, mark.column + 1)
                continue
            if cls is ev.DocumentEndEvent:
                return (root[0] if root else None), marks
            self.nodes += 1
            if self.nodes > self.max_nodes:
                self.count(0, event.start_mark)
            if cls is scalar_event:
                value: Any = event.value
                if event.tag is not None or event.implicit[0]:
                    value = plain.get(value, _NO_KEY) if event.tag is None else _NO_KEY
                    if value is _NO_KEY:
                        value = self.scalar(event)
                mark, anchor = event.start_mark, event.anchor
            elif cls is mapping_end or cls is sequence_end:
                frame = stack.pop()
                top = stack[-1] if stack else None
                value, mark, anchor = frame.container, frame.mark, frame.anchor
            elif cls is mapping_start or cls is sequence_start:
                top = self.open(stack, event, cls is mapping_start)
                continue
            else:
                if cls is ev.AliasEvent:
                    self.alias(stack, root, marks, event)
                continue
            # Place the finished value in its parent (the general path also handles the rest).
            if top is None or anchor is not None or top.key is _MERGE:
                self.finish(stack, root, marks, value, mark, anchor)
            elif top.is_map:
                key = top.key
                top.container[key] = value
                top.key = _NO_KEY
                # Errors about a field read best at its key.
                marks[top.loc + (key,)] = top.key_mark
            else:
                items = top.container
                marks.setdefault(top.loc + (len(items),), (mark.line + 1, mark.column + 1))
                items.append(value)
        raise fail("unexpected end of YAML stream", Position(self.source))

    def open(self, stack: list[_Frame], event: ev.CollectionStartEvent, is_map: bool) -> _Frame:
        """Push a new mapping or sequence frame and return it."""
        if event.tag not in (_MAP_TAGS if is_map else _SEQ_TAGS):
            raise self.err(f"unsupported YAML tag {event.tag!r}; use plain YAML values", event.start_mark)
        if len(stack) >= MAX_DEPTH:
            raise self.err(f"nesting deeper than {MAX_DEPTH} levels; flatten the document", event.start_mark)
        parent_loc: Loc = ()
        if stack:
            top = stack[-1]
            if not top.is_map:
                parent_loc = top.loc + (len(top.container),)
            elif top.key is not _MERGE:
                parent_loc = top.loc + (top.key,)
        frame = _Frame(is_map, parent_loc, event.anchor, event.start_mark)
        stack.append(frame)
        return frame

    def key(self, frame: _Frame, event: ev.Event) -> None:
        """Consume ``event`` as the key of the mapping in ``frame``."""
        if not isinstance(event, ev.ScalarEvent):
            if isinstance(event, ev.AliasEvent):
                raise self.err("aliases cannot be used as mapping keys", event.start_mark)
            raise self.err("a mapping key must be a plain scalar, not a list or mapping", event.start_mark)
        key = event.value
        if key == "<<" and event.implicit[0] and event.tag is None:
            frame.key = _MERGE
        else:
            first = frame.keys.get(key)
            if first is not None:
                raise self.err(f"duplicate key {key!r} (first at line {first[0]}); each key may appear once",
                               event.start_mark)
            frame.key = key
        mark = event.start_mark
        frame.key_mark = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        frame.keys[key] = frame.key_mark

    def alias(self, stack: list[_Frame], root: list[Any], marks: dict[Loc, tuple[int, int]],
              event: ev.AliasEvent) -> None:
        if event.anchor not in self.anchors:
            raise self.err(f"unknown alias *{event.anchor}", event.start_mark)
        value, sub = self.anchors[event.anchor]
        self.count(len(sub), event.start_mark)
        if stack and stack[-1].key is _MERGE:
            self.merge(stack[-1], value, event.start_mark)
        else:
            self.attach(stack, root, marks, copy.deepcopy(value), event.start_mark, sub)

    def finish(self, stack: list[_Frame], root: list[Any], marks: dict[Loc, tuple[int, int]], value: Any,
               mark: Any, anchor: str | None) -> None:
        """Place a complete value: into a merge, or into its parent, remembering it under its anchor."""
        if stack and stack[-1].key is _MERGE:
            self.merge(stack[-1], value, mark)
            return
        loc = self.attach(stack, root, marks, value, mark)
        if anchor is not None:
            prefix = len(loc)
            sub = {k[prefix:]: v for k, v in marks.items() if k[:prefix] == loc}
            self.anchors[anchor] = (value, sub)

    def attach(self, stack: list[_Frame], root: list[Any], marks: dict[Loc, tuple[int, int]], value: Any,
               mark: Any, sub_marks: dict[Loc, tuple[int, int]] | None = None) -> Loc:
        loc: Loc
        if not stack:
            root.append(value)
            loc = ()
        else:
            frame = stack[-1]
            if not frame.is_map:
                loc = frame.loc + (len(frame.container),)
                frame.container.append(value)
            else:
                key = frame.key
                if key is _NO_KEY:
                    raise self.err("a mapping key must be a plain scalar", mark)
                loc = frame.loc + (key,)
                frame.container[key] = value
                frame.key = _NO_KEY
                # Errors about a field read best at its key.
                marks[loc] = frame.key_mark
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

    def merge(self, frame: _Frame, value: Any, mark: Any) -> None:
        frame.key = _NO_KEY
        sources = value if isinstance(value, list) else [value]
        for src in sources:
            if not isinstance(src, dict):
                raise self.err("'<<' merge needs a mapping or a list of mappings", mark)
            for k, v in src.items():
                frame.container.setdefault(k, copy.deepcopy(v))


def exact_documents(text: str, source: str, max_nodes: int) -> list[tuple[Any, dict[Loc, tuple[int, int]]]]:
    """The exact loader: (data, position of every value) of each document of ``text``."""
    builder = _Builder(source, max_nodes)
    docs: list[tuple[Any, dict[Loc, tuple[int, int]]]] = []
    try:
        loader = _Loader(text)
        try:
            docs.extend(builder.documents(loader.get_event))
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = Position(source, mark.line + 1, mark.column + 1) if mark else Position(source)
        problem = exc.problem or exc.context or "invalid YAML"
        if "nesting depth" in problem:  # libyaml (PyYAML's C parser) has its own limit, above ours
            raise UserError(Diagnostic(f"nesting deeper than {MAX_DEPTH} levels; flatten the document", pos)) from None
        raise UserError(Diagnostic(f"invalid YAML: {problem}", pos)) from None
    except yaml.YAMLError as exc:
        raise fail(f"invalid YAML: {exc}", Position(source)) from None
    return docs
