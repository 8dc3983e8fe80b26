"""``toporender plan`` and ``toporender inventory import``: the only placement code that touches files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from toporender.cli.guard import guarded
from toporender.errors import Diagnostic, Position, UserError, fail
from toporender.load.yaml_source import NOT_UTF8, Document, first_invalid_utf8, load_file


@click.group("inventory")
def inventory_cmd() -> None:
    """Manage the committed node inventory."""


@inventory_cmd.command("import")
@click.argument("source", default="-")
@click.option("-o", "--output", "output", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Write the inventory to FILE (atomically, only when the import succeeded) instead of stdout.")
@guarded("inventory import")
def import_cmd(source: str, output: Path | None) -> None:
    """Turn `kubectl get nodes -o yaml|json` output (FILE or - for stdin) into the compact, sorted form.

    Dumps of any size are read one node at a time (docs/security.md, "Size limits")."""
    import io
    import sys

    from toporender.placement.inventory import compact_inventory, inventory_yaml
    from toporender.placement.nodelist import read_nodes

    path = Path(source)
    if source != "-" and path.is_dir():
        raise fail("expected a file but found a directory", Position(source))
    try:
        raw = sys.stdin.buffer if source == "-" else path.open("rb")
    except FileNotFoundError:
        raise fail("file not found", Position(source)) from None
    except OSError as exc:
        raise fail(f"cannot read file: {exc.strerror or exc}", Position(source)) from None
    display = "<stdin>" if source == "-" else source
    try:
        with io.TextIOWrapper(raw, encoding="utf-8-sig") as stream:
            nodes = read_nodes(stream, display)
    except UnicodeDecodeError:
        where = None
        if source != "-":
            with path.open("rb") as again:
                where = first_invalid_utf8(again)
        raise fail(NOT_UTF8, Position(display, *(where or (1, 1)))) from None
    text = inventory_yaml(compact_inventory(nodes))
    if output is None:
        click.echo(text, nl=False)
        return
    from toporender.emit.atomic import atomic_write

    atomic_write(output, text)
    click.echo(f"wrote {output}: {len(nodes)} nodes", err=True)


def _run_documents(target: Path) -> list[Document] | None:
    """Documents of a Run-spec file or directory, or None if the target holds no ``kind: Run``.

    A directory with a ``toporender.yaml`` is a repo, planned as one: reading all its files first, to find
    Run specs it does not have, cost a large repo a second read of every workflow and of the inventory."""
    from toporender.load.repo import CONFIG_FILE
    from toporender.load.walk import TooManyEntries, files_under

    if target.is_dir() and (target / CONFIG_FILE).is_file():
        return None
    try:
        files = [target] if target.is_file() else sorted(
            p for p in files_under(target) if p.suffix in (".yaml", ".yml")) if target.is_dir() else []
    except TooManyEntries:
        raise fail("more files than a directory of Run specs holds; pass the Run spec file",
                   Position(str(target))) from None
    docs: list[Document] = []
    found = False
    for f in files:
        try:
            loaded = load_file(f, str(f))
        except UserError:
            if target.is_file():
                raise
            continue
        for d in loaded:
            if isinstance(d.data, dict) and d.data.get("kind") == "Run":
                found = True
                docs.append(d)
    return docs if found else None


@click.command("plan")
@click.argument("target", default=".")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "svg", "html"]), default="table",
              show_default=True, help="svg and html draw the plan as a picture (repos, not Run specs).")
@click.option("--inventory", "inventory", default=None, help="Node inventory (compact form or a NodeList dump).")
@click.option("--wide", is_flag=True, help="Table: full domain names and notes, one line per gang, however wide.")
@click.option("--jobs", "jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Processes that read a large repo's workflows (1: this one only). Default: $TOPORENDER_JOBS, "
                   "else the CPUs available.")
@guarded("plan")
def plan_cmd(target: str, fmt: str, inventory: str | None, wide: bool, jobs: int | None) -> None:
    """Show where every gang (or Run) would go: domains, nodes, usage, fragmentation and the plan hash."""
    from toporender.placement.report import format_plan

    path = Path(target)
    if not path.exists():
        raise _missing(target)
    runs = _run_documents(path)
    if runs is not None:
        from toporender.placement.inventory import load_inventory
        from toporender.placement.runs import parse_runs, plan_runs

        if inventory is None:
            raise click.UsageError("planning Run specs needs --inventory PATH")
        if fmt in ("svg", "html"):
            raise click.UsageError("--format svg and html draw a repo's plan; Run specs print as table or json")
        inv = load_inventory(Path(inventory), inventory)
        plan = plan_runs(inv, parse_runs(runs))
        for r in plan.runs:
            if not r.placed:
                click.echo(f"warning: {r.reason}", err=True)
        click.echo(format_plan(plan, fmt, target, wide), nl=False)
        return
    from toporender.jobs import default_jobs
    from toporender.pipeline import plan_repo

    plans = plan_repo(path if path.is_dir() else path.parent, Path(inventory) if inventory else None,
                      jobs or default_jobs())
    if not plans:
        raise UserError(Diagnostic("no pool of this repo has an inventory to plan against; set 'inventory:' in "
                                   "toporender.yaml or pass --inventory", Position("toporender.yaml")))
    if fmt == "json":
        click.echo(_plan_json({pool: p.to_dict() for pool, p in plans}), nl=False)
        return
    if fmt in ("svg", "html"):
        from toporender.placement.picture import plan_html, plan_svg

        svg = plan_svg(plans)
        click.echo(svg if fmt == "svg" else plan_html(svg, f"toporender plan: {target}"), nl=False)
        return
    click.echo("\n".join(format_plan(p, "table", pool, wide) for pool, p in plans), nl=False)


def _plan_json(data: dict[str, Any]) -> bytes:
    """``json.dumps(data, indent=2)`` and a line break, as bytes: orjson writes the same bytes for the plan's ints
    and strings in a tenth of the time (a 1M-GPU plan is 60 MB) where
    :func:`~toporender.placement.plan.orjson_is_standard` holds, and they are written as they are (made a string
    and encoded again, they took as long once more); anything else takes the standard encoder."""
    import json

    import orjson

    from toporender.placement.plan import orjson_is_standard

    try:
        raw = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        raw = b""
    return raw if raw and orjson_is_standard(raw) else (json.dumps(data, indent=2) + "\n").encode()


def _missing(target: str) -> UserError:
    return fail("file or directory not found", Position(target))
