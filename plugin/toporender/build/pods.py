"""Backend-neutral task Pods and the headless Service that lets ranks find each other."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toporender.errors import fail
from toporender.expand.gangs import Gang, Task
from toporender.expand.naming import short_hash
from toporender.load.models import ResourceSpec

GPU_RESOURCE = "nvidia.com/gpu"
FILES_VOLUME = "toporender-files"
MAX_CONFIGMAP_BYTES = 1024 * 1024
HOSTNAME_LABEL = "kubernetes.io/hostname"


def cpu_quantity(cpu: float) -> str:
    if float(cpu).is_integer():
        return str(int(cpu))
    return f"{round(cpu * 1000)}m"


def memory_quantity(value: str | int) -> str:
    """OSMO reads a bare number as KiB."""
    return f"{value}Ki" if isinstance(value, int) else value


def resource_requirements(res: ResourceSpec) -> dict[str, Any] | None:
    q: dict[str, Any] = {}
    if res.cpu is not None:
        q["cpu"] = cpu_quantity(res.cpu)
    if res.memory is not None:
        q["memory"] = memory_quantity(res.memory)
    if res.storage is not None:
        q["ephemeral-storage"] = memory_quantity(res.storage)
    if res.gpu:
        q[GPU_RESOURCE] = res.gpu
    if not q:
        return None
    return {"requests": q, "limits": dict(q)}


def base_pod(gang: Gang, task: Task, scheduler_name: str | None = None,
             identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The pod before templates and the backend's labels; ``schedulerName`` comes first in the spec
    (templates may not set it).

    ``identity`` stands in for the task's own names (:meth:`Task.identity`): the pod builder of
    :mod:`toporender.build.pod_shapes` passes slots there, to be filled in per task."""
    ident = task.identity() if identity is None else identity
    labels = {**gang.workflow.spec.workflow.labels, **gang.labels, "toporender.dev/task": ident["WF_TASK_NAME"]}
    if task.spec.lead:
        labels["toporender.dev/lead"] = "true"
    image = task.spec.image or gang.pool.default_image
    container: dict[str, Any] = {"name": ident["USER_CONTAINER_NAME"], "image": image}
    if task.spec.command:
        container["command"] = list(task.spec.command)
    if task.spec.args:
        container["args"] = list(task.spec.args)
    if task.spec.env:
        container["env"] = [{"name": k, "value": v} for k, v in task.spec.env.items()]
    resources = resource_requirements(task.resource)
    if resources:
        container["resources"] = resources
    if task.spec.files:
        container["volumeMounts"] = [{"name": FILES_VOLUME, "mountPath": f.path, "subPath": files_key(task, f.path),
                                      "readOnly": True} for f in task.spec.files]
    spec: dict[str, Any] = {"schedulerName": scheduler_name} if scheduler_name else {}
    spec["restartPolicy"] = "Never"
    deadline = gang.workflow.spec.workflow.timeout.exec_seconds
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    if gang.service_name:
        spec["hostname"] = ident["WF_HOSTNAME"]
        spec["subdomain"] = gang.service_name
    if gang.pool.node_selector:
        spec["nodeSelector"] = dict(gang.pool.node_selector)
    excluded = task.resource.nodesExcluded
    if excluded:
        avoid = {"key": HOSTNAME_LABEL, "operator": "NotIn", "values": sorted(set(excluded))}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [avoid]}]}}}
    spec["containers"] = [container]
    if task.spec.files:
        spec["volumes"] = [{"name": FILES_VOLUME, "configMap": {"name": files_configmap_name(gang)}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": ident["WF_POD_NAME"], "namespace": gang.namespace, "labels": labels},
        "spec": spec,
    }


def finish_pod(pod: dict[str, Any], gang: Gang, task_name: Any, labels: Mapping[str, Any],
               annotations: Mapping[str, Any] | None) -> None:
    """Our labels over the templates' (gang, task, then the backend's) and the backend's annotations."""
    meta = pod["metadata"]
    meta["labels"] = {**meta.get("labels", {}), **gang.labels, "toporender.dev/task": task_name, **labels}
    if annotations:
        meta["annotations"] = {**meta.get("annotations", {}), **annotations}


def files_key(task: Task, path: str) -> str:
    """The ConfigMap key of one task's file: stable, unique per task and path, valid as a key."""
    return f"{task.container}.{short_hash(path, 12)}"


def files_configmap_name(gang: Gang) -> str:
    return f"{gang.uuid}-files"


def files_configmap(gang: Gang) -> dict[str, Any] | None:
    """OSMO's task ``files`` of the whole group as one ConfigMap (text as data, base64 as binaryData), which each
    task mounts file by file; None when no task has files."""
    data: dict[str, str] = {}
    binary: dict[str, str] = {}
    for task in gang.tasks:
        for f in task.spec.files:
            (binary if f.base64 else data)[files_key(task, f.path)] = f.contents
    if not data and not binary:
        return None
    size = sum(len(k) + len(v.encode()) for part in (data, binary) for k, v in part.items())
    if size > MAX_CONFIGMAP_BYTES:
        raise fail(f"the files of group '{gang.name}' add up to {size} bytes; a ConfigMap holds at most 1 MiB: "
                   "ship large files in the image or a volume", gang.pos)
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": files_configmap_name(gang), "namespace": gang.namespace, "labels": dict(gang.labels)}}
    if data:
        out["data"] = data
    if binary:
        out["binaryData"] = binary
    return out


def headless_service(gang: Gang) -> dict[str, Any] | None:
    if gang.service_name is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": gang.service_name, "namespace": gang.namespace, "labels": dict(gang.labels)},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": dict(gang.labels)},
    }
