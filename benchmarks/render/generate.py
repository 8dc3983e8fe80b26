"""Deterministic generator of the render benchmark repo: 40 workflows, 10,000 Pods in total.

The shape is what the render path sees in production: one KAI pool with a two-level topology
(zone, NVLink clique), a ComputeDomain group template and two pod templates applied to every pod,
task groups whose replicas each form a clique-bound subgroup inside one zone, and a committed
node inventory (4 zones x 90 NVL72-style racks of 18 nodes x 4 GPUs, 25,920 GPUs for the 20,000
the pods ask for), so the packer places every gang and annotates its intended domains. Nothing is
random, so every run renders byte-identical output.

Run ``python benchmarks/render/generate.py DIR`` to write the repo into DIR.
"""

from __future__ import annotations

import sys
from pathlib import Path

WORKFLOWS = 40
GROUPS_PER_WORKFLOW = 5
REPLICAS_PER_GROUP = 5
PODS_PER_REPLICA = 10
TOTAL_PODS = WORKFLOWS * GROUPS_PER_WORKFLOW * REPLICAS_PER_GROUP * PODS_PER_REPLICA
GPUS_PER_POD = 2
ZONES = "abcd"
RACKS_PER_ZONE = 90
NODES_PER_RACK = 18
GPUS_PER_NODE = 4

CONFIG = """\
namespace: ml-training
submitted_by: platform-team
default_pool: gb200
inventory: inventory/nodes.yaml
pools:
  gb200:
    description: GB200 NVL72 racks in zones, IMEX channels via ComputeDomain
    backend: kai
    queue: team-llm
    priority_class: train
    topology_keys:
    - key: zone
      label: topology.kubernetes.io/zone
    - key: gpu-clique
      label: nvidia.com/gpu.clique
    node_selector:
      nvidia.com/gpu.product: NVIDIA-GB200
    common_group_templates: [compute-domain]
    common_pod_template: [use-compute-domain, gpu-tolerations]
group_templates:
  compute-domain:
    apiVersion: resource.nvidia.com/v1beta1
    kind: ComputeDomain
    metadata:
      name: compute-domain-{{WF_GROUP_UUID}}
      labels:
        example.com/submitted-by: '{{WF_SUBMITTED_BY}}'
    spec:
      numNodes: '{{ TASKS|length }}'
      channel:
        resourceClaimTemplate:
          name: compute-domain-{{WF_GROUP_UUID}}-rct
pod_templates:
  use-compute-domain:
    spec:
      containers:
      - name: '{{USER_CONTAINER_NAME}}'
        resources:
          claims:
          - name: compute-domain-channel
      resourceClaims:
      - name: compute-domain-channel
        resourceClaimTemplateName: compute-domain-{{WF_GROUP_UUID}}-rct
  gpu-tolerations:
    spec:
      tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
"""


def workflow(w: int) -> str:
    """One workflow: groups of replicas; each replica is a subgroup bound to one clique, all in one zone."""
    lines = [
        f"# Generated benchmark workflow {w}.",
        "workflow:",
        f"  name: train-{w:02d}",
        f"  labels: {{team: team-{w % 4}, project: bench}}",
        "  groups:",
    ]
    for g in range(GROUPS_PER_WORKFLOW):
        lines += [f"  - name: stage-{g}", "    tasks:"]
        for r in range(REPLICAS_PER_GROUP):
            for p in range(PODS_PER_REPLICA):
                lead = ", lead: true" if r == 0 and p == 0 else ""
                lines.append(f"    - {{name: s{g}-r{r}-w{p}, resource: replica-{r}{lead},")
                lines.append("       image: 'nvcr.io/nvidia/pytorch:24.10-py3',")
                lines.append("       command: [torchrun], args: ['--nnodes=50', '--nproc-per-node=2', train.py],")
                lines.append(f"       env: {{NCCL_DEBUG: WARN, STAGE: '{g}', RANK_OFFSET: '{r * PODS_PER_REPLICA}'}}}}")
    lines.append("  resources:")
    for r in range(REPLICAS_PER_GROUP):
        lines += [
            f"    replica-{r}:",
            "      cpu: 64",
            f"      gpu: {GPUS_PER_POD}",
            "      memory: 480Gi",
            "      storage: 200Gi",
            "      topology:",
            f"      - {{key: gpu-clique, group: replica-{r}}}",
            "      - {key: zone, group: job}",
        ]
    return "\n".join(lines) + "\n"


def inventory() -> str:
    """The compact node inventory, one node per line."""
    lines = ["apiVersion: toporender.dev/v1alpha1", "kind: NodeInventory", "nodes:"]
    for zone in ZONES:
        for rack in range(RACKS_PER_ZONE):
            for node in range(NODES_PER_RACK):
                lines.append(
                    f"- {{name: gb200-{zone}-r{rack:03d}-n{node:02d}, gpus: {GPUS_PER_NODE}, labels: "
                    f"{{topology.kubernetes.io/zone: zone-{zone}, nvidia.com/gpu.clique: clique-{zone}-{rack:03d}, "
                    "nvidia.com/gpu.product: NVIDIA-GB200}}")
    return "\n".join(lines) + "\n"


def generate(root: Path) -> Path:
    """Write the repo under ``root`` (created if needed) and return it."""
    (root / "workflows").mkdir(parents=True, exist_ok=True)
    (root / "inventory").mkdir(exist_ok=True)
    (root / "toporender.yaml").write_text(CONFIG)
    (root / "inventory" / "nodes.yaml").write_text(inventory())
    for w in range(WORKFLOWS):
        (root / "workflows" / f"train-{w:02d}.yaml").write_text(workflow(w))
    return root


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: generate.py DIR")
    print(generate(Path(sys.argv[1])))
