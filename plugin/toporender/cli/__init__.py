"""Command line: a thin click layer over the library.

Subcommands are imported lazily (``toporender render`` never imports the packer's or the KRM
adapter's modules), which keeps cold start short for hosts that spawn us per request.
Exit codes: 0 ok, 1 invalid input (message on stderr, nothing on stdout), 2 usage error.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from typing import Any, NoReturn

import click

# command name -> "module:attribute"; each module owns its command and its options.
LAZY_COMMANDS: dict[str, str] = {
    "render": "toporender.cli.commands:render_cmd",
    "validate": "toporender.cli.commands:validate_cmd",
    "schema": "toporender.cli.commands:schema_cmd",
    "pool": "toporender.cli.commands:pool_cmd",
    "plan": "toporender.cli.plan:plan_cmd",
    "inventory": "toporender.cli.plan:inventory_cmd",
    "golden": "toporender.cli.golden:golden_cmd",
    "diff": "toporender.cli.diff:diff_cmd",
    "argocd": "toporender.cli.argocd:argocd_cmd",
    "krm": "toporender.cli.krm:krm_cmd",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when they run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in LAZY_COMMANDS if self._load(name) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
                return None
            raise
        command: click.Command = getattr(module, attr)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="toporender")
def cli() -> None:
    """Render topology-aware gang-scheduler objects from workflows kept in Git."""


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point (``argv`` given: run in-process and return, as tests do).

    The process builds a few million small dicts and lists (10,000 Pods are about 0.4 million
    containers), none of them in a reference cycle, and then exits. Python's cyclic garbage
    collector would walk them again and again as they pile up, a quarter of a large render's time,
    with nothing to free, so it is off for the process. Freeing them one by one at exit would
    take another 0.1 s, so the console script flushes its output and ends the process directly,
    as mypy does.

    Pydantic plugins are off for the console process: pydantic looks them up in every installed package's
    metadata before its first model (about 15 ms of a cold start), and a plugin installed beside toporender
    could fail a validation, which would make a render depend on what else the environment holds.
    """
    gc.disable()
    if argv is None:
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if argv is not None:
        return cli.main(args=argv, prog_name="toporender")
    try:
        cli.main(args=sys.argv[1:], prog_name="toporender")
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # noqa: BLE001 - e.g. a broken install failing to import a command
        from toporender.cli.guard import internal_error

        try:
            internal_error(exc, " ".join(sys.argv[1:2]) or "toporender")
        except SystemExit as exit_:
            code = exit_.code
    _exit(code)


def _exit(code: Any) -> NoReturn:
    """``sys.exit(code)`` without tearing down the interpreter's objects one by one."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        code = code or 1
    os._exit(code)
