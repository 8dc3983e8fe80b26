"""Serialise rendered objects: a YAML stream or one JSON object per line, both deterministic.

The YAML writer is specialised for what we render (plain dicts, lists, str, int, float, bool,
None). PyYAML's own dumper spends almost all its time in its Python representer and
serializer even with the C emitter, which made emitting dominate large renders. Layout and
quoting follow libyaml's block style (what the C dumper printed before), so typical output is
byte-identical to it; where a string would read as something else to a YAML 1.2 or Go parser
(Argo CD, kubectl), such as ``y``, ``089``, ``1e3`` or ``0o17``, we quote where PyYAML would
not. Multi-line strings become literal blocks when that is unambiguous, otherwise
double-quoted with escapes. ``tests/emit/test_stream.py`` checks that everything round-trips.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from typing import Any

# Plain scalars other parsers read as non-strings although PyYAML does not: YAML 1.1 short
# booleans (Go yaml.v2), YAML 1.2 / Go numbers (exponent without dot or sign, leading zeros,
# 0o/0x/0b), infinities and NaNs in any spelling, and digit-less "_" or "-_" (ruamel's YAML 1.2
# int pattern accepts them and then fails to convert).
_OTHER_PARSERS = re.compile(
    r"[yYnN]"
    r"|[-+]?(?:\.[0-9_]+|[0-9_]+(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9_]+)?"
    r"|[-+]?0[bBoOxX][0-9a-fA-F_]*"
    r"|[-+]?\.?(?:inf|infinity|nan)",
    re.IGNORECASE,
)

# Characters libyaml does not print as they are: control characters other than the line feed,
# tab included, DEL and C1 controls, the line and paragraph separators, surrogates, the BOM,
# U+FFFE/U+FFFF and everything outside the Basic Multilingual Plane. Any of them forces double
# quotes and an escape. (Spelt as the set of these rather than as the complement of what is
# printed: the complement takes ten times longer to compile, on every start of the program.)
_SPECIAL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff"
                      "\U00010000-\U0010ffff]")

# What makes a printable one-line string unusable as a block plain scalar (libyaml's analysis):
# document markers, a leading indicator, "- ", "? ", ": " or a trailing ":", " #",
# leading or trailing spaces.
_NOT_PLAIN = re.compile(r"^(?:---|\.\.\.)|^[-?:](?: |$)|^[#,\[\]{}&*!|>'\"%@`]|: |:$| #|^ | $")

_ESCAPES = {"\0": "\\0", "\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f",
            "\r": "\\r", "\x1b": "\\e", '"': '\\"', "\\": "\\\\"}
_NEEDS_ESCAPE = re.compile('["\\\\\n]|' + _SPECIAL.pattern)

# Simple keys end at 1024 characters for the parser; longer keys use the explicit "? " form.
_MAX_SIMPLE_KEY = 1000


@cache
def _implicit() -> dict[Any, Any]:
    """YAML 1.1 implicit types as PyYAML resolves plain scalars (bool, int, float, null, timestamp, merge,
    value), indexed by first character; PyYAML is imported the first time a string needs it, which a JSON
    render of names never does."""
    from yaml.resolver import Resolver

    return Resolver.yaml_implicit_resolvers


def _implicit_non_string(s: str) -> bool:
    for _tag, regexp in _implicit().get(s[:1], ()):
        if regexp.match(s):
            return True
    return _OTHER_PARSERS.fullmatch(s) is not None


def _escape(ch: str) -> str:
    known = _ESCAPES.get(ch)
    if known is not None:
        return known
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def double_quoted(s: str) -> str:
    """A double-quoted scalar on one line: every special character escaped, the rest as is."""
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _escape(m.group()), s) + '"'


# Most strings we emit are names: a letter, then letters, digits and ``._/-``. Written plain, such
# a string reads back as itself in every parser unless it is one of these words in some spelling.
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9._/-]*")
_NAME_LIKE_NON_STRINGS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null", "inf", "nan",
                                    "infinity"})


def scalar_str(s: str) -> str:
    """One-line rendering of a string: plain when that reads back as the same string, else quoted."""
    if _NAME.fullmatch(s) is not None and s.lower() not in _NAME_LIKE_NON_STRINGS:
        return s
    return scalar_str_by_rules(s)


def scalar_str_by_rules(s: str) -> str:
    """:func:`scalar_str` worked out from libyaml's rules and every parser's implicit types."""
    if "\n" in s or _SPECIAL.search(s):
        return double_quoted(s)
    if s and not _NOT_PLAIN.search(s) and not _implicit_non_string(s):
        return s
    return "'" + s.replace("'", "''") + "'"


def _literal_ok(s: str) -> bool:
    """A literal block reads back exactly when indentation, chomping and whitespace are unambiguous."""
    return (s[0] not in " \n" and not s.endswith("\n\n") and not s.endswith(" ") and " \n" not in s
            and _SPECIAL.search(s.replace("\n", "")) is None)


def _scalar(value: Any) -> str:
    """A non-string scalar as PyYAML's safe representer spells it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _float(float(value))
    raise TypeError(f"cannot emit {type(value).__name__} as YAML: {value!r}")


def _float(x: float) -> str:
    if x != x:
        return ".nan"
    if x in (float("inf"), float("-inf")):
        return ".inf" if x > 0 else "-.inf"
    text = repr(x).lower()
    if "." not in text and "e" in text:
        text = text.replace("e", ".0e", 1)
    return text


class _Writer:
    """Block-style YAML for one call.

    Every line is ``head + text``: ``head`` is the indentation plus a key and ``:`` (or a ``-``
    / ``:`` indicator), ``text`` is `` value\n``. Both are cached, since keys and most values
    repeat across thousands of objects; that and one ``append`` per line is what makes this fast.
    """

    def __init__(self) -> None:
        self.out: list[str] = []
        self.texts: dict[str, str] = {}
        self.heads: dict[str, dict[Any, str]] = {}

    def text(self, value: Any, inner: str) -> str:
        """`` value\n`` for a scalar or an empty container; multi-line strings as literal blocks at ``inner``."""
        if isinstance(value, str):
            text = self.texts.get(value)
            if text is None:
                if "\n" in value and _literal_ok(value):
                    chomp, body = ("", value[:-1]) if value.endswith("\n") else ("-", value)
                    lines = [inner + line if line else "" for line in body.split("\n")]
                    return " |" + chomp + "\n" + "\n".join(lines) + "\n"
                text = self.texts[value] = " " + scalar_str(value) + "\n"
            return text
        if isinstance(value, dict):
            return " {}\n"
        if isinstance(value, (list, tuple)):
            return " []\n"
        return " " + _scalar(value) + "\n"

    def document(self, value: Any) -> None:
        if isinstance(value, dict) and value:
            self.out.append("---\n")
            self.mapping(value, "", "")
        elif isinstance(value, (list, tuple)) and value:
            self.out.append("---\n")
            self.sequence(value, "", "")
        else:
            self.out.append("---" + self.text(value, "  "))

    def mapping(self, mapping: dict[Any, Any], indent: str, first: str | None) -> None:
        """Write ``mapping`` at ``indent``; its first line starts with ``first`` (``- `` in a list item)."""
        out, texts = self.out, self.texts
        heads = self.heads.get(indent)
        if heads is None:
            heads = self.heads[indent] = {}
        inner = indent + "  "
        for key, value in mapping.items():
            head = heads.get(key)
            if head is None:
                rendered = scalar_str(key) if isinstance(key, str) else _scalar(key)
                if len(rendered) > _MAX_SIMPLE_KEY:
                    out.append((first if first is not None else indent) + "? " + rendered + "\n")
                    self.item(value, indent, indent + ":")
                    first = None
                    continue
                head = indent + rendered + ":"
                if type(key) is str:  # 1 and True would share a slot
                    heads[key] = head
            if first is not None:
                head = first + head[len(indent):]
                first = None
            if type(value) is str:
                text = texts.get(value)
                out.append(head + (text if text is not None else self.text(value, inner)))
            elif isinstance(value, dict) and value:
                out.append(head + "\n")
                self.mapping(value, inner, inner)
            elif isinstance(value, (list, tuple)) and value:
                out.append(head + "\n")
                self.sequence(value, indent, indent)
            else:
                out.append(head + self.text(value, inner))

    def sequence(self, items: list[Any] | tuple[Any, ...], indent: str, first: str) -> None:
        """Write ``items`` at ``indent``; the first line starts with ``first`` instead of ``indent``."""
        for value in items:
            self.item(value, indent, first + "-")
            first = indent

    def item(self, value: Any, indent: str, head: str) -> None:
        """A node after an indicator (``-`` or ``:``) at ``indent``; ``head`` is the line up to the indicator."""
        if type(value) is str:
            text = self.texts.get(value)
            if text is not None:
                self.out.append(head + text)
                return
        inner = indent + "  "
        if isinstance(value, dict) and value:
            self.mapping(value, inner, head + " ")
        elif isinstance(value, (list, tuple)) and value:
            self.sequence(value, inner, head + " ")
        else:
            self.out.append(head + self.text(value, inner))


def dump_yaml(objects: list[dict[str, Any]]) -> str:
    """A YAML stream, ``---`` before each document; empty for no objects."""
    writer = _Writer()
    for obj in objects:
        writer.document(obj)
    return "".join(writer.out)


def yaml_chunks(objects: list[dict[str, Any]], per_chunk: int = 256) -> list[bytes]:
    """:func:`dump_yaml` in UTF-8, as chunks of ``per_chunk`` documents, so the writer's pieces
    never pile up for the whole stream (what the CLI writes)."""
    writer = _Writer()
    chunks: list[bytes] = []
    for start in range(0, len(objects), per_chunk):
        for obj in objects[start:start + per_chunk]:
            writer.document(obj)
        chunks.append("".join(writer.out).encode())
        writer.out.clear()
    return chunks


# The encoder for what orjson writes differently: one shared encoder without cycle checks, as
# rendered objects are trees we built ourselves.
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
# orjson writes 1e-9 for 1e-09 and 0.00001 for 1e-05, and null for inf and nan; a line with any
# of these (or with an innocent look-alike) is encoded again by the standard encoder. A number
# ends at a delimiter, which keeps hex in names (the "7e-8930-" of a UUID) from looking like one.
# (Separate tests: a regex that starts with a literal runs at memory speed, an alternation does not.)
_NEGATIVE_EXPONENT = re.compile(rb"e-(?<=[0-9]e-)[0-9]+[,}\]]")


def _orjson_differs(line: bytes) -> bool:
    return b"null" in line or b"0.0000" in line or _NEGATIVE_EXPONENT.search(line) is not None


def json_chunks(objects: list[dict[str, Any]], per_chunk: int = 256) -> list[bytes]:
    """The stream of compact JSON lines in UTF-8, byte for byte ``json.dumps(ensure_ascii=False,
    separators=(",", ":"))`` and a newline per object, as chunks of ``per_chunk`` lines.

    orjson writes the same bytes about five times faster except for the cases above and ints
    beyond 64 bits (which it refuses); tests compare both encoders on generated data. The
    look-alike test runs once per chunk, and line by line only when it finds something. Joining
    lines chunk by chunk lets each chunk's line buffers (orjson allocates more than a line needs)
    be reused for the next, instead of every line holding on to its own.
    """
    import orjson

    newline = orjson.OPT_APPEND_NEWLINE
    chunks: list[bytes] = []
    for start in range(0, len(objects), per_chunk):
        batch = objects[start:start + per_chunk]
        lines: list[bytes] = []
        for obj in batch:
            try:
                lines.append(orjson.dumps(obj, option=newline))
            except TypeError:
                lines.append(_standard_line(obj))
        chunk = b"".join(lines)
        if _orjson_differs(chunk):
            chunk = b"".join(_standard_line(obj) if _orjson_differs(line) else line
                             for obj, line in zip(batch, lines))
        chunks.append(chunk)
    return chunks


def _standard_line(obj: Any) -> bytes:
    return (_JSON.encode(obj) + "\n").encode()


def json_string(text: str) -> bytes:
    """``text`` as a string of the JSON stream (:func:`json_chunks`): orjson writes every string as the standard
    encoder does, in UTF-8 (a test compares them over every code point); a lone surrogate, which orjson
    refuses, fails as the standard encoder's line fails to encode."""
    import orjson

    try:
        return orjson.dumps(text)
    except TypeError:
        return _JSON.encode(text).encode()


def annotation_entries(fmt: str) -> Callable[[dict[str, str]], bytes]:
    """What the stream in ``fmt`` writes for the entries ``notes`` at the end of a non-empty ``annotations``
    mapping of an object's ``metadata``, after the mapping's own entries: in JSON ``,"key":"value"`` each, in
    YAML a line ``    key: value`` each (a multi-line value as its literal block). The YAML function keeps its
    writer for the next notes."""
    if fmt == "json":
        import orjson

        def json_entries(notes: dict[str, str]) -> bytes:
            """orjson writes a mapping's entries as it writes them inside the object's line; a lone surrogate,
            which it refuses, goes entry by entry (:func:`json_string`)."""
            if not notes:
                return b""
            try:
                return b"," + orjson.dumps(notes)[1:-1]
            except TypeError:
                return b"".join(b"," + json_string(key) + b":" + json_string(value) for key, value in notes.items())

        return json_entries
    writer = _Writer()

    def yaml_entries(notes: dict[str, str]) -> bytes:
        writer.out.clear()
        writer.mapping(notes, "    ", None)
        return "".join(writer.out).encode()

    return yaml_entries


def dump_json(objects: list[dict[str, Any]]) -> str:
    """One compact JSON object per line (see :func:`json_chunks`)."""
    return b"".join(json_chunks(objects)).decode()


def dump(objects: list[dict[str, Any]], fmt: str) -> str:
    return dump_json(objects) if fmt == "json" else dump_yaml(objects)


def dump_chunks(objects: list[dict[str, Any]], fmt: str) -> list[bytes]:
    """:func:`dump` as UTF-8 pieces to write one after the other, what the CLI writes."""
    return json_chunks(objects) if fmt == "json" else yaml_chunks(objects)
