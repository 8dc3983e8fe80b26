#!/usr/bin/env python3
"""Regenerate the vendored CRD schemas in ``plugin/toporender/schemas/`` from saved upstream CRD files.

Usage: ``python tools/vendor_schemas.py DIR [--out OUTDIR]`` where DIR holds the upstream CRD YAML files, each
starting with a ``# Upstream: <repo>, path <path> @ <ref>; license <license>`` header line.

Only what validation needs is kept: identity (group, kind, plural, scope, served versions) and the structural
schema keywords. Descriptions are dropped because they are most of the bytes and none of the checks. Output is
sorted JSON so a rerun on the same input is byte-identical and diffs stay reviewable.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

# (input file, output file, variant). The validator routes on the variant besides (group, version, kind).
SOURCES: list[tuple[str, str, str]] = [
    ("kai-scheduler_scheduling.run.ai_podgroups.yaml", "kai-main_scheduling.run.ai_podgroups.json", "main"),
    (
        "kai-scheduler-v0.14.0_scheduling.run.ai_podgroups.yaml",
        "kai-v0.14.0_scheduling.run.ai_podgroups.json",
        "v0.14.0",
    ),
    ("kai-scheduler_kai.scheduler_topologies.yaml", "kai-main_kai.scheduler_topologies.json", "main"),
    (
        "kai-scheduler-v0.14.0_kai.scheduler_topologies.yaml",
        "kai-v0.14.0_kai.scheduler_topologies.json",
        "v0.14.0",
    ),
    ("kai-scheduler_scheduling.run.ai_queues.yaml", "kai-main_scheduling.run.ai_queues.json", "main"),
    (
        "dra-driver-nvidia-gpu_resource.nvidia.com_computedomains.yaml",
        "dra-main_resource.nvidia.com_computedomains.json",
        "main",
    ),
    (
        "dra-driver-nvidia-gpu-v25.12.0_resource.nvidia.com_computedomains.yaml",
        "dra-v25.12.0_resource.nvidia.com_computedomains.json",
        "v25.12.0",
    ),
    (
        "koordinator-v1.8.0_scheduling.sigs.k8s.io_podgroups.yaml",
        "koordinator-v1.8.0_scheduling.sigs.k8s.io_podgroups.json",
        "v1.8.0",
    ),
    (
        "koordinator-v1.8.0_scheduling.koordinator.sh_clusternetworktopologies.yaml",
        "koordinator-v1.8.0_scheduling.koordinator.sh_clusternetworktopologies.json",
        "v1.8.0",
    ),
    ("kueue-v0.19.2_kueue.x-k8s.io_topologies.yaml", "kueue-v0.19.2_kueue.x-k8s.io_topologies.json", "v0.19.2"),
    (
        "kueue-v0.19.2_kueue.x-k8s.io_resourceflavors.yaml",
        "kueue-v0.19.2_kueue.x-k8s.io_resourceflavors.json",
        "v0.19.2",
    ),
    ("kueue-v0.19.2_kueue.x-k8s.io_localqueues.yaml", "kueue-v0.19.2_kueue.x-k8s.io_localqueues.json", "v0.19.2"),
    (
        "volcano-v1.15.1_scheduling.volcano.sh_podgroups.yaml",
        "volcano-v1.15.1_scheduling.volcano.sh_podgroups.json",
        "v1.15.1",
    ),
    (
        "volcano-v1.15.1_topology.volcano.sh_hypernodes.yaml",
        "volcano-v1.15.1_topology.volcano.sh_hypernodes.json",
        "v1.15.1",
    ),
]

KEEP = frozenset(
    {
        "type",
        "properties",
        "items",
        "required",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "anyOf",
        "allOf",
        "oneOf",
        "not",
        "additionalProperties",
        "format",
        "nullable",
        "default",
    }
)

HEADER = re.compile(
    r"^# Upstream: (?P<repo>[^,]+?)(?: \((?P<alias>[^)]*)\))?, path (?P<path>\S+) @ "
    r"(?P<ref>[^;]+); license (?P<license>\S+)\s*$"
)


def _strip(node: Any) -> Any:
    """Keep structural keywords and x-kubernetes-* markers; drop descriptions, titles, examples."""
    if isinstance(node, list):
        return [_strip(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _strip(sub) for name, sub in value.items()}
        elif key == "x-kubernetes-validations":
            out[key] = [
                {
                    k: r[k]
                    for k in (
                        "rule",
                        "message",
                        "messageExpression",
                        "reason",
                        "fieldPath",
                        "optionalOldSelf",
                    )
                    if k in r
                }
                for r in value
            ]
        elif key in KEEP or key.startswith("x-kubernetes-"):
            out[key] = _strip(value) if isinstance(value, (dict, list)) else value
    return out


def _parse_header(text: str, name: str) -> dict[str, str]:
    first = text.splitlines()[0] if text else ""
    m = HEADER.match(first)
    if not m:
        raise SystemExit(f"{name}: first line is not a '# Upstream: ...' header")
    ref = m.group("ref").strip()
    source = {"repo": m.group("repo").strip(), "path": m.group("path"), "ref": ref}
    commit = re.search(r"\b([0-9a-f]{40})\b", ref)
    if commit:
        source["commit"] = commit.group(1)
    tag = re.match(r"tag (\S+)", ref)
    if tag:
        source["tag"] = tag.group(1)
    if m.group("alias"):
        source["note"] = m.group("alias")
    return {"license": m.group("license").rstrip("."), **source}


def convert(path: Path, variant: str) -> dict[str, Any]:
    """One upstream CRD file -> the vendored document (identity, source, license, per-version schemas)."""
    text = path.read_text(encoding="utf-8")
    header = _parse_header(text, path.name)
    crd = yaml.safe_load(text)
    if crd.get("kind") != "CustomResourceDefinition":
        raise SystemExit(f"{path.name}: not a CustomResourceDefinition")
    spec = crd["spec"]
    versions = []
    for v in spec["versions"]:
        if not v.get("served", False):
            continue
        entry: dict[str, Any] = {
            "name": v["name"],
            "storage": bool(v.get("storage", False)),
            "schema": _strip(v["schema"]["openAPIV3Schema"]),
        }
        if v.get("deprecated"):
            entry["deprecated"] = True
        versions.append(entry)
    license_ = header.pop("license")
    return {
        "group": spec["group"],
        "kind": spec["names"]["kind"],
        "plural": spec["names"]["plural"],
        "scope": spec["scope"],
        "variant": variant,
        "versions": versions,
        "source": header,
        "license": license_,
    }


def dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source_dir", type=Path, help="directory with the upstream CRD YAML files")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "plugin" / "toporender" / "schemas",
    )
    parser.add_argument("--check", action="store_true", help="fail if the vendored files differ; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for src, dst, variant in SOURCES:
        text = dump(convert(args.source_dir / src, variant))
        target = args.out / dst
        if args.check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(dst)
            continue
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    if stale:
        print("stale vendored schemas: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
