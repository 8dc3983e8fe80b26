"""``toporender diff``: what a change to a workflow repo does, for review.

The working tree and a git revision of the same repo directory are both rendered (the revision is read with
``git archive``, never checked out) and compared gang by gang: gangs added and removed, edited (their
``toporender.dev/gang-revision`` or, under ``on_change: keep``, their objects changed: Argo CD replaces
them), moved to other domains, and newly unplaceable with the reason; the objects that will be replaced; and
the free GPUs of every domain before and after, when the repo has an inventory.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toporender.build.objects import REVISION, SYNC_OPTIONS
from toporender.errors import Position, fail
from toporender.pipeline import RenderResult, plan_repo, render_repo
from toporender.placement.outcomes import PLACEMENT, REASON

MAX_ARCHIVE_BYTES = 512 * 1024 * 1024
GangKey = tuple[str, str]


@dataclass
class GangView:
    """What a review needs of one gang's rendered objects."""

    revision: str
    placement: str | None
    reason: str | None
    objects: dict[str, str] = field(default_factory=dict)
    """identity -> canonical JSON without metadata (under ``on_change: keep``, what tells an edit)."""
    replaceable: list[str] = field(default_factory=list)
    """Objects with Argo CD's Force/Replace sync options: recreated when the gang changes."""


@dataclass
class Review:
    added: list[GangKey] = field(default_factory=list)
    removed: list[GangKey] = field(default_factory=list)
    edited: list[GangKey] = field(default_factory=list)
    moved: list[GangKey] = field(default_factory=list)
    unplaceable: dict[GangKey, str] = field(default_factory=dict)
    replaced: list[str] = field(default_factory=list)
    capacity: list[tuple[str, int | None, int | None]] = field(default_factory=list)
    """(pool/level/domain path, free GPUs before, after) for every domain whose free GPUs changed."""

    def as_dict(self) -> dict[str, Any]:
        def gang(k: GangKey) -> str:
            return f"{k[0]}/{k[1]}"

        return {
            "added": [gang(k) for k in self.added],
            "removed": [gang(k) for k in self.removed],
            "edited": [gang(k) for k in self.edited],
            "moved": [gang(k) for k in self.moved],
            "unplaceable": {gang(k): r for k, r in self.unplaceable.items()},
            "replaced": self.replaced,
            "capacity": [{"domain": d, "free_before": b, "free_after": a} for d, b, a in self.capacity],
        }


def base_tree(root: Path, revision: str, dest: Path) -> Path:
    """The repo directory ``root`` as it is at ``revision``, extracted into ``dest`` (read with git only)."""
    def git(*args: str) -> bytes:
        try:
            proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=120)
        except FileNotFoundError:
            raise fail("git is not installed; toporender diff reads the base revision with git",
                       Position(str(root))) from None
        if proc.returncode != 0:
            message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise fail(f"git {' '.join(args[:2])} failed: {message[-1] if message else 'exit ' + str(proc.returncode)}",
                       Position(str(root)))
        return proc.stdout

    prefix = git("rev-parse", "--show-prefix").decode().strip()
    data = git("archive", "--format=tar", f"{revision}:{prefix}" if prefix else revision)
    if len(data) > MAX_ARCHIVE_BYTES:
        raise fail(f"the repo at {revision} is larger than {MAX_ARCHIVE_BYTES // 2**20} MiB", Position(str(root)))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def gang_views(result: RenderResult) -> dict[GangKey, GangView]:
    views: dict[GangKey, GangView] = {}
    for obj in result.objects:
        meta = obj.get("metadata", {})
        labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
        workflow, group = labels.get("toporender.dev/workflow"), labels.get("toporender.dev/group")
        if not isinstance(workflow, str) or not isinstance(group, str):
            continue
        if "toporender.dev/run" in labels:
            workflow = f"{workflow}-r{labels['toporender.dev/run']}"
        view = views.setdefault((workflow, group), GangView("", None, None))
        ident = f"{obj.get('kind')}/{meta.get('name')}"
        stable = {k: v for k, v in obj.items() if k != "metadata"}
        stable["labels"] = labels
        view.objects[ident] = json.dumps(stable, sort_keys=True)
        if obj.get("kind") == "PodGroup" or PLACEMENT in notes:
            view.placement = notes.get(PLACEMENT, view.placement)
            view.reason = notes.get(REASON, view.reason)
        if "Replace=true" in str(notes.get(SYNC_OPTIONS, "")):
            view.replaceable.append(ident)
        if REVISION in notes:
            view.revision = notes[REVISION]
        elif SYNC_OPTIONS not in notes:
            view.revision = ""
    for view in views.values():
        if not view.revision:
            view.revision = json.dumps(sorted(view.objects.items()))
    return views


def _capacity(root: Path) -> dict[str, int]:
    free: dict[str, int] = {}
    for pool, plan in plan_repo(root):
        for d in plan.domains:
            free[f"{pool}/{d.level}={'/'.join(d.path)}"] = d.free
    return free


def review(before: Path, after: Path) -> Review:
    """Compare the renders (and, with an inventory, the plans) of two copies of a repo."""
    old, new = gang_views(render_repo(before)), gang_views(render_repo(after))
    out = Review()
    out.added = sorted(set(new) - set(old))
    out.removed = sorted(set(old) - set(new))
    for key in sorted(set(old) & set(new)):
        a, b = old[key], new[key]
        if a.revision != b.revision:
            out.edited.append(key)
            out.replaced.extend(sorted(b.replaceable))
        if a.placement != b.placement and a.placement not in (None, "unplaceable") \
                and b.placement not in (None, "unplaceable"):
            out.moved.append(key)
    for key, view in new.items():
        if view.placement == "unplaceable" and (key not in old or old[key].placement != "unplaceable"):
            out.unplaceable[key] = view.reason or "no domain fits"
    free_before, free_after = _capacity(before), _capacity(after)
    for domain in sorted(set(free_before) | set(free_after)):
        was, now = free_before.get(domain), free_after.get(domain)
        if was != now:
            out.capacity.append((domain, was, now))
    return out


def run_diff(root: Path, revision: str) -> Review:
    with tempfile.TemporaryDirectory(prefix="toporender-diff-") as tmp:
        base = base_tree(root, revision, Path(tmp) / "base")
        return review(base, root)


def format_review(r: Review, fmt: str) -> str:
    data = r.as_dict()
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    md = fmt == "markdown"
    lines: list[str] = ["### toporender diff" if md else "toporender diff"]
    rows = [("added", data["added"]), ("removed", data["removed"]), ("edited (replaced on sync)", data["edited"]),
            ("moved to other domains", data["moved"])]
    if md:
        lines += ["", "| change | gangs |", "|---|---|"]
        lines += [f"| {name} | {', '.join(f'`{g}`' for g in gangs) or '-'} |" for name, gangs in rows]
    else:
        lines += [f"  {name:27s} {', '.join(gangs) or '-'}" for name, gangs in rows]
    if data["unplaceable"]:
        lines.append("" if md else "newly unplaceable:")
        if md:
            lines.append("**Newly unplaceable**")
        lines += [f"- `{g}`: {reason}" if md else f"  {g}: {reason}" for g, reason in data["unplaceable"].items()]
    if data["replaced"]:
        lines.append("" if md else "objects replaced on sync:")
        if md:
            lines.append("**Objects replaced on sync**: " + ", ".join(f"`{o}`" for o in data["replaced"]))
        else:
            lines += [f"  {o}" for o in data["replaced"]]
    if data["capacity"]:
        if md:
            lines += ["", "| domain | free GPUs before | after |", "|---|---|---|"]
            lines += [f"| `{c['domain']}` | {c['free_before']} | {c['free_after']} |" for c in data["capacity"]]
        else:
            lines.append("free GPUs per domain (before -> after):")
            lines += [f"  {c['domain']}: {c['free_before']} -> {c['free_after']}" for c in data["capacity"]]
    return "\n".join(lines) + "\n"


def gate(r: Review, fail_on: set[str]) -> bool:
    """Whether the review trips a CI gate (``unplaceable``, ``moved``, ``removed``, ``edited``)."""
    return bool(("unplaceable" in fail_on and r.unplaceable) or ("moved" in fail_on and r.moved)
                or ("removed" in fail_on and r.removed) or ("edited" in fail_on and r.edited))
