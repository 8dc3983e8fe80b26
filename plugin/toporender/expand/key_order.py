"""Guarding the order of a pool's ``topology_keys``: coarsest first, as KAI's Topology levels and OSMO's pools.

A pool written finest first (``[gpu-clique, zone]``, the order some design documents use) is valid YAML and
renders: the subgroup tree and the KAI ``Topology`` come out upside down, and only an inventory would show it.
Levels whose node labels are well known (Kubernetes' ``topology.kubernetes.io/region`` and ``zone``,
``kubernetes.io/hostname``, NVIDIA's ``nvidia.com/gpu.clique`` from GPU Feature Discovery, NVIDIA topograph's
``network.topology.nvidia.com/*``) or whose last word names a level (``rack``, ``spine``, ``block``...) have a
known rank; two ranked levels in the wrong order are refused with the order that fixes them. Levels with labels
of no known rank are left where they are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from toporender.load.models import TopologyKey

# Coarse to fine. Equal ranks are not ordered against each other.
_LABEL_RANK = {
    "topology.kubernetes.io/region": 0,
    "topology.kubernetes.io/zone": 10,
    "failure-domain.beta.kubernetes.io/region": 0,
    "failure-domain.beta.kubernetes.io/zone": 10,
    "network.topology.nvidia.com/core": 20,
    "network.topology.nvidia.com/spine": 30,
    "network.topology.nvidia.com/leaf": 45,
    "network.topology.nvidia.com/accelerator": 60,
    "nvidia.com/gpu.clique": 60,
    "kubernetes.io/hostname": 100,
}
_WORD_RANK = {
    "region": 0, "zone": 10, "datacenter": 10, "spine": 30, "block": 30, "leaf": 45, "rack": 50, "clique": 60,
    "nvlink": 60, "accelerator": 60, "host": 100, "hostname": 100, "node": 100,
}
_WORDS = re.compile(r"[a-z]+")


def rank(key: TopologyKey) -> int | None:
    """How coarse a level is (smaller is coarser), from its node label, else from the last word of its label or
    key; None when neither says."""
    known = _LABEL_RANK.get(key.label)
    if known is not None:
        return known
    for text in (key.label.rsplit("/", 1)[-1], key.key):
        words = _WORDS.findall(text.lower())
        if words and words[-1] in _WORD_RANK:
            return _WORD_RANK[words[-1]]
    return None


def order_problem(keys: Sequence[TopologyKey]) -> str | None:
    """Why ``keys`` are not coarsest first, with the order to use instead; None when no two ranked levels clash."""
    ranks = [rank(k) for k in keys]
    ranked = [i for i, r in enumerate(ranks) if r is not None]
    for a, b in zip(ranked, ranked[1:]):
        ra, rb = ranks[a], ranks[b]
        assert ra is not None and rb is not None
        if ra > rb:
            fixed = sorted(ranked, key=lambda i: (ranks[i], i))
            order = list(range(len(keys)))
            for slot, i in zip(ranked, fixed):
                order[slot] = i
            finer, coarser = keys[a], keys[b]
            return (f"topology_keys are coarsest first, but '{finer.key}' ({finer.label}) comes before the coarser "
                    f"'{coarser.key}' ({coarser.label}); did you mean "
                    f"[{', '.join(keys[i].key for i in order)}]?")
    return None
