"""The KRM function itself: settings from the function config, inputs from items or from disk, the render,
and which items go out.

How inputs arrive and results are written is :mod:`toporender.hosts.krm.resource_list`'s business; the
modes, inputs and outputs are described in :mod:`toporender.hosts.krm`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toporender.cache import open_store
from toporender.errors import Diagnostic, Position, UserError, fail
from toporender.hosts.common import check_namespace, check_repo_relative, parse_bool
from toporender.hosts.krm.resource_list import (
    LOCAL_CONFIG,
    Item,
    Origin,
    diagnostic_results,
    dump_stream,
    failure_list,
    generated_nodes,
    load_stream,
    print_results,
    read_items,
    read_resource_list,
    resource_list_text,
)
from toporender.load.repo import CONFIG_FILE
from toporender.load.yaml_source import Document
from toporender.pipeline import RenderOptions, RenderResult, render_documents, render_repo

GROUP = "toporender.dev"
API_VERSION = f"{GROUP}/v1alpha1"
FN_KIND = "Toporender"
INPUT_KINDS = {"RepoConfig", "Workflow", "NodeInventory", FN_KIND}
SOURCE_ANNOTATION = f"{GROUP}/source"
OWNED_LABELS = (f"{GROUP}/workflow", f"{GROUP}/pool")
SPEC_FIELDS = ("path", "namespace", "pool", "inventory", "strict", "poolObjects", "keepInputs", "outputDir")


def is_ours(it: Item) -> bool:
    """An input of this function: a repo config, a workflow, an inventory or the function config."""
    return it.api_version == API_VERSION and it.kind in INPUT_KINDS


def is_inventory_node(it: Item) -> bool:
    """A Node given as inventory: marked local-config, so kustomize and kpt never apply it."""
    return (
        it.api_version == "v1"
        and it.kind == "Node"
        and str(it.annotations().get(LOCAL_CONFIG, "")).lower() == "true"
    )


def is_generated(it: Item) -> bool:
    """An object an earlier run of this function generated."""
    return any(k in it.labels() for k in OWNED_LABELS)


@dataclass
class Outcome:
    """What one run of the function returns: the output items, its results, and whether it failed (exit 1)."""

    items: list[Any]
    results: list[dict[str, Any]] = field(default_factory=list)
    failed: bool = False


# ---------------------------------------------------------------------------------------------
# Function config


@dataclass(frozen=True)
class FnSettings:
    """The function config's settings; everything but the repo path and the output's shape is render options."""

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
        Diagnostic(f"unknown functionConfig field {where}.{k}; known: {', '.join(SPEC_FIELDS)}",
                   Position(source, data_path=(where, k))) for k in unknown
    ]

    def text(key: str) -> str | None:
        value = raw.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            errors.append(Diagnostic(f"functionConfig {where}.{key} must be a string",
                                     Position(source, data_path=(where, key))))
            return None
        return value

    def flag(key: str) -> bool | None:
        value = raw.get(key)
        if value is None or value == "":
            return None
        try:
            return parse_bool(value, f"functionConfig {where}.{key}", Position(source, data_path=(where, key)))
        except UserError as err:
            errors.extend(err.diagnostics)
            return None

    inventory = text("inventory")
    if inventory is not None:
        try:
            inventory = check_repo_relative(inventory, f"functionConfig {where}.inventory",
                                            Position(source, data_path=(where, "inventory")))
        except UserError as err:
            errors.extend(err.diagnostics)
    output_dir = text("outputDir") or "generated"
    try:
        output_dir = check_repo_relative(output_dir, f"functionConfig {where}.outputDir",
                                         Position(source, data_path=(where, "outputDir")))
    except UserError as err:
        errors.extend(err.diagnostics)
    namespace = text("namespace")
    if namespace is not None:
        try:
            check_namespace(namespace, f"functionConfig {where}.namespace",
                            Position(source, data_path=(where, "namespace")))
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
    workflows = [it for it in items if is_ours(it) and it.kind == "Workflow"]
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
    consumed = {it.position for it in items if is_ours(it) or is_inventory_node(it)}
    inputs = [it for it in items if (is_ours(it) and it.kind != FN_KIND) or is_inventory_node(it)]
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
        result = render_repo(root, settings.options, open_store(root))
        return result, origins, consumed

    configs = [it for it in items if is_ours(it) and it.kind == "RepoConfig"]
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
    origins[CONFIG_FILE] = _origin(cfg_item)
    workflows: list[Document] = []
    sources = _workflow_sources(items)
    for it in items:
        if is_ours(it) and it.kind == "Workflow":
            source = sources[it.position]
            origins[source] = _origin(it)
            workflows.append(Document(source, 0, spec_of(it)))
    inventory: list[Document] = []
    for it in items:
        if is_inventory_node(it) or (is_ours(it) and it.kind == "NodeInventory"):
            source = origin_key(it)
            origins.setdefault(source, _origin(it))
            data = {k: v for k, v in it.data.items() if k != "metadata"} if it.kind == "NodeInventory" else it.data
            inventory.append(Document(source, 0, data))
    if errors:
        raise UserError(errors)
    result = render_documents(config_doc, workflows, settings.options, inventory=inventory or None)
    return result, origins, consumed


def process(items: list[Item], fn_config: Any, cwd: Path, fn_source: str = "functionConfig") -> Outcome:
    """The whole function: settings, render, assemble output items and results."""
    unchanged = [it.node for it in items]
    fn_ref = None
    fn_origins: dict[str, Origin] = {}
    if isinstance(fn_config, dict):
        fn_item = Item(fn_config, None, -1)
        fn_ref = fn_item.ref()
        fn_origins[fn_source] = Origin(fn_ref, fn_item.file_path, fn_item.file_index)
    try:
        settings = parse_fn_config(fn_config, fn_source)
    except UserError as err:
        return Outcome(unchanged, diagnostic_results(err.diagnostics, fn_origins, fn_ref, None), True)
    origins: dict[str, Origin] = {}
    try:
        result, origins, consumed = render_items(items, settings, cwd)
    except UserError as err:
        # render_items fills origins before rendering; rebuild them for the error report.
        results = diagnostic_results(err.diagnostics, _origins_only(items), fn_ref, settings.path)
        return Outcome(unchanged, results, True)
    in_package = any(it.file_path for it in items)
    out: list[Any] = []
    for it in items:
        if is_generated(it) and not is_ours(it):
            continue  # ours from an earlier run: replaced by this render
        if it.position in consumed:
            keep = settings.keep_inputs if settings.keep_inputs is not None else bool(it.file_path)
            if not keep:
                continue
        out.append(it.node)
    out.extend(generated_nodes(result, in_package, settings.output_dir))
    results = diagnostic_results(result.warnings, origins, fn_ref, settings.path)
    return Outcome(out, results, False)


def _origin(it: Item) -> Origin:
    """A RepoConfig's or Workflow's document is its ``spec``; an inventory's is the item itself."""
    prefix = ("spec",) if it.kind in ("RepoConfig", "Workflow") else ()
    return Origin(it.ref(), it.file_path, it.file_index, prefix)


def _origins_only(items: list[Item]) -> dict[str, Origin]:
    origins: dict[str, Origin] = {}
    sources = _workflow_sources(items)
    for it in items:
        if not is_ours(it) and not is_inventory_node(it):
            continue
        if it.kind == "RepoConfig":
            origins[CONFIG_FILE] = _origin(it)
        elif it.kind == "Workflow":
            origins[sources[it.position]] = _origin(it)
        origins.setdefault(it.file_path or f"{it.kind}/{it.name}", _origin(it))
    return origins


# ---------------------------------------------------------------------------------------------
# Modes


def run_function(text: str, cwd: Path) -> tuple[str, int]:
    """KRM function mode: ResourceList text in, (ResourceList text out, exit code)."""
    try:
        rl, rl_node, items = read_resource_list(text)
    except UserError as err:
        return failure_list(err), 1
    outcome = process(items, rl.get("functionConfig"), cwd)
    print_results(outcome.results)
    return resource_list_text(rl, rl_node, outcome.items, outcome.results), 1 if outcome.failed else 0


def run_legacy(config_path: Path, stdin_text: str, cwd: Path) -> tuple[str, int]:
    """Legacy exec plugin mode: config file + plain YAML stream in, plain YAML stream out."""
    from toporender.load.yaml_source import load_file

    try:
        config_docs = [d for d in load_file(config_path, "plugin config") if d.data is not None]
        if len(config_docs) != 1:
            raise fail("the plugin config must be one YAML document", Position("plugin config"))
        plain, nodes = load_stream(stdin_text, "stdin") if stdin_text.strip() else ([], [])
        items = read_items(plain, nodes, "stdin", "resource")
    except UserError as err:
        for d in err.diagnostics:
            print(str(d), file=sys.stderr)
        return "", 1
    outcome = process(items, config_docs[0].data, cwd, "plugin config")
    print_results(outcome.results)
    if outcome.failed:
        return "", 1
    return (dump_stream(outcome.items) if outcome.items else ""), 0


def export_items(root: Path) -> list[dict[str, Any]]:
    """A toporender repo as KRM input items (to start a kpt package from an existing repo)."""
    from toporender.load.repo import load_repo, single_document
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
                "spec": single_document(root / wf.source, wf.source).data,  # the loader keeps only the model
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
