"""An imitation of Argo CD's cmp-server (CMP v2 sidecar), as precise as the tests need.

Follows Argo CD's cmpserver (``cmpserver/plugin/plugin.go``, ``reposerver/repository/repository.go``,
``util/app/discovery/discovery.go``) and gitops-engine's ``kube.SplitYAML``:

- plugin.yaml is parsed leniently (YAML -> JSON, keys matched case-insensitively, unknown keys
  ignored); only metadata.name, kind and spec.generate.command are checked;
- the whole repo (``.git`` included) is copied to ``<tmp>/_cmp_server/<uuid>/`` with file modes reset
  to 0644/0755, symlinks recreated relative, and a symlink leaving the tree fails the request;
- discovery: ``fileName`` via a plain glob relative to the app path (no ``**``), else ``find.glob``
  with ``**``, else ``find.command`` (exit 0 and non-empty stdout);
- init then generate run with cwd = app path, empty stdin, env = sidecar env + ARGOCD_APP_* +
  KUBE_* + ARGOCD_ENV_* / ARGOCD_APP_PARAMETERS / PARAM_* (only with a plugin block);
- one deadline for the request (60 s - 100 ms): SIGTERM to the process group, SIGKILL 5 s later;
- non-zero exit -> "`argv` failed exit status N: <trimmed stderr>"; stdout has one trailing newline
  trimmed and is split like NewYAMLOrJSONDecoder: YAML docs on ``---`` lines or a JSON object stream
  when it starts with ``{``; empty/``null`` docs skipped; ``kind`` required; a top-level array is an
  error; objects whose ``items`` is a list are flattened (``items: null`` lists dropped).
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_DEADLINE = 60.0
CMP_TIMEOUT_BUFFER = 0.1
KILL_GRACE = 5.0


class CmpError(Exception):
    """A request failure as the repo-server would report it."""


# ---------------------------------------------------------------------------------------------
# plugin.yaml


def _ci_get(obj: Any, key: str) -> Any:
    """encoding/json field matching: exact key first, then case-insensitive."""
    if not isinstance(obj, dict):
        return None
    if key in obj:
        return obj[key]
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == key.lower():
            return v
    return None


@dataclass
class Command:
    command: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, raw: Any) -> Command:
        return cls([str(x) for x in _ci_get(raw, "command") or []], [str(x) for x in _ci_get(raw, "args") or []])

    @property
    def argv(self) -> list[str]:
        return self.command + self.args


@dataclass
class PluginConfig:
    name: str
    version: str
    init: Command
    generate: Command
    discover_file_name: str
    discover_glob: str
    discover_command: Command
    preserve_file_mode: bool
    static_parameters: list[dict[str, Any]]

    @property
    def socket_name(self) -> str:
        return f"{self.name}-{self.version}" if self.version else self.name


def load_plugin_config(path: Path) -> PluginConfig:
    # yaml.YAMLToJSON then non-strict json.Unmarshal: round-trip through JSON like Go does.
    data = json.loads(json.dumps(yaml.safe_load(path.read_text())))
    meta = _ci_get(data, "metadata") or {}
    spec = _ci_get(data, "spec") or {}
    name = _ci_get(meta, "name") or ""
    if not name:
        raise CmpError("metadata.name is required")
    if _ci_get(data, "kind") != "ConfigManagementPlugin":
        raise CmpError(f"kind must be ConfigManagementPlugin, got {_ci_get(data, 'kind')!r}")
    generate = Command.of(_ci_get(spec, "generate"))
    if not generate.command:
        raise CmpError("spec.generate.command is required")
    discover = _ci_get(spec, "discover") or {}
    find = _ci_get(discover, "find") or {}
    params = _ci_get(spec, "parameters") or {}
    return PluginConfig(
        name=str(name),
        version=str(_ci_get(spec, "version") or ""),
        init=Command.of(_ci_get(spec, "init")),
        generate=generate,
        discover_file_name=str(_ci_get(discover, "fileName") or ""),
        discover_glob=str(_ci_get(find, "glob") or ""),
        discover_command=Command.of(find),
        preserve_file_mode=bool(_ci_get(spec, "preserveFileMode")),
        static_parameters=list(_ci_get(params, "static") or []),
    )


# ---------------------------------------------------------------------------------------------
# Repo materialisation


def materialize(repo: Path, dest_root: Path, preserve_file_mode: bool = False,
                exclusions: tuple[str, ...] = ()) -> Path:
    """Copy ``repo`` like the tar/untar hop does; returns ``<dest_root>/_cmp_server/<uuid>``."""
    out = dest_root / "_cmp_server" / str(uuid.uuid4())
    out.mkdir(parents=True)
    files = 0
    for dirpath, dirnames, filenames in os.walk(repo):
        rel_dir = Path(dirpath).relative_to(repo)
        for name in list(dirnames) + filenames:
            rel = rel_dir / name
            if any(fnmatch.fnmatch(rel.as_posix(), pat) for pat in exclusions):
                if name in dirnames:
                    dirnames.remove(name)
                continue
            src, dst = repo / rel, out / rel
            if src.is_symlink():
                target = os.readlink(src)
                resolved = (src.parent / target).resolve() if not os.path.isabs(target) else Path(target).resolve()
                try:
                    resolved.relative_to(repo.resolve())
                except ValueError:
                    raise CmpError(f"illegal filepath in symlink: {rel.as_posix()} -> {target}") from None
                rel_target = os.path.relpath(out / resolved.relative_to(repo.resolve()), dst.parent)
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(rel_target, dst)
                if name in dirnames:
                    dirnames.remove(name)  # do not descend through a link
                files += 1
            elif src.is_dir():
                dst.mkdir(exist_ok=True)
                os.chmod(dst, stat.S_IMODE(src.stat().st_mode) if preserve_file_mode else 0o755)
            else:
                shutil.copyfile(src, dst)
                os.chmod(dst, stat.S_IMODE(src.stat().st_mode) if preserve_file_mode else 0o644)
                files += 1
    if files == 0:
        raise CmpError(f"no files to send({repo})")
    return out


# ---------------------------------------------------------------------------------------------
# Environment


def param_escape(s: str) -> str:
    return re.sub(r"[^A-Z0-9_]", "_", s.upper())


def envsubst(value: str, build_env: Mapping[str, str]) -> str:
    """os.Expand against the build env only: $VAR / ${VAR}; unknown -> ""; $$ -> $."""
    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(2)
        return build_env.get(name, "")

    return re.sub(r"\$\$|\$\{([^}]*)\}|\$([A-Za-z0-9_]+)", repl, value)


@dataclass
class App:
    """The parts of an Application (and the cluster) that reach the plugin."""

    name: str = "training"
    app_namespace: str = "argocd"              # where the Application object lives
    control_plane_namespace: str = "argocd"
    dest_namespace: str = "training"
    project: str = "default"
    source_path: str = "."
    repo_url: str = "https://git.example.com/ml/repo.git"
    revision: str = "0123456789abcdef0123456789abcdef01234567"
    target_revision: str = "HEAD"
    kube_version: str = ""
    api_versions: list[str] = field(default_factory=list)
    plugin: dict[str, Any] | None = None      # spec.source.plugin: {name?, env?, parameters?}


def build_env(app: App, sidecar_env: Mapping[str, str]) -> dict[str, str]:
    app_name = app.name if app.app_namespace == app.control_plane_namespace else f"{app.app_namespace}_{app.name}"
    build = {
        "ARGOCD_APP_NAME": app_name,
        "ARGOCD_APP_NAMESPACE": app.dest_namespace,
        "ARGOCD_APP_PROJECT_NAME": app.project,
        "ARGOCD_APP_REVISION": app.revision,
        "ARGOCD_APP_REVISION_SHORT": app.revision[:7],
        "ARGOCD_APP_REVISION_SHORT_8": app.revision[:8],
        "ARGOCD_APP_SOURCE_REPO_URL": app.repo_url,
        "ARGOCD_APP_SOURCE_PATH": app.source_path,
        "ARGOCD_APP_SOURCE_TARGET_REVISION": app.target_revision,
    }
    env = dict(sidecar_env)
    env.update(build)
    env["KUBE_VERSION"] = app.kube_version.lstrip("v").split("+")[0].split("-")[0] if app.kube_version else ""
    env["KUBE_API_VERSIONS"] = ",".join(sorted(app.api_versions))
    if app.plugin is not None:
        for e in app.plugin.get("env") or []:
            env[f"ARGOCD_ENV_{e['name']}"] = envsubst(str(e.get("value", "")), build)
        params = app.plugin.get("parameters")
        # Go: json.Marshal of a nil slice after the protobuf hop is "null"; map keys sorted.
        env["ARGOCD_APP_PARAMETERS"] = "null" if params is None else json.dumps(
            [dict(sorted(p.items())) for p in params], separators=(",", ":"))
        for p in params or []:
            pname = param_escape(p["name"])
            if "string" in p:
                env[f"PARAM_{pname}"] = str(p["string"])
            for k, v in (p.get("map") or {}).items():
                env[f"PARAM_{pname}_{param_escape(k)}"] = str(v)
            for i, v in enumerate(p.get("array") or []):
                env[f"PARAM_{pname}_{i}"] = str(v)
    return env


# ---------------------------------------------------------------------------------------------
# Discovery


def run_capture(argv: list[str], cwd: Path, env: Mapping[str, str], deadline: float) -> tuple[int, bytes, bytes]:
    """exec.CommandContext with Setpgid; on the deadline SIGTERM the group, SIGKILL after 5 s."""
    proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    timeout = max(0.0, deadline - time.monotonic())
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=KILL_GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        stderr = err.decode(errors="replace")
        raise CmpError(f"`{shlex.join(argv)}` failed timeout after {timeout:.1f}s: {stderr}") from None
    return proc.returncode, out, err


def matches(cfg: PluginConfig, app_dir: Path, env: Mapping[str, str], deadline: float) -> bool:
    if cfg.discover_file_name:
        return bool(glob.glob(str(app_dir / cfg.discover_file_name)))  # filepath.Glob: no '**'
    if cfg.discover_glob:
        return bool(glob.glob(str(app_dir / cfg.discover_glob), recursive=True))
    if cfg.discover_command.command:
        rc, out, _ = run_capture(cfg.discover_command.argv, app_dir, env, deadline)
        if rc != 0:
            return False
        return out.decode(errors="replace").rstrip("\n") != ""
    return False


# ---------------------------------------------------------------------------------------------
# Output parsing


def split_manifests(stdout: str) -> list[dict[str, Any]]:
    """kube.SplitYAML + the repo-server's List flattening."""
    if stdout.endswith("\n"):
        stdout = stdout[:-1]
    raw_docs: list[Any] = []
    if stdout.lstrip().startswith("{"):
        decoder = json.JSONDecoder()
        idx, text = 0, stdout
        while True:
            while idx < len(text) and text[idx].isspace():
                idx += 1
            if idx >= len(text):
                break
            try:
                obj, idx = decoder.raw_decode(text, idx)
            except json.JSONDecodeError as exc:
                raise CmpError(f"failed to unmarshal manifest: {exc}") from None
            raw_docs.append(obj)
    else:
        chunks = re.split(r"^---[^\n]*$", stdout, flags=re.M)
        for chunk in chunks:
            if not chunk.strip() or chunk.strip() == "null":
                continue
            try:
                raw_docs.append(yaml.safe_load(chunk))
            except yaml.YAMLError as exc:
                raise CmpError(f"failed to unmarshal manifest: {exc}") from None
    objs: list[dict[str, Any]] = []
    for doc in raw_docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise CmpError(f"failed to unmarshal manifest: cannot unmarshal {type(doc).__name__} into an object")
        if not doc.get("kind"):
            raise CmpError(f"failed to unmarshal manifest: Object 'Kind' is missing in '{json.dumps(doc)[:200]}'")
        objs.append(doc)
    flat: list[dict[str, Any]] = []
    for obj in objs:
        if "items" in obj and (isinstance(obj["items"], list) or obj["items"] is None):
            for item in obj["items"] or []:
                if not isinstance(item, dict) or not item.get("kind"):
                    raise CmpError("failed to unmarshal manifest: list item without 'kind'")
                flat.append(item)
        else:
            flat.append(obj)
    return flat


# ---------------------------------------------------------------------------------------------
# A request


@dataclass
class Response:
    manifests: list[dict[str, Any]]
    stdout: str
    stderr: str
    seconds: float
    workdir: Path
    warnings: list[str] = field(default_factory=list)


def generate_manifests(plugin_yaml: Path, repo: Path, app: App, tmp_root: Path,
                       sidecar_env: Mapping[str, str] | None = None, deadline_s: float = DEFAULT_DEADLINE,
                       exclusions: tuple[str, ...] = (), keep_workdir: bool = False) -> Response:
    """One GenerateManifest request, from the repo checkout to the parsed manifest list."""
    start = time.monotonic()
    deadline = start + deadline_s - CMP_TIMEOUT_BUFFER
    cfg = load_plugin_config(plugin_yaml)
    workdir = materialize(repo, tmp_root, cfg.preserve_file_mode, exclusions)
    try:
        app_dir = (workdir / app.source_path).resolve()
        if not app_dir.is_relative_to(workdir.resolve()) or not app_dir.is_dir():
            raise CmpError(f"app path {app.source_path!r} does not exist in the repo")
        env = build_env(app, sidecar_env if sidecar_env is not None else os.environ)
        named = (app.plugin or {}).get("name")
        has_discovery = bool(cfg.discover_file_name or cfg.discover_glob or cfg.discover_command.command)
        if named:
            if named not in (cfg.socket_name,):
                raise CmpError(f'couldn\'t find cmp-server plugin with name "{named}"')
            if has_discovery and not matches(cfg, app_dir, env, deadline):
                raise CmpError(f'could not find cmp-server plugin with name "{named}" supporting the given repository')
        elif not matches(cfg, app_dir, env, deadline):
            raise CmpError("could not find plugin supporting the given repository")
        for step in (cfg.init, cfg.generate):
            if not step.command:
                continue
            rc, out, err = run_capture(step.argv, app_dir, env, deadline)
            if rc != 0:
                stderr = err.decode(errors="replace").strip()
                raise CmpError(f"`{shlex.join(step.argv)}` failed exit status {rc}: {stderr}")
        text = out.decode("utf-8")
        warnings = [] if text.strip() else ["Plugin command returned zero output"]
        manifests = split_manifests(text)
        return Response(manifests, text, err.decode(errors="replace"), time.monotonic() - start, workdir, warnings)
    finally:
        if not keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
