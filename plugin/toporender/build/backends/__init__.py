"""Scheduler backends behind one small interface.

A backend turns a :class:`~toporender.expand.gangs.Gang` into its scheduler objects (PodGroups) and the
labels/annotations each pod needs to join them. Everything else about pods is backend-neutral.
"""

from __future__ import annotations

from toporender.build.backends.interface import Backend, GangObjects
from toporender.load.models import PoolConfig

__all__ = ["Backend", "GangObjects", "backend_for"]


def backend_for(pool: PoolConfig) -> Backend:
    if pool.backend == "kai":
        from toporender.build.backends.kai import KaiBackend

        return KaiBackend()
    if pool.backend == "koordinator":
        from toporender.build.backends.koordinator import KoordinatorBackend

        return KoordinatorBackend()
    if pool.backend == "kueue":
        from toporender.build.backends.kueue import KueueBackend

        return KueueBackend()
    if pool.backend == "volcano":
        from toporender.build.backends.volcano import VolcanoBackend

        return VolcanoBackend()
    from toporender.build.backends.kube import KubeBackend

    return KubeBackend()
