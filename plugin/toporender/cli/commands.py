"""The core CLI commands: render, validate, schema, pool show."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from toporender.cli.guard import guarded
from toporender.hosts.common import print_diagnostics as report
from toporender.hosts.common import write_stdout

F = TypeVar("F", bound=Callable[..., Any])


def render_options(fn: F) -> F:
    options = [
        click.option("--namespace", help="Namespace when toporender.yaml does not set one (default: 'default')."),
        click.option("--pool", help="Pool for workflows that name none (overrides default_pool)."),
        click.option("--inventory", help="Node inventory file, relative to DIR (overrides the config)."),
        click.option("--strict/--no-strict", default=None, help="Treat unplaceable gangs as errors."),
        click.option("--pool-objects/--no-pool-objects", default=None,
                     help="Also render pool-level objects (KAI Topology/Queue, Koordinator ClusterNetworkTopology)."),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return fn


def make_options(namespace: str | None, pool: str | None, inventory: str | None, strict: bool | None,
                 pool_objects: bool | None) -> Any:
    from toporender.options import RenderOptions

    return RenderOptions(namespace=namespace, pool=pool, inventory=inventory, strict=strict,
                         pool_objects=pool_objects)


NO_CACHE = click.option("--no-cache", is_flag=True,
                        help="Render from scratch, without reading or writing the render cache "
                             "(TOPORENDER_NO_CACHE=1 does the same).")


def open_store(directory: Path) -> Any:
    from toporender.cache import open_store

    return open_store(directory)


DIR_ARG = click.argument("directory", default=".", type=click.Path(file_okay=False, path_type=Path))


@click.command("render")
@DIR_ARG
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="YAML stream, or one JSON object per line.")
@click.option("-o", "--output-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write one file per workflow (same relative path) into this directory instead of stdout.")
@render_options
@NO_CACHE
@click.option("--jobs", "jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Processes that build a large repo's workflows (1: this one only). Default: $TOPORENDER_JOBS, "
                   "else the CPUs available.")
@guarded("render")
def render_cmd(directory: Path, fmt: str, output_dir: Path | None, no_cache: bool, jobs: int | None,
               **opts: Any) -> None:
    """Render every workflow of the repo in DIR to a manifest stream on stdout."""
    store = None if no_cache else open_store(directory)
    options = make_options(**opts)
    if output_dir is None:
        from toporender.cache import diagnostics_from_json, find

        found = find(store, directory, f"stream-{fmt}", options) if store is not None else None
        if found is not None and found.meta is not None:  # a cache hit imports none of the renderer
            report(diagnostics_from_json(found.meta["warnings"]))
            write_stdout(found.pieces)
            return
        from toporender.jobs import default_jobs
        from toporender.rerender import render_stream

        out, warnings = render_stream(directory, options, fmt, store, found, jobs or default_jobs())
        report(warnings)
        write_stdout(out)
        return
    from toporender.emit.stream import dump
    from toporender.pipeline import render_repo

    result = render_repo(directory, options, store)
    report(result.warnings)
    from toporender.emit.atomic import atomic_write

    for rendered in result.files:
        rel = Path(rendered.source)
        target = output_dir / (rel.with_suffix(".json") if fmt == "json" else rel)
        content = dump(rendered.objects, fmt)
        if not target.is_file() or target.read_text(encoding="utf-8") != content:
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, content)
            click.echo(f"wrote {target}", err=True)


@click.command("validate")
@DIR_ARG
@click.option("--output", "check_output", is_flag=True,
              help="Also render and check every object against the upstream schemas and admission rules.")
@render_options
@guarded("validate")
def validate_cmd(directory: Path, check_output: bool, **opts: Any) -> None:
    """Check the repo in DIR without printing manifests."""
    from toporender.load.repo import load_repo
    from toporender.pipeline import check_rendered, render

    repo = load_repo(directory)
    result = render(repo, make_options(**opts))
    report(result.warnings)
    if check_output:
        problems = check_rendered(repo, result)
        if problems:
            report(problems)
            sys.exit(1)
    files = len(result.files)
    click.echo(f"ok: {len(result.objects)} object{'s' if len(result.objects) != 1 else ''} from {files} "
               f"file{'s' if files != 1 else ''}", err=True)


@click.command("schema")
@click.argument("kind", type=click.Choice(["workflow", "config"]), default="workflow")
def schema_cmd(kind: str) -> None:
    """Print the JSON Schema of a workflow file or of toporender.yaml (for editors)."""
    from toporender.load.models import RepoConfig, WorkflowDocument

    model = WorkflowDocument if kind == "workflow" else RepoConfig
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "toporender workflow" if kind == "workflow" else "toporender.yaml"
    write_stdout(json.dumps(schema, indent=2, sort_keys=True) + "\n")


@click.group("pool")
def pool_cmd() -> None:
    """Inspect pools of the repo config."""


@pool_cmd.command("show")
@click.argument("name")
@click.argument("directory", default=None, required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--dir", "dir_option", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="The repo directory, as the DIRECTORY argument (kept for scripts that pass it this way).")
@click.option("--parsed", is_flag=True, help="Include parsed_group_templates and parsed_pod_template.")
@guarded("pool show")
def pool_show(name: str, directory: Path | None, dir_option: Path | None, parsed: bool) -> None:
    """Print pool NAME of the repo in DIRECTORY (default .) as toporender reads it."""
    if directory is not None and dir_option is not None and directory != dir_option:
        raise click.UsageError("give the repo directory once: as DIRECTORY or as --dir")
    directory = directory or dir_option or Path(".")
    from toporender.emit.stream import dump_yaml
    from toporender.errors import fail
    from toporender.load.repo import CONFIG_FILE, load_config, single_document

    doc = single_document(directory / CONFIG_FILE, CONFIG_FILE)
    config = load_config(doc)
    if name not in config.pools:
        raise fail(f"pool '{name}' is not defined; pools: {', '.join(config.pools)}", doc.pos(("pools",)))
    out: dict[str, Any] = {"name": name, **config.pools[name].model_dump(mode="json", exclude_defaults=False)}
    if parsed:
        from toporender.build.templates.apply import parsed_group_templates, parsed_pod_template

        out["parsed_group_templates"] = parsed_group_templates(config, name)
        out["parsed_pod_template"] = parsed_pod_template(config, name, None)
    write_stdout(dump_yaml([out]))
