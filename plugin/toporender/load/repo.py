"""Load a workflow repo: ``toporender.yaml`` plus the workflow files it names.

This is the only stage that touches the file system for rendering. It refuses paths that
escape the repo (as Argo CD does for symlinks) and returns documents with source positions.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from toporender.errors import Diagnostic, DiagnosticSink, Position, UserError, fail
from toporender.load import walk
from toporender.load.model_errors import parse
from toporender.load.models import GroupSpec, RepoConfig, ResourceSpec, WorkflowDocument
from toporender.load.walk import inside
from toporender.load.yaml_source import Document, Loc, load_file

CONFIG_FILE = "toporender.yaml"
MAX_WORKFLOW_FILES = 10_000
MAX_INPUT_BYTES = 2 * 1024 * 1024
MAX_INPUT_VALUES = 100_000
MAX_TOTAL_BYTES = 256 * 1024 * 1024
"""All workflow files of one repo together; with the per-file caps this bounds what a render reads."""


@dataclass(frozen=True)
class WorkflowGroup:
    """A task group with where it was written (bare ``tasks:`` become one group per task, as in OSMO)."""

    spec: GroupSpec
    loc: Loc
    task_locs: tuple[Loc, ...]


@dataclass(frozen=True)
class WorkflowFile:
    doc: Document
    spec: WorkflowDocument

    @property
    def source(self) -> str:
        return self.doc.source

    @property
    def name(self) -> str:
        return self.spec.workflow.name

    @property
    def run_name(self) -> str:
        """The name identities derive from: the workflow's name, and ``-r<run>`` for runs after the first."""
        run = self.spec.workflow.run
        return self.name if run == 1 else f"{self.name}-r{run}"

    @cached_property
    def resources(self) -> dict[str, ResourceSpec]:
        res = self.spec.resources if self.spec.resources is not None else self.spec.workflow.resources
        return res if res is not None else {"default": ResourceSpec()}

    @property
    def resources_loc(self) -> Loc:
        return ("resources",) if self.spec.resources is not None else ("workflow", "resources")

    def groups(self) -> list[WorkflowGroup]:
        wf = self.spec.workflow
        if wf.groups is not None:
            return [
                WorkflowGroup(g, ("workflow", "groups", i), tuple(("workflow", "groups", i, "tasks", j)
                                                                  for j in range(len(g.tasks))))
                for i, g in enumerate(wf.groups)
            ]
        assert wf.tasks is not None
        return [
            WorkflowGroup(GroupSpec(name=bare_group_name(t.name), tasks=[t]), ("workflow", "tasks", i),
                          (("workflow", "tasks", i),))
            for i, t in enumerate(wf.tasks)
        ]

    def pos(self, loc: Loc) -> Position:
        return self.doc.pos(loc)


def bare_group_name(task: str) -> str:
    """The group a task listed without groups gets: ``<task>-group``, or, where that is over 63 characters,
    the task's name cut short with a hash of the whole name, so two long names never meet."""
    name = f"{task}-group"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(task.encode()).hexdigest()[:8]
    return f"{task[:63 - len('-group') - 9].rstrip('-_.')}-{digest}-group"


@dataclass(frozen=True)
class Repo:
    """Everything the pipeline needs, already parsed; built from disk or from in-memory documents."""

    root: Path | None
    config_doc: Document
    config: RepoConfig
    workflows: tuple[WorkflowFile, ...]


def load_config(doc: Document) -> RepoConfig:
    if not isinstance(doc.data, dict):
        raise fail("expected a mapping with 'pools:' (see README: repo config)", doc.pos())
    return parse(RepoConfig, doc)


def load_workflow(doc: Document) -> WorkflowFile:
    if not isinstance(doc.data, dict):
        raise fail("expected a mapping with 'workflow:' (an OSMO workflow spec)", doc.pos())
    return WorkflowFile(doc, parse(WorkflowDocument, doc))


def single_document(path: Path, source: str) -> Document:
    docs = [d for d in load_file(path, source, max_bytes=MAX_INPUT_BYTES, max_nodes=MAX_INPUT_VALUES)
            if d.data is not None]
    if not docs:
        raise fail("file is empty; expected one YAML document", Position(source))
    if len(docs) > 1:
        raise fail("expected one YAML document per file; split the file", docs[1].pos())
    return docs[0]


def discover(root: Path, patterns: list[str], exclude: set[str]) -> list[str]:
    """Repo-relative POSIX paths of the regular files matching ``patterns``, sorted (:mod:`toporender.load.walk`).

    A match that is not a readable regular file inside the repo is an error at its path, never skipped."""
    return sorted(_found(root, patterns, exclude).files)


def _found(root: Path, patterns: list[str], exclude: set[str]) -> walk.Found:
    """:func:`discover`'s walk, with each file's size."""
    for pattern in patterns:
        if os.path.isabs(pattern) or ".." in Path(pattern).parts:
            raise fail(f"workflow pattern {pattern!r} must be relative to the repo and stay inside it",
                       Position(CONFIG_FILE))
    try:
        found = walk.find(root, patterns, exclude)
    except walk.TooManyEntries:
        raise fail(f"the workflow folders hold more than {walk.MAX_ENTRIES} entries; narrow 'workflows:' to the "
                   "folders that hold workflows", Position(CONFIG_FILE)) from None
    if found.problems:
        raise UserError(Diagnostic(message, Position(rel)) for rel, message in sorted(found.problems.items()))
    if len(found.files) > MAX_WORKFLOW_FILES:
        raise fail(f"more than {MAX_WORKFLOW_FILES} workflow files matched; narrow 'workflows:'",
                   Position(CONFIG_FILE))
    return found


def load_repo(root: Path) -> Repo:
    """Read ``toporender.yaml`` and every workflow it names, collecting all errors at once."""
    config_doc, config = load_repo_config(root)
    sink = DiagnosticSink()
    workflows = tuple(iter_workflows(root, config, sink))
    sink.raise_if_errors()
    return Repo(root, config_doc, config, workflows)


def load_repo_config(root: Path) -> tuple[Document, RepoConfig]:
    """The repo's ``toporender.yaml``, read and validated."""
    config_path = root / CONFIG_FILE
    if not root.is_dir():
        raise fail(f"{root} is not a directory; pass the repo directory that holds {CONFIG_FILE}",
                   Position(str(root)))
    if config_path.is_dir():
        raise fail("expected a file but found a directory", Position(CONFIG_FILE))
    if not inside(root, config_path):
        raise fail("symlink points outside the repo; copy the file into the repo instead", Position(CONFIG_FILE))
    if not config_path.exists():
        raise fail(f"no {CONFIG_FILE} in {root}; create one (see README, 'Repo config')", Position(CONFIG_FILE))
    config_doc = single_document(config_path, CONFIG_FILE)
    return config_doc, load_config(config_doc)


def iter_workflows(root: Path, config: RepoConfig, sink: DiagnosticSink,
                   paths: list[str] | None = None) -> Iterator[WorkflowFile]:
    """The repo's workflows one file at a time, in path order; a file that cannot be loaded is an error in
    ``sink`` and is not yielded. A caller that keeps only what it derives from each workflow (``toporender
    plan`` keeps demands) never holds the models of a large repo all at once. ``paths``: the
    :func:`workflow_paths` a caller found already."""
    for rel in workflow_paths(root, config) if paths is None else paths:
        try:
            wf = read_workflow(root, rel)
        except UserError as err:
            sink.extend(err)
            continue
        yield wf


def workflow_paths(root: Path, config: RepoConfig) -> list[str]:
    """The repo-relative paths of the repo's workflow files, in path order, each checked to stay inside the repo,
    and all of them together within :data:`MAX_TOTAL_BYTES` (else the error at the first file past it)."""
    return [rel for rel, _ in workflow_sizes(root, config)]


def workflow_sizes(root: Path, config: RepoConfig) -> list[tuple[str, int]]:
    """:func:`workflow_paths`, each with its size in bytes."""
    out = []
    total = 0
    found = _found(root, config.workflows, {CONFIG_FILE})
    for rel in sorted(found.files):
        size = found.sizes[rel]
        total += size
        if total > MAX_TOTAL_BYTES:
            raise fail(f"the workflow files add up to more than {MAX_TOTAL_BYTES // 2**20} MiB; split the repo "
                       "into several (one Argo CD application each)", Position(rel))
        out.append((rel, size))
    return out


def read_workflow(root: Path, rel: str) -> WorkflowFile:
    """One workflow file of :func:`workflow_paths`, loaded and validated; raises what is wrong with it."""
    wf = load_workflow(single_document(root / rel, rel))
    # validated into wf.spec, and positions come from the text: the raw data of a 10,000-file repo was a
    # quarter of its memory
    wf.doc.data = None
    return wf


def check_not_empty(repo: Repo) -> None:
    """Refuse to render no workflow at all unless the config says so.

    An empty stream is what a host applies with prune: Argo CD would delete every object the Application
    manages. Workflows in the wrong folder, with a ``.json`` name, or all deleted by mistake look exactly
    like that, so rendering nothing has to be asked for (``allow_empty: true``, the way to retire a repo).
    """
    if repo.workflows or repo.config.allow_empty:
        return
    globs = ", ".join(map(repr, repo.config.workflows))
    found = "no Workflow item was given" if repo.root is None else f"no file of the repo matches {globs}"
    raise fail(f"{found}; no workflow would be rendered, and a host that prunes would delete every object it "
               "manages. Put workflow files where 'workflows:' looks (default: workflows/**/*.yaml and *.yml), "
               "or set 'allow_empty: true' to render nothing on purpose", repo.config_doc.pos(("workflows",)))
