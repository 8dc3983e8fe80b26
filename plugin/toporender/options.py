"""The per-invocation settings of a render, apart from the pipeline so the render cache can key on them
without importing the renderer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RenderOptions:
    """Per-invocation settings a host may override (Argo CD parameters, CLI flags)."""

    namespace: str | None = None
    pool: str | None = None
    inventory: str | None = None
    strict: bool | None = None
    pool_objects: bool | None = None
    sync_waves: bool | None = None
