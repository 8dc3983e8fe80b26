"""``toporender golden``: keep rendered snapshots of every workflow in the repo (the pre-commit hook).

What is written where, and when the command exits 1, is described in :mod:`toporender.hosts.golden`.
"""

from __future__ import annotations

from pathlib import Path

import click

from toporender.cli.guard import guarded
from toporender.errors import fail
from toporender.hosts.golden import run_golden


@click.command("golden")
@click.argument("dirs", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@click.option("--check", is_flag=True, help="Write nothing; exit 1 and print a diff when golden files are stale.")
@click.option("--no-cache", is_flag=True,
              help="Render from scratch, without reading or writing the render cache (or TOPORENDER_NO_CACHE=1).")
@guarded("golden")
def golden_cmd(dirs: tuple[Path, ...], check: bool, no_cache: bool) -> None:
    """Re-render every workflow of DIR (default: .) into its golden dir.

    Writes only files whose content changed, deletes golden files of removed workflows, prints
    what changed and exits 1 when anything changed (so a pre-commit hook fails and the user
    stages the new files). Several DIRs may be given (one toporender repo each).
    """
    status = 0
    try:
        for root in dirs or (Path("."),):
            status = max(status, run_golden(root, check, cache=not no_cache))
    except OSError as exc:
        raise fail(f"cannot update golden files: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")) from None
    raise SystemExit(status)
