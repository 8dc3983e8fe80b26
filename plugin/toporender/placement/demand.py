"""What a gang asks for, as plain data that nothing changes once built.

The renderer translates workflow specs into these records; the packer never sees pydantic models, so its hot
loops stay on tuples and ints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from toporender.expand.levels import LevelConstraint

Toleration = tuple[str, "str | None", "str | None"]


@dataclass(slots=True, unsafe_hash=True)
class PodDemand:
    """One pod: all of its GPUs come from a single node; 0 GPUs means it is not packed.

    Never changed once built (mypy holds its ``Final`` fields to that), but not a frozen dataclass: building one
    costs four times as long, and ``toporender plan`` builds each twice (in a worker and again as it arrives)."""

    name: Final[str]
    gpus: Final[int]
    tolerations: Final[tuple[tuple[str, str | None, str | None], ...]] = ()
    excluded: Final[tuple[str, ...]] = ()
    """Names of nodes this pod must not run on (the resource's ``nodesExcluded``)."""

    def __reduce__(self) -> tuple[type[PodDemand], tuple[str, int, tuple[Toleration, ...], tuple[str, ...]]]:
        """Pickled as a call of the class: a slotted dataclass's own state methods look its fields up for every
        object, and ``toporender plan`` sends a large repo's 280,000 pods from its workers (half the time of
        pickling them both ways)."""
        return PodDemand, (self.name, self.gpus, self.tolerations, self.excluded)


@dataclass(frozen=True)
class SubgroupDemand:
    """A subgroup of a gang; leaf subgroups list their pods, mid-level ones constrain their children."""

    name: str
    parent: str | None
    constraint: LevelConstraint
    pods: tuple[PodDemand, ...] = ()


@dataclass(frozen=True)
class GangDemand:
    """A gang (PodGroup): all pods are placed together or not at all."""

    key: str
    display: str
    constraint: LevelConstraint
    subgroups: tuple[SubgroupDemand, ...]
    pods: tuple[PodDemand, ...]
    pod_subgroup: tuple[tuple[str, str], ...] = ()

    @property
    def gpus(self) -> int:
        """Total GPUs the gang needs."""
        return sum(p.gpus for p in self.pods)
