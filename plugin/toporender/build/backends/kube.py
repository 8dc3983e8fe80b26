"""Plain kube-scheduler: no gang object, pods only (for CPU pools and tests)."""

from __future__ import annotations

from typing import Any

from toporender.build.backends.interface import GangObjects
from toporender.expand.gangs import Gang
from toporender.load.models import PoolConfig


class KubeBackend:
    def pool_objects(self, pool_name: str, pool: PoolConfig, namespace: str) -> list[dict[str, Any]]:
        return []

    def render_gang(self, gang: Gang) -> GangObjects:
        return GangObjects([], scheduler_name=gang.pool.scheduler_name)
