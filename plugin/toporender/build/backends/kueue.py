"""Kueue topology-aware scheduling (TAS): plain Pods in a Kueue pod group, topology as PodSet annotations.

Follows Kueue v0.19.2 (``kubernetes-sigs/kueue``):

* pods join a pod group by the ``kueue.x-k8s.io/pod-group-name`` label and the
  ``kueue.x-k8s.io/pod-group-total-count`` annotation, and a LocalQueue by the ``kueue.x-k8s.io/queue-name``
  label (``pkg/controller/jobs/pod/constants/constants.go``, ``pkg/controller/constants/constants.go``);
* the gang's level becomes ``podset-required-topology`` (or ``podset-preferred-topology``), read from the Pod
  metadata of each PodSet (``apis/kueue/v1beta2/topology_types.go``); at most one of them per PodSet
  (``pkg/controller/jobframework/tas_validation.go``), so a finer preferred level under a required one is
  reported, not rendered;
* subgroups become PodSet slices: consecutive pod ranks of one size in one domain of one level
  (``podset-slice-required-topology`` + ``podset-slice-size``), or up to three nested layers in
  ``podset-slice-required-topology-constraints`` (beta and on by default from v0.19, ``TASMultiLayerTopology``).
  The rank is the ``kueue.x-k8s.io/pod-group-pod-index`` label (``pkg/controller/tas/topology_ungater.go`` reads
  it below the PodSet's count), numbered so that every subgroup's pods are consecutive;
* Kueue places each PodSet on its own, and a pod group has one PodSet per pod shape (``GenerateRoleHash`` in
  ``pkg/util/pod/pod.go``: requests, ports, node selector, affinity, tolerations...). :func:`finish_pods` finds
  the shapes of the built pods, numbers ranks per shape and reports what that costs.

What a subgroup tree Kueue cannot express becomes is decided by :func:`slice_plan` and reported by
:func:`gang_warnings`, at the workflow's group.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from toporender.build.backends.interface import GangObjects
from toporender.build.backends.kai import queue_name, topology_name
from toporender.expand.gangs import Gang
from toporender.expand.topology import Subgroup
from toporender.load.models import PoolConfig

API = "kueue.x-k8s.io/v1beta2"
PREFIX = "kueue.x-k8s.io/"
QUEUE_LABEL = PREFIX + "queue-name"
GROUP_LABEL = PREFIX + "pod-group-name"
INDEX_LABEL = PREFIX + "pod-group-pod-index"
TOTAL_ANNOTATION = PREFIX + "pod-group-total-count"
REQUIRED = PREFIX + "podset-required-topology"
PREFERRED = PREFIX + "podset-preferred-topology"
SLICE_REQUIRED = PREFIX + "podset-slice-required-topology"
SLICE_SIZE = PREFIX + "podset-slice-size"
SLICE_CONSTRAINTS = PREFIX + "podset-slice-required-topology-constraints"
POOL_LABEL = "toporender.dev/pool"
MAX_LAYERS = 3
"""``errTopologyConstraintsLayerCount`` in ``pkg/controller/jobframework/tas.go``."""


@dataclass(frozen=True)
class SlicePlan:
    """What a gang's subgroups become in Kueue: slice layers (node label, pods per slice), outermost first."""

    layers: tuple[tuple[str, int], ...]
    order: tuple[str, ...]
    """Task names in rank order: every subgroup's tasks are consecutive."""
    dropped: tuple[str, ...]
    """Why parts of the tree are not rendered, one sentence each."""


def _depths(subgroups: tuple[Subgroup, ...]) -> dict[str, int]:
    by_name = {s.name: s for s in subgroups}
    depth: dict[str, int] = {}
    for sg in subgroups:
        d, cur = 1, sg
        while cur.parent is not None:
            d, cur = d + 1, by_name[cur.parent]
        depth[sg.name] = d
    return depth


def slice_plan(gang: Gang) -> SlicePlan:
    """Slice layers for the gang's subgroup tree, and the rank order that makes each subgroup consecutive.

    A depth of the tree is one Kueue slice layer when every branch reaches it and all its subgroups require
    the same level and hold the same number of pods; ranks follow the tree depth first, so each subgroup is a
    run of consecutive ranks aligned to its size. Anything else, a preferred subgroup level, unequal sizes or
    levels, a ragged tree, has no Kueue form and is dropped (never turned into a stronger requirement).
    From v0.19 up to three layers are kept; before it only the outermost.
    """
    topo = gang.topology
    order_index = {t.spec.name: i for i, t in enumerate(gang.tasks)}
    if not topo.subgroups:
        return SlicePlan((), tuple(t.spec.name for t in gang.tasks), ())
    by_name = topo.by_name
    depth = _depths(topo.subgroups)
    leaves = [s for s in topo.subgroups if s.is_leaf]
    leaf_rank = {s.name: i for i, s in enumerate(leaves)}
    order = tuple(sorted(order_index, key=lambda t: (leaf_rank.get(topo.task_subgroup.get(t, ""), -1),
                                                     order_index[t])))
    where = f"group '{gang.name}'"
    dropped: list[str] = []
    layers: list[tuple[str, int]] = []
    balanced = len({depth[s.name] for s in leaves}) == 1
    for d in range(1, max(depth.values()) + 1):
        level = [s for s in topo.subgroups if depth[s.name] == d]
        names = ", ".join(s.name for s in level[:3]) + (", ..." if len(level) > 3 else "")
        preferred = sorted({s.constraint.preferred for s in level if s.constraint.preferred})
        if preferred:
            dropped.append(f"{where}: the preferred level {', '.join(preferred)} of subgroups {names} is not passed "
                           "on: Kueue slices are required only")
        required = {s.constraint.required for s in level}
        sizes = {s.size(by_name) for s in level}
        if required == {None}:
            continue
        if not balanced:
            dropped.append(f"{where}: the required level of subgroups {names} is NOT enforced: Kueue slices need "
                           "every branch of the subgroup tree to have the same depth")
        elif len(required) > 1:
            levels = ", ".join(sorted(r or "none" for r in required))
            dropped.append(f"{where}: the required levels of subgroups {names} differ ({levels}) and are NOT "
                           "enforced: a Kueue slice layer has one level for all its slices")
        elif len(sizes) > 1:
            dropped.append(f"{where}: subgroups {names} have different sizes ({', '.join(map(str, sorted(sizes)))}) "
                           "so their required level is NOT enforced: Kueue slices have one size per layer")
        else:
            layers.append((str(next(iter(required))), next(iter(sizes))))
    limit = MAX_LAYERS if gang.pool.kueue_version == "v0.19" else 1
    for label, size in layers[limit:]:
        dropped.append(f"{where}: the required level {label} of its {size}-pod subgroups is NOT enforced: Kueue "
                       f"{gang.pool.kueue_version} takes at most {limit} slice layer{'s' if limit > 1 else ''}"
                       + ("" if limit > 1 else " (kueue_version v0.19 takes three)"))
    return SlicePlan(tuple(layers[:limit]), order, tuple(dropped))


def gang_annotations(gang: Gang, plan: SlicePlan) -> dict[str, str]:
    """The TAS annotations every pod of the gang carries (one PodSet's worth)."""
    out: dict[str, str] = {TOTAL_ANNOTATION: str(len(gang.tasks))}
    top = gang.topology.constraint
    if top.required:
        out[REQUIRED] = top.required
    elif top.preferred:
        out[PREFERRED] = top.preferred
    if len(plan.layers) == 1:
        out[SLICE_REQUIRED], out[SLICE_SIZE] = plan.layers[0][0], str(plan.layers[0][1])
    elif plan.layers:
        out[SLICE_CONSTRAINTS] = json.dumps([{"topology": t, "size": s} for t, s in plan.layers],
                                            separators=(",", ":"))
    return out


def gang_warnings(gang: Gang) -> list[str]:
    """What the rendered pod group will not do although the workflow asks for it (it still runs)."""
    if gang.pool.backend != "kueue":
        return []
    out: list[str] = []
    top = gang.topology.constraint
    if top.required and top.preferred:
        out.append(f"group '{gang.name}': the preferred level {top.preferred} is not passed on: Kueue takes one of "
                   f"required or preferred topology per PodSet, and the required {top.required} is kept")
    return out + list(slice_plan(gang).dropped)


def pod_shape(pod: dict[str, Any]) -> str:
    """The fields Kueue's ``SpecShape`` hashes into a pod's role (``pkg/util/pod/pod.go``), as canonical JSON."""
    spec = pod.get("spec", {})

    def containers(key: str) -> list[Any]:
        return [{"requests": (c.get("resources") or {}).get("requests"), "ports": c.get("ports")}
                for c in spec.get(key) or []]

    shape = {k: spec.get(k) for k in ("nodeSelector", "affinity", "tolerations", "runtimeClassName", "priority",
                                      "topologySpreadConstraints", "overhead", "resourceClaims")}
    shape.update(containers=containers("containers"), initContainers=containers("initContainers"),
                 resources=(spec.get("resources") or {}).get("requests"))
    return json.dumps(shape, sort_keys=True)


SLICE_KEYS = (SLICE_REQUIRED, SLICE_SIZE, SLICE_CONSTRAINTS)


def finish_pods(gang: Gang, pods: list[dict[str, Any]]) -> list[str]:
    """Number the built pods' ranks per Kueue PodSet and return warnings for a gang that is several PodSets.

    Kueue reads a rank below the PodSet's count only, so ranks restart for each pod shape. Slices of a PodSet
    cannot be bigger than the PodSet (``ValidateSliceSizeAnnotationUpperBound``), and they would cut across
    our subgroups, so a gang of several shapes keeps its gang level (enforced per PodSet) without slices.
    Mappings are replaced, never edited in place: pods built from one shape may share them.
    """
    shapes: dict[str, list[dict[str, Any]]] = {}
    by_task = {str(p["metadata"]["labels"].get("toporender.dev/task")): p for p in pods}
    for task in slice_plan(gang).order:
        pod = by_task[task]
        shapes.setdefault(pod_shape(pod), []).append(pod)
    several = len(shapes) > 1
    for members in shapes.values():
        for rank, pod in enumerate(members):
            meta = pod["metadata"]
            meta["labels"] = {**meta["labels"], INDEX_LABEL: str(rank)}
            if several:
                meta["annotations"] = {k: v for k, v in meta.get("annotations", {}).items() if k not in SLICE_KEYS}
    top = gang.topology.constraint
    if not several or not (top or gang.topology.subgroups):
        return []
    return [f"group '{gang.name}': its tasks have {len(shapes)} different pod shapes (requests, ports, node "
            "selector, tolerations...), and Kueue makes one PodSet per shape and places each on its own: the "
            "gang's topology level holds within each shape only and subgroup slices are not rendered; give "
            "every task of the group the same resources and templates"]


def flavor_name(pool_name: str, pool: PoolConfig) -> str:
    return queue_name(pool_name, pool)


def pool_problems(pool: PoolConfig) -> list[tuple[tuple[str | int, ...], str]]:
    """Pool settings Kueue cannot honour, each with its location inside the pool's mapping."""
    if pool.backend != "kueue":
        return []
    out: list[tuple[tuple[str | int, ...], str]] = []
    labels = [k.label for k in pool.topology_keys]
    if "kubernetes.io/hostname" in labels[:-1]:
        i = labels.index("kubernetes.io/hostname")
        out.append((("topology_keys", i), "Kueue's Topology takes kubernetes.io/hostname only as the last level; "
                                          "list it last"))
    if pool.pin != "none":
        out.append((("pin",), "Kueue picks the domains itself and injects their node selectors; pinning pods to "
                              "the intended domain would give pods of one group different affinities, which Kueue "
                              "splits into one PodSet each; use pin: none (the intended domains stay annotations)"))
    if pool.render_pool_objects:
        out.extend(pool_objects_problems(pool))
    return out


def pool_objects_problems(pool: PoolConfig) -> list[tuple[tuple[str | int, ...], str]]:
    """Why the pool's Kueue objects cannot be rendered (checked whenever they are asked for)."""
    if pool.topology_keys and not pool.node_selector:
        return [(("topology_keys",), "a Kueue ResourceFlavor with a topologyName needs at least one node label; "
                                     "set node_selector on the pool (it becomes the flavor's nodeLabels)")]
    return []


class KueueBackend:
    def pool_objects(self, pool_name: str, pool: PoolConfig, namespace: str) -> list[dict[str, Any]]:
        """Topology, the ResourceFlavor that enables TAS with it, and the namespace's LocalQueue.

        The ClusterQueue (quotas, cohorts) belongs to the cluster's admins: the LocalQueue points at
        ``queue_settings.parent``, else at a ClusterQueue of the queue's own name.
        """
        labels = {POOL_LABEL: pool_name}
        queue = queue_name(pool_name, pool)
        objects: list[dict[str, Any]] = []
        flavor: dict[str, Any] = {}
        if pool.node_selector:
            flavor["nodeLabels"] = dict(sorted(pool.node_selector.items()))
        if pool.topology_keys:
            tname = topology_name(pool_name, pool)
            objects.append({"apiVersion": API, "kind": "Topology", "metadata": {"name": tname, "labels": dict(labels)},
                            "spec": {"levels": [{"nodeLabel": k.label} for k in pool.topology_keys]}})
            flavor["topologyName"] = tname
        objects.append({"apiVersion": API, "kind": "ResourceFlavor",
                        "metadata": {"name": flavor_name(pool_name, pool), "labels": dict(labels)}, "spec": flavor})
        objects.append({"apiVersion": API, "kind": "LocalQueue",
                        "metadata": {"name": queue, "namespace": namespace, "labels": dict(labels)},
                        "spec": {"clusterQueue": pool.queue_settings.parent or queue}})
        return objects

    def render_gang(self, gang: Gang) -> GangObjects:
        plan = slice_plan(gang)
        queue = queue_name(gang.pool_name, gang.pool)
        shared = gang_annotations(gang, plan)
        rank = {t: i for i, t in enumerate(plan.order)}
        labels = {t.spec.name: {QUEUE_LABEL: queue, GROUP_LABEL: gang.podgroup_name,
                                INDEX_LABEL: str(rank[t.spec.name])} for t in gang.tasks}
        annotations = {t.spec.name: dict(shared) for t in gang.tasks}
        return GangObjects([], labels, annotations, gang.pool.scheduler_name)
