"""Input models: OSMO-style workflow documents and the repo config (``toporender.yaml``).

Every model forbids unknown fields so a typo is an error with a position, not a silently
ignored setting. Field names follow OSMO where OSMO has the concept, so existing workflow files
load unchanged.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$"
KEY_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$"
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"

Name = Annotated[str, Field(min_length=1, max_length=63, pattern=NAME_PATTERN)]
_NOT_IN_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")
_LABEL_ENDS = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


_DURATION = re.compile(r"^(\d+)(d|h|m|s)$")
_ISO_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def duration_seconds(value: Any) -> int:
    """Whole seconds of an OSMO duration: a number of seconds, ``90s``, ``30m``, ``2h``, ``1d`` or ISO 8601
    ``PT1H30M``; at least one second."""
    seconds: int | None = None
    if isinstance(value, bool):
        seconds = None
    elif isinstance(value, int):
        seconds = value
    elif isinstance(value, str):
        short = _DURATION.match(value)
        iso = _ISO_DURATION.match(value) if value not in ("P", "PT") and not value.endswith("T") else None
        if short:
            seconds = int(short.group(1)) * _UNIT_SECONDS[short.group(2)]
        elif iso:
            d, h, m, s = (int(x or 0) for x in iso.groups())
            seconds = ((d * 24 + h) * 60 + m) * 60 + s
    if seconds is None or not 1 <= seconds <= 10**10:
        raise ValueError("must be a duration of at least 1 s: seconds, or e.g. '90s', '30m', '2h', '1d', 'PT1H30M'")
    return seconds


def submitter_label(value: str) -> str:
    """``alice@example.com`` -> ``alice``: the user part, other characters as ``-``, cut to 63, ends alphanumeric."""
    label = _LABEL_ENDS.sub("", _NOT_IN_LABEL.sub("-", value.split("@", 1)[0])[:63])
    if not label:
        raise ValueError("needs a user name or an e-mail address, e.g. 'alice' or 'alice@example.com'")
    return label
LabelKey = Annotated[str, Field(min_length=1, max_length=316, pattern=LABEL_KEY_PATTERN)]
LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]
DnsLabel = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
Quantity = Annotated[str, Field(max_length=64, pattern=QUANTITY_PATTERN)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# ---------------------------------------------------------------------------------------------
# Workflow documents (OSMO ``WorkflowSpec`` subset)


class TopologyRequirement(Strict):
    """One level a task's pods must (or should) share with the other pods of its ``group``."""

    key: Annotated[str, Field(min_length=1, max_length=63)]
    group: Annotated[str, Field(min_length=1, max_length=63, pattern=NAME_PATTERN)] = "default"
    requirementType: Literal["required", "preferred"] = "required"


class ResourceSpec(Strict):
    """Per-pod resources and topology requirements, shared by every task that names it."""

    cpu: Annotated[float, Field(gt=0, le=100_000)] | None = None
    gpu: Annotated[int, Field(ge=0, le=1024)] | None = None
    memory: Quantity | int | None = None
    storage: Quantity | int | None = None
    platform: Name | None = None
    nodesExcluded: list[Annotated[str, Field(max_length=253)]] = Field(default_factory=list, max_length=10_000)
    topology: list[TopologyRequirement] = Field(default_factory=list, max_length=16)

    @field_validator("cpu", "gpu", "memory", "storage", mode="before")
    @classmethod
    def _not_a_boolean(cls, v: object) -> object:
        if isinstance(v, bool):
            raise ValueError(f"{str(v).lower()} is a boolean, not a quantity (YAML reads unquoted yes, no, true, "
                             "false, on, off as booleans); write a number")
        return v

    @field_validator("memory", "storage")
    @classmethod
    def _bounded(cls, v: str | int | None) -> str | int | None:
        if isinstance(v, int) and not 0 <= v <= 10**15:
            raise ValueError("must be between 0 and 10**15 (KiB)")
        return v


class FileSpec(Strict):
    """OSMO's task file: text (or base64 when ``base64``) put at an absolute path in the task's container."""

    path: Annotated[str, Field(min_length=2, max_length=1024, pattern=r"^/[^\x00]*[^/]$")]
    contents: str = Field(max_length=1024 * 1024)
    base64: bool = False

    @field_validator("contents", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        """As OSMO does, a number written without quotes is its text."""
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _decodes(self) -> FileSpec:
        if self.base64:
            try:
                base64.b64decode(self.contents.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError, ValueError):
                raise ValueError("contents are not valid base64 (set base64: false for text)") from None
        return self


class TaskSpec(Strict):
    name: Name
    resource: Name = "default"
    image: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    command: list[str] = Field(default_factory=list, max_length=1000)
    args: list[str] = Field(default_factory=list, max_length=10_000)
    env: dict[Annotated[str, Field(pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$", max_length=256)], str] = Field(
        default_factory=dict
    )
    environment: dict[Annotated[str, Field(pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$", max_length=256)], str] = Field(
        default_factory=dict
    )
    lead: bool = False
    files: list[FileSpec] = Field(default_factory=list, max_length=100)

    @model_validator(mode="before")
    @classmethod
    def _fold_environment(cls, data: Any) -> Any:
        """OSMO's ``environment`` and toporender's ``env`` are one container env: folded into ``env`` here, so
        nothing downstream reads ``environment`` (a clash is left for :meth:`_one_value_per_variable`)."""
        if not isinstance(data, dict):
            return data
        environment, env = data.get("environment"), data.get("env", {})
        if not isinstance(environment, dict) or not environment or not isinstance(env, dict):
            return data
        if any(k in env and env[k] != v for k, v in environment.items()):
            return data
        return {**data, "env": {**environment, **env}, "environment": {}}

    @model_validator(mode="after")
    def _one_value_per_variable(self) -> TaskSpec:
        if self.environment:  # most tasks have neither; a large repo validates hundreds of thousands
            clash = sorted(k for k, v in self.environment.items() if k in self.env and self.env[k] != v)
            if clash:
                raise ValueError(f"environment and env give {', '.join(clash)} different values; keep one")
        if len(self.files) > 1:
            paths = [f.path for f in self.files]
            twice = sorted({p for p in paths if paths.count(p) > 1})
            if twice:
                raise ValueError(f"files: {', '.join(twice)} is given twice; each path holds one file")
        return self


class TimeoutSpec(Strict):
    """OSMO's workflow timeouts: ``exec_timeout`` bounds each task's run (a Pod's ``activeDeadlineSeconds``)."""

    exec_timeout: int | str | None = None

    @field_validator("exec_timeout", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        if value is not None:
            duration_seconds(value)
        return value

    @property
    def exec_seconds(self) -> int | None:
        return None if self.exec_timeout is None else duration_seconds(self.exec_timeout)


class GroupSpec(Strict):
    name: Name
    tasks: list[TaskSpec] = Field(min_length=1, max_length=100_000)


class WorkflowSpec(Strict):
    name: Name
    pool: Name | None = None
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    groups: list[GroupSpec] | None = Field(default=None, min_length=1)
    tasks: list[TaskSpec] | None = Field(default=None, min_length=1)
    resources: dict[Name, ResourceSpec] | None = None
    timeout: TimeoutSpec = Field(default_factory=lambda: TimeoutSpec())
    run: Annotated[int, Field(ge=1, le=999_999)] = 1
    """The run key: bumping it gives every object of the workflow a new identity, so a finished workflow runs
    again under its own name (toporender's own field; OSMO submits a new run instead)."""

    @model_validator(mode="after")
    def _groups_or_tasks(self) -> WorkflowSpec:
        if (self.groups is None) == (self.tasks is None):
            raise ValueError("set exactly one of 'groups' or 'tasks'")
        return self


class WorkflowDocument(Strict):
    """A workflow file. ``resources`` may sit under ``workflow:`` (OSMO) or beside it (design docs)."""

    version: Literal[2] = 2
    workflow: WorkflowSpec
    resources: dict[Name, ResourceSpec] | None = None

    @model_validator(mode="after")
    def _one_resources(self) -> WorkflowDocument:
        if self.resources is not None and self.workflow.resources is not None:
            raise ValueError("'resources' is set both under 'workflow:' and beside it; keep one")
        return self


# ---------------------------------------------------------------------------------------------
# Repo config (toporender.yaml)


class TopologyKey(Strict):
    """A topology level of a pool: the name workflows use and the node label that defines it."""

    key: Annotated[str, Field(min_length=1, max_length=63, pattern=KEY_PATTERN)]
    label: LabelKey
    layer: Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z][A-Za-z0-9]*$")] | None = None


class PlatformConfig(Strict):
    override_pod_template: list[Name] = Field(default_factory=list)


class GangSettings(Strict):
    """Koordinator gang settings, validated here because Koordinator silently defaults bad values."""

    mode: Literal["Strict", "NonStrict"] | None = None
    waiting_time: Annotated[str, Field(pattern=r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")] | None = None
    schedule_timeout_seconds: Annotated[int, Field(ge=1, le=2_147_483_647)] | None = None
    match_policy: Literal["only-waiting", "waiting-and-running", "once-satisfied"] | None = None


class QueueSettings(Strict):
    parent: DnsLabel | None = None
    gpu_quota: Annotated[int, Field(ge=-1)] = -1
    gpu_limit: Annotated[int, Field(ge=-1)] = -1
    gpu_over_quota_weight: Annotated[int, Field(ge=0)] = 1


class PoolConfig(Strict):
    description: str = ""
    backend: Literal["kai", "koordinator", "kueue", "volcano", "kube"] = "kai"
    on_change: Literal["replace", "keep"] = "replace"
    """What Argo CD does with a gang whose workflow changed: replace it as a whole, or keep the running objects
    (an edited Pod then fails to sync; see docs/delivery.md)."""
    queue: DnsLabel | None = None
    queue_settings: QueueSettings = QueueSettings()
    priority_class: DnsLabel | None = None
    preemptibility: Literal["preemptible", "non-preemptible"] | None = None
    scheduler_name: DnsLabel | None = None
    kai_version: Literal["v0.14", "v0.15"] = "v0.14"
    kueue_version: Literal["v0.15", "v0.19"] = "v0.19"
    """Kueue release line: ``v0.19`` renders up to three nested slice layers (TASMultiLayerTopology, on by
    default from v0.19); ``v0.15`` (v0.15 to v0.18) one slice layer."""
    topology_name: DnsLabel | None = None
    topology_keys: list[TopologyKey] = Field(default_factory=list, max_length=16)
    render_pool_objects: bool = False
    default_image: Annotated[str, Field(min_length=1, max_length=1024)] = "ubuntu:24.04"
    node_selector: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    inventory: str | None = None
    pin: Literal["none", "soft", "hard"] = "none"
    strict: bool = False
    gang: GangSettings = GangSettings()
    common_pod_template: list[Name] = Field(default_factory=list)
    common_group_templates: list[Name] = Field(default_factory=list)
    default_platform: Name | None = None
    platforms: dict[Name, PlatformConfig] = Field(default_factory=dict)


DEFAULT_ALLOWED_KINDS = (
    "ConfigMap", "Secret", "Service", "PersistentVolumeClaim",
    "ResourceClaim.resource.k8s.io", "ResourceClaimTemplate.resource.k8s.io",
    "ComputeDomain.resource.nvidia.com",
    "PodGroup.scheduling.run.ai", "PodGroup.scheduling.sigs.k8s.io", "PodGroup.scheduling.volcano.sh",
)


class Policy(Strict):
    """What the repo's templates may create (``policy:`` in ``toporender.yaml``; see docs/security.md)."""

    allowed_kinds: list[Annotated[str, Field(min_length=1, max_length=253)]] = Field(
        default_factory=lambda: list(DEFAULT_ALLOWED_KINDS), max_length=1000)
    """Kinds a group template may render, as ``Kind`` (core group) or ``Kind.group``; ``*`` allows any."""
    pod_security: Literal["baseline", "restricted", "privileged"] = "baseline"
    """The Kubernetes Pod Security Standard every rendered Pod meets."""


class RepoConfig(Strict):
    """``toporender.yaml``: where workflows live and how each pool renders them."""

    version: Literal[1] = 1
    namespace: DnsLabel | None = None
    workflows: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        default_factory=lambda: ["workflows/**/*.yaml", "workflows/**/*.yml"], min_length=1
    )
    default_pool: Name | None = None
    inventory: str | None = None
    golden_dir: str = "golden"
    submitted_by: Annotated[str, Field(min_length=1, max_length=253)] | None = None
    sync_waves: bool = False
    allow_empty: bool = False
    osmo_labels: bool = False
    pools: dict[Name, PoolConfig] = Field(min_length=1)
    pod_templates: dict[Name, dict[str, Any]] = Field(default_factory=dict)
    group_templates: dict[Name, dict[str, Any]] = Field(default_factory=dict)
    policy: Policy = Policy()

    @field_validator("submitted_by")
    @classmethod
    def _submitter(cls, value: str | None) -> str | None:
        """OSMO's rule: a user, or the part of an e-mail address before ``@``, as a label value."""
        return None if value is None else submitter_label(value)
