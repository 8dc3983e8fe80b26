"""``toporender argocd``: the Argo CD config-management plugin (CMP v2 sidecar) commands.

What the sidecar hands the command and what it may print is described in :mod:`toporender.hosts.argocd`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from toporender.cli.guard import guarded
from toporender.hosts.argocd import SETTINGS, generate, parameter_table
from toporender.hosts.common import print_diagnostics, write_stdout

NO_MANIFESTS = "toporender: no manifests generated; run 'toporender validate' in the repo to check it"


@click.group("argocd")
def argocd_cmd() -> None:
    """Argo CD config-management plugin (sidecar) commands."""


@argocd_cmd.command("generate")
@guarded("argocd generate", hint=NO_MANIFESTS)
def generate_cmd() -> None:
    """Print the manifests for the Argo CD app in the current directory.

    Reads ARGOCD_APP_NAMESPACE, ARGOCD_APP_PARAMETERS / PARAM_* and ARGOCD_ENV_TOPORENDER_*.
    """
    out, warnings = generate(Path.cwd(), os.environ)
    print_diagnostics(warnings)
    if not out:
        print(
            "toporender: warning: the repo renders no objects; Argo CD gets an empty manifest list, and with "
            "prune enabled that deletes every resource this Application manages",
            file=sys.stderr,
        )
        return
    write_stdout(out)


@argocd_cmd.command("parameters")
@click.option("--format", "fmt", type=click.Choice(["json", "markdown"]), default="json", show_default=True,
              help="json: the announcements (a dynamic-parameters command); markdown: the table of the docs.")
def parameters_cmd(fmt: str) -> None:
    """Print the parameters the plugin reads, as announcements or as a Markdown table."""
    if fmt == "markdown":
        write_stdout(parameter_table())
        return
    print(json.dumps([s.announcement() for s in SETTINGS], indent=2))
