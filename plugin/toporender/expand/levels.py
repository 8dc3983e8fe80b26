"""A topology level constraint, kept free of the renderer's models so the packer imports it on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(unsafe_hash=True)
class LevelConstraint:
    """Required and preferred topology levels as node-label keys (None when absent).

    The one shape of a level constraint from expansion through the packer's input to the backends; the packer
    turns the keys into level indices once, when it compiles a gang. Never changed once built (mypy holds its
    ``Final`` fields to that), but not a frozen dataclass: building one costs four times as long, and expansion
    builds several per subgroup."""

    required: Final[str | None] = None
    preferred: Final[str | None] = None

    def __bool__(self) -> bool:
        return self.required is not None or self.preferred is not None
