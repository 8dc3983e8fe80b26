"""``toporender argocd generate``: the Argo CD config-management plugin (CMP v2 sidecar) command.

The cmp-server runs this with cwd = the Application's source path inside a fresh, mode-reset
copy of the repo, an empty stdin, and the request environment (see docs/delivery.md):

- ``ARGOCD_APP_NAMESPACE``: target namespace, used when toporender.yaml does not fix one;
- ``ARGOCD_APP_PARAMETERS``: JSON list of the parameters set on the Application (``null`` when
  none; each ``{"name", "string"|"array"|"map"}``); ``PARAM_<NAME>`` is used only when the JSON
  variable is absent (hand runs, old Argo CD);
- ``ARGOCD_ENV_TOPORENDER_<SETTING>``: the same settings from the Application's ``plugin.env``
  (lower precedence than parameters).

stdout carries only manifests (YAML stream, or one JSON object per line with ``output-format:
json``); it is written once, after the render succeeded, so a failure never yields a partial
stream. Bad input exits 1 (an internal error 3) with short ``path:line:col: message`` lines on
stderr (Argo CD shows them in the UI). An empty render exits 0 with a warning on stderr: with auto-sync + prune, zero
manifests delete every object the Application owns. Nothing is written to disk.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toporender.errors import Diagnostic, UserError, fail
from toporender.hosts.common import (
    check_namespace,
    check_repo_relative,
    parse_bool,
)

ENV_PREFIX = "ARGOCD_ENV_TOPORENDER_"


@dataclass(frozen=True)
class Setting:
    """A per-Application setting: its parameter name, plugin.env name and UI announcement."""

    name: str
    env: str
    title: str
    tooltip: str
    choices: tuple[str, ...] = ()
    is_bool: bool = False

    def announcement(self) -> dict[str, Any]:
        """The static ``ParameterAnnouncement`` for argocd/plugin.yaml (UI only)."""
        ann: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "tooltip": self.tooltip,
            "collectionType": "string",
            "required": False,
        }
        if self.choices:
            ann["string"] = self.choices[0]
        # No default for the others: unset means "as toporender.yaml says", not false/empty.
        return ann


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "pool",
        "POOL",
        "Pool",
        "Pool for workflows that name none (overrides default_pool of toporender.yaml).",
    ),
    Setting(
        "inventory",
        "INVENTORY",
        "Inventory file",
        "Node inventory file, relative to the app path (overrides 'inventory' of toporender.yaml).",
    ),
    Setting(
        "strict",
        "STRICT",
        "Strict placement",
        "true: a gang that cannot be placed on the inventory is an error instead of a warning.",
        is_bool=True,
    ),
    Setting(
        "pool-objects",
        "POOL_OBJECTS",
        "Pool-level objects",
        "true: also render the pool-level objects of each pool's scheduler (e.g. KAI Topology and Queue).",
        is_bool=True,
    ),
    Setting(
        "sync-waves",
        "SYNC_WAVES",
        "Sync waves",
        "true: annotate Argo CD sync waves (pool objects -2, PodGroups and group resources -1, Pods 0), so "
        "PodGroups exist before their Pods; pools with on_change: replace have them already.",
        is_bool=True,
    ),
    Setting(
        "output-format",
        "OUTPUT_FORMAT",
        "Output format",
        "yaml (default) or json (one object per line, faster for Argo CD to parse).",
        choices=("yaml", "json"),
    ),
)
BY_NAME = {s.name: s for s in SETTINGS}


def parameter_table() -> str:
    """The Markdown table of :data:`SETTINGS` that ``argocd/README.md`` holds (a test keeps it equal), so the
    documented parameters are the ones the plugin reads."""
    rows = ["| parameter | `plugin.env` name | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | `TOPORENDER_{s.env}` | {s.tooltip} |" for s in SETTINGS]
    return "\n".join(rows) + "\n"
BY_ENV = {s.env: s for s in SETTINGS}


def param_env_name(name: str) -> str:
    """Argo CD's ``PARAM_`` escaping: upper-case, every char outside [A-Z0-9_] becomes ``_``."""
    return "PARAM_" + re.sub(r"[^A-Z0-9_]", "_", name.upper())


def _parameters(raw: str, warnings: list[Diagnostic]) -> dict[str, str]:
    try:
        params = json.loads(raw)
    except RecursionError:
        raise fail("ARGOCD_APP_PARAMETERS is nested too deeply") from None
    except ValueError as exc:
        raise fail(f"ARGOCD_APP_PARAMETERS is not valid JSON: {exc}") from None
    if params is None:
        return {}
    if not isinstance(params, list):
        raise fail("ARGOCD_APP_PARAMETERS must be a JSON list of parameters")
    found: dict[str, str] = {}
    errors: list[Diagnostic] = []
    for p in params:
        name = p.get("name") if isinstance(p, dict) else None
        if not isinstance(name, str):
            errors.append(Diagnostic(f"ARGOCD_APP_PARAMETERS: every parameter needs a 'name', got {p!r}"))
            continue
        if name not in BY_NAME:
            close = difflib.get_close_matches(name, list(BY_NAME), n=1, cutoff=0.75)
            if close:  # a typo of ours: never silently render without the setting the user meant
                errors.append(
                    Diagnostic(
                        f"unknown plugin parameter {name!r}; did you mean {close[0]!r}? known: {', '.join(BY_NAME)}"
                    )
                )
            else:  # somebody else's parameter (shared Application templates): ignore, but say so
                warnings.append(
                    Diagnostic(
                        f"ignoring plugin parameter {name!r}; toporender knows {', '.join(BY_NAME)}", severity="warning"
                    )
                )
            continue
        if p.get("array") or p.get("map"):
            errors.append(Diagnostic(f"plugin parameter {name!r} takes a single string value, not an array or map"))
            continue
        value = p.get("string")
        if value is None or value == "":
            continue  # cleared in the UI: fall back to the repo config
        if not isinstance(value, str):
            errors.append(Diagnostic(f"plugin parameter {name!r} must be a string, got {value!r}"))
            continue
        found[name] = value
    if errors:
        raise UserError(errors)
    return found


def collect_settings(environ: Mapping[str, str], warnings: list[Diagnostic] | None = None) -> dict[str, str]:
    """Raw setting values from the request env: parameters win over ``plugin.env`` entries."""
    values: dict[str, str] = {}
    errors: list[Diagnostic] = []
    for key, value in sorted(environ.items()):
        if not key.startswith(ENV_PREFIX):
            continue
        setting = BY_ENV.get(key[len(ENV_PREFIX) :])
        if setting is None:
            known = ", ".join(ENV_PREFIX + s.env for s in SETTINGS)
            errors.append(
                Diagnostic(
                    f"unknown plugin env {key[len('ARGOCD_ENV_') :]!r}; known: {known.replace('ARGOCD_ENV_', '')}"
                )
            )
        elif value != "":
            values[setting.name] = value
    if errors:
        raise UserError(errors)
    raw = environ.get("ARGOCD_APP_PARAMETERS")
    if raw is not None:
        values.update(_parameters(raw, warnings if warnings is not None else []))
    else:
        for s in SETTINGS:
            value = environ.get(param_env_name(s.name), "")
            if value != "":
                values[s.name] = value
    return values


@dataclass(frozen=True)
class GenerateRequest:
    namespace: str | None
    pool: str | None
    inventory: str | None
    strict: bool | None
    pool_objects: bool | None
    output_format: str
    sync_waves: bool | None = None
    warnings: tuple[Diagnostic, ...] = ()


def parse_request(environ: Mapping[str, str]) -> GenerateRequest:
    warnings: list[Diagnostic] = []
    values = collect_settings(environ, warnings)
    errors: list[Diagnostic] = []

    def flag(name: str) -> bool | None:
        if name not in values:
            return None
        try:
            return parse_bool(values[name], f"plugin parameter {name!r}")
        except UserError as err:
            errors.extend(err.diagnostics)
            return None

    fmt = values.get("output-format", "yaml").strip().lower()
    if fmt not in BY_NAME["output-format"].choices:
        errors.append(Diagnostic(f"plugin parameter 'output-format' must be yaml or json, got {fmt!r}"))
    inventory = values.get("inventory")
    if inventory is not None:
        try:
            inventory = check_repo_relative(inventory, "plugin parameter 'inventory'")
        except UserError as err:
            errors.extend(err.diagnostics)
    strict, pool_objects, sync_waves = flag("strict"), flag("pool-objects"), flag("sync-waves")
    if errors:
        raise UserError(errors)
    pool = values.get("pool")
    namespace = environ.get("ARGOCD_APP_NAMESPACE") or None
    if namespace is not None:
        check_namespace(namespace, "ARGOCD_APP_NAMESPACE (the Application's destination namespace)")
    return GenerateRequest(
        namespace=namespace,
        pool=pool.strip() if pool else None,
        inventory=inventory,
        strict=strict,
        pool_objects=pool_objects,
        output_format=fmt,
        sync_waves=sync_waves,
        warnings=tuple(warnings),
    )


def generate(app_dir: Path, environ: Mapping[str, str]) -> tuple[Sequence[bytes | memoryview], list[Diagnostic]]:
    """Render ``app_dir`` for one Argo CD request; returns (stdout as UTF-8 pieces, warnings)."""
    from toporender.cache import open_store
    from toporender.options import RenderOptions
    from toporender.rerender import render_stream

    req = parse_request(environ)
    options = RenderOptions(
        namespace=req.namespace,
        pool=req.pool,
        inventory=req.inventory,
        strict=req.strict,
        pool_objects=req.pool_objects,
        sync_waves=req.sync_waves,
    )
    out, rendered = render_stream(app_dir, options, req.output_format, open_store(app_dir, environ))
    warnings = [*req.warnings, *rendered]
    if not any(out):
        return [], warnings
    return out, warnings
