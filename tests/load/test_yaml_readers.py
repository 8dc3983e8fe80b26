"""The fast YAML reader must give exactly what the position-tracking loader gives.

Every case is read twice: by ``load_text`` (fast reader when it vouches for the text) and by the
exact loader alone. Data must match in value *and* type (``1``, ``1.0`` and ``True`` are equal in
Python), errors must match in message and position.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toporender.errors import UserError
from toporender.load import yaml_exact
from toporender.load import yaml_fast as yamlfast
from toporender.load.yaml_source import MAX_DEPTH, MAX_NODES, _exact_documents, load_text

CASES = yaml.safe_load((Path(__file__).parent / "fixtures" / "yaml_readers" / "cases.yaml").read_text())


def canon(value: Any) -> Any:
    """A comparable form that keeps types apart (and makes NaN equal to itself)."""
    if isinstance(value, dict):
        return ("map", [(canon(k), canon(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("seq", [canon(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


def outcome(read: Any, text: str) -> Any:
    try:
        return ("data", [canon(d.data) for d in read(text)])
    except UserError as err:
        return ("error", [str(d) for d in err.diagnostics])


def both(text: str) -> tuple[Any, Any]:
    return (outcome(lambda t: load_text(t, "f.yaml"), text),
            outcome(lambda t: _exact_documents(t, "f.yaml", MAX_NODES), text))


def fast_taken(text: str, max_nodes: int = MAX_NODES) -> bool:
    return yamlfast.load_plain(text, max_nodes=max_nodes, max_depth=MAX_DEPTH) is not yamlfast.UNSURE


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_fast_reader_agrees_with_exact_loader(case: dict[str, Any]) -> None:
    fast, exact = both(case["text"])
    assert fast == exact
    if case.get("fast"):
        assert fast_taken(case["text"]), "this plain document should not need the exact loader"


_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 0)()
_LONG = "1" + "0" * _DIGITS


@pytest.mark.skipif(not _DIGITS, reason="this Python reads ints of any length")
@pytest.mark.parametrize(("text", "fast"), [
    (f"{_LONG}\n", False),
    (f"a: [{_LONG}]\n", False),
    (f"a: {{b: -{_LONG}}}\n", False),
    (f"a: {_LONG[:-1]}\n", True),
    (f"a: '{_LONG}'\n", True),
    (f"a: 4\nb: x{_LONG}\n", True),
])
def test_ints_python_refuses_go_to_the_exact_loader(text: str, fast: bool) -> None:
    """Only an int read with more digits than Python converts needs the exact loader (which refuses it)."""
    fast_result, exact = both(text)
    assert fast_result == exact
    assert fast_taken(text) is fast


def test_positions_of_a_fast_read_document_are_the_exact_ones() -> None:
    text = "a: 1\nb:\n  c: [x, {d: 'yes'}]\n"
    assert fast_taken(text)
    fast_doc = load_text(text, "f.yaml")[0]
    exact_doc = _exact_documents(text, "f.yaml", MAX_NODES)[0]
    for loc in [(), ("a",), ("b",), ("b", "c"), ("b", "c", 1), ("b", "c", 1, "d"), ("b", "missing")]:
        assert fast_doc.pos(loc) == exact_doc.pos(loc)


@pytest.mark.parametrize(("depth", "fast"), [(MAX_DEPTH, True), (MAX_DEPTH + 1, False)])
def test_depth_limit_is_the_exact_loaders(depth: int, fast: bool) -> None:
    # depth - 1 nested mappings, the innermost holding a list: depth collections in all.
    text = "".join(" " * i + "k:\n" for i in range(depth - 2)) + " " * (depth - 2) + "k: [v]\n"
    assert fast_taken(text) is fast
    fast_outcome, exact_outcome = both(text)
    assert fast_outcome == exact_outcome
    assert (fast_outcome[0] == "data") is fast


@pytest.mark.parametrize("extra", [0, 1])
def test_value_limit_is_the_exact_loaders(extra: int) -> None:
    # A mapping holding a list of n scalars: 2 (mapping) + 2 (list) + n values, as the exact loader counts.
    limit = 50
    n = limit - 4 + extra
    text = "k: [" + ", ".join(["x"] * n) + "]\n"
    assert fast_taken(text, max_nodes=limit) is (extra == 0)
    fast = outcome(lambda t: load_text(t, "f.yaml", max_nodes=limit), text)
    exact = outcome(lambda t: _exact_documents(t, "f.yaml", limit), text)
    assert fast == exact
    assert (fast[0] == "error") is (extra == 1)


# Generated documents: tricky scalars, plain or quoted, as keys and values, in block and flow style.
TRICKY = ["yes", "No", "on", "OFF", "y", "n", "true", "False", "null", "~", "0", "4", "-1", "+12", "0777", "010",
          "0o17", "0x1F", "0b11", "1_000", "1.5", ".5", "1.", "1e3", "1.0e3", "1.5e+3", "12:30", "190:20:30",
          ".inf", "-.inf", ".NaN", "-.nan", "2001-12-14", "=", "-", "x", "s0-r0-w0", "a b", "3e0", "#x", "k:v"]
scalars = st.sampled_from(TRICKY).flatmap(
    lambda s: st.sampled_from([s, f"'{s}'", f'"{s}"']) if s not in ("#x",) else st.sampled_from([f"'{s}'"]))
keys = st.sampled_from(TRICKY).flatmap(lambda s: st.sampled_from([s, f"'{s}'"]))


def block(value: Any, indent: int) -> str:
    pad = " " * indent
    if isinstance(value, dict):
        return "".join(f"{pad}{k}:\n{block(v, indent + 2)}" if isinstance(v, (dict, list)) and v
                       else f"{pad}{k}: {flow(v)}\n" for k, v in value.items()) or f"{pad}{{}}\n"
    if isinstance(value, list):
        return "".join(f"{pad}-\n{block(v, indent + 2)}" if isinstance(v, (dict, list)) and v
                       else f"{pad}- {flow(v)}\n" for v in value) or f"{pad}[]\n"
    return f"{pad}{value}\n"


def flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    return str(value)


trees = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys, kids, max_size=4),
                     max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=st.dictionaries(keys, trees, min_size=1, max_size=5), style=st.sampled_from(["block", "flow"]))
def test_generated_documents_read_the_same(tree: dict[str, Any], style: str) -> None:
    text = block(tree, 0) if style == "block" else flow(tree) + "\n"
    fast, exact = both(text)
    assert fast == exact, text


@pytest.mark.parametrize("text", [
    "- " * 100_000 + "x\n",  # 200 KB that would overflow yaml-rs's stack
    "a:\n" + "- " * 100_000 + "x\n",
    "".join(" " * i + "k:\n" for i in range(250)),
], ids=["compact sequences", "compact sequences under a key", "indented mappings"])
def test_deep_block_nesting_goes_to_the_exact_loader(text: str) -> None:
    assert not fast_taken(text)
    fast, exact = both(text)
    assert fast == exact
    assert fast[0] == "error" and "nesting deeper than" in fast[1][0]


def single_quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


free_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=st.lists(st.tuples(free_text, free_text, st.booleans()), min_size=1, max_size=6))
def test_generated_free_text_reads_the_same(pairs: list[tuple[str, str, bool]]) -> None:
    """Any characters, quoted or (where they may be) plain, as keys and values."""
    lines = []
    for key, value, plain in pairs:
        shown = value if plain and value.strip() == value and value else single_quoted(value)
        lines.append(f"{single_quoted(key)}: {shown}")
    text = "\n".join(lines) + "\n"
    fast, exact = both(text)
    assert fast == exact, text


def _squeezed(pattern: str) -> str:
    """A verbose-mode pattern without the whitespace verbose mode ignores (outside character classes)."""
    out, in_class, escaped = [], False, False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "[]":
            in_class = ch == "["
        elif ch.isspace() and not in_class:
            continue
        out.append(ch)
    return "".join(out)


def test_the_fast_readers_resolver_table_is_pyyamls() -> None:
    """The fast reader decides that a plain scalar stays a string from its own copy of the exact loader's
    resolver table; every first character, tag, order, pattern and flag must be PyYAML's."""
    from yaml.resolver import Resolver

    theirs = {first: [(tag, _squeezed(rx.pattern), rx.flags) for tag, rx in entries]
              for first, entries in Resolver.yaml_implicit_resolvers.items()}
    ours = {first: [(tag, _squeezed(rx.pattern), rx.flags) for tag, rx in entries]
            for first, entries in yamlfast._IMPLICIT.items()}
    assert ours == theirs


@pytest.mark.parametrize("scalar", ["200Gi", "--nnodes=50", "0", "0o17", "1e3", "1.5", "12:30", "2026-11-25",
                                    "2026-11-25 10:00:00", "yes", "Yes", "yEs", "~", "", "null", "<<", "=", "!",
                                    ".inf", ".NaN", "0x1F", "0b101", "+12", "-", "nvcr.io/x:1", "true"])
def test_the_table_and_the_exact_loader_agree_on_strings(scalar: str) -> None:
    exact_tag = yaml_exact._RESOLVER.resolve(yaml.ScalarNode, scalar, (True, False))
    assert (yamlfast._implicit_type(scalar) in yamlfast._READ_AS_STRING) == (exact_tag in yaml_exact._STRING_TAGS)
