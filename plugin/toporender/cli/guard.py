"""The one exit-code policy every command runs under.

0 ok; 1 invalid input (positioned messages on stderr); 2 usage (click's own); 3 internal error. On 1 and 3
nothing reaches stdout, since every command writes its output only after the work succeeded: a host such as
Argo CD must never apply or prune with half a stream. No traceback reaches a user unless they ask for one with
``TOPORENDER_DEBUG=1``.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from toporender.errors import Diagnostic, UserError, WorkerLost
from toporender.hosts.common import print_diagnostics as report

F = TypeVar("F", bound=Callable[..., Any])

OK, INVALID_INPUT, USAGE, INTERNAL = 0, 1, 2, 3


def invalid_input(err: UserError, hint: str = "") -> NoReturn:
    """Exit 1 with the input's problems (and what to do next, when the host has a hint)."""
    report(err.diagnostics)
    if hint:
        print(hint, file=sys.stderr)
    sys.stderr.flush()
    raise SystemExit(INVALID_INPUT)


def internal_error(exc: BaseException, command: str) -> NoReturn:
    """Exit 3 with one readable line; hosts show stderr to users, so the traceback only on request."""
    if os.environ.get("TOPORENDER_DEBUG"):
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    print(f"toporender {command}: internal error: {type(exc).__name__}: {exc}; nothing was written. "
          "Please report it (set TOPORENDER_DEBUG=1 for a traceback)", file=sys.stderr)
    sys.stderr.flush()
    raise SystemExit(INTERNAL)


def guarded(command: str, hint: str = "") -> Callable[[F], F]:
    """Run a click command under the exit-code policy; ``hint`` follows input errors (e.g. what to run next)."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except UserError as err:
                invalid_input(err, hint)
            except WorkerLost as exc:
                print(f"toporender {command}: {exc}", file=sys.stderr)
                sys.stderr.flush()
                raise SystemExit(INTERNAL) from None
            except RecursionError:
                invalid_input(UserError(Diagnostic("input is nested too deeply to process; simplify it")), hint)
            except (SystemExit, KeyboardInterrupt):
                raise
            except Exception as exc:  # noqa: BLE001 - the last line of defence for hosts that prune on output
                if _is_click_exit(exc):
                    raise
                internal_error(exc, command)

        return wrapper  # type: ignore[return-value]

    return decorate


def _is_click_exit(exc: Exception) -> bool:
    """click's usage errors and aborts carry their own exit codes (2 for usage)."""
    import click

    return isinstance(exc, (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort))
