"""The YAML stream means what the JSON stream means, read by a YAML 1.2 parser as well as a YAML 1.1 one.

Generated template values (any text, numbers, the strings YAML 1.1 reads as booleans, base-60 numbers or
octals, and Jinja filters that return ``Markup``: ``tojson``, ``safe``, ``escape``) go through a real render;
the YAML output is parsed with ruamel.yaml (YAML 1.2) and PyYAML (YAML 1.1) and must equal the JSON output.
"""

from __future__ import annotations

import io
import json
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from toporender.emit.stream import dump_json, dump_yaml
from toporender.load.yaml_source import load_text
from toporender.pipeline import render_documents

WORKFLOW = "workflow:\n  name: wf\n  groups:\n  - name: g\n    tasks:\n    - {name: t, image: x}\n"
TRICKY = ["yes", "no", "on", "off", "y", "n", "true", "False", "null", "~", "", " ", "1:30", "0o17", "017", "0x1F",
          "1e3", ".inf", "-.nan", "2026-11-25", "12:30:00", "- a", "a: b", "#x", "&a", "*a", "!tag", "|", ">",
          "'", '"', "%x", "@x", "`x", "a\nb", "tab\there", "\u00e9", "\u2028", "\ufeffbom", "NULL", "Yes", "+1",
          "1_000", "0b101", "=", "<<"]
FILTERED = ["{{ V|tojson }}", "{{ V|safe }}", "{{ V|escape }}", "x-{{ V|tojson }}", "{{ V }}"]

text = st.text(alphabet=st.characters(whitelist_categories=("L", "N", "P", "S", "Zs"), blacklist_characters="{}%#"),
               max_size=20)
values = st.one_of(st.sampled_from(TRICKY), text)


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _render(data: dict[str, str], annotation: str) -> list[dict[str, Any]]:
    config = {
        "namespace": "ml",
        "pools": {"p": {"backend": "kai", "common_group_templates": ["cm"]}},
        "group_templates": {"cm": {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "cm-{{WF_GROUP_UUID}}",
                                                "annotations": {"example.com/v": annotation}},
                                   "data": data}},
    }
    doc = load_text(json.dumps(config, ensure_ascii=False), "toporender.yaml")[0]
    return render_documents(doc, [load_text(WORKFLOW, "workflows/wf.yaml")[0]]).objects


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plain=st.lists(values, min_size=1, max_size=6), filtered=st.sampled_from(FILTERED), value=values)
def test_yaml_output_reads_back_as_the_json_output(plain: list[str], filtered: str, value: str) -> None:
    data = {f"k{i}": v for i, v in enumerate(plain)}
    data["filtered"] = filtered.replace("V", _quote(value))
    objects = _render(data, filtered.replace("V", _quote(value)))
    from_json = [json.loads(line) for line in dump_json(objects).split("\n") if line]
    stream = dump_yaml(objects)
    assert list(YAML(typ="safe", pure=True).load_all(io.StringIO(stream))) == from_json
    assert list(yaml.safe_load_all(stream)) == from_json
    cm = next(o for o in from_json if o["kind"] == "ConfigMap")
    assert all(cm["data"][f"k{i}"] == v for i, v in enumerate(plain))
