"""What every YAML reader of the project shares: the limits on a file and the location of a value in it.

Kept apart so the fast reader's callers can use them without importing the exact loader (PyYAML)."""

from __future__ import annotations

MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_NODES = 500_000
MAX_DEPTH = 100

Loc = tuple[str | int, ...]
"""Keys and list indexes from a document's root to a value."""
