"""Pods by task shape: the base pod and the pod templates merged once, then one build per task.

The tasks of a gang mostly differ only in their own strings: their identity (task name and UUID,
pod name, hostname, container name), the image, command and arguments, environment values, and
the backend's per-task label and annotation values (the subgroup). Everything else, namely which
of those fields are set, the resource's requests, the platform and its templates, and every
other value of the merged pod, is shared by all tasks of one *shape*.

Rendering every pod the general way (base pod, every pod template rendered and merged, labels
merged) repeats the same decisions for thousands of pods. Here they are taken once per shape:
1. The shape's pod is built and merged with the task's own strings as *slots*, and every template
   string that uses no identity value is rendered there and then.
2. The merged pod becomes one Python expression that builds it. Its constants are passed by
   index, so no input text ever becomes source code. It is compiled once per distinct expression,
   so every gang of the same structure shares one builder.
3. Each task's pod is one call of that builder.

This is done only where the outcome provably does not depend on the slots' values. Otherwise
:class:`Undecided` is raised and those tasks are rendered the general way, which also reports
every template problem. Undecided cases:
- a template string that does more than plain ``{{ NAME }}`` references to an identity value;
- a list merged by ``name`` where a slot could equal another name;
- a set-like list item holding a slot;
- anything a template check would report;
- a value that is not a plain YAML scalar, mapping or list.
"""

from __future__ import annotations

from collections import ChainMap, Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, TypeAlias, cast

from toporender.build.pods import base_pod, finish_pod
from toporender.build.templates.apply import pod_template_names
from toporender.build.templates.engine import LENGTH_REF, TemplateFailure, compile_string, format_string, simple_parts
from toporender.build.templates.merge import SET_LISTS, merge_pod
from toporender.build.templates.policy import police_pod_patch
from toporender.errors import DiagnosticSink, Position
from toporender.expand.gangs import IDENTITY, Gang, Task
from toporender.load.models import RepoConfig
from toporender.load.repo import CONFIG_FILE
from toporender.load.yaml_source import Loc
from toporender.placement.compiled import search_over

_IDENTITY = frozenset(IDENTITY)
_MAX_NODES = 10_000
_MAX_DEPTH = 48
_SCALARS = (str, int, float, bool, type(None))


class Undecided(Exception):
    """The shape's pod could depend on a slot's value in a way slots do not express."""


@dataclass(slots=True, unsafe_hash=True)
class Ref:
    """Slot for one per-task string: ``source`` names where it comes from, ``key`` which one.

    Sources: ``identity`` (:data:`~toporender.expand.gangs.IDENTITY`), ``image``, ``command`` and ``args``
    (by position), ``env`` (by name), ``labels`` and ``annotations`` (the backend's, by key). Not a frozen
    dataclass, which takes four times as long to build (see :class:`~toporender.expand.gangs.Task`)."""

    source: Final[str]
    key: Final[Any] = None


@dataclass(frozen=True)
class Fmt:
    """Slot for a template string that uses identity values: ``str.format_map`` over the task's template
    variables, as the general path renders it."""

    fmt: str


_SLOTS = (Ref, Fmt)
Builder: TypeAlias = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class PodShape:
    """A compiled builder for one shape's pod and the constants it reads."""

    build: Builder
    constants: tuple[Any, ...]
    uses_variables: bool
    """Whether a slot needs the task's full template variables (an :class:`Fmt`)."""
    fixed_tolerations: bool = False
    """Whether the pod's tolerations use no per-task value, so every pod of the shape tolerates the same."""


def shape_key(task: Task, labels: Mapping[str, str], annotations: Mapping[str, str] | None) -> tuple[Any, ...]:
    """Everything a task's pod depends on but its own strings: which task fields are set (and the env
    names), the lead flag, what the pod takes from the resource (requests, and the platform whose
    templates apply, the excluded nodes; not its name or topology, which reach the pod only as the backend's
    labels), and which labels and annotations the backend adds."""
    spec, res = task.spec, task.resource
    return (spec.image is None, len(spec.command), len(spec.args), tuple(spec.env), spec.lead,
            res.cpu, res.gpu, res.memory, res.storage, res.platform, tuple(res.nodesExcluded), tuple(labels),
            tuple(annotations or ()))


class PodShapes:
    """The pods of one gang's tasks that share their shape with another task.

    A task alone in its shape (usually the lead) gets None from :meth:`pod`: one pod does not pay for a
    merge, so the caller builds it the general way, as it does for every task of an undecided shape.
    Each pod is correct either way, so mixing the two paths within a gang changes nothing."""

    def __init__(self, gang: Gang, config: RepoConfig, scheduler_name: str | None,
                 pod_labels: Mapping[str, Mapping[str, str]], pod_annotations: Mapping[str, Mapping[str, str]],
                 variables: Callable[[], dict[str, Any]]):
        self.gang, self.config, self.scheduler_name, self.variables = gang, config, scheduler_name, variables
        self.labels = [pod_labels.get(t.spec.name, {}) for t in gang.tasks]
        self.annotations = [pod_annotations.get(t.spec.name) or {} for t in gang.tasks]
        self.keys = [shape_key(t, lab, ann) for t, lab, ann in zip(gang.tasks, self.labels, self.annotations)]
        self.shared = {key for key, n in Counter(self.keys).items() if n > 1}
        self.shapes: dict[tuple[Any, ...], PodShape | None] = {}

    def tolerations_shared(self, index: int) -> bool:
        """Whether task ``index``'s pod tolerates what every pod of its shape tolerates (see :meth:`pod`)."""
        shape = self.shapes.get(self.keys[index])
        return shape is not None and shape.fixed_tolerations

    def pod(self, index: int) -> dict[str, Any] | None:
        """Task ``index``'s pod from its shape, or None when the caller must build it the general way."""
        key = self.keys[index]
        if key not in self.shared or self.gang.tasks[index].spec.files:
            return None
        if key not in self.shapes:
            try:
                self.shapes[key] = build_shape(self.gang, index, self.config, self.scheduler_name,
                                               self.labels[index], self.annotations[index], self.variables)
            except Undecided:
                self.shapes[key] = None
        shape = self.shapes[key]
        if shape is None:
            return None
        task = self.gang.tasks[index]
        identity = task.identity()
        variables: Mapping[str, Any] | None = None
        if shape.uses_variables:
            group = self.variables()
            variables = ChainMap(group["TASKS"][index], group)
        return shape.build(shape.constants, identity, task.spec, self.labels[index], self.annotations[index],
                           variables)


def build_shape(gang: Gang, index: int, config: RepoConfig, scheduler_name: str | None,
                labels: Mapping[str, str], annotations: Mapping[str, str],
                variables: Callable[[], dict[str, Any]]) -> PodShape:
    """The pod of task ``index``'s shape with its own strings as slots, merged as the general path merges."""
    task = gang.tasks[index]
    spec = task.spec
    slotted = spec.model_copy(update={
        "image": None if spec.image is None else Ref("image"),
        "command": [Ref("command", i) for i in range(len(spec.command))],
        "args": [Ref("args", i) for i in range(len(spec.args))],
        "env": {k: Ref("env", k) for k in spec.env},
    })
    pod = base_pod(gang, replace(task, spec=slotted), scheduler_name,
                   {name: Ref("identity", name) for name in IDENTITY})
    names = pod_template_names(config, gang.pool_name, task.resource.platform)
    if names:
        group = variables()
        shared = {**group, **{k: v for k, v in group["TASKS"][index].items() if k not in _IDENTITY}}
        for name in names:
            patch = _symbolic(config.pod_templates[name], shared, ("pod_templates", name))
            checks = DiagnosticSink()
            police_pod_patch(name, patch, gang.namespace, lambda loc: Position(CONFIG_FILE), checks, set())
            if checks.errors or checks.warnings:
                raise Undecided(f"pod template '{name}' sets what the template checks report or drop")
            _check_comparisons([pod], [patch])
            pod = merge_pod(pod, patch)
    meta = pod.get("metadata")
    if not isinstance(meta, dict) or not all(isinstance(meta.get(f, {}), dict) for f in ("labels", "annotations")):
        raise Undecided("a template replaced the pod's metadata, labels or annotations")
    finish_pod(pod, gang, Ref("identity", "WF_TASK_NAME"), {k: Ref("labels", k) for k in labels},
               {k: Ref("annotations", k) for k in annotations})
    pod_spec = pod.get("spec")
    fixed = not _has_slot(pod_spec.get("tolerations") if isinstance(pod_spec, dict) else pod_spec)
    return replace(_compile_shape(pod), fixed_tolerations=fixed)


def _symbolic(value: Any, shared: Mapping[str, Any], path: Loc) -> Any:
    """A pod template with every string rendered that uses no identity value, and slots for the rest."""
    if isinstance(value, str):
        return _symbolic_string(value, shared, path) if "{" in value else value
    if isinstance(value, dict):
        return {k: _symbolic(v, shared, path + (k,)) for k, v in value.items()}
    if isinstance(value, list):
        return [_symbolic(v, shared, path + (i,)) for i, v in enumerate(value)]
    return value


def _symbolic_string(value: str, shared: Mapping[str, Any], path: Loc) -> Any:
    length = LENGTH_REF.fullmatch(value)
    parts = simple_parts(value)
    used = (length.group(1),) if length else parts[1::2] if parts is not None else None
    if used is None:
        raise Undecided("a template value uses Jinja beyond {{ NAME }}")
    if _IDENTITY.isdisjoint(used):
        try:
            return compile_string(value, path)(shared)
        except TemplateFailure as exc:
            raise Undecided("a template value fails to render") from exc
    if length or parts is None or any(n not in _IDENTITY and n not in shared for n in used):
        raise Undecided("a template value uses an identity value in a way slots do not express")
    if len(parts) == 3 and not parts[0].strip() and not parts[2].strip():
        return Ref("identity", parts[1])
    return Fmt(format_string(parts))


def _check_comparisons(bases: list[Any], patches: list[Any], key: Any = None) -> None:
    """Raise :class:`Undecided` where :func:`merge_pod` could compare a slot with a different value.

    ``merge_pod`` compares the ``name`` of the items of lists at the same path in base and patch (lists
    of named objects merge by name), and whole items of set-like lists. A slot's value is known only per
    task, so a slot may be compared only with itself. Judged along the patch, for all nodes at one path
    at once (list positions ignored), which also covers items merged into each other."""
    dict_patches = [p for p in patches if isinstance(p, dict)]
    if dict_patches:
        dict_bases = [b for b in bases if isinstance(b, dict)]
        for k in dict.fromkeys(k for p in dict_patches for k in p):
            _check_comparisons([b[k] for b in dict_bases if k in b], [p[k] for p in dict_patches if k in p], k)
        return
    base_items = [item for b in bases if isinstance(b, list) for item in b]
    patch_items = [item for p in patches if isinstance(p, list) for item in p]
    # a set-like list is unioned, every item compared whole, with any list it meets, an empty one included
    if key in SET_LISTS and any(_has_slot(item) for item in base_items + patch_items):
        raise Undecided(f"a slot in an item of the set-like list {key!r}")
    if not patch_items or not base_items:
        return
    names = [item["name"] for item in base_items + patch_items if isinstance(item, dict) and "name" in item]
    if not all(isinstance(v, (*_SLOTS, *_SCALARS)) for v in names):
        raise Undecided("a list item's name is not a plain value")
    if any(isinstance(v, _SLOTS) for v in names) and len(set(names)) > 1:
        raise Undecided("a list merged by name compares a slot with another name")
    _check_comparisons(base_items, patch_items)


def _has_slot(node: Any) -> bool:
    if isinstance(node, _SLOTS):
        return True
    if isinstance(node, dict):
        return any(_has_slot(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_slot(v) for v in node)
    return False


_BUILDERS: dict[str, Builder] = {}
_SLOT_CODE = {"identity": "i[{}]", "env": "s.env[{}]", "labels": "l[{}]", "annotations": "a[{}]"}


def _compile_shape(pod: dict[str, Any]) -> PodShape:
    """The pod as one expression over constants ``c`` and the task's identity ``i``, spec ``s``, backend labels
    ``l`` and annotations ``a`` and template variables ``m``; compiled once per distinct expression."""
    constants: list[Any] = []
    out: list[str] = []
    nodes = 0
    uses_variables = False

    def emit(node: Any, depth: int) -> None:
        nonlocal nodes, uses_variables
        nodes += 1
        if nodes > _MAX_NODES or depth > _MAX_DEPTH:
            raise Undecided("the pod is too large or too deep for one expression")
        kind = type(node)
        if kind is dict:
            out.append("{")
            for k, v in node.items():
                out.append(f"c[{len(constants)}]:")
                constants.append(k)
                emit(v, depth + 1)
                out.append(",")
            out.append("}")
        elif kind is list:
            out.append("[")
            for v in node:
                emit(v, depth + 1)
                out.append(",")
            out.append("]")
        elif kind is Ref:
            if node.source == "image":
                out.append("s.image")
            elif node.source in ("command", "args"):
                out.append(f"s.{node.source}[{int(node.key)}]")
            else:
                out.append(_SLOT_CODE[node.source].format(f"c[{len(constants)}]"))
                constants.append(node.key)
        elif kind is Fmt:
            uses_variables = True
            out.append(f"c[{len(constants)}].format_map(m)")
            constants.append(node.fmt)
        elif kind in _SCALARS:
            out.append(f"c[{len(constants)}]")
            constants.append(node)
        else:
            raise Undecided(f"a {kind.__name__} value is not a plain YAML value")

    try:
        emit(pod, 0)
    finally:
        emit = search_over
    source = "lambda c, i, s, l, a, m: " + "".join(out)
    build = _BUILDERS.get(source)
    if build is None:
        if len(_BUILDERS) > 256:
            _BUILDERS.clear()
        build = _BUILDERS[source] = cast(Builder, eval(compile(source, "<toporender pod shape>", "eval")))
    return PodShape(build, tuple(constants), uses_variables)
