"""Scheduler backends behind one small interface.

A backend turns a :class:`~toporender.expand.gangs.Gang` into its scheduler objects (PodGroups) and the
labels/annotations each pod needs to join them. Everything else about pods is backend-neutral.
"""

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


def backend_for(pool: PoolConfig) -> Backend:
    if pool.backend == "kai":
        from toporender.build.backends.kai import KaiBackend

        return KaiBackend()
    if pool.backend == "koordinator":
        from toporender.build.backends.koordinator import KoordinatorBackend

        return KoordinatorBackend()
    from toporender.build.backends.kube import KubeBackend

    return KubeBackend()
