"""An imitation of the apply step of an Argo CD sync, as precise as the lifecycle tests need.

Follows Argo CD's sync (gitops-engine ``sync/sync_context.go``) and the documented sync options
(``docs/user-guide/sync-options.md``):

- resources are applied in sync-wave order (``argocd.argoproj.io/sync-wave``, default 0), then by kind;
- with the Application's ``ApplyOutOfSyncOnly=true`` a resource equal to its live state is not touched;
- an out-of-sync resource is applied; with ``Replace=true`` it is replaced, and with ``Force=true`` as well
  it is deleted and created again (``kubectl replace --force``), the combination Argo CD's e2e test
  ``TestSyncWithForceReplace`` uses for a change to an immutable field;
- the API server refuses a Pod update that changes anything but its metadata, ``activeDeadlineSeconds``,
  tolerations or container images ("pod updates may not change fields other than ..."), and the sync fails
  with that message (Argo CD issue 5882);
- with prune, live resources that the desired state no longer holds are deleted;
- with ``RespectIgnoreDifferences=true``, the annotations the Application's ``ignoreDifferences`` names are
  left out of the comparison and keep their live values (read from ``argocd/application.yaml``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

SYNC_WAVE = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations")

Identity = tuple[str, str, str, str]


def identity(obj: dict[str, Any]) -> Identity:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


@dataclass
class SyncResult:
    created: list[Identity] = field(default_factory=list)
    updated: list[Identity] = field(default_factory=list)
    replaced: list[Identity] = field(default_factory=list)
    pruned: list[Identity] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _options(obj: dict[str, Any]) -> set[str]:
    raw = obj["metadata"].get("annotations", {}).get(SYNC_OPTIONS, "")
    return {part.strip() for part in raw.split(",") if part.strip()}


def _pod_spec_change_refused(live: dict[str, Any], desired: dict[str, Any]) -> bool:
    def fixed(spec: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
        out["containers"] = [{k: v for k, v in c.items() if k != "image"} for c in spec.get("containers", [])]
        return out

    return fixed(live.get("spec", {})) != fixed(desired.get("spec", {}))


@dataclass
class Cluster:
    """Live objects by identity."""

    live: dict[Identity, dict[str, Any]] = field(default_factory=dict)

    def sync(self, desired: list[dict[str, Any]], *, apply_out_of_sync_only: bool = True,
             prune: bool = True, ignored: dict[str, set[str]] | None = None) -> SyncResult:
        """``ignored``: kind -> annotation keys of the Application's ignoreDifferences."""
        ignored = ignored if ignored is not None else ignored_annotations()
        result = SyncResult()
        order = sorted(range(len(desired)), key=lambda i: (
            int(desired[i]["metadata"].get("annotations", {}).get(SYNC_WAVE, "0")), i))
        for i in order:
            obj = desired[i]
            key = identity(obj)
            live = self.live.get(key)
            if live is None:
                self.live[key] = copy.deepcopy(obj)
                result.created.append(key)
                continue
            skip = ignored.get(obj["kind"], set())
            if skip:
                obj = copy.deepcopy(obj)
                notes = obj["metadata"].setdefault("annotations", {})
                for k in skip:
                    notes.pop(k, None)
                    if k in live["metadata"].get("annotations", {}):
                        notes[k] = live["metadata"]["annotations"][k]
            if apply_out_of_sync_only and live == obj:
                continue
            options = _options(obj)
            if "Replace=true" in options and "Force=true" in options:
                self.live[key] = copy.deepcopy(obj)
                result.replaced.append(key)
                continue
            if obj["kind"] == "Pod" and _pod_spec_change_refused(live, obj):
                result.errors.append(f"Pod \"{key[3]}\" is invalid: spec: Forbidden: pod updates may not change "
                                     "fields other than `spec.containers[*].image`, `spec.activeDeadlineSeconds`, "
                                     "`spec.tolerations` (only additions to existing tolerations)")
                continue
            self.live[key] = copy.deepcopy(obj)
            result.updated.append(key)
        if prune and not result.errors:
            wanted = {identity(o) for o in desired}
            for key in sorted(set(self.live) - wanted):
                del self.live[key]
                result.pruned.append(key)
        return result


def ignored_annotations() -> dict[str, set[str]]:
    """kind -> annotation keys that ``argocd/application.yaml`` lists under ``ignoreDifferences``."""
    from pathlib import Path

    import yaml

    app = yaml.safe_load((Path(__file__).resolve().parents[2] / "argocd" / "application.yaml").read_text())
    assert "RespectIgnoreDifferences=true" in app["spec"]["syncPolicy"]["syncOptions"]
    out: dict[str, set[str]] = {}
    for entry in app["spec"].get("ignoreDifferences", []):
        for pointer in entry.get("jsonPointers", []):
            prefix = "/metadata/annotations/"
            if pointer.startswith(prefix):
                key = pointer[len(prefix):].replace("~1", "/").replace("~0", "~")
                out.setdefault(entry["kind"], set()).add(key)
    return out
