"""Sync waves order the apply: pool objects (-2), PodGroups/Services/group resources (-1), Pods (0)."""

from __future__ import annotations

import json

import yaml

from conftest import ROOT
from toporender.hosts.argocd import generate
from toporender.pipeline import RenderOptions, render_repo

WAVE = "argocd.argoproj.io/sync-wave"
EXAMPLE = ROOT / "examples" / "nvlink-compute-domain"


def waves(objects: list[dict]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for o in objects:
        out.setdefault(o["kind"], set()).add(o["metadata"].get("annotations", {}).get(WAVE, "none"))
    return out


def test_render_option_adds_waves_in_apply_order() -> None:
    assert waves(render_repo(EXAMPLE).objects)["Pod"] == {"0"}, "on_change: replace (the default) orders the gang"
    got = waves(render_repo(EXAMPLE, RenderOptions(sync_waves=True, pool_objects=True)).objects)
    assert got == {"Topology": {"-2"}, "Queue": {"-2"}, "ComputeDomain": {"-1"}, "PodGroup": {"-1"},
                   "Service": {"-1"}, "Pod": {"0"}}


def test_argocd_parameter_turns_waves_on() -> None:
    env = {"ARGOCD_APP_NAMESPACE": "ml", "ARGOCD_APP_PARAMETERS": json.dumps(
        [{"name": "sync-waves", "string": "true"}])}
    chunks, _ = generate(EXAMPLE, env)
    text = b"".join(chunks).decode()
    objects = [o for o in yaml.safe_load_all(text) if o]
    assert waves(objects)["Pod"] == {"0"} and waves(objects)["PodGroup"] == {"-1"}
