"""Helpers for the host adapter tests: example repos, tool lookup, running the CLI as hosts do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = Path(__file__).resolve().parent / "fixtures" / "minimal"
BUILD_ANNOTATION_PREFIXES = ("config.kubernetes.io/", "internal.config.kubernetes.io/", "config.k8s.io/",
                             "kustomize.config.k8s.io/")


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require_tool(name: str) -> str:
    """Path of a host tool; skip when absent, but FAIL under CI=true (the check must run there)."""
    path = shutil.which(name, path=tool_env()["PATH"])
    if path is None:
        msg = f"{name} is not installed; this host integration test needs the real {name}"
        if on_ci():
            pytest.fail(f"{msg} (CI=true: a missing tool is a failure, install it in .ci/run)")
        pytest.skip(msg)
    return path


def tool_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """os.environ with this interpreter's bin dir first on PATH (where the toporender script lives)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("TOPORENDER_DEBUG", None)
    if extra:
        env.update(extra)
    return env


def example_repos() -> list[Path]:
    """Every example repo the lead ships (examples/*/toporender.yaml) plus our minimal fixture."""
    found = sorted(p.parent for p in (PROJECT / "examples").glob("*/toporender.yaml"))
    return found + [FIXTURE_REPO]


def example_ids() -> list[str]:
    return [p.name for p in example_repos()]


def toporender(*args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None,
               stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("toporender", path=tool_env()["PATH"])
    argv = [exe] if exe else [sys.executable, "-m", "toporender"]
    return subprocess.run(argv + list(args), cwd=cwd, env=tool_env(env), input=stdin if stdin is not None else "",
                          capture_output=True, text=True, timeout=timeout)


def render_cli(repo: Path, *args: str) -> list[dict[str, Any]]:
    """The reference: what ``toporender render`` prints for ``repo``."""
    proc = toporender("render", str(repo), *args)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d is not None]


def strip_build_annotations(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop the annotations kustomize/kpt add for their own bookkeeping (and an emptied map)."""
    out = yaml.safe_load(yaml.safe_dump(obj))
    ann = out.get("metadata", {}).get("annotations")
    if isinstance(ann, dict):
        for key in list(ann):
            if key.startswith(BUILD_ANNOTATION_PREFIXES):
                del ann[key]
        if not ann:
            del out["metadata"]["annotations"]
    return out


def identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace", "")), str(meta.get("name")))


def by_identity(objs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((strip_build_annotations(o) for o in objs), key=identity)


def tree_snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every path under ``root`` with its mode and content, to prove nothing was written."""
    snap: dict[str, tuple[int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            snap[rel] = (st.st_mode, p.read_bytes() if p.is_file() and not p.is_symlink() else b"")
    return snap


def copy_repo(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("golden"))
    return dst
