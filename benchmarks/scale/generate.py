"""Deterministic generator of a repo the size large users grow into: 10,000 workflows on a 1M-GPU inventory.

``python benchmarks/scale/generate.py DIR [--workflows N] [--nodes N]`` writes a repo with the render
benchmark's pool config (KAI, zone and NVLink-clique levels, a ComputeDomain group template, two pod
templates), ``--workflows`` workflow files of 24 to 32 Pods each (replicas of four 2-GPU Pods, each replica
bound to one clique, the group to one zone; 280,000 Pods for the default 10,000) and a compact inventory of
``--nodes`` nodes in racks of 18 (every sixth rack of 8-GPU nodes, the rest of 4-GPU nodes; 216,000 nodes
make 1,008,000 GPUs in 12 zones). Scaling both options by the same factor keeps the demand at 56% of the
GPUs, so the time of 1/10 and of the whole can be compared.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("render_generate", HERE.parent / "render" / "generate.py")
assert _spec is not None and _spec.loader is not None
_render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_render)
CONFIG: str = _render.CONFIG
"""The render benchmark's pool config (loaded by path: both generators are called ``generate``)."""

NODES_PER_RACK = 18
RACKS_PER_ZONE = 1_000
PODS_PER_REPLICA = 4
GPUS_PER_POD = 2


def workflow(w: int) -> str:
    replicas = 6 + w % 3
    lines = ["workflow:", f"  name: train-{w:05d}", f"  labels: {{team: team-{w % 16}}}", "  groups:",
             "  - name: train", "    tasks:"]
    for r in range(replicas):
        for p in range(PODS_PER_REPLICA):
            lead = ", lead: true" if r == 0 and p == 0 else ""
            lines.append(f"    - {{name: r{r}-w{p}, resource: replica-{r}{lead}, "
                         "image: 'nvcr.io/nvidia/pytorch:24.10-py3', command: [torchrun], args: [train.py]}")
    lines.append("  resources:")
    for r in range(replicas):
        lines += [f"    replica-{r}:", "      cpu: 32", f"      gpu: {GPUS_PER_POD}", "      memory: 240Gi",
                  "      topology:", f"      - {{key: gpu-clique, group: replica-{r}}}",
                  "      - {key: zone, group: job}"]
    return "\n".join(lines) + "\n"


def inventory(nodes: int) -> str:
    lines = ["apiVersion: toporender.dev/v1alpha1", "kind: NodeInventory", "nodes:"]
    for i in range(nodes):
        rack, zone = i // NODES_PER_RACK, i // (NODES_PER_RACK * RACKS_PER_ZONE)
        gpus = 8 if rack % 6 == 5 else 4
        lines.append(f"- {{name: gb200-z{zone:02d}-r{rack:05d}-n{i % NODES_PER_RACK:02d}, gpus: {gpus}, labels: "
                     f"{{topology.kubernetes.io/zone: zone-{zone:02d}, nvidia.com/gpu.clique: clique-{rack:05d}, "
                     "nvidia.com/gpu.product: NVIDIA-GB200}}")
    return "\n".join(lines) + "\n"


def generate(root: Path, workflows: int = 10_000, nodes: int = 216_000) -> Path:
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    (root / "inventory").mkdir(exist_ok=True)
    (root / "toporender.yaml").write_text(CONFIG)
    (root / "inventory" / "nodes.yaml").write_text(inventory(nodes))
    for w in range(workflows):
        (root / "workflows" / f"train-{w:05d}.yaml").write_text(workflow(w))
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--workflows", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=216_000)
    args = parser.parse_args()
    print(generate(args.dir, args.workflows, args.nodes))


if __name__ == "__main__":
    main()
