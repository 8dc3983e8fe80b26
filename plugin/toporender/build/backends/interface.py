"""The one small interface every scheduler backend implements, and what a backend returns for a gang."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from toporender.expand.gangs import Gang
from toporender.load.models import PoolConfig


@dataclass
class GangObjects:
    """What a backend contributes for one gang."""

    objects: list[dict[str, Any]]
    pod_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    pod_annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    scheduler_name: str | None = None


class Backend(Protocol):
    def pool_objects(self, pool_name: str, pool: PoolConfig, namespace: str) -> list[dict[str, Any]]:
        """Cluster-level objects a pool needs (Topology, Queue...), rendered only on request."""
        ...

    def render_gang(self, gang: Gang) -> GangObjects: ...
