"""A render spread over worker processes (``render --jobs N`` on a large repo) writes what one process writes,
byte for byte, with or without the cache, and leaves nothing behind."""

from __future__ import annotations

import errno
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_render_cache import EDITS, after_each_edit, config, inventory, job, small_repo
from test_rerender import NAMESPACED

from conftest import CliResult, run_cli, write_repo
from toporender import jobs as jobs_module
from toporender import pipeline, rerender
from toporender.placement import stage


@pytest.fixture(autouse=True)
def spread_small_repos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every repo of these tests is spread over workers, and the spill folder goes to a folder of the test's."""
    monkeypatch.setattr(jobs_module, "SPREAD_FROM_FILES", 1)
    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setenv("TMPDIR", str(spill))
    monkeypatch.setattr("tempfile.tempdir", None)
    return spill


def one_process(repo: Path, *args: str) -> CliResult:
    return run_cli("render", *args, "--no-cache", "--jobs", "1", str(repo))


def spread(repo: Path, *args: str, jobs: str = "2") -> CliResult:
    return run_cli("render", *args, "--jobs", jobs, str(repo))


def assert_spread_same(repo: Path, *args: str, jobs: str = "2") -> CliResult:
    plain = one_process(repo, *args)
    for result in (spread(repo, *args, "--no-cache", jobs=jobs), spread(repo, *args, jobs=jobs),
                   spread(repo, *args, jobs=jobs)):
        assert (result.code, result.stdout, result.stderr) == (plain.code, plain.stdout, plain.stderr)
    return plain


def many_files(root: Path, count: int = 12) -> Path:
    """A repo of ``count`` workflow files, a few of whose gangs do not fit (their warnings come from the
    workers' placement), with a group template that warns once per render."""
    text = config().replace("    strict: false\n", "    strict: false\n    common_group_templates: [cm]\n")
    files = {f"workflows/w{i:02}.yaml": job(f"w{i:02}", replicas=1 + i % 2, per_replica=1 + i % 3, gpu=2 + 2 * (i % 2))
             for i in range(count)}
    return write_repo(root, {"toporender.yaml": text + NAMESPACED, "nodes.yaml": inventory(2), **files})


def kept_as_objects(repo: Path) -> Path:
    """The repo with a pool that pins pods: its files' objects, not their text with slots, wait in the spill
    folder until placed, and the workers annotate and write them (:func:`toporender.rerender._write_chunk`)."""
    text = (repo / "toporender.yaml").read_text()
    (repo / "toporender.yaml").write_text(text.replace("pin: none", "pin: hard"))
    return repo


def files_built_here(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The workflow files this process builds from now on (a worker's builds are its own)."""
    built: list[str] = []
    real = pipeline.build_files

    def spy(repo: pipeline.Repo, options: pipeline.RenderOptions):  # type: ignore[no-untyped-def]
        built.extend(wf.source for wf in repo.workflows)
        return real(repo, options)

    monkeypatch.setattr(pipeline, "build_files", spy)
    return built


@pytest.mark.parametrize(("args", "jobs", "start_method"), [
    ((), "2", None), (("--format", "json"), "2", None), ((), "3", None), (("--format", "json"), "7", None),
    (("--strict",), "2", None), (("--namespace", "other"), "2", None),
    (("--format", "json"), "2", "spawn"), ((), "2", "forkserver"),
], ids=["yaml", "json", "3 jobs", "7 jobs", "strict", "namespace", "spawn", "forkserver"])
def test_a_spread_render_is_the_render_of_one_process(tmp_path: Path, cache_dir: Path, args: tuple[str, ...],
                                                      jobs: str, start_method: str | None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Uncached, cached cold and cached warm: stdout, stderr and exit code of one process, whatever the count of
    workers and however they start; the workers built every file (this process built none)."""
    monkeypatch.setattr(jobs_module, "START_METHOD", start_method)
    repo = many_files(tmp_path / "repo")
    plain = one_process(repo, *args)
    assert "cannot be placed" in plain.stderr or "--strict" in args
    built = files_built_here(monkeypatch)
    assert_spread_same(repo, *args, jobs=jobs)
    assert built == []


def test_the_pool_is_packed_while_the_workers_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process packs the pool's gangs as the workers send them, some of which do not fit (so the greedy
    baselines run at the end too): the stream of one process, byte for byte."""
    repo = many_files(tmp_path / "repo")
    plain = one_process(repo, "--format", "json")
    assert "cannot be placed" in plain.stderr
    packed: list[int] = []
    take = stage.PackAhead.take

    def spy(self: stage.PackAhead, pool_name: str, demands: Any) -> Any:
        got = take(self, pool_name, demands)
        packed.append(-1 if got is None else got.packed)
        return got

    monkeypatch.setattr(stage.PackAhead, "take", spy)
    result = spread(repo, "--format", "json", "--no-cache")
    assert (result.code, result.stdout, result.stderr) == (plain.code, plain.stdout, plain.stderr)
    assert packed == [12]


@pytest.mark.parametrize(("files", "expected"), [
    ({"workflows/w03.yaml": "workflow: [\n"}, "workflows/w03.yaml:"),
    ({"workflows/w03.yaml": job("w01")}, "workflow name 'w01' is also used by"),
    ({"workflows/w05.yaml": job("w05").replace("gpu: 4", "gpu: -4")}, "workflows/w05.yaml:"),
    ({"nodes.yaml": inventory(2).replace("gpus: 4", "gpus: -4", 1)}, "nodes.yaml:"),
], ids=["unreadable file", "duplicate names", "invalid resource", "bad inventory"])
def test_a_problem_reads_as_in_one_process(tmp_path: Path, cache_dir: Path, files: dict[str, str],
                                           expected: str) -> None:
    repo = many_files(tmp_path / "repo")
    write_repo(repo, files)
    plain = assert_spread_same(repo)
    assert plain.code == 1 and plain.stdout == "" and expected in plain.stderr, plain.stderr


def test_an_output_problem_found_by_a_worker_reads_as_in_one_process(tmp_path: Path, cache_dir: Path) -> None:
    """A group template that renders an object the cluster would reject: the worker that writes it finds it,
    and the whole pipeline reports it at the template."""
    repo = many_files(tmp_path / "repo")
    text = config().replace("    strict: false\n", "    strict: false\n    common_group_templates: [cd]\n")
    (repo / "toporender.yaml").write_text(
        text + "group_templates:\n  cd:\n    apiVersion: resource.nvidia.com/v1beta2\n    kind: ComputeDomain\n"
        "    metadata: {name: 'cd-{{WF_GROUP_UUID}}'}\n"
        "    spec: {numNodes: 1, channel: {resourceClaimTemplate: {name: imex}}}\n")
    plain = assert_spread_same(repo)
    assert plain.code == 1 and plain.stdout == "" and "group template 'cd' renders an object" in plain.stderr


def test_the_spill_folder_is_removed(tmp_path: Path, spread_small_repos: Path, cache_dir: Path) -> None:
    repo = many_files(tmp_path / "repo")
    assert spread(repo, "--no-cache").code == 0
    assert spread(repo).code == 0
    write_repo(repo, {"workflows/w04.yaml": "workflow: [\n"})
    assert spread(repo).code == 1
    assert list(spread_small_repos.iterdir()) == []


def test_a_cold_spread_render_fills_the_cache_for_one_file_edits(tmp_path: Path, cache_dir: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The entries a spread render stores are those of a render in one process: an edit then builds only the
    edited file, in this process (one file is too few to spread)."""
    repo = many_files(tmp_path / "repo")
    assert_spread_same(repo)
    monkeypatch.setattr(jobs_module, "SPREAD_FROM_FILES", 2)
    built = files_built_here(monkeypatch)
    (repo / "workflows/w02.yaml").write_text(job("w02", replicas=2, gpu=2))
    assert_spread_same(repo)
    assert built == ["workflows/w02.yaml"]  # by the cached render; the uncached ones spread or went whole


def whole_renders(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The repos rendered by the whole pipeline from now on (a spread render that handed itself over)."""
    whole: list[Path] = []
    real = pipeline.render_stream

    def spy(root: Path, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        whole.append(root)
        return real(root, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "render_stream", spy)
    return whole


def _killed(_: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _full_disk(_: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("pass_", ["_build_chunk", "_write_chunk"])
def test_a_spill_folder_without_room_renders_in_one_process(tmp_path: Path, pass_: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that cannot write its spill (or read it back) hands the render to one process, which writes
    what it always writes: a small temporary folder costs time, never the stream."""
    repo = many_files(tmp_path / "repo")
    if pass_ == "_write_chunk":
        kept_as_objects(repo)
    plain = one_process(repo)
    monkeypatch.setattr(rerender, pass_, _full_disk)
    result = spread(repo, "--no-cache")
    assert (result.code, result.stdout, result.stderr) == (plain.code, plain.stdout, plain.stderr)


_WRITE_CHUNK = rerender._write_chunk


def _short_output(item: tuple[object, str, object]) -> list[int]:
    sizes = _WRITE_CHUNK(item)  # type: ignore[arg-type]
    os.truncate(item[1], sum(sizes) - 1)
    return sizes


def test_written_output_that_is_not_what_the_worker_said_renders_in_one_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The main process maps each chunk's output file and slices it by the lengths the worker sent: a file
    shorter than they say (truncated) is never written out as it is."""
    repo = kept_as_objects(many_files(tmp_path / "repo"))
    plain = one_process(repo)
    monkeypatch.setattr(rerender, "_write_chunk", _short_output)
    result = spread(repo, "--no-cache")
    assert (result.code, result.stdout, result.stderr) == (plain.code, plain.stdout, plain.stderr)


_BUILD_CHUNK = rerender._build_chunk


def _short_spill(item: tuple[object, object, str]) -> object:
    built = _BUILD_CHUNK(item)  # type: ignore[arg-type]
    path = built[1][-1].spilled[0]  # type: ignore[index]
    os.truncate(path, os.path.getsize(path) - 1)
    return built


def test_spilled_text_that_is_not_what_the_worker_said_renders_in_one_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The main process maps the text with slots the workers spilled and slices it by the lengths they sent:
    a spill shorter than they say is never written out as it is."""
    repo = many_files(tmp_path / "repo")
    plain = one_process(repo)
    monkeypatch.setattr(rerender, "_build_chunk", _short_spill)
    result = spread(repo, "--no-cache")
    assert (result.code, result.stdout, result.stderr) == (plain.code, plain.stdout, plain.stderr)


@pytest.mark.parametrize("pass_", ["_build_chunk", "_write_chunk"])
def test_a_worker_that_dies_ends_render_with_a_message(tmp_path: Path, pass_: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    repo = many_files(tmp_path / "repo")
    if pass_ == "_write_chunk":
        kept_as_objects(repo)
    monkeypatch.setattr(rerender, pass_, _killed)
    r = spread(repo, "--no-cache")
    assert r.code == 3 and r.stdout == ""
    assert "worker process ended" in r.stderr and "Traceback" not in r.stderr
    assert multiprocessing.active_children() == []


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(EDITS, min_size=1, max_size=4),
       args=st.sampled_from([(), ("--format", "json"), ("--strict",)]))
def test_random_edits_render_the_same_spread(tmp_path_factory: pytest.TempPathFactory,
                                             edits: list[tuple[object, ...]], args: tuple[str, ...]) -> None:
    base = tmp_path_factory.mktemp("edits")
    repo = small_repo(base / "repo")
    (repo / "workflows/c.yaml").write_text(job("c", replicas=2, per_replica=1))
    after_each_edit(base / "cache", repo, edits, lambda repo: assert_spread_same(repo, *args))


@pytest.mark.parametrize("cached", [False, True])
def test_objects_that_would_not_read_back_render_in_one_process(tmp_path: Path, cache_dir: Path, cached: bool,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker whose objects would not read back exactly (as spilled: marshal without a cache, JSON with one)
    hands the render to one process, which writes what it always writes."""
    repo = many_files(tmp_path / "repo")
    if not cached:
        kept_as_objects(repo)
    plain = one_process(repo)
    monkeypatch.setattr(rerender, "_exact_json" if cached else "_marshal", lambda objects: None)
    whole = whole_renders(monkeypatch)
    result = spread(repo) if cached else spread(repo, "--no-cache")
    assert (result.code, result.stdout, result.stderr) == (plain.code, plain.stdout, plain.stderr)
    assert whole == [repo]


@pytest.mark.parametrize(("args", "env", "code", "message"), [
    (["--jobs", "0"], None, 2, "--jobs"),
    ([], "0", 1, "TOPORENDER_JOBS must be a whole number"),
], ids=["zero", "env zero"])
def test_job_counts_that_are_refused(tmp_path: Path, args: list[str], env: str | None, code: int, message: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if env is not None:
        monkeypatch.setenv("TOPORENDER_JOBS", env)
    r = run_cli("render", "--no-cache", *args, str(many_files(tmp_path / "repo")))
    assert r.code == code and r.stdout == "" and message in r.stderr, r.stderr


POD_TEMPLATE = "    common_pod_template: [own]\n"
VARIANTS = {
    "placed": lambda text: text,
    "no inventory": lambda text: text.replace("inventory: nodes.yaml\n", ""),
    "hard pin": lambda text: text.replace("pin: none", "pin: hard"),
    "soft pin": lambda text: text.replace("pin: none", "pin: soft"),
    "slot key in a pod": lambda text: text.replace("    strict: false\n", "    strict: false\n" + POD_TEMPLATE)
    + "pod_templates:\n  own:\n    spec:\n      nodeSelector: {example.com/a: b, \"\\0\": \"\"}\n",
}


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize(("variant", "filled"), [
    ("placed", True), ("no inventory", True), ("hard pin", False), ("soft pin", False),
    ("slot key in a pod", False),
])
def test_text_with_slots_is_the_text_one_process_writes(tmp_path: Path, variant: str, filled: bool, fmt: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a cache, the workers write the stream's text with a slot for each PodGroup's and pod's
    placement annotations, which this process fills: the stream of one process, byte for byte. A file whose
    notes would not go at the end of the annotations (a pool that pins), or whose text holds the slot's text
    elsewhere, is annotated as objects instead."""
    repo = many_files(tmp_path / "repo")
    (repo / "toporender.yaml").write_text(VARIANTS[variant]((repo / "toporender.yaml").read_text()))
    plain = one_process(repo, "--format", fmt)
    assert plain.code == 0, plain.stderr
    assert ("toporender.dev/intended-node" in plain.stdout) == (variant != "no inventory")
    filled_files: list[Path] = []
    real = rerender._fill

    def spy(lines: memoryview, f: rerender._File, outcomes: rerender._Outcomes,
            fmt: str) -> list[bytes | memoryview]:
        filled_files.append(Path(f.rel))
        return real(lines, f, outcomes, fmt)

    monkeypatch.setattr(rerender, "_fill", spy)
    result = spread(repo, "--format", fmt, "--no-cache")
    assert (result.code, result.stdout, result.stderr) == (plain.code, plain.stdout, plain.stderr)
    assert len(filled_files) == (12 if filled else 0)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("longest_fits", [False, True])
def test_an_object_that_could_pass_the_annotation_limit_renders_in_one_process(
        tmp_path: Path, longest_fits: bool, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Filling a file's slots checks the length of its whole text, and when that is too long, of its longest
    object, against the annotations' size limit; an object that could pass it sends the render to the whole
    pipeline, which checks the annotations exactly."""
    import toporender.validation

    repo = many_files(tmp_path / "repo")
    plain = one_process(repo, "--format", fmt)
    lengths: list[int] = []

    def fit(length: int) -> bool:
        lengths.append(length)
        return longest_fits and len(lengths) % 2 == 0

    monkeypatch.setattr(toporender.validation, "annotations_fit", fit)
    whole = whole_renders(monkeypatch)
    result = spread(repo, "--format", fmt, "--no-cache")
    assert (result.code, result.stdout, result.stderr) == (plain.code, plain.stdout, plain.stderr)
    assert whole == ([] if longest_fits else [repo])
    assert all(whole_file > line for whole_file, line in zip(lengths[::2], lengths[1::2]))
    assert len(lengths) == (24 if longest_fits else 2)


def _pod(name: str, notes: dict[str, str] | None) -> dict[str, object]:
    meta: dict[str, object] = {"name": name}
    if notes is not None:
        meta["annotations"] = notes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeSelector": {"a": "b"}}}


def _group(notes: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg",
                                                                                          "annotations": notes}}


SHARED = {"k": "v"}


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize(("objects", "slotted"), [
    ([[_group({"k": "v"})], [_pod("a", {"k": "v"}), _pod("b", {"k": "w"})]], True),
    ([[_group({"k": "v"}), {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}],
      [_pod("a", {"k": "v"})]], True),
    ([[_group({"k": "v"})], [_pod("a", {})]], False),
    ([[_group({"k": "v"})], [_pod("a", None)]], False),
    ([[_group({"toporender.dev/plan-hash": "x"})], [_pod("a", {"k": "v"})]], False),
    ([[_group({"k": "v"})], [_pod("a", {"k": "v", "toporender.dev/intended-node": "n"})]], False),
    ([[_group({"k": "v"})], [_pod("a", SHARED), _pod("b", SHARED)]], False),
    ([[_group({"k": "v", "\0": ""})], [_pod("a", {"k": "v"})]], False),
], ids=["pods", "other kinds", "empty notes", "no notes", "own gang note", "own pod note", "shared notes",
        "slot key"])
def test_which_files_take_slots(objects: list[list[dict[str, object]]], slotted: bool, fmt: str,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's lines take slots only where placement's notes go at the end of each PodGroup's and pod's own
    non-empty annotations; the slots are found where the lines hold them. Any other file keeps its objects,
    as they were."""
    import copy
    import json
    import marshal

    import toporender.validation

    monkeypatch.setattr(toporender.validation, "output_problems", lambda objects, kai_version: [])
    objects = copy.deepcopy(objects)  # the table's objects stay as written for the next format
    before = copy.deepcopy(objects)
    gang = {"key": "w#g", "pool": "p", "tasks": [p["metadata"]["name"] for p in objects[1]]}  # type: ignore[index]
    f = rerender._File("w.yaml", "key", {"gangs": [gang]}, objects=[objects], stored=b"")
    rerender._slot([f], {"pools": {"p": {"pin": "none"}}, "pool_objects": [], "kai": "main"}, fmt)
    assert f.stored is not None
    if not slotted:
        assert (f.at, f.slots) == (None, None)
        assert marshal.loads(f.stored) == [before]
        return
    assert f.slots == [1] and f.at is not None and len(f.at) == 1 + len(objects[1])
    slot = rerender._slot_text(fmt)
    assert all(f.stored[at:at + len(slot)] == slot for at in f.at)
    text = f.stored.replace(slot, b"").decode()
    read = [json.loads(line) for line in text.splitlines()] if fmt == "json" else list(yaml.safe_load_all(text))
    assert read == before[0] + before[1]
