"""NVIDIA KAI scheduler: ``scheduling.run.ai/v2alpha2`` PodGroups with subGroups and topology.

Follows KAI scheduler's API (``pkg/apis/scheduling/v2alpha2/podgroup_types.go``) and its admission webhook
(``podgroup_webhook.go``): ``subGroups`` (camelCase), ``topology`` always set in a constraint (v0.14's
``subgroup_info/factory.go`` ignores a constraint without it), ``minMember`` only on leaves, pods linked by the
``pod-group-name`` annotation and the ``kai.scheduler/subgroup-name`` label naming a leaf.
"""

from __future__ import annotations

from typing import Any

from toporender.build.backends.interface import GangObjects
from toporender.expand.gangs import Gang
from toporender.expand.levels import LevelConstraint
from toporender.load.models import PoolConfig

SCHEDULER = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
PODGROUP_ANNOTATION = "pod-group-name"


def queue_name(pool_name: str, pool: PoolConfig) -> str:
    return pool.queue or pool_name.lower().replace("_", "-").replace(".", "-")


def topology_name(pool_name: str, pool: PoolConfig) -> str:
    return pool.topology_name or f"{pool_name.lower().replace('_', '-').replace('.', '-')}-topology"


def _constraint(c: LevelConstraint, topology: str) -> dict[str, str]:
    out = {"topology": topology}
    if c.required:
        out["requiredTopologyLevel"] = c.required
    if c.preferred:
        out["preferredTopologyLevel"] = c.preferred
    return out


class KaiBackend:
    def pool_objects(self, pool_name: str, pool: PoolConfig, namespace: str) -> list[dict[str, Any]]:
        labels = {"toporender.dev/pool": pool_name}
        queue = pool.queue_settings
        no_limit = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
        queue_spec: dict[str, Any] = {}
        if queue.parent:
            queue_spec["parentQueue"] = queue.parent
        queue_spec["resources"] = {
            "cpu": dict(no_limit),
            "gpu": {"quota": queue.gpu_quota, "limit": queue.gpu_limit,
                    "overQuotaWeight": queue.gpu_over_quota_weight},
            "memory": dict(no_limit),
        }
        objects: list[dict[str, Any]] = []
        if pool.topology_keys:
            objects.append({
                "apiVersion": "kai.scheduler/v1alpha1",
                "kind": "Topology",
                "metadata": {"name": topology_name(pool_name, pool), "labels": dict(labels)},
                "spec": {"levels": [{"nodeLabel": k.label} for k in pool.topology_keys]},
            })
        objects.append({
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": queue_name(pool_name, pool), "labels": dict(labels)},
            "spec": queue_spec,
        })
        return objects

    def render_gang(self, gang: Gang) -> GangObjects:
        pool, topo = gang.pool, gang.topology
        queue = queue_name(gang.pool_name, pool)
        tname = topology_name(gang.pool_name, pool)
        min_subgroup = pool.kai_version != "v0.14"
        spec: dict[str, Any] = {"queue": queue}
        if pool.priority_class:
            spec["priorityClassName"] = pool.priority_class
        if pool.preemptibility:
            spec["preemptibility"] = pool.preemptibility
        if topo.subgroups:
            if min_subgroup:
                spec["minSubGroup"] = len(topo.top_children())
        else:
            spec["minMember"] = len(gang.tasks)
        if topo.constraint:
            spec["topologyConstraint"] = _constraint(topo.constraint, tname)
        if topo.subgroups:
            subgroups: list[dict[str, Any]] = []
            for sg in topo.subgroups:
                item: dict[str, Any] = {"name": sg.name}
                if sg.is_leaf:
                    item["minMember"] = len(sg.tasks)
                elif min_subgroup:
                    item["minSubGroup"] = len(sg.children)
                if sg.parent:
                    item["parent"] = sg.parent
                if sg.constraint:
                    item["topologyConstraint"] = _constraint(sg.constraint, tname)
                subgroups.append(item)
            spec["subGroups"] = subgroups
        podgroup = {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {
                "name": gang.podgroup_name,
                "namespace": gang.namespace,
                "labels": {**gang.labels, QUEUE_LABEL: queue},
            },
            "spec": spec,
        }
        labels: dict[str, dict[str, str]] = {}
        annotations: dict[str, dict[str, str]] = {}
        for task in gang.tasks:
            lab = {QUEUE_LABEL: queue}
            leaf = topo.task_subgroup.get(task.spec.name)
            if leaf:
                lab[SUBGROUP_LABEL] = leaf
            labels[task.spec.name] = lab
            annotations[task.spec.name] = {PODGROUP_ANNOTATION: gang.podgroup_name}
        return GangObjects([podgroup], labels, annotations, pool.scheduler_name or SCHEDULER)
