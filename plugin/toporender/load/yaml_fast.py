"""A fast way to read plain YAML files that gives exactly what the position-tracking loader gives.

Reading the YAML of a large repo event by event in Python is most of a render's time. ``yaml-rs``
(a Rust YAML 1.2 parser) builds the same plain data about ten times faster, but without positions,
and YAML 1.2 reads a few plain scalars differently from the YAML 1.1 rules our users' files (and
PyYAML, kubectl and Argo CD) follow: ``yes``/``on``, ``0777``, ``1e3``, ``12:30``, ``<<``.

So the fast reader only vouches for a text when it can show that both readers agree:

- the text has none of the constructs the fast path leaves to the exact loader (anchors, aliases,
  tags, directives, several documents, complex or collection keys, merge keys, escapes, tabs, the
  line breaks YAML 1.1 and 1.2 count differently) and no number spelt in a way the two read
  differently (leading zeros, ``0o``, exponents);
- every string it read is one the exact loader would also read as that string had it been plain
  (so ``12:30`` or ``yes`` read as strings send the file to the exact loader), every key is a string
  (the exact loader never converts keys), and the exact loader's limits on values and depth hold.

Nulls and booleans need no check: every YAML 1.2 spelling of them means the same in YAML 1.1.
Anything else returns :data:`UNSURE` and the caller uses the exact loader, which also produces the
error message and, lazily, the positions. Tests compare both readers on a corpus of edge cases and
on generated documents.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

UNSURE: Any = object()
"""Returned when the fast reader cannot vouch for the text; use the exact loader."""

# Anywhere: escapes, tabs, CR, merge keys, document markers, complex keys. Each is looked for
# only where its first character occurs: one character is found at memory speed, two sixty
# times slower.
_EXACT_ANYWHERE = ("\\", "\t", "\r", "<<", "\n---", "\n...", "? ", "?\n")
# Printable ASCII and the line feed; str.isprintable takes five times longer on ASCII text.
_PRINTABLE_ASCII = bytes(range(0x20, 0x7F)) + b"\n"
# The line breaks YAML 1.1 and 1.2 count differently, and a BOM.
_EXACT_NON_ASCII = ("\x85", "\u2028", "\u2029", "\ufeff")
# At the start of a node: anchors, aliases, tags, directives, reserved indicators.
_INDICATORS = "&*!%@`"
_AT_NODE_START = {c: re.compile(r"(?:^|[-?:,\[{ ])" + re.escape(c), re.M) for c in _INDICATORS}
# Ints YAML 1.1 reads differently: leading zeros (octal there, decimal in 1.2) and 0o (1.2 only), at the start
# of a plain scalar: after a space or line break, a flow indicator, or the ':' after a quoted key or a flow
# collection. Inside a string ("2026-10-01T08:00:00Z") such a spelling is no number, and kubectl's dumps have
# timestamps everywhere.
# The pattern starts with its literal "0", so the engine only stops at zeros.
_RISKY_INT = re.compile(r"0(?:(?<=[\s\[{,]0)|(?<=[\s\[{,][-+]0)|(?<=[\"'\]}]:0)|(?<=[\"'\]}]:[-+]0))[0-9_o]")
_RISKY_INT_FIRST = re.compile(r"[-+]?0[0-9_o]")
# Python refuses to read ints longer than sys.get_int_max_str_digits() (3.11+) and so does the
# exact loader; yaml-rs does not. Checked on the ints read (a regex over the text took longer
# than all other checks together); spellings with leading zeros are _RISKY_INT's.
_MAX_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 0)()
_TOO_LONG = 10 ** _MAX_DIGITS if _MAX_DIGITS else None
# Floats YAML 1.1 reads differently: an exponent without a dot or a sign, a signed .nan.
_RISKY_FLOAT = re.compile(r"[eE](?<=[0-9._][eE])[-+]?[0-9]|[-+]\.(?:nan|NaN|NAN)")
# First characters of the plain scalars the exact loader reads as something other than a string.
# yaml-rs limits flow nesting itself but recurses without limit through block nesting, and a few
# hundred kilobytes of "- - - ..." would overflow the stack; block nesting needs a line whose
# leading run of spaces and "-" grows with the depth, so long runs go to the exact loader.
_DEEP_BLOCK = re.compile(r"\n[ -]{200}")  # starts with a literal: a fast scan
_MAYBE_NOT_STRING = frozenset("-+.0123456789~=<yYnNtTfFoO")
_COLLECTIONS = frozenset((dict, list))
_STR = {str}


def fast_reader() -> Callable[[str], Any] | None:
    """``yaml_rs.loads`` set up like the exact loader, or None when yaml-rs is not installed."""
    try:
        import yaml_rs
    except ImportError:  # pragma: no cover - yaml-rs is a dependency; the exact loader still works
        return None
    policy = yaml_rs.DuplicateKeyPolicy.Error

    def loads(text: str) -> Any:
        return yaml_rs.loads(text, parse_datetime=False, duplicate_key_policy=policy)

    return loads


_READER = fast_reader()
_stays_string: dict[str, bool] = {}

# PyYAML's implicit resolvers (YAML 1.1) as the exact loader applies them to a plain scalar: the first pattern
# of the scalar's first character that matches gives its type, else it is a string. Written without the
# verbose mode's spaces; tests/load/test_yaml_readers.py holds every pattern, flag and first character to
# PyYAML's own, so knowing that a scalar stays a string never needs PyYAML imported.
_IMPLICIT_TYPES = (
    ("bool", "yYnNtTfFoO", r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$"),
    ("float", "-+0123456789.", r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*"
     r"(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    ("int", "-+0123456789", r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+"
     r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"),
    ("merge", "<", r"^(?:<<)$"),
    ("null", ["~", "n", "N", ""], r"^(?:~|null|Null|NULL|)$"),
    ("timestamp", "0123456789", r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?"
     r"-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?"
     r"(?::[0-9][0-9])?))?)$"),
    ("value", "=", r"^(?:=)$"),
    ("yaml", "!&*", r"^(?:!|&|\*)$"),
)


def _implicit_table() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    table: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for tag, firsts, pattern in _IMPLICIT_TYPES:
        for first in firsts:
            flags = 0 if tag in ("merge", "value", "yaml") else re.X  # as PyYAML compiles them
            table.setdefault(first, []).append(("tag:yaml.org,2002:" + tag, re.compile(pattern, flags)))
    return table


_IMPLICIT = _implicit_table()
_READ_AS_STRING = ("tag:yaml.org,2002:timestamp", None)
"""What the exact loader keeps as the string written (timestamps too: Kubernetes treats them as strings)."""


def _implicit_type(scalar: str) -> str | None:
    """The tag the exact loader's resolver gives ``scalar`` written plain; None: a string."""
    for tag, pattern in _IMPLICIT.get(scalar[:1], ()):
        if pattern.match(scalar):
            return tag
    return None


def plain_is_string(scalar: str) -> bool:
    """Whether the exact loader reads ``scalar``, written plain, as that very string (as opposed to a number,
    a boolean, null and the like). Readers of layouts regular enough to parse without a YAML parser
    (:mod:`toporender.placement.nodelist`) vouch for a plain scalar only when this holds."""
    return _implicit_type(scalar) in _READ_AS_STRING


def load_plain(text: str, *, max_nodes: int, max_depth: int) -> Any:
    """The data of single-document ``text``, or :data:`UNSURE`.

    Strings are checked by the exact loader's own rules: its resolver table (:data:`_IMPLICIT_TYPES`), so
    the exact loader itself is not needed to vouch for a file.
    """
    if _READER is None or _needs_exact(text):
        return UNSURE
    try:
        data = _READER(text)
    except Exception:  # noqa: BLE001 - any refusal: the exact loader says what is wrong
        return UNSURE
    if data is None:
        return UNSURE
    numbers = _agrees(data, text, max_nodes, max_depth)
    if numbers is None:
        return UNSURE
    if int in numbers and (_RISKY_INT.search(text) or _RISKY_INT_FIRST.match(text)):
        return UNSURE
    if float in numbers and _RISKY_FLOAT.search(text):
        return UNSURE
    return data


def _needs_exact(text: str) -> bool:
    """Constructs the fast path leaves to the exact loader (it reads them, or refuses them, itself).

    Plain substring tests first: they run at memory speed, and most files contain none of these.
    """
    if text.startswith(("---", "...")) or text.endswith("?") or \
            any(s[0] in text and s in text for s in _EXACT_ANYWHERE):
        return True
    if _DEEP_BLOCK.search(text) or _DEEP_BLOCK.match("\n" + text[:200]):
        return True
    if text.isascii():  # control characters: libyaml refuses them
        if text.encode("ascii").translate(None, _PRINTABLE_ASCII):
            return True
    elif not text.replace("\n", " ").isprintable() or any(s in text for s in _EXACT_NON_ASCII):
        return True
    return any(c in text and _AT_NODE_START[c].search(text) is not None for c in _INDICATORS)


def _agrees(data: Any, text: str, max_nodes: int, max_depth: int) -> set[type] | None:
    """Check strings, keys and the exact loader's limits, one nesting level at a time.

    Returns the types of the scalars read (numbers need a look at how they are spelt), or None
    on any disagreement. The exact loader counts one value per scalar and two per collection (its
    start and end events), and refuses a collection opened inside ``max_depth`` others.
    """
    if not isinstance(data, (dict, list)):
        if (type(data) is str and not _strings_agree({data}, text)) or _too_long_int([data]):
            return None
        return {type(data)}
    types: set[type] = set()
    nodes = 2
    level: list[Any] = [data]
    depth = 1
    while level:
        if depth > max_depth:
            return None
        values: list[Any] = []
        keys: list[Any] = []
        for coll in level:
            if type(coll) is dict:
                keys.extend(coll)
                values.extend(coll.values())
            else:
                values.extend(coll)
        here = set(map(type, values))
        level = [v for v in values if type(v) is dict or type(v) is list] if here & _COLLECTIONS else []
        nodes += len(values) + len(level)
        if nodes > max_nodes or (keys and set(map(type, keys)) != _STR):
            return None
        if str in here and not _strings_agree({v for v in values if type(v) is str}, text):
            return None
        if int in here and _too_long_int(values):
            return None
        types |= here
        depth += 1
    return types


def _too_long_int(values: list[Any]) -> bool:
    return _TOO_LONG is not None and any(type(v) is int and abs(v) >= _TOO_LONG for v in values)


def _strings_agree(strings: set[str], text: str) -> bool:
    """Strings such as ``'yes'`` or ``'12:30'`` are fine quoted; written plain, YAML 1.1 reads them otherwise.

    A lone line break is what yaml-rs makes of an empty block scalar ending the text (``a: |``, then nothing),
    which is empty for the exact loader; any such string goes to the exact loader."""
    if "\n" in strings:
        return False
    for s in strings:
        if s[:1] not in _MAYBE_NOT_STRING:
            continue
        verdict = _stays_string.get(s)
        if verdict is None:
            verdict = _stays_string[s] = _quoted_or_string(s)
        if not verdict and _written_plain(text, s):
            return False
    return True


def _quoted_or_string(scalar: str) -> bool:
    """True when the exact loader reads ``scalar`` as itself, or the fast reader never makes it
    from a plain scalar (``'4'`` read as a string was quoted: plain, YAML 1.2 reads 4).

    The exact loader reads a plain scalar as itself exactly when its resolver finds no type for it (or a
    timestamp, kept as written); any other type it constructs, or refuses."""
    if _implicit_type(scalar) in _READ_AS_STRING:
        return True
    assert _READER is not None
    try:
        return type(_READER(scalar)) is not str
    except Exception:  # noqa: BLE001
        return False


def _written_plain(text: str, scalar: str) -> bool:
    """Whether ``scalar`` may appear in ``text`` as a whole plain scalar (erring towards yes)."""
    for m in re.finditer(re.escape(scalar) + r"[ \t]*(?:$|#|[,\]}]|:(?:[ \t]|$))", text, re.M):
        i = m.start() - 1
        while i >= 0 and text[i] in " \t":
            i -= 1
        before = text[i] if i >= 0 else "\n"
        spaced = i < m.start() - 1
        if (before in "\n[{," or (before in "-?:" and spaced)
                or (before == ":" and i > 0 and text[i - 1] in "\"']}")):
            return True
    return False
