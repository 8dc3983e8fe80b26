"""``toporender krm``: the KRM function (kpt, kustomize) and the kustomize legacy exec plugin.

What each mode reads and writes, and how it reports bad input, is described in :mod:`toporender.hosts.krm`.
Function mode answers bad input with a ResourceList of error results, which is why the command handles
those errors itself; only an internal error is left to the shared guard (exit 3, nothing on stdout).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from toporender.cli.guard import guarded
from toporender.emit.stream import dump_yaml
from toporender.errors import UserError
from toporender.hosts.common import read_stdin, write_stdout
from toporender.hosts.krm.function import export_items, run_function, run_legacy
from toporender.hosts.krm.resource_list import failure_list


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
@guarded("krm")
def krm_cmd(config_file: Path | None, extra: tuple[str, ...], export_dir: Path | None) -> None:
    """KRM function: ResourceList on stdin -> ResourceList on stdout.

    With CONFIG_FILE (how kustomize runs a legacy exec plugin: the plugin's config file as the
    first argument), reads resources as a plain YAML stream instead and prints one.
    """
    cwd = Path(os.getcwd())
    if export_dir is not None:
        out, code = dump_yaml(export_items(export_dir)), 0
    elif config_file is None:
        try:
            out, code = run_function(read_stdin(), cwd)
        except UserError as err:
            out, code = failure_list(err), 1
    else:
        stdin_text = "" if sys.stdin is None or sys.stdin.isatty() else read_stdin()
        out, code = run_legacy(config_file, stdin_text, cwd)
    write_stdout(out)
    raise SystemExit(code)
