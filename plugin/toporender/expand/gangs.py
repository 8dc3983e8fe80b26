"""Validate workflows against the repo config and expand each task group into a :class:`Gang`.

A ``Gang`` is everything the later stages need about one task group (names, uuids, pool,
resources, topology), so packing and the backends never look at raw input again.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Final

from toporender.errors import DiagnosticSink, Position, fail
from toporender.expand.key_order import order_problem
from toporender.expand.naming import dns1035_label, dns_label, is_dns_label, normalize, uid, uid_text, workflow_uuid
from toporender.expand.topology import GroupTopology, expand_group
from toporender.load.models import PoolConfig, RepoConfig, ResourceSpec, TaskSpec
from toporender.load.repo import CONFIG_FILE, Repo, WorkflowFile
from toporender.load.yaml_source import Loc

IDENTITY = ("WF_TASK_NAME", "WF_TASK_UUID", "WF_POD_NAME", "WF_HOSTNAME", "USER_CONTAINER_NAME")
"""Template variables that name one task (see :mod:`toporender.build.pod_shapes`)."""


@dataclass(slots=True, unsafe_hash=True)
class Task:
    """One task of a gang with its names.

    Never changed once expanded (mypy holds its ``Final`` fields to that), but not a frozen dataclass: building
    one costs four times as long, and there is one per Pod."""

    spec: Final[TaskSpec]
    resource: Final[ResourceSpec]
    uuid: Final[str]
    pod_name: Final[str]
    hostname: Final[str]
    container: Final[str]

    def identity(self) -> dict[str, str]:
        """The values of :data:`IDENTITY` for this task, in that order."""
        return {"WF_TASK_NAME": self.spec.name, "WF_TASK_UUID": self.uuid, "WF_POD_NAME": self.pod_name,
                "WF_HOSTNAME": self.hostname, "USER_CONTAINER_NAME": self.container}


@dataclass(frozen=True)
class Gang:
    """One task group of one workflow, ready to render."""

    source: str
    workflow: WorkflowFile
    name: str
    uuid: str
    workflow_uuid: str
    namespace: str
    pool_name: str
    pool: PoolConfig
    tasks: tuple[Task, ...]
    topology: GroupTopology
    service_name: str | None
    loc: Loc

    @property
    def pos(self) -> Position:
        """Where the group is written; worked out only when a message needs it."""
        return self.workflow.pos(self.loc)

    @property
    def key(self) -> str:
        return f"{self.source}#{self.name}"

    @property
    def podgroup_name(self) -> str:
        return self.uuid

    @cached_property
    def labels(self) -> Mapping[str, str]:
        """Labels we put on every object of the gang (ours win over templates); read-only, shared."""
        labels = {"toporender.dev/workflow": self.workflow.name, "toporender.dev/group": self.name}
        if self.workflow.spec.workflow.run != 1:
            labels["toporender.dev/run"] = str(self.workflow.spec.workflow.run)
        return MappingProxyType(labels)


def resolve_namespace(config: RepoConfig, override: str | None) -> str:
    ns = config.namespace or override or "default"
    if not is_dns_label(ns):
        raise fail(f"namespace {ns!r} is not a valid Kubernetes namespace; use lower-case letters, digits and '-'")
    return ns


def check_config(repo: Repo, sink: DiagnosticSink) -> None:
    """Cross-field checks of toporender.yaml that the models cannot express."""
    cfg, doc = repo.config, repo.config_doc
    if cfg.default_pool is not None and cfg.default_pool not in cfg.pools:
        sink.error(f"default_pool '{cfg.default_pool}' is not a pool; pools: {', '.join(cfg.pools)}",
                   doc.pos(("default_pool",)))
    for name, pool in cfg.pools.items():
        loc = ("pools", name)
        if pool.topology_keys and pool.backend == "kube":
            sink.error(f"pool '{name}' has topology_keys but backend 'kube' has no topology-aware gang scheduling; "
                       "use backend 'kai', 'koordinator', 'kueue' or 'volcano', or remove topology_keys",
                       doc.pos(loc + ("topology_keys",)))
        for field in ("key", "label"):
            seen: set[str] = set()
            for i, k in enumerate(pool.topology_keys):
                value = getattr(k, field)
                if value in seen:
                    sink.error(f"topology {field} '{value}' appears twice in pool '{name}'; each level needs its own",
                               doc.pos(loc + ("topology_keys", i, field)))
                seen.add(value)
        problem = order_problem(pool.topology_keys)
        if problem is not None:
            sink.error(f"pool '{name}': {problem}", doc.pos(loc + ("topology_keys",)))
        for i, tmpl in enumerate(pool.common_pod_template):
            if tmpl not in cfg.pod_templates:
                sink.error(f"pool '{name}' uses unknown pod template '{tmpl}'; define it under pod_templates",
                           doc.pos(loc + ("common_pod_template", i)))
        for i, tmpl in enumerate(pool.common_group_templates):
            if tmpl not in cfg.group_templates:
                sink.error(f"pool '{name}' uses unknown group template '{tmpl}'; define it under group_templates",
                           doc.pos(loc + ("common_group_templates", i)))
        for pname, platform in pool.platforms.items():
            for i, tmpl in enumerate(platform.override_pod_template):
                if tmpl not in cfg.pod_templates:
                    sink.error(f"platform '{pname}' uses unknown pod template '{tmpl}'; define it under pod_templates",
                               doc.pos(loc + ("platforms", pname, "override_pod_template", i)))
        if pool.default_platform is not None and pool.default_platform not in pool.platforms:
            sink.error(f"default_platform '{pool.default_platform}' is not a platform of pool '{name}'",
                       doc.pos(loc + ("default_platform",)))


def pick_pool(repo: Repo, wf: WorkflowFile, override: str | None, sink: DiagnosticSink) -> str | None:
    cfg = repo.config
    name = wf.spec.workflow.pool or override or cfg.default_pool
    if name is None:
        if len(cfg.pools) == 1:
            return next(iter(cfg.pools))
        sink.error(f"workflow has no pool and toporender.yaml has no default_pool; set workflow.pool to one of: "
                   f"{', '.join(cfg.pools)}", wf.pos(("workflow",)))
        return None
    if name not in cfg.pools:
        where = wf.pos(("workflow", "pool")) if wf.spec.workflow.pool else Position(CONFIG_FILE)
        sink.error(f"pool '{name}' is not defined in toporender.yaml; pools: {', '.join(cfg.pools)}", where)
        return None
    return name


def _check_names(wf: WorkflowFile, sink: DiagnosticSink) -> None:
    """OSMO: group and task names are unique per workflow, compared case-insensitively with _ = -."""
    seen_groups: dict[str, str] = {}
    seen_tasks: dict[str, str] = {}
    for group in wf.groups():
        g = normalize(group.spec.name)
        if g in seen_groups:
            sink.error(f"group name '{group.spec.name}' duplicates '{seen_groups[g]}' (names compare "
                       "case-insensitively with '_' equal to '-'); rename one", wf.pos(group.loc + ("name",)))
        seen_groups.setdefault(g, group.spec.name)
        for task, tloc in zip(group.spec.tasks, group.task_locs):
            t = normalize(task.name)
            if t in seen_tasks:
                sink.error(f"task name '{task.name}' duplicates '{seen_tasks[t]}' (names compare "
                           "case-insensitively with '_' equal to '-'); rename one", wf.pos(tloc + ("name",)))
            seen_tasks.setdefault(t, task.name)
            if task.resource not in wf.resources:
                known = ", ".join(wf.resources) or "none"
                sink.error(f"task '{task.name}' uses resource '{task.resource}' which is not defined; "
                           f"defined resources: {known}", wf.pos(tloc + ("resource",)))


def _tasks(tasks: list[TaskSpec], wf: WorkflowFile, group_uuid: uuid.UUID) -> tuple[Task, ...]:
    """The group's tasks with their names and uuids; what every task of the group shares is worked out once."""
    resources, run_name, parent = wf.resources, wf.run_name, group_uuid.bytes
    out = []
    for t in tasks:
        label = dns_label(t.name)
        out.append(Task(t, resources.get(t.resource) or ResourceSpec(), uid_text(parent, normalize(t.name)),
                        dns_label(f"{run_name}-{t.name}"), label, label))
    return tuple(out)


def expand(repo: Repo, *, namespace: str | None = None, pool: str | None = None,
           sink: DiagnosticSink, names: dict[str, str] | None = None) -> list[Gang]:
    """All gangs of the repo in stream order: workflows by path, groups in file order.

    ``names`` (workflow name -> file) carries the check that names are unique across calls that expand a repo
    one workflow at a time."""
    ns = resolve_namespace(repo.config, namespace)
    gangs: list[Gang] = []
    names = {} if names is None else names
    for wf in repo.workflows:
        key = normalize(wf.name)
        if key in names:
            sink.error(f"workflow name '{wf.name}' is also used by {names[key]}; workflow names must be "
                       "unique in a repo", wf.pos(("workflow", "name")))
            continue
        names[key] = wf.source
        _check_names(wf, sink)
        pool_name = pick_pool(repo, wf, pool, sink)
        if pool_name is None:
            continue
        pool_cfg = repo.config.pools[pool_name]
        wf_uuid = workflow_uuid(ns, wf.run_name)
        for group in wf.groups():
            errors = len(sink.errors)
            topo = expand_group(wf, group, pool_name, pool_cfg, sink)
            if len(sink.errors) > errors:
                continue
            g_uuid = uid(wf_uuid, normalize(group.spec.name))
            tasks = _tasks(group.spec.tasks, wf, g_uuid)
            service = dns1035_label(f"{wf.run_name}-{group.spec.name}") if len(tasks) > 1 else None
            gangs.append(Gang(wf.source, wf, group.spec.name, str(g_uuid), str(wf_uuid), ns, pool_name, pool_cfg,
                              tasks, topo, service, group.loc))
    return gangs
