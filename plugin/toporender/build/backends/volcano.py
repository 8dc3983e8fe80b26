"""Volcano: a ``scheduling.volcano.sh/v1beta1`` PodGroup with network topology, HyperNodes for the pool.

Follows Volcano v1.15.1 (``volcano-sh/volcano``, API types in ``volcano-sh/apis@v1.15.0``):

* pods join by the ``scheduling.k8s.io/group-name`` annotation and run under ``schedulerName: volcano``;
* the gang's level becomes ``spec.networkTopology``: a required level is ``mode: hard`` with
  ``highestTierAllowed`` the level's HyperNode tier (without it hard mode does not bite,
  ``IsHardTopologyMode`` in ``pkg/scheduler/api/job_info.go``); a preferred one is ``mode: soft``, which the
  scheduler runs as "as tight as it fits" and whose tier it replaces (``convertSoftToHardTopology`` in
  ``pkg/scheduler/framework/session.go``), so no tier is written for it;
* subgroups become ``spec.subGroupPolicy``, one entry per leaf subgroup selecting its pods by the
  ``toporender.dev/subgroup`` label, with ``subGroupSize`` its pod count (all of it is needed) and its own
  network topology (``pkg/scheduler/api/sub_job_info.go``). Volcano subgroups are flat: the level of a
  mid-level subgroup has no place and is reported by :func:`gang_warnings`;
* tiers: the pool's topology keys finest first, tier 1 being the finest level above the node
  (``kubernetes.io/hostname`` is the node itself, not a HyperNode). :func:`hypernodes` builds that tree from the
  committed inventory.

The PodGroup webhook (``pkg/webhooks/admission/podgroups/validate/validate_podgroup.go``) rejects
``highestTierAllowed`` together with ``highestTierName``; only the first is rendered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from toporender.build.backends.interface import GangObjects
from toporender.expand.gangs import Gang
from toporender.expand.levels import LevelConstraint
from toporender.expand.naming import unique_names
from toporender.load.models import PoolConfig

SCHEDULER = "volcano"
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
HYPERNODE_API = "topology.volcano.sh/v1alpha1"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
SUBGROUP_LABEL = "toporender.dev/subgroup"
POOL_LABEL = "toporender.dev/pool"
HOSTNAME = "kubernetes.io/hostname"
DEFAULT_QUEUE = "default"
"""Volcano's own queue, which every installation has; toporender renders no Volcano Queue, so a queue named
after the pool would be rejected by the PodGroup webhook until an admin created it."""


def tiers(pool: PoolConfig) -> dict[str, int]:
    """HyperNode tier per node label: the finest level above the node is tier 1."""
    labels = [k.label for k in pool.topology_keys if k.label != HOSTNAME]
    return {label: len(labels) - i for i, label in enumerate(labels)}


def network_topology(c: LevelConstraint, pool: PoolConfig) -> tuple[dict[str, Any] | None, list[str]]:
    """``networkTopology`` for a constraint, and the parts of it Volcano cannot say."""
    tier = tiers(pool)
    dropped: list[str] = []
    if c.required:
        if c.required not in tier:
            return None, [f"the required level {c.required} (one node) has no HyperNode tier and is NOT enforced"]
        if c.preferred:
            dropped.append(f"the preferred level {c.preferred} under the required {c.required} is not passed on: "
                           "hard mode takes one tier")
        return {"mode": "hard", "highestTierAllowed": tier[c.required]}, dropped
    if c.preferred:
        return {"mode": "soft"}, dropped
    return None, dropped


def gang_warnings(gang: Gang) -> list[str]:
    """What the rendered PodGroup will not do although the workflow asks for it (it still runs)."""
    if gang.pool.backend != "volcano":
        return []
    where = f"group '{gang.name}'"
    topo = gang.topology
    out = [f"{where}: {msg}" for msg in network_topology(topo.constraint, gang.pool)[1]]
    for sg in topo.subgroups:
        dropped = network_topology(sg.constraint, gang.pool)[1]
        if not sg.is_leaf and sg.constraint:
            what = sg.constraint.required or sg.constraint.preferred
            kind = "required" if sg.constraint.required else "preferred"
            out.append(f"{where}: the {kind} level {what} of mid-level subgroup '{sg.name}' is "
                       f"{'NOT enforced' if kind == 'required' else 'not passed on'}: Volcano's subGroupPolicy is "
                       "flat, only leaf subgroups keep their level (use backend 'kai' for nested subgroups)")
            continue
        out.extend(f"{where}, subgroup '{sg.name}': {msg}" for msg in dropped)
    return out


def pool_problems(pool: PoolConfig) -> list[tuple[tuple[str | int, ...], str]]:
    """Pool settings Volcano cannot honour, each with its location inside the pool's mapping."""
    if pool.backend != "volcano":
        return []
    labels = [k.label for k in pool.topology_keys]
    if HOSTNAME in labels[:-1]:
        return [(("topology_keys", labels.index(HOSTNAME)),
                 "kubernetes.io/hostname is the node itself, below every HyperNode tier; list it last")]
    return []


def hypernodes(pool_name: str, pool: PoolConfig, nodes: Iterable[tuple[str, dict[str, str]]]) -> list[dict[str, Any]]:
    """The pool's HyperNode tree from the committed inventory: one HyperNode per domain of each level.

    A domain is the path of label values from the coarsest level down, so a rack name reused in two zones is
    two HyperNodes. Tier 1 selects its nodes by all their level labels (``labelMatch``, so a replaced node
    with the same labels needs no re-render); higher tiers list their child HyperNodes. Only nodes matching
    the pool's ``node_selector`` and carrying every level label count. Sorted by tier then name.
    """
    keys = [k for k in pool.topology_keys if k.label != HOSTNAME]
    if not keys:
        return []
    tier = tiers(pool)
    paths: set[tuple[str, ...]] = set()
    for _, labels in nodes:
        if any(labels.get(k) != v for k, v in pool.node_selector.items()):
            continue
        values = [labels.get(k.label) for k in keys]
        if any(v is None for v in values):
            continue
        full = tuple(str(v) for v in values)
        paths.update(full[: i + 1] for i in range(len(keys)))
    ordered = sorted(paths, key=lambda p: (len(p), p))
    names = dict(zip(ordered, unique_names([f"{keys[len(p) - 1].key}-{p[-1]}" for p in ordered],
                                           ["/".join(p) for p in ordered])))
    out: list[dict[str, Any]] = []
    for path in ordered:
        depth = len(path) - 1
        key = keys[depth]
        if depth == len(keys) - 1:
            match = {k.label: v for k, v in zip(keys, path)}
            members: list[dict[str, Any]] = [{"type": "Node", "selector": {"labelMatch": {"matchLabels": match}}}]
        else:
            children = sorted(names[p] for p in ordered if len(p) == len(path) + 1 and p[:-1] == path)
            members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
        out.append({"apiVersion": HYPERNODE_API, "kind": "HyperNode",
                    "metadata": {"name": names[path], "labels": {POOL_LABEL: pool_name}},
                    "spec": {"tier": tier[key.label], "tierName": key.key, "members": members}})
    out.sort(key=lambda o: (o["spec"]["tier"], o["metadata"]["name"]))
    return out


def inventory_nodes(nodes: Sequence[Any]) -> list[tuple[str, dict[str, str]]]:
    """(name, labels) of inventory nodes, whatever their model."""
    return [(str(n.name), dict(n.labels)) for n in nodes]


class VolcanoBackend:
    def pool_objects(self, pool_name: str, pool: PoolConfig, namespace: str) -> list[dict[str, Any]]:
        """Nothing without the inventory: :func:`hypernodes` is called with it by the build stage."""
        return []

    def render_gang(self, gang: Gang) -> GangObjects:
        pool, topo = gang.pool, gang.topology
        spec: dict[str, Any] = {"minMember": len(gang.tasks), "queue": pool.queue or DEFAULT_QUEUE}
        if pool.priority_class:
            spec["priorityClassName"] = pool.priority_class
        top, _ = network_topology(topo.constraint, pool)
        if top is not None:
            spec["networkTopology"] = top
        policies: list[dict[str, Any]] = []
        for sg in topo.subgroups:
            if not sg.is_leaf:
                continue
            policy: dict[str, Any] = {"name": sg.name, "subGroupSize": len(sg.tasks), "minSubGroups": 1,
                                      "labelSelector": {"matchLabels": {SUBGROUP_LABEL: sg.name}}}
            nt, _ = network_topology(sg.constraint, pool)
            if nt is not None:
                policy["networkTopology"] = nt
            policies.append(policy)
        if policies:
            spec["subGroupPolicy"] = policies
        podgroup = {"apiVersion": PODGROUP_API, "kind": "PodGroup",
                    "metadata": {"name": gang.podgroup_name, "namespace": gang.namespace,
                                 "labels": dict(gang.labels)},
                    "spec": spec}
        labels: dict[str, dict[str, str]] = {}
        annotations: dict[str, dict[str, str]] = {}
        for task in gang.tasks:
            leaf = topo.task_subgroup.get(task.spec.name)
            labels[task.spec.name] = {SUBGROUP_LABEL: leaf} if leaf else {}
            annotations[task.spec.name] = {GROUP_ANNOTATION: gang.podgroup_name}
        return GangObjects([podgroup], labels, annotations, pool.scheduler_name or SCHEDULER)
