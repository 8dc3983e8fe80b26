"""``toporender krm``: KRM function (kustomize / kpt) and kustomize legacy exec plugin.

KRM function mode (no argument): one ``ResourceList`` (``config.kubernetes.io/v1``) on stdin, one on
stdout. Legacy exec plugin mode (``toporender krm CONFIG_FILE``, as kustomize calls
``<plugin> /tmp/kust-plugin-config-NNN``): the config is read from the file, resources (transformer
use; empty for generators) come as a plain YAML stream on stdin, and a plain YAML stream goes out.

Inputs, either
- from disk: ``spec.path`` of the function config names a toporender repo directory (relative to the
  working directory: the kustomization root for kustomize, the process cwd for kpt), rendered with
  :func:`toporender.pipeline.render_repo`; or
- as items (``toporender.dev/v1alpha1``): one ``RepoConfig`` (``spec`` = toporender.yaml content),
  ``Workflow`` items (``spec`` = one OSMO workflow document), and the inventory as ``NodeInventory``
  items or ``v1 Node`` items marked ``config.kubernetes.io/local-config: "true"``, rendered with
  :func:`toporender.pipeline.render_documents`.

Output: every item we do not own passes through unchanged (ruamel.yaml round-trip: comments,
quoting and key order survive; kustomize/kpt annotations are untouched); items we generated in an
earlier run (``toporender.dev/workflow`` / ``toporender.dev/pool`` labels) are replaced by the fresh
render; consumed inputs are removed, except items that come from a file of a kpt package (they
carry a path annotation, and removing them would delete the user's source files); ``spec.keepInputs``
overrides that. Generated objects are appended in render order; inside a package they get
``config.kubernetes.io/path`` = ``<outputDir>/<source>`` (default ``generated/workflows/x.yaml``).

Errors: ``results`` entries (``severity: error``, ``message``, ``resourceRef``, ``file{path,index}``),
the same lines on stderr, **and** exit code 1 (kustomize and kpt ignore results on exit 0); the
items are then returned unchanged.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import click
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from toporender.emit.stream import dump_yaml
from toporender.errors import Diagnostic, Position, UserError, fail
from toporender.hosts.common import (
    check_namespace,
    check_repo_relative,
    die_internal,
    parse_bool,
    read_stdin,
    write_stdout,
)
from toporender.load.repo import CONFIG_FILE
from toporender.load.yaml_source import Document, load_text
from toporender.pipeline import RenderOptions, RenderResult, render_documents, render_repo

GROUP = "toporender.dev"
API_VERSION = f"{GROUP}/v1alpha1"
FN_KIND = "Toporender"
INPUT_KINDS = {"RepoConfig", "Workflow", "NodeInventory", FN_KIND}
RESOURCE_LIST_VERSIONS = ("config.kubernetes.io/v1", "config.kubernetes.io/v1beta1")
LOCAL_CONFIG = "config.kubernetes.io/local-config"
PATH_ANNOTATIONS = ("internal.config.kubernetes.io/path", "config.kubernetes.io/path")
INDEX_ANNOTATIONS = ("internal.config.kubernetes.io/index", "config.kubernetes.io/index")
SOURCE_ANNOTATION = f"{GROUP}/source"
OWNED_LABELS = (f"{GROUP}/workflow", f"{GROUP}/pool")
SPEC_FIELDS = ("path", "namespace", "pool", "inventory", "strict", "poolObjects", "keepInputs", "outputDir")


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 1 << 30  # never re-wrap scalars of pass-through items
    y.indent(mapping=2, sequence=2, offset=0)
    return y


# ---------------------------------------------------------------------------------------------
# Items


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

    def is_ours(self) -> bool:
        return self.api_version == API_VERSION and self.kind in INPUT_KINDS

    def is_inventory_node(self) -> bool:
        return (
            self.api_version == "v1"
            and self.kind == "Node"
            and str(self.annotations().get(LOCAL_CONFIG, "")).lower() == "true"
        )

    def is_generated(self) -> bool:
        return any(k in self.labels() for k in OWNED_LABELS)


@dataclass
class Origin:
    """Where a diagnostic's source document came from, for ``results[].resourceRef/file``."""

    ref: dict[str, str] | None
    path: str | None
    index: int | None


@dataclass
class Outcome:
    items: list[Any]
    results: list[dict[str, Any]] = field(default_factory=list)
    failed: bool = False


# ---------------------------------------------------------------------------------------------
# Function config


@dataclass(frozen=True)
class FnSettings:
    path: str | None = None
    options: RenderOptions = RenderOptions()
    keep_inputs: bool | None = None
    output_dir: str = "generated"


def parse_fn_config(fn: Any, source: str) -> FnSettings:
    """Settings from a ``Toporender`` function config (``spec``) or a kpt ``ConfigMap`` (``data``)."""
    if fn is None:
        return FnSettings()
    pos = Position(source)
    if not isinstance(fn, dict):
        raise fail("functionConfig must be a mapping", pos)
    kind, api = fn.get("kind"), fn.get("apiVersion")
    if kind == "ConfigMap" and api == "v1":
        raw = fn.get("data") or {}
        where = "data"
    elif kind == FN_KIND and api == API_VERSION:
        raw = fn.get("spec") or {}
        where = "spec"
    else:
        raise fail(f"functionConfig must be {API_VERSION} {FN_KIND} or a v1 ConfigMap, got {api} {kind}", pos)
    if not isinstance(raw, dict):
        raise fail(f"functionConfig {where} must be a mapping", pos)
    unknown = sorted(set(map(str, raw)) - set(SPEC_FIELDS))
    errors = [
        Diagnostic(f"unknown functionConfig field {where}.{k}; known: {', '.join(SPEC_FIELDS)}", pos) for k in unknown
    ]

    def text(key: str) -> str | None:
        value = raw.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            errors.append(Diagnostic(f"functionConfig {where}.{key} must be a string", pos))
            return None
        return value

    def flag(key: str) -> bool | None:
        value = raw.get(key)
        if value is None or value == "":
            return None
        try:
            return parse_bool(value, f"functionConfig {where}.{key}", pos)
        except UserError as err:
            errors.extend(err.diagnostics)
            return None

    inventory = text("inventory")
    if inventory is not None:
        try:
            inventory = check_repo_relative(inventory, f"functionConfig {where}.inventory", pos)
        except UserError as err:
            errors.extend(err.diagnostics)
    output_dir = text("outputDir") or "generated"
    try:
        output_dir = check_repo_relative(output_dir, f"functionConfig {where}.outputDir", pos)
    except UserError as err:
        errors.extend(err.diagnostics)
    namespace = text("namespace")
    if namespace is not None:
        try:
            check_namespace(namespace, f"functionConfig {where}.namespace", pos)
        except UserError as err:
            errors.extend(err.diagnostics)
    settings = FnSettings(
        path=text("path"),
        options=RenderOptions(
            namespace=namespace,
            pool=text("pool"),
            inventory=inventory,
            strict=flag("strict"),
            pool_objects=flag("poolObjects"),
        ),
        keep_inputs=flag("keepInputs"),
        output_dir=output_dir,
    )
    if errors:
        raise UserError(errors)
    return settings


# ---------------------------------------------------------------------------------------------
# Processing (shared by both modes)


def _workflow_sources(items: list[Item]) -> dict[int, str]:
    """The repo-relative source name of each Workflow item (used for golden/generated file names).

    ``toporender.dev/source`` wins; else the item's file when it holds only this workflow; else
    ``workflows/<metadata.name>.yaml``; a clash gets ``#<index>`` appended.
    """
    workflows = [it for it in items if it.is_ours() and it.kind == "Workflow"]
    per_file: dict[str, int] = {}
    for it in workflows:
        if it.file_path:
            per_file[it.file_path] = per_file.get(it.file_path, 0) + 1
    sources: dict[int, str] = {}
    taken: set[str] = set()
    for it in workflows:
        ann = it.annotations()
        if isinstance(ann.get(SOURCE_ANNOTATION), str) and ann[SOURCE_ANNOTATION]:
            source = str(ann[SOURCE_ANNOTATION])
        elif it.file_path and per_file[it.file_path] == 1:
            source = it.file_path
        else:
            source = f"workflows/{it.name or it.position}.yaml"
        if source in taken:
            source = f"{source}#{it.file_index if it.file_index is not None else it.position}"
        taken.add(source)
        sources[it.position] = source
    return sources


def render_items(
    items: list[Item], settings: FnSettings, cwd: Path
) -> tuple[RenderResult, dict[str, Origin], set[int]]:
    """Render from disk (``spec.path``) or from input items; returns result, origins, consumed positions."""
    consumed = {it.position for it in items if it.is_ours() or it.is_inventory_node()}
    inputs = [it for it in items if (it.is_ours() and it.kind != FN_KIND) or it.is_inventory_node()]
    origins: dict[str, Origin] = {}
    if settings.path is not None:
        if inputs:
            first = inputs[0]
            raise fail(
                f"functionConfig spec.path is set, so {first.kind} '{first.name}' would be ignored; "
                "use either spec.path or input items"
            )
        root = cwd / settings.path
        if not root.is_dir():
            raise fail(f"functionConfig spec.path {settings.path!r} is not a directory (relative to {cwd})")
        result = render_repo(root, settings.options)
        return result, origins, consumed

    configs = [it for it in items if it.is_ours() and it.kind == "RepoConfig"]
    if not configs:
        raise fail(
            f"no input: add a {API_VERSION} RepoConfig item (spec = toporender.yaml) and Workflow items, "
            "or set spec.path in the function config to a toporender repo directory"
        )
    if len(configs) > 1:
        raise fail(f"{len(configs)} RepoConfig items; give exactly one")
    errors: list[Diagnostic] = []

    def spec_of(it: Item) -> Any:
        spec = it.data.get("spec")
        if not isinstance(spec, dict):
            errors.append(Diagnostic(f"{it.kind} '{it.name}': spec must be a mapping", Position(origin_key(it))))
        return spec

    def origin_key(it: Item) -> str:
        return it.file_path or f"{it.kind}/{it.name}"

    cfg_item = configs[0]
    config_doc = Document(CONFIG_FILE, 0, spec_of(cfg_item))
    origins[CONFIG_FILE] = Origin(cfg_item.ref(), cfg_item.file_path, cfg_item.file_index)
    workflows: list[Document] = []
    sources = _workflow_sources(items)
    for it in items:
        if it.is_ours() and it.kind == "Workflow":
            source = sources[it.position]
            origins[source] = Origin(it.ref(), it.file_path, it.file_index)
            workflows.append(Document(source, 0, spec_of(it)))
    inventory: list[Document] = []
    for it in items:
        if it.is_inventory_node() or (it.is_ours() and it.kind == "NodeInventory"):
            source = origin_key(it)
            origins.setdefault(source, Origin(it.ref(), it.file_path, it.file_index))
            data = {k: v for k, v in it.data.items() if k != "metadata"} if it.kind == "NodeInventory" else it.data
            inventory.append(Document(source, 0, data))
    if errors:
        raise UserError(errors)
    result = render_documents(config_doc, workflows, settings.options, inventory=inventory or None)
    return result, origins, consumed


def _results(
    diags: Iterable[Diagnostic],
    origins: Mapping[str, Origin],
    fn_ref: dict[str, str] | None,
    settings: FnSettings,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for d in diags:
        entry: dict[str, Any] = {
            "message": d.message,
            "severity": "error" if d.severity == "error" else d.severity,
        }
        origin = origins.get(d.pos.path) if d.pos else None
        if origin is not None:
            if origin.ref:
                entry["resourceRef"] = origin.ref
            assert d.pos is not None
            entry["file"] = {"path": origin.path or d.pos.path, "index": origin.index or 0}
        else:
            if fn_ref:
                entry["resourceRef"] = fn_ref
            if d.pos and d.pos.path:
                base = PurePosixPath(settings.path) if settings.path else PurePosixPath(".")
                entry["file"] = {"path": (base / d.pos.path).as_posix(), "index": 0}
                entry["message"] = f"{d.pos.path}:{d.pos.line}:{d.pos.col}: {d.message}"
        out.append(entry)
    return out


def _generated_nodes(result: RenderResult, in_package: bool, output_dir: str) -> list[Any]:
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


def process(items: list[Item], fn_config: Any, cwd: Path, fn_source: str = "functionConfig") -> Outcome:
    """The whole function: settings, render, assemble output items and results."""
    unchanged = [it.node for it in items]
    fn_ref = None
    if isinstance(fn_config, dict):
        fn_ref = Item(fn_config, None, -1).ref()
    try:
        settings = parse_fn_config(fn_config, fn_source)
    except UserError as err:
        return Outcome(unchanged, _results(err.diagnostics, {}, fn_ref, FnSettings()), True)
    origins: dict[str, Origin] = {}
    try:
        result, origins, consumed = render_items(items, settings, cwd)
    except UserError as err:
        # render_items fills origins before rendering; rebuild them for the error report.
        return Outcome(unchanged, _results(err.diagnostics, _origins_only(items), fn_ref, settings), True)
    in_package = any(it.file_path for it in items)
    out: list[Any] = []
    for it in items:
        if it.is_generated() and not it.is_ours():
            continue  # ours from an earlier run: replaced by this render
        if it.position in consumed:
            keep = settings.keep_inputs if settings.keep_inputs is not None else bool(it.file_path)
            if not keep:
                continue
        out.append(it.node)
    out.extend(_generated_nodes(result, in_package, settings.output_dir))
    results = _results(result.warnings, origins, fn_ref, settings)
    return Outcome(out, results, False)


def _origins_only(items: list[Item]) -> dict[str, Origin]:
    origins: dict[str, Origin] = {}
    sources = _workflow_sources(items)
    for it in items:
        if not it.is_ours() and not it.is_inventory_node():
            continue
        if it.kind == "RepoConfig":
            origins[CONFIG_FILE] = Origin(it.ref(), it.file_path, it.file_index)
        elif it.kind == "Workflow":
            origins[sources[it.position]] = Origin(it.ref(), it.file_path, it.file_index)
        origins.setdefault(it.file_path or f"{it.kind}/{it.name}", Origin(it.ref(), it.file_path, it.file_index))
    return origins


# ---------------------------------------------------------------------------------------------
# Wire formats


def _load_stream(text: str, source: str) -> tuple[list[Any], list[Any]]:
    """Plain documents (safe, bounded loader: the gate for untrusted input) and round-trip nodes."""
    plain = [d.data for d in load_text(text, source)]
    try:
        nodes = list(_yaml().load_all(text))
    except (YAMLError, RecursionError) as exc:
        raise fail(f"cannot read YAML: {exc}", Position(source)) from None
    if len(nodes) != len(plain):
        raise fail("YAML stream could not be read consistently; simplify it", Position(source))
    return plain, nodes


def _items(plain: list[Any], nodes: list[Any], source: str, loc: str) -> list[Item]:
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


def _dump(data: Any) -> str:
    buf = io.StringIO()
    _yaml().dump(data, buf)
    return buf.getvalue()


def _dump_all(nodes: list[Any]) -> str:
    buf = io.StringIO()
    y = _yaml()
    y.explicit_start = True
    y.dump_all(nodes, buf)
    return buf.getvalue()


def _print_results(results: list[dict[str, Any]]) -> None:
    """The same problems on stderr (kustomize shows stderr but never the results)."""
    for r in results:
        ref = r.get("resourceRef") or {}
        where = (r.get("file") or {}).get("path") or (f"{ref['kind']}/{ref['name']}" if ref else "")
        msg = str(r["message"])
        if where and not msg.startswith(where):
            msg = f"{where}: {msg}"
        sev = r.get("severity", "error")
        print(msg if sev == "error" else f"{sev}: {msg}", file=sys.stderr)


def _failure_list(err: UserError) -> str:
    """The reply when stdin cannot be read at all: no items (the non-zero exit makes hosts stop)."""
    results = [{"message": str(d), "severity": "error"} for d in err.diagnostics]
    _print_results(results)
    return _dump({"apiVersion": RESOURCE_LIST_VERSIONS[0], "kind": "ResourceList", "items": [], "results": results})


def run_function(text: str, cwd: Path) -> tuple[str, int]:
    """KRM function mode: ResourceList text in, (ResourceList text out, exit code)."""
    source = "ResourceList"
    try:
        plain, nodes = _load_stream(text, source)
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
        items = _items(raw_items, item_nodes, source, "items")
    except UserError as err:
        return _failure_list(err), 1
    outcome = process(items, rl.get("functionConfig"), cwd)
    _print_results(outcome.results)
    out: dict[str, Any] = {"apiVersion": rl.get("apiVersion"), "kind": "ResourceList", "items": outcome.items}
    if "functionConfig" in rl_node:
        out["functionConfig"] = rl_node["functionConfig"]
    if outcome.results:
        out["results"] = outcome.results
    return _dump(out), 1 if outcome.failed else 0


def run_legacy(config_path: Path, stdin_text: str, cwd: Path) -> tuple[str, int]:
    """Legacy exec plugin mode: config file + plain YAML stream in, plain YAML stream out."""
    from toporender.load.yaml_source import load_file

    try:
        config_docs = [d for d in load_file(config_path, "plugin config") if d.data is not None]
        if len(config_docs) != 1:
            raise fail("the plugin config must be one YAML document", Position("plugin config"))
        plain, nodes = _load_stream(stdin_text, "stdin") if stdin_text.strip() else ([], [])
        items = _items(plain, nodes, "stdin", "resource")
    except UserError as err:
        for d in err.diagnostics:
            print(str(d), file=sys.stderr)
        return "", 1
    outcome = process(items, config_docs[0].data, cwd, "plugin config")
    _print_results(outcome.results)
    if outcome.failed:
        return "", 1
    return (_dump_all(outcome.items) if outcome.items else ""), 0


def export_items(root: Path) -> list[dict[str, Any]]:
    """A toporender repo as KRM input items (to start a kpt package from an existing repo)."""
    from toporender.load.repo import load_repo
    from toporender.load.yaml_source import load_file

    repo = load_repo(root)
    local = {LOCAL_CONFIG: "true"}
    out: list[dict[str, Any]] = [
        {
            "apiVersion": API_VERSION,
            "kind": "RepoConfig",
            "metadata": {"name": "toporender", "annotations": dict(local)},
            "spec": repo.config_doc.data,
        }
    ]
    names: set[str] = set()
    for wf in repo.workflows:
        name = wf.name.lower().replace("_", "-")
        while name in names:
            name += "-x"
        names.add(name)
        out.append(
            {
                "apiVersion": API_VERSION,
                "kind": "Workflow",
                "metadata": {"name": name, "annotations": {**local, SOURCE_ANNOTATION: wf.source}},
                "spec": wf.doc.data,
            }
        )
    if repo.config.inventory:
        inv = check_repo_relative(repo.config.inventory, "inventory", Position(CONFIG_FILE))
        for i, doc in enumerate(load_file(root / inv, inv)):
            data = doc.data
            if not isinstance(data, dict):
                continue
            meta = {"name": f"inventory-{i}", "annotations": dict(local)}
            if data.get("kind") in ("List", "NodeList"):
                for node in data.get("items") or []:
                    node = dict(node)
                    node["metadata"] = {
                        **(node.get("metadata") or {}),
                        "annotations": {**((node.get("metadata") or {}).get("annotations") or {}), **local},
                    }
                    out.append(node)
            else:
                out.append({**data, "metadata": {**(data.get("metadata") or {}), **meta}})
    return out


@click.command("krm", context_settings={"ignore_unknown_options": True})
@click.argument("config_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--export",
    "export_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Print the toporender repo in this directory as KRM input items (RepoConfig, Workflow, "
    "inventory) and exit: the starting point of a kpt package.",
)
def krm_cmd(config_file: Path | None, extra: tuple[str, ...], export_dir: Path | None) -> None:
    """KRM function: ResourceList on stdin -> ResourceList on stdout.

    With CONFIG_FILE (how kustomize runs a legacy exec plugin: the plugin's config file as the
    first argument), reads resources as a plain YAML stream instead and prints one.
    """
    try:
        cwd = Path(os.getcwd())
        if export_dir is not None:
            try:
                out, code = dump_yaml(export_items(export_dir)), 0
            except UserError as err:
                for d in err.diagnostics:
                    print(str(d), file=sys.stderr)
                out, code = "", 1
        elif config_file is None:
            try:
                out, code = run_function(read_stdin(), cwd)
            except UserError as err:
                out, code = _failure_list(err), 1
        else:
            try:
                stdin_text = "" if sys.stdin is None or sys.stdin.isatty() else read_stdin()
            except UserError as err:
                print(str(err), file=sys.stderr)
                raise SystemExit(1) from None
            out, code = run_legacy(config_file, stdin_text, cwd)
    except Exception as exc:  # noqa: BLE001 - a traceback helps nobody in a kustomize build log
        die_internal(exc, "krm")
    write_stdout(out)
    raise SystemExit(code)
