"""The KRM function's wire formats: ResourceLists and plain YAML streams in, items and results out.

Every input is read twice: with the safe, bounded loader, the gate for untrusted input, whose plain data
the function looks at; and with ruamel.yaml's round-trip loader, whose nodes are what passes through, so
comments, quoting and key order of items the function does not touch survive, as do kustomize's and kpt's
annotations. Problems become ``results`` entries that point at the item and file they came from.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from toporender.emit.stream import dump_yaml
from toporender.errors import Diagnostic, Position, UserError, fail
from toporender.load.yaml_source import load_text
from toporender.pipeline import RenderResult

RESOURCE_LIST_VERSIONS = ("config.kubernetes.io/v1", "config.kubernetes.io/v1beta1")
LOCAL_CONFIG = "config.kubernetes.io/local-config"
PATH_ANNOTATIONS = ("internal.config.kubernetes.io/path", "config.kubernetes.io/path")
INDEX_ANNOTATIONS = ("internal.config.kubernetes.io/index", "config.kubernetes.io/index")


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 1 << 30  # never re-wrap scalars of pass-through items
    y.indent(mapping=2, sequence=2, offset=0)
    return y


@dataclass
class Item:
    """One input item: plain data (safely loaded) plus the round-trip node we pass through."""

    data: dict[str, Any]
    node: Any
    position: int

    @property
    def api_version(self) -> str:
        return str(self.data.get("apiVersion", ""))

    @property
    def kind(self) -> str:
        return str(self.data.get("kind", ""))

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.data.get("metadata")
        return meta if isinstance(meta, dict) else {}

    @property
    def name(self) -> str:
        return str(self.meta.get("name", ""))

    def annotations(self) -> dict[str, Any]:
        ann = self.meta.get("annotations")
        return ann if isinstance(ann, dict) else {}

    def labels(self) -> dict[str, Any]:
        lab = self.meta.get("labels")
        return lab if isinstance(lab, dict) else {}

    @property
    def file_path(self) -> str | None:
        ann = self.annotations()
        for key in PATH_ANNOTATIONS:
            if isinstance(ann.get(key), str) and ann[key]:
                return str(ann[key])
        return None

    @property
    def file_index(self) -> int | None:
        ann = self.annotations()
        for key in INDEX_ANNOTATIONS:
            try:
                return int(ann[key])
            except (KeyError, TypeError, ValueError):
                continue
        return None

    def ref(self) -> dict[str, str]:
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.meta.get("namespace"):
            ref["namespace"] = str(self.meta["namespace"])
        return ref


@dataclass
class Origin:
    """Where a diagnostic's source document came from, for ``results[].resourceRef/file``."""

    ref: dict[str, str] | None
    path: str | None
    index: int | None
    prefix: tuple[str, ...] = ()
    """Where the document toporender read sits in the item (``spec`` of a Workflow item), so that a field's
    path in the document becomes its path in the item."""


def field_path(parts: Sequence[str | int]) -> str:
    """kpt's field path notation: ``spec.workflow.groups[0].name``; a key with a dot goes in brackets."""
    out = ""
    for part in parts:
        if isinstance(part, int) or "." in part or "[" in part:
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _without_field(message: str, data_path: Sequence[str | int]) -> str:
    """The message without its leading ``a.b.c: `` when the result's ``field`` says the same."""
    dotted = ".".join(map(str, data_path)) + ": "
    return message[len(dotted):] if data_path and message.startswith(dotted) else message


# ---------------------------------------------------------------------------------------------
# Reading


def load_stream(text: str, source: str) -> tuple[list[Any], list[Any]]:
    """Plain documents (safe, bounded loader: the gate for untrusted input) and round-trip nodes."""
    plain = [d.data for d in load_text(text, source)]
    try:
        nodes = list(_yaml().load_all(text))
    except (YAMLError, RecursionError) as exc:
        raise fail(f"cannot read YAML: {exc}", Position(source)) from None
    if len(nodes) != len(plain):
        raise fail("YAML stream could not be read consistently; simplify it", Position(source))
    return plain, nodes


def read_items(plain: list[Any], nodes: list[Any], source: str, loc: str) -> list[Item]:
    """The Kubernetes objects of a stream as items; empty documents are skipped, anything else without a kind
    is an error."""
    items: list[Item] = []
    errors: list[Diagnostic] = []
    for i, (data, node) in enumerate(zip(plain, nodes, strict=False)):
        if data is None:
            continue
        if not isinstance(data, dict) or "kind" not in data:
            errors.append(Diagnostic(f"{loc}[{i}] is not a Kubernetes object (needs 'kind')", Position(source)))
            continue
        items.append(Item(data, node, len(items)))
    if errors:
        raise UserError(errors)
    return items


def read_resource_list(text: str) -> tuple[dict[str, Any], Any, list[Item]]:
    """The one ResourceList on stdin: its plain data, its round-trip node and its items."""
    source = "ResourceList"
    plain, nodes = load_stream(text, source)
    docs = [(p, n) for p, n in zip(plain, nodes, strict=False) if p is not None]
    if len(docs) != 1 or not isinstance(docs[0][0], dict) or docs[0][0].get("kind") != "ResourceList":
        raise fail("stdin must hold exactly one ResourceList (config.kubernetes.io/v1)", Position(source))
    rl, rl_node = docs[0]
    if rl.get("apiVersion") not in RESOURCE_LIST_VERSIONS:
        raise fail(
            f"ResourceList apiVersion must be one of {', '.join(RESOURCE_LIST_VERSIONS)}",
            Position(source),
        )
    raw_items = rl.get("items")
    if raw_items is None:
        raw_items, item_nodes = [], []
    elif not isinstance(raw_items, list):
        raise fail("ResourceList items must be a list", Position(source))
    else:
        item_nodes = list(rl_node["items"])
    return rl, rl_node, read_items(raw_items, item_nodes, source, "items")


# ---------------------------------------------------------------------------------------------
# Writing


def diagnostic_results(
    diags: Iterable[Diagnostic],
    origins: Mapping[str, Origin],
    fn_ref: dict[str, str] | None,
    repo_path: str | None,
) -> list[dict[str, Any]]:
    """``results`` entries; a problem in a file of the repo at ``repo_path`` (``spec.path``) names that file."""
    out: list[dict[str, Any]] = []
    for d in diags:
        entry: dict[str, Any] = {
            "message": d.message,
            "severity": "error" if d.severity == "error" else d.severity,
        }
        origin = origins.get(d.pos.path) if d.pos else None
        data_path = d.pos.data_path if d.pos else ()
        if origin is not None:
            if origin.ref:
                entry["resourceRef"] = origin.ref
            assert d.pos is not None
            entry["file"] = {"path": origin.path or d.pos.path, "index": origin.index or 0}
            if origin.prefix or data_path:
                entry["field"] = {"path": field_path((*origin.prefix, *data_path))}
                entry["message"] = _without_field(d.message, data_path)
        else:
            if fn_ref:
                entry["resourceRef"] = fn_ref
            if d.pos and d.pos.path:
                base = PurePosixPath(repo_path) if repo_path else PurePosixPath(".")
                path = (base / d.pos.path).as_posix()
                entry["file"] = {"path": path, "index": d.pos.doc_index}
                entry["message"] = f"{path}:{d.pos.line}:{d.pos.col}: {d.message}"
            if data_path:
                entry["field"] = {"path": field_path(data_path)}
        out.append(entry)
    return out


def generated_nodes(result: RenderResult, in_package: bool, output_dir: str) -> list[Any]:
    """Generated objects as round-trip nodes, parsed back from the core's YAML (1.1-safe quoting)."""
    y = _yaml()
    nodes: list[Any] = []
    for rendered in result.files:
        if not rendered.objects:
            continue
        for index, node in enumerate(y.load_all(dump_yaml(rendered.objects))):
            if node is None:
                continue
            if in_package:
                path = f"{output_dir}/{rendered.source}"
                ann = node["metadata"].setdefault("annotations", {})
                for key in PATH_ANNOTATIONS:
                    ann[key] = path
                for key in INDEX_ANNOTATIONS:
                    ann[key] = str(index)
            nodes.append(node)
    return nodes


def _dump(data: Any) -> str:
    buf = io.StringIO()
    _yaml().dump(data, buf)
    return buf.getvalue()


def dump_stream(nodes: list[Any]) -> str:
    """Round-trip nodes as a plain YAML stream (the legacy exec plugin's output)."""
    buf = io.StringIO()
    y = _yaml()
    y.explicit_start = True
    y.dump_all(nodes, buf)
    return buf.getvalue()


def resource_list_text(rl: Mapping[str, Any], rl_node: Any, items: list[Any], results: list[dict[str, Any]]) -> str:
    """The reply to ResourceList ``rl``: the same apiVersion and functionConfig, the output items, any results."""
    out: dict[str, Any] = {"apiVersion": rl.get("apiVersion"), "kind": "ResourceList", "items": items}
    if "functionConfig" in rl_node:
        out["functionConfig"] = rl_node["functionConfig"]
    if results:
        out["results"] = results
    return _dump(out)


def print_results(results: list[dict[str, Any]]) -> None:
    """The same problems on stderr (kustomize shows stderr but never the results)."""
    for r in results:
        ref = r.get("resourceRef") or {}
        file = r.get("file") or {}
        where = file.get("path") or (f"{ref['kind']}/{ref['name']}" if ref else "")
        msg = str(r["message"])
        if where and not msg.startswith(where):
            item = f" (document {file['index']})" if file.get("index") else ""
            fld = f" {r['field']['path']}" if r.get("field") else ""
            msg = f"{where}{item}:{fld}: {msg}" if fld else f"{where}{item}: {msg}"
        sev = r.get("severity", "error")
        print(msg if sev == "error" else f"{sev}: {msg}", file=sys.stderr)


def failure_list(err: UserError) -> str:
    """The reply when stdin cannot be read at all: no items (the non-zero exit makes hosts stop)."""
    results = [{"message": str(d), "severity": "error"} for d in err.diagnostics]
    print_results(results)
    return _dump({"apiVersion": RESOURCE_LIST_VERSIONS[0], "kind": "ResourceList", "items": [], "results": results})
