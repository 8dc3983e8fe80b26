"""Koordinator (koord-scheduler): gang groups of ``scheduling.sigs.k8s.io/v1alpha1`` PodGroups.

Follows koord-scheduler's code where it differs from the design proposal (``apis/extension/coscheduling.go``,
``apis/extension/network_topology.go``, ``pkg/scheduler/plugins/coscheduling/``):

* one PodGroup per leaf subgroup of the backend-neutral :class:`~toporender.expand.topology.GroupTopology`
  (one for the whole group when it has no subgroups); with several, every PodGroup carries the same
  ``gang.scheduling.koordinator.sh/groups`` so koord-scheduler binds them all or none;
* Koordinator has no subgroup hierarchy: one ``network-topology-spec`` applies to the whole GangGroup,
  so only the levels the *whole gang* shares are expressed (see :func:`gather_plan`); per-subgroup
  levels are reported by :func:`gang_warnings` instead of being silently turned into something else;
* pods join by the ``pod-group.scheduling.sigs.k8s.io`` label, run under ``koord-scheduler`` and carry
  their 1-based rank in the gang as ``network-topology-index`` (the website example numbers from 1);
* gang settings become PodGroup annotations or ``spec.scheduleTimeoutSeconds``, because koord-scheduler
  reads a CR gang's settings from the PodGroup and ignores the pods' ``waiting-time`` annotation then.

Everything here is a pure function of the pool config and the :class:`~toporender.expand.gangs.Gang`;
:func:`check_pool` and :func:`gang_warnings` return messages for the caller to report.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from toporender.build.backends.interface import GangObjects
from toporender.errors import fail
from toporender.expand.gangs import Gang
from toporender.expand.naming import dns_label
from toporender.load.models import PoolConfig, TopologyKey
from toporender.load.yaml_source import Loc

SCHEDULER = "koord-scheduler"
PODGROUP_API = "scheduling.sigs.k8s.io/v1alpha1"
TOPOLOGY_API = "scheduling.koordinator.sh/v1alpha1"
TOPOLOGY_NAME = "default"
"""koord-scheduler only reads the ClusterNetworkTopology named ``default``."""

POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
POOL_LABEL = "toporender.dev/pool"
GANG = "gang.scheduling.koordinator.sh/"
GROUPS_ANNOTATION = GANG + "groups"
SPEC_ANNOTATION = GANG + "network-topology-spec"
INDEX_ANNOTATION = GANG + "network-topology-index"
MODE_ANNOTATION = GANG + "mode"
MATCH_POLICY_ANNOTATION = GANG + "match-policy"

MUST_GATHER = "MustGather"
PREFER_GATHER = "PreferGather"

CLUSTER_LAYER = "ClusterTopologyLayer"
"""Built-in implicit root of every ClusterNetworkTopology; never declared, never gathered on."""
NODE_LAYER = "NodeTopologyLayer"
"""Built-in bottom layer: a node. Declared last, without a label key."""

CONVENTIONAL_LAYERS = ("DatacenterLayer", "SpineLayer", "BlockLayer", "AcceleratorLayer", NODE_LAYER)
"""Koordinator's naming convention, coarsest first; used to catch keys listed in the wrong order."""

DEFAULT_LAYER_BY_LABEL = {
    "nvidia.com/gpu.clique": "AcceleratorLayer",
    "kubernetes.io/hostname": NODE_LAYER,
}
"""Exact node labels with a well-known meaning (GPU operator NVLink clique, the node itself)."""

DEFAULT_LAYER_BY_NAME = {
    "accelerator": "AcceleratorLayer",
    "block": "BlockLayer",
    "leaf": "BlockLayer",
    "rack": "BlockLayer",
    "spine": "SpineLayer",
    "datacenter": "DatacenterLayer",
    "zone": "DatacenterLayer",
}
"""Label names (the part after the prefix) as topograph and common conventions use them, e.g.
``network.topology.nvidia.com/block`` or ``topology.kubernetes.io/zone``. Numbered tiers are left out on
purpose: tools disagree on whether tier 1 is the finest or the coarsest level."""

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def default_layer(label: str) -> str | None:
    """The conventional Koordinator layer for a node label, or None when the pool must name one."""
    if label in DEFAULT_LAYER_BY_LABEL:
        return DEFAULT_LAYER_BY_LABEL[label]
    return DEFAULT_LAYER_BY_NAME.get(label.rsplit("/", 1)[-1].lower())


def layer_of(key: TopologyKey) -> str | None:
    """The layer a pool key maps to: its explicit ``layer``, else the convention for its label."""
    return key.layer or default_layer(key.label)


def _layers(pool: PoolConfig) -> list[str]:
    """Layer per pool key, failing loudly if a pool slipped past :func:`check_pool`."""
    out: list[str] = []
    for key in pool.topology_keys:
        layer = layer_of(key)
        if layer is None:
            raise fail(_missing_layer_message(key))
        out.append(layer)
    return out


def _missing_layer_message(key: TopologyKey) -> str:
    return (f"topology key '{key.key}' (node label '{key.label}') has no Koordinator layer; set "
            f"'layer:' on it (for example BlockLayer or SpineLayer); defaults exist only for labels named "
            f"{', '.join(sorted(DEFAULT_LAYER_BY_NAME))} and for {', '.join(sorted(DEFAULT_LAYER_BY_LABEL))}")


def go_duration_seconds(text: str) -> float:
    """Seconds in a Go duration as the pool model accepts it (unsigned, e.g. ``90s``, ``1m30s``)."""
    return sum(float(n) * _DURATION_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


def schedule_timeout(pool: PoolConfig) -> int | None:
    """``spec.scheduleTimeoutSeconds`` for the pool's gangs.

    A PodGroup CR gang takes its wait from this field and ignores the pods' ``waiting-time`` annotation,
    so ``waiting_time`` is carried here, rounded up to whole seconds (0 would mean "no wait at all").
    """
    settings = pool.gang
    if settings.schedule_timeout_seconds is not None:
        return settings.schedule_timeout_seconds
    if settings.waiting_time is not None:
        return max(1, math.ceil(go_duration_seconds(settings.waiting_time)))
    return None


def pool_problems(pool: PoolConfig) -> list[tuple[Loc, str]]:
    """Like :func:`check_pool`, each message with its location inside the pool's mapping.

    The location (e.g. ``("topology_keys", 2, "label")``) lets the caller point at the exact line via
    ``doc.pos(("pools", name) + loc)``.
    """
    if pool.backend != "koordinator":
        return []
    errors: list[tuple[Loc, str]] = []
    seen: dict[str, str] = {}
    layers: list[tuple[int, TopologyKey, str]] = []
    for i, key in enumerate(pool.topology_keys):
        at: Loc = ("topology_keys", i, "layer" if key.layer else "label")
        layer = layer_of(key)
        if layer is None:
            errors.append((at, _missing_layer_message(key)))
            continue
        if layer == CLUSTER_LAYER:
            errors.append((at, f"topology key '{key.key}' uses layer {CLUSTER_LAYER}, Koordinator's implicit root "
                               "spanning the whole cluster; gathering there constrains nothing, remove the key or "
                               "name its real layer"))
            continue
        if layer in seen:
            errors.append((at, f"topology keys '{seen[layer]}' and '{key.key}' both map to layer {layer}; each "
                               "key needs its own layer (set 'layer:' on one of them)"))
            continue
        seen[layer] = key.key
        layers.append((i, key, layer))
    for n, (i, key, layer) in enumerate(layers):
        if layer == NODE_LAYER and n != len(layers) - 1:
            errors.append((("topology_keys", i), f"topology key '{key.key}' maps to {NODE_LAYER}, which is the "
                                                 "bottom of the tree; list it last in topology_keys"))
    known = [(i, key, CONVENTIONAL_LAYERS.index(layer)) for i, key, layer in layers if layer in CONVENTIONAL_LAYERS]
    for (_, prev, a), (i, cur, b) in zip(known, known[1:]):
        if b < a:
            errors.append((("topology_keys", i),
                           f"topology key '{cur.key}' ({CONVENTIONAL_LAYERS[b]}) is listed after '{prev.key}' "
                           f"({CONVENTIONAL_LAYERS[a]}) but is the coarser level; list topology_keys coarsest "
                           "first, the ClusterNetworkTopology parents follow that order"))
    settings = pool.gang
    if settings.waiting_time is not None:
        seconds = go_duration_seconds(settings.waiting_time)
        if seconds <= 0:
            errors.append((("gang", "waiting_time"),
                           f"gang.waiting_time '{settings.waiting_time}' must be positive"))
        elif (settings.schedule_timeout_seconds is not None
              and settings.schedule_timeout_seconds != math.ceil(seconds)):
            errors.append((("gang", "waiting_time"),
                           f"gang.waiting_time '{settings.waiting_time}' and gang.schedule_timeout_seconds "
                           f"{settings.schedule_timeout_seconds} disagree; both become the PodGroup's "
                           "spec.scheduleTimeoutSeconds, set only one"))
    return errors


def check_pool(pool_name: str, pool: PoolConfig) -> list[str]:
    """Errors in a ``backend: koordinator`` pool that the models cannot express (empty for other backends).

    Koordinator accepts any layer string and silently ignores what it cannot match, so a missing or
    duplicated layer would only show up as gangs that never gather; we reject those up front.
    """
    return [f"pool '{pool_name}': {msg}" for _, msg in pool_problems(pool)]


@dataclass(frozen=True)
class GatherPlan:
    """What one gang's network-topology-spec can and cannot say."""

    rules: tuple[tuple[str, str], ...]
    """(layer, strategy), coarsest first."""
    unexpressed: tuple[tuple[str, str], ...]
    """(topology key, requirementType) of levels that differ between parts of the gang."""


def gather_plan(gang: Gang) -> GatherPlan:
    """Gather rules for the whole GangGroup, from the levels every task of the gang shares.

    A level is gang-wide when all tasks name the same topology group there; those levels form the top of
    the gang's tree (the same chain KAI renders as the PodGroup's top constraint). The finest gang-wide
    ``required`` level becomes the only ``MustGather`` (coarser requirements are implied and
    koord-scheduler enforces just the lowest MustGather anyway). Every gang-wide ``preferred`` level below
    it becomes a ``PreferGather``, coarsest first, so the fallback order of the website example
    (accelerator, then block, then spine) survives. Levels where the gang splits into subgroups cannot be
    expressed: a Koordinator spec applies to the whole GangGroup, and gathering the whole gang there
    would over-constrain a requirement (or change a preference's meaning).
    """
    keys = gang.pool.topology_keys
    index = {k.key: i for i, k in enumerate(keys)}
    groups: dict[int, set[str]] = {}
    types: dict[int, set[str]] = {}
    for task in gang.tasks:
        for req in task.resource.topology:
            if req.key not in index:
                continue  # reported by the topology checks before any backend runs
            lvl = index[req.key]
            groups.setdefault(lvl, set()).add(req.group)
            types.setdefault(lvl, set()).add(req.requirementType)
    shared = [lvl for lvl in sorted(groups) if len(groups[lvl]) == 1]
    split = [lvl for lvl in sorted(groups) if len(groups[lvl]) > 1]
    required = [lvl for lvl in shared if "required" in types[lvl]]
    floor = required[-1] if required else -1
    layers = _layers(gang.pool) if groups else []
    rules: list[tuple[str, str]] = []
    if required:
        rules.append((layers[floor], MUST_GATHER))
    rules.extend((layers[lvl], PREFER_GATHER) for lvl in shared if lvl > floor)
    unexpressed = tuple((keys[lvl].key, "required" if "required" in types[lvl] else "preferred") for lvl in split)
    return GatherPlan(tuple(rules), unexpressed)


def network_topology_spec(plan: GatherPlan) -> str | None:
    """Compact JSON for the ``network-topology-spec`` annotation, or None when there is nothing to gather."""
    if not plan.rules:
        return None
    body = {"gatherStrategy": [{"layer": layer, "strategy": strategy} for layer, strategy in plan.rules]}
    return json.dumps(body, separators=(",", ":"))


def gang_warnings(gang: Gang) -> list[str]:
    """Things the rendered gang will not do although the workflow asks for them (not errors: it still runs)."""
    if gang.pool.backend != "koordinator":
        return []
    plan = gather_plan(gang)
    out: list[str] = []
    where = f"group '{gang.name}'"
    for key, kind in plan.unexpressed:
        consequence = ("is NOT enforced" if kind == "required" else "is not passed on")
        out.append(f"{where}: its tasks name different '{key}' groups, so each subgroup asks for its own '{key}' "
                   f"domain ({kind}); Koordinator applies one network-topology-spec to the whole gang group and has "
                   f"no per-subgroup levels, so this {consequence} (use backend 'kai', or give every task the same "
                   f"'{key}' group)")
    if plan.rules and all(strategy == PREFER_GATHER for _, strategy in plan.rules):
        layers = ", ".join(layer for layer, _ in plan.rules)
        out.append(f"{where}: only preferred topology ({layers}) is rendered as PreferGather, which current "
                   "Koordinator accepts but ignores; the gang is placed without topology. Use "
                   "requirementType: required for a level that must hold")
    return out


def podgroup_names(gang: Gang) -> dict[str | None, str]:
    """PodGroup name per leaf subgroup (key None: the single PodGroup of a group without subgroups).

    Derived from the gang's stable uuid and the subgroup name, so re-renders never rename a PodGroup;
    long names are cut to 63 characters with a hash of the full name appended.
    """
    leaves = [sg.name for sg in gang.topology.subgroups if sg.is_leaf]
    if not leaves:
        return {None: gang.podgroup_name}
    return {leaf: dns_label(f"{gang.podgroup_name}-{leaf}") for leaf in leaves}


def _podgroup(gang: Gang, name: str, members: int, annotations: dict[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": gang.namespace, "labels": dict(gang.labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"minMember": members}
    timeout = schedule_timeout(gang.pool)
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {"apiVersion": PODGROUP_API, "kind": "PodGroup", "metadata": meta, "spec": spec}


class KoordinatorBackend:
    def pool_objects(self, pool_name: str, pool: PoolConfig, namespace: str) -> list[dict[str, Any]]:
        """The ``default`` ClusterNetworkTopology: the pool's keys coarsest first, the node layer last.

        Cluster-scoped and unique per cluster, so only one pool per cluster should render it.
        """
        if not pool.topology_keys:
            return []
        entries: list[dict[str, Any]] = []
        parent: str | None = None
        for key, layer in zip(pool.topology_keys, _layers(pool)):
            if layer == NODE_LAYER:
                continue  # the node layer is the nodes themselves; it is declared below without a label
            entry: dict[str, Any] = {"labelKey": [key.label]}
            if parent:
                entry["parentTopologyLayer"] = parent
            entry["topologyLayer"] = layer
            entries.append(entry)
            parent = layer
        node: dict[str, Any] = {"parentTopologyLayer": parent} if parent else {}
        node["topologyLayer"] = NODE_LAYER
        entries.append(node)
        return [{
            "apiVersion": TOPOLOGY_API,
            "kind": "ClusterNetworkTopology",
            "metadata": {"name": TOPOLOGY_NAME, "labels": {POOL_LABEL: pool_name}},
            "spec": {"networkTopologySpec": entries},
        }]

    def render_gang(self, gang: Gang) -> GangObjects:
        pool, topo = gang.pool, gang.topology
        names = podgroup_names(gang)
        annotations: dict[str, str] = {}
        if len(names) > 1:
            members = sorted(f"{gang.namespace}/{n}" for n in names.values())
            annotations[GROUPS_ANNOTATION] = json.dumps(members, separators=(",", ":"))
        spec = network_topology_spec(gather_plan(gang))
        if spec is not None:
            annotations[SPEC_ANNOTATION] = spec
        if pool.gang.mode is not None:
            annotations[MODE_ANNOTATION] = pool.gang.mode
        if pool.gang.match_policy is not None:
            annotations[MATCH_POLICY_ANNOTATION] = pool.gang.match_policy

        if None in names:
            objects = [_podgroup(gang, names[None], len(gang.tasks), annotations)]
        else:
            by_name = topo.by_name
            objects = [_podgroup(gang, pg, len(by_name[leaf].tasks), annotations)
                       for leaf, pg in names.items() if leaf is not None]

        labels: dict[str, dict[str, str]] = {}
        pod_annotations: dict[str, dict[str, str]] = {}
        for rank, task in enumerate(gang.tasks, start=1):
            pg = names[None] if None in names else names[topo.task_subgroup[task.spec.name]]
            labels[task.spec.name] = {POD_GROUP_LABEL: pg}
            pod_annotations[task.spec.name] = {INDEX_ANNOTATION: str(rank)}
        return GangObjects(objects, labels, pod_annotations, pool.scheduler_name or SCHEDULER)
