"""Diagnostics that point at the user's files.

Every problem with user input is reported as ``path:line:col: message``. Code raises
:class:`UserError`; only the host adapters (CLI, Argo CD, KRM, pre-commit) turn it into text and
an exit code, so no traceback ever reaches a user for bad input.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Position:
    """A 1-based line/column inside a file, as editors and compilers print it."""

    path: str
    line: int = 1
    col: int = 1
    data_path: tuple[str | int, ...] = field(default=(), compare=False)
    """Where in the document's data (keys and list indexes), for hosts that point at fields, not lines: kpt's
    ``results[].field.path``. Not part of the position's identity or order."""
    doc_index: int = field(default=0, compare=False)
    """Which YAML document of the file (kpt's ``results[].file.index``)."""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Diagnostic:
    """One message about the input, optionally anchored at a position."""

    message: str
    pos: Position | None = None
    severity: str = "error"

    def __str__(self) -> str:
        where = f"{self.pos}: " if self.pos else ""
        prefix = "" if self.severity == "error" else f"{self.severity}: "
        return f"{where}{prefix}{self.message}"


class UserError(Exception):
    """Input the user must fix. Carries every diagnostic found, sorted by position."""

    def __init__(self, diagnostics: Diagnostic | Iterable[Diagnostic]):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        unique = {(d.pos, d.message): d for d in diagnostics}
        self.diagnostics: list[Diagnostic] = sorted(
            unique.values(), key=lambda d: (d.pos is None, d.pos or Position(""), d.message)
        )
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class WorkerLost(Exception):
    """A worker process (:mod:`toporender.jobs`) ended without giving its results (it was killed, or ran out of
    memory). Defined here so that what catches it does not import the worker machinery."""


def fail(message: str, pos: Position | None = None) -> UserError:
    """Build a single-diagnostic error (``raise fail(...)``)."""
    return UserError(Diagnostic(message, pos))


class DiagnosticSink:
    """Collects errors so one run reports all of them, not just the first."""

    def __init__(self) -> None:
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []

    def error(self, message: str, pos: Position | None = None) -> None:
        self.errors.append(Diagnostic(message, pos))

    def warn(self, message: str, pos: Position | None = None) -> None:
        self.warnings.append(Diagnostic(message, pos, "warning"))

    def extend(self, err: UserError) -> None:
        self.errors.extend(err.diagnostics)

    def raise_if_errors(self) -> None:
        if self.errors:
            raise UserError(self.errors)
