"""A ``kubectl get nodes -o json|yaml`` dump of a large GPU cluster, for the inventory import benchmark.

``python benchmarks/inventory/generate.py OUT.json|OUT.yaml [--nodes N]`` writes a NodeList in the layout
kubectl prints (``apiVersion``, ``items``, ``kind: List``, ``metadata``), each Node with what a GPU node
carries: topology and feature-discovery labels, annotations, taints on some nodes, capacity and allocatable,
conditions, addresses, node info and a few images, until the file holds ``--size-mb`` (default 150) MB. Nodes
are named and labelled deterministically; ``--nodes 216000 --lean`` (labels and allocatable only, as small as
kubectl output gets) is the node list of a 1,728,000-GPU cluster.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

GPUS_PER_NODE = 8
NODES_PER_RACK = 18
RACKS_PER_ZONE = 40


def node(i: int, lean: bool) -> dict[str, Any]:
    rack, zone = i // NODES_PER_RACK, i // (NODES_PER_RACK * RACKS_PER_ZONE)
    name = f"gpu-{zone:02d}-{rack:05d}-{i % NODES_PER_RACK:02d}"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": f"us-east-1-{zone}",
        "network.topology.nvidia.com/spine": f"spine-{rack // 8}",
        "nvidia.com/gpu.clique": f"c{zone:02d}{rack:05d}.1",
        "nvidia.com/gpu.count": str(GPUS_PER_NODE),
        "nvidia.com/gpu.product": "NVIDIA-GB200",
        "node.kubernetes.io/instance-type": "gb200.8x",
    }
    allocatable = {"cpu": "144", "memory": "1843200Mi", "nvidia.com/gpu": str(GPUS_PER_NODE), "pods": "110"}
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"labels": labels, "name": name}}
    if lean:
        obj["status"] = {"allocatable": allocatable}
        return obj
    labels.update({f"feature.node.kubernetes.io/cpu-cpuid.{f}": "true" for f in ("AVX512F", "AMXBF16", "VAES")})
    labels["beta.kubernetes.io/arch"] = "amd64"
    obj["metadata"].update({
        "annotations": {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            "nfd.node.kubernetes.io/feature-labels": "cpu-cpuid.AVX512F,cpu-cpuid.AMXBF16,cpu-cpuid.VAES",
        },
        "creationTimestamp": "2026-10-01T08:00:00Z",
        "resourceVersion": str(1_000_000 + i),
        "uid": f"00000000-0000-4000-8000-{i:012d}",
    })
    spec: dict[str, Any] = {"podCIDR": f"10.{i // 65536 % 256}.{i // 256 % 256}.0/24",
                            "providerID": f"aws:///us-east-1a/i-{i:017x}"}
    if i % 25 == 0:
        spec["unschedulable"] = True
        spec["taints"] = [{"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable",
                           "timeAdded": "2026-11-20T10:00:00Z"}]
    obj["spec"] = spec
    capacity = {**allocatable, "ephemeral-storage": "3750000000Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    conditions = [
        {"lastHeartbeatTime": "2026-11-24T11:59:00Z", "lastTransitionTime": "2026-10-01T08:00:00Z",
         "message": message, "reason": reason, "status": status, "type": kind}
        for kind, status, reason, message in (
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status"))
    ]
    obj["status"] = {
        "addresses": [{"address": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}", "type": "InternalIP"},
                      {"address": name, "type": "Hostname"}],
        "allocatable": {**allocatable, "ephemeral-storage": "3456000000Ki"},
        "capacity": capacity,
        "conditions": conditions,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "images": [{"names": [f"nvcr.io/nvidia/pytorch@sha256:{(i * 7 + k) % 10**6:064d}",
                              f"nvcr.io/nvidia/pytorch:25.0{k}-py3"], "sizeBytes": 9_000_000_000 + k}
                   for k in range(3)],
        "nodeInfo": {"architecture": "amd64", "bootID": f"b-{i:08d}", "containerRuntimeVersion": "containerd://1.7.27",
                     "kernelVersion": "6.8.0-1021-nvidia", "kubeProxyVersion": "v1.32.4", "kubeletVersion": "v1.32.4",
                     "machineID": f"m{i:031d}", "operatingSystem": "linux",
                     "osImage": "Ubuntu 24.04.2 LTS", "systemUUID": f"s-{i:08d}"},
    }
    return obj


def _yaml_scalar(value: Any) -> str:
    """A scalar as kubectl's YAML writes it: strings that would read as something else are quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    plain = (text and text[0].isalpha() and text.lower() not in ("true", "false", "yes", "no", "on", "off", "null",
                                                                 "y", "n")
             and not any(c in text for c in ":#{}[],&*!|>'\"%@`") and text == text.strip())
    return text if plain else json.dumps(text)


def _yaml_lines(value: Any, indent: int) -> Iterator[str]:
    pad = " " * indent
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                yield f"{pad}{_yaml_scalar(key)}:"
                yield from _yaml_lines(item, indent + 2 if isinstance(item, dict) else indent)
            else:
                yield f"{pad}{_yaml_scalar(key)}: {_yaml_scalar(item) if item != {} else '{}'}"
    else:
        for item in value:
            lines = list(_yaml_lines(item, indent + 2)) if isinstance(item, (dict, list)) else [
                f"{pad}  {_yaml_scalar(item)}"]
            yield f"{pad}- {lines[0][indent + 2:]}"
            yield from lines[1:]


def write(path: Path, nodes: int | None, lean: bool, size_mb: float) -> tuple[int, int]:
    """Write the dump: ``nodes`` nodes, or as many as make ``size_mb`` MB; returns (nodes, bytes)."""
    limit = None if nodes is not None else int(size_mb * 1e6)
    written = count = 0
    with path.open("w", encoding="utf-8") as out:
        json_out = path.suffix == ".json"
        head = '{\n    "apiVersion": "v1",\n    "items": [\n' if json_out else "apiVersion: v1\nitems:\n"
        tail = ('\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n'
                if json_out else 'kind: List\nmetadata:\n  resourceVersion: ""\n')
        out.write(head)
        written = len(head) + len(tail)
        while (count < nodes) if nodes is not None else (written < (limit or 0)):
            if json_out:
                text = ("        " if count == 0 else ",\n        ") + json.dumps(node(count, lean), indent=4).replace(
                    "\n", "\n        ")
            else:
                text = "\n".join(_yaml_lines([node(count, lean)], 0)) + "\n"
            out.write(text)
            written += len(text)
            count += 1
        out.write(tail)
    return count, path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="OUT.json or OUT.yaml")
    parser.add_argument("--nodes", type=int, help="this many nodes (default: as many as make --size-mb)")
    parser.add_argument("--size-mb", type=float, default=150.0)
    parser.add_argument("--lean", action="store_true", help="labels and allocatable only")
    args = parser.parse_args()
    nodes, size = write(args.out, args.nodes, args.lean, args.size_mb)
    print(f"{args.out}: {nodes} nodes, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
