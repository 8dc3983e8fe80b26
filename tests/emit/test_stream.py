"""The YAML and JSON writers: exact round trips, quoting that survives other parsers, PyYAML's layout.

Three independent readers check the YAML: PyYAML (YAML 1.1, what our own loader uses), ruamel.yaml
(YAML 1.2 core schema, like Go's yaml.v3) and, when kubectl is installed, kustomize's Go parser.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from conftest import ROOT
from toporender.emit.stream import (
    annotation_entries,
    dump,
    dump_chunks,
    dump_json,
    dump_yaml,
    json_chunks,
    json_string,
    scalar_str,
    scalar_str_by_rules,
    yaml_chunks,
)

# Strings that change meaning, or break the document, unless quoted or escaped.
TRICKY = [
    "", " ", "  lead", "trail ", "yes", "No", "ON", "off", "y", "Y", "n", "N", "true", "False", "TRUE",
    "null", "Null", "NULL", "~", "0", "-1", "+1", "007", "089", "0o17", "0O17", "0x1F", "0b101", "1_000",
    "1e3", "1E3", "1e+3", "-1.5e-3", "1.", ".5", "3.14", "1:20", "190:20:30.15", ".inf", "-.inf", "+.INF",
    ".nan", ".NaN", "inf", "NaN", "infinity", "2001-12-14", "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10 -5", "<<", "=", "-", "--", "---", "--- x", "...", "... x", "?", "? x", ":", ": x",
    "x:", "x: y", "x:y", "x #y", "x#y", "#x", ",x", "[x", "]x", "{x", "}x", "&x", "*x", "!x", "!!str x", "|x",
    ">x", "'x", '"x', "%x", "@x", "`x", "- x", "-x", "a'b", 'a"b', "a\\b", "\\", "a\nb", "a\n", "a\n\n",
    "\na", "\n", "a\n b", "a \nb", " a\nb", "a\r\nb", "a\rb", "tab\there", "\t", "nul\x00", "bell\x07",
    "esc\x1b", "del\x7f", "\x85", "nbsp\xa0", "line\u2028sep", "para\u2029", "bom\ufeff", "\ufeffbom",
    "é", "日本語", "emoji 😀", "private \ue000", "\ufffe", "\U0010ffff", "k8s.io/name", "480Gi", "v0.14",
    "pytorch/pytorch:2.5.1-cuda12.4", "--nnodes=4", "a: b: c", "{a: 1}", "[1, 2]", "x" * 2000,
    "# not a comment", "key: |\n  block", "%YAML 1.2", "\x01\x02", "\\n", "a\tb\n",
]

# Strings that PyYAML would read back fine unquoted but YAML 1.2 or Go parsers would not.
QUOTED_FOR_OTHER_PARSERS = ["y", "n", "089", "0o17", "1e3", "1E3", "1.", "+.INF", "inf", "NaN", "0x"]


def load_all(text: str) -> list[Any]:
    return list(yaml.safe_load_all(text))


def ruamel_load_all(text: str) -> list[Any]:
    return list(YAML(typ="safe", pure=True).load_all(io.StringIO(text)))


def pyyaml_dump(objects: list[Any]) -> str:
    """The layout we keep: what the C dumper printed before the specialised writer."""
    return yaml.dump_all(objects, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=2**31 - 1, explicit_start=True)


@pytest.mark.parametrize("s", TRICKY, ids=[repr(s)[:40] for s in TRICKY])
def test_tricky_string_round_trips_as_value_key_and_item(s: str) -> None:
    objects = [{"value": s, s: "key", "items": [s, [s], {s: [s]}]}]
    text = dump_yaml(objects)
    assert load_all(text) == objects
    assert ruamel_load_all(text) == objects


@pytest.mark.parametrize("s", QUOTED_FOR_OTHER_PARSERS)
def test_strings_other_parsers_would_retype_are_quoted(s: str) -> None:
    assert dump_yaml([{"k": s}]) == f"---\nk: '{s}'\n"


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(alphabet="aeflnorsuyAEFLNORSUY019._/-", max_size=9),
                 st.sampled_from(["y", "N", "yes", "No", "TRUE", "false", "On", "oFF", "null", "Inf", "NaN",
                                  "infinity", "e5", "E", "a:b", "a b"]),
                 st.sampled_from(TRICKY + QUOTED_FOR_OTHER_PARSERS)))
def test_name_shortcut_agrees_with_the_rules(s: str) -> None:
    """The shortcut for name-like strings spells them exactly as the full rules would."""
    assert scalar_str(s) == scalar_str_by_rules(s)


@pytest.mark.parametrize("s", ["480Gi", "k8s.io/name", "v0.14", "--nnodes=4", "a:b", "a#b", "2.5.1", "é"])
def test_ordinary_strings_stay_plain(s: str) -> None:
    assert dump_yaml([{"k": s}]) == f"---\nk: {s}\n"


def test_scalars_and_containers_spelled_like_pyyaml() -> None:
    objects: list[Any] = [{
        "none": None, "t": True, "f": False, "int": -12, "big": 2**70, "float": 1.5, "exp": 1e17, "small": 1e-7,
        "pinf": math.inf, "ninf": -math.inf, "empty_map": {}, "empty_list": [], "str": "x",
        "nested": {"a": {"b": [1, [2, 3], {"c": {}}, [], [[4]], {"d": [5], "e": {"f": None}}]}},
        "list_of_maps": [{"name": "a", "value": "1"}, {"name": "b"}], 3: "int key", None: "null key",
        True: "bool key", 1.5: "float key",
    }]
    assert dump_yaml(objects) == pyyaml_dump(objects)
    assert load_all(dump_yaml(objects)) == objects


def test_nan_round_trips() -> None:
    (loaded,) = load_all(dump_yaml([{"x": math.nan}]))
    assert math.isnan(loaded["x"])


def test_documents_that_are_not_mappings() -> None:
    objects: list[Any] = [[1, {"a": 2}], "text", 5, None, {}, [], "multi\nline\n"]
    text = dump_yaml(objects)
    assert load_all(text) == objects
    assert ruamel_load_all(text) == objects


def test_tuples_and_subclasses_are_written_as_their_base_types() -> None:
    class Name(str):
        pass

    class Count(int):
        pass

    text = dump_yaml([{Name("k"): Name("yes"), "t": (1, (2,)), "c": Count(3)}])
    assert load_all(text) == [{"k": "yes", "t": [1, [2]], "c": 3}]


def test_unsupported_types_are_refused() -> None:
    with pytest.raises(TypeError, match="cannot emit"):
        dump_yaml([{"x": object()}])


def test_multi_line_strings_become_literal_blocks_when_exact() -> None:
    script = "set -e\ntorchrun train.py\n"
    assert dump_yaml([{"args": ["-c", script]}]) == "---\nargs:\n- -c\n- |\n  set -e\n  torchrun train.py\n"
    assert dump_yaml([{"a": {"s": "x\n\ny"}}]) == "---\na:\n  s: |-\n    x\n\n    y\n"
    for ambiguous in ["  indented\nfirst", "trailing \nspace", "x\n\n", "\nleading", "tab\tx\ny"]:
        line = dump_yaml([{"s": ambiguous}]).splitlines()[1]
        assert line.startswith('s: "'), line


def test_long_keys_use_the_explicit_form() -> None:
    key = "k" * 1500
    objects = [{key: {"a": [1, {key: "v"}]}, "b": [key], "short": 1}]
    text = dump_yaml(objects)
    assert "? " + key in text
    assert load_all(text) == objects
    assert ruamel_load_all(text) == objects


def test_empty_stream() -> None:
    assert dump_yaml([]) == ""
    assert dump_json([]) == ""


def test_json_is_one_compact_object_per_line() -> None:
    objects: list[dict[str, Any]] = [{"a": "é\n", "b": [1, 2.5, None, True]}, {"c": {}}]
    text = dump(objects, "json")
    assert text == '{"a":"é\\n","b":[1,2.5,null,true]}\n{"c":{}}\n'
    assert [json.loads(line) for line in text.splitlines()] == objects
    assert dump(objects, "yaml") == dump_yaml(objects)
    assert [b"".join(dump_chunks(objects, fmt)).decode() for fmt in ("json", "yaml")] == [text, dump_yaml(objects)]


@pytest.mark.parametrize("golden", sorted((ROOT / "golden").glob("*.yaml")), ids=lambda p: p.name)
def test_golden_files_are_reemitted_byte_for_byte(golden: Path) -> None:
    text = golden.read_text()
    assert dump_yaml(load_all(text)) == text


# Hypothesis: arbitrary JSON-like data, with strings biased towards the tricky ones.
SPECIAL_CHARS = list(" \t\n\r-?:,[]{}#&*!|>'\"%@`.+_0123456789eEoxyYnN~\\\x00\x85\xa0\u2028\ufeff😀é")
strings = st.one_of(
    st.text(max_size=30),
    st.sampled_from(TRICKY),
    st.text(alphabet=st.sampled_from(SPECIAL_CHARS), max_size=12),
    st.builds(lambda a, b: a + b, st.sampled_from(TRICKY), st.text(alphabet=st.sampled_from(SPECIAL_CHARS),
                                                                     max_size=4)),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), strings)
data = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                     st.dictionaries(strings, inner, max_size=5)), max_leaves=30)
documents = st.lists(st.dictionaries(strings, data, max_size=6), max_size=3)


@settings(max_examples=300, deadline=None)  # ruamel's pure-Python loader makes this the slow one
@given(documents)
def test_round_trip_through_pyyaml_and_a_yaml_1_2_parser(objects: list[dict[str, Any]]) -> None:
    text = dump_yaml(objects)
    assert b"".join(yaml_chunks(objects, per_chunk=2)).decode() == text
    assert load_all(text) == objects
    assert ruamel_load_all(text) == objects
    assert [json.loads(line) for line in dump_json(objects).split("\n")[:-1]] == objects


# Where PyYAML's emitter and ours both print a string on one line and PyYAML does not leave it
# open to other parsers' readings, the bytes must be PyYAML's (libyaml spells some escapes
# differently and keeps line breaks, \r included, in single quotes; those cases are excluded).
def _comparable(s: str) -> bool:
    from toporender.emit.stream import _OTHER_PARSERS

    return not any(c in s for c in "\n\r\x85\u2028\u2029") and _OTHER_PARSERS.fullmatch(s) is None


comparable_strings = strings.filter(_comparable)
comparable = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), comparable_strings),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(comparable_strings, inner, max_size=4)),
    max_leaves=20)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.dictionaries(comparable_strings, comparable, max_size=5), max_size=2))
def test_same_bytes_as_pyyaml_where_pyyaml_is_unambiguous(objects: list[dict[str, Any]]) -> None:
    assert dump_yaml(objects) == pyyaml_dump(objects)


def test_go_parser_reads_every_tricky_string_back(tmp_path: Path) -> None:
    """kustomize (Go, kyaml) parses our YAML and re-emits it; every value must come back unchanged."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("kubectl is required under CI=true")
        pytest.skip("kubectl not installed")
    # kustomize converts through JSON internally and refuses control characters and noncharacters
    # however they are written.
    values = [s for s in TRICKY
              if not any(ord(c) < 0x20 and c not in "\t\n" or 0x7F <= ord(c) <= 0x9F or c == "\ufffe" for c in s)]
    data = {f"k{i}": s for i, s in enumerate(values)}
    labels = {"app": "yes", "n": "089"}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tricky", "labels": labels},
                  "data": data}
    (tmp_path / "cm.yaml").write_text(dump_yaml([config_map]))
    (tmp_path / "kustomization.yaml").write_text("resources:\n- cm.yaml\n")
    out = subprocess.run([kubectl, "kustomize", str(tmp_path)], check=True, capture_output=True, text=True).stdout
    # kustomize prints its own YAML (``<<`` unquoted, say); read it without resolving types, so a
    # value Go had read as a number or boolean shows up as its re-spelling.
    back = yaml.load(out, Loader=yaml.BaseLoader)
    assert back["data"] == data
    assert back["metadata"]["labels"] == labels


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63, max_value=2**70),
                         st.floats(), st.floats(min_value=-1e-3, max_value=1e-3), strings)
json_data = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                               st.dictionaries(strings, inner, max_size=5)),
                         max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(strings, json_data, max_size=6), max_size=4))
def test_json_stream_is_byte_for_byte_the_standard_encoders(objects: list[dict[str, Any]]) -> None:
    """The fast encoder is only an accelerator: floats, inf/nan and huge ints fall back to json's own output."""
    expected = "".join(json.dumps(o, ensure_ascii=False, separators=(",", ":")) + "\n" for o in objects)
    assert dump_json(objects) == expected
    assert b"".join(json_chunks(objects, per_chunk=2)).decode() == expected


def test_a_json_string_is_written_as_the_standard_encoder_writes_it() -> None:
    """Every code point but the surrogates, alone and between others, as ``json.dumps(ensure_ascii=False)``
    writes it; a lone surrogate fails as that encoder's text fails to encode."""
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    for text in [*points, "".join(points[:0x3000]), 'a"b\\c\nd\u2028\x7f']:
        assert json_string(text) == json.dumps(text, ensure_ascii=False).encode()
    with pytest.raises(UnicodeEncodeError):
        json_string("\ud800")


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@settings(max_examples=200, deadline=None)
@given(st.dictionaries(strings | st.sampled_from(TRICKY), strings | st.sampled_from([*TRICKY, "\ud800", "a\udfffb"]),
                       max_size=4))
def test_annotation_entries_are_what_the_stream_writes_after_the_own(fmt: str, notes: dict[str, str]) -> None:
    """Entries written after an object's own annotations, in place of a marker entry, give the text the stream
    writes for the object with those entries added (how a spread render fills placement's annotations in), or
    fail as writing that object fails (a lone surrogate in JSON)."""
    written = annotation_entries(fmt)
    marker = written({"\x00": ""})
    for own in ({"a": "b"}, {"note": "x\ny", "yes": "on"}):
        notes = {k: v for k, v in notes.items() if k not in own and k != "\x00"}
        obj = {"kind": "Pod", "metadata": {"name": "p", "annotations": {**own, "\x00": ""}}, "spec": {"x": 1}}
        text = b"".join(dump_chunks([obj], fmt))
        assert text.count(marker) == 1
        expected = {**obj, "metadata": {"name": "p", "annotations": {**own, **notes}}}
        try:
            whole = b"".join(dump_chunks([expected], fmt))
        except UnicodeEncodeError:
            with pytest.raises(UnicodeEncodeError):
                written(notes)
            continue
        assert text.replace(marker, written(notes)) == whole
