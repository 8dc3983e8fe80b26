"""``toporender diff``: what the working tree changes against a git revision (:mod:`toporender.hosts.diff`)."""

from __future__ import annotations

from pathlib import Path

import click

from toporender.cli.guard import guarded
from toporender.hosts.common import write_stdout

GATES = ("unplaceable", "moved", "removed", "edited")


@click.command("diff")
@click.argument("base", default="HEAD")
@click.option("--dir", "directory", default=".", type=click.Path(file_okay=False, path_type=Path),
              help="The repo directory (holds toporender.yaml); default: the current directory.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table",
              show_default=True, help="markdown suits a pull-request comment.")
@click.option("--fail-on", default="", metavar="LIST",
              help=f"Exit 1 when the change has any of these (comma-separated): {', '.join(GATES)}.")
@guarded("diff")
def diff_cmd(base: str, directory: Path, fmt: str, fail_on: str) -> None:
    """Compare the render and plan of the working tree with those of git revision BASE (default HEAD).

    Prints gangs added, removed, edited (replaced on sync) and moved, newly unplaceable gangs with the
    reason, the objects Argo CD will replace, and per-domain free GPUs before and after. The base is read
    with git archive; nothing is checked out."""
    from toporender.hosts.diff import format_review, gate, run_diff

    wanted = {g.strip() for g in fail_on.split(",") if g.strip()}
    unknown = wanted - set(GATES)
    if unknown:
        raise click.UsageError(f"--fail-on: unknown {', '.join(sorted(unknown))}; choose from {', '.join(GATES)}")
    result = run_diff(directory, base)
    write_stdout(format_review(result, fmt))
    raise SystemExit(1 if gate(result, wanted) else 0)
