"""Rendering file by file from the cache (:mod:`toporender.rerender`): only the files without an entry are built,
the rest comes from their entries, and the output is byte for byte the uncached render's in every case: one
file edited, the inventory changed, warnings replayed, entries of any kind damaged, gone or foreign."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_render_cache import apply, assert_same, config, entries, inventory, job, small_repo

from conftest import run_cli, write_repo
from toporender import cache, pipeline, rerender
from toporender.placement import outcomes


def kinds(directory: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in (directory / "v1").iterdir():
        if not path.name.startswith("."):
            counts[path.name.split("-")[0]] = counts.get(path.name.split("-")[0], 0) + 1
    return counts


def built_sources(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The workflow files each call of :func:`toporender.pipeline.build_files` builds, in this process."""
    calls: list[list[str]] = []
    real = pipeline.build_files

    def spy(repo: pipeline.Repo, options: pipeline.RenderOptions):  # type: ignore[no-untyped-def]
        calls.append([wf.source for wf in repo.workflows])
        return real(repo, options)

    monkeypatch.setattr(pipeline, "build_files", spy)
    return calls


def test_an_edit_builds_only_the_edited_file(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = small_repo(tmp_path / "repo")
    (repo / "workflows/c.yaml").write_text(job("c", replicas=2, per_replica=1))
    calls = built_sources(monkeypatch)
    assert_same(repo)
    assert calls == [["workflows/a.yaml", "workflows/b.yaml", "workflows/c.yaml"]]
    calls.clear()
    (repo / "workflows/b.yaml").write_text(job("b", replicas=2, gpu=2))  # a new demand: a new plan
    assert_same(repo)
    assert calls == [["workflows/b.yaml"]]
    calls.clear()
    (repo / "nodes.yaml").write_text(inventory(3))  # a repack: nothing is built
    assert_same(repo, "--format", "json")
    assert calls == []
    assert kinds(cache_dir)["file"] == 4


@pytest.mark.parametrize("edit", [
    ("inventory", 2),
    ("lock", ["workflows/c.yaml#g", "workflows/b.yaml#g", "workflows/a.yaml#g"]),
    ("image",),
])
def test_a_render_without_a_new_file_imports_neither_pydantic_nor_the_loader(tmp_path: Path, edit: tuple[object, ...]
                                                                             ) -> None:
    repo = small_repo(tmp_path / "repo")
    (repo / "workflows/c.yaml").write_text(job("c"))
    env = {**os.environ, "TOPORENDER_CACHE_DIR": str(tmp_path / "cache")}
    script = ("import sys; from pathlib import Path; from toporender.cache import open_store; "
              "from toporender.options import RenderOptions; from toporender.rerender import render_stream; "
              "out, _ = render_stream(Path(sys.argv[1]), RenderOptions(), 'yaml', open_store(Path(sys.argv[1]))); "
              "sys.stdout.write(b''.join(out).decode()); "
              "print(sorted(m for m in ('pydantic', 'toporender.load.models', 'toporender.pipeline') "
              "if m in sys.modules), file=sys.stderr)")

    def render() -> tuple[str, str]:
        proc = subprocess.run([sys.executable, "-c", script, str(repo)], env=env, capture_output=True, text=True,
                              check=True)
        return proc.stdout, proc.stderr.strip()

    render()
    if edit[0] == "image":  # a file built before: its entries come back, only the whole render is new
        text = (repo / "workflows/a.yaml").read_text()
        (repo / "workflows/a.yaml").write_text(text + "# another revision\n")
        render()
        (repo / "workflows/a.yaml").write_text(text)
    else:
        apply(repo, edit)
    out, imported = render()
    assert imported == "[]"
    assert out == run_cli("render", "--no-cache", str(repo)).stdout


NAMESPACED = ("group_templates:\n  cm:\n    apiVersion: v1\n    kind: ConfigMap\n"
              "    metadata: {name: 'cm-{{WF_GROUP_UUID}}', namespace: ml}\n")


def test_a_once_per_render_warning_is_replayed_once(tmp_path: Path, cache_dir: Path) -> None:
    text = config().replace("    strict: false\n", "    strict: false\n    common_group_templates: [cm]\n")
    repo = small_repo(tmp_path / "repo")
    (repo / "toporender.yaml").write_text(text + NAMESPACED)
    first = assert_same(repo)
    assert first.stderr.count("group template 'cm' sets metadata.namespace") == 1
    (repo / "workflows/b.yaml").write_text(job("b", replicas=2, gpu=2))
    assert assert_same(repo).stderr.count("group template 'cm' sets metadata.namespace") == 1
    (repo / "workflows/a.yaml").unlink()
    assert assert_same(repo).stderr.count("group template 'cm' sets metadata.namespace") == 1


def test_an_unplaceable_gang_of_a_stored_file_is_reported_at_its_group(tmp_path: Path, cache_dir: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    assert_same(repo)
    (repo / "nodes.yaml").write_text(inventory(8))
    result = assert_same(repo)
    assert "workflows/b.yaml:4:5: warning: group 'g' cannot be placed" in result.stderr


def damaged(entry: Path, damage: str) -> bytes:
    """``entry`` truncated, with a bit flipped, written for another key (foreign), or, for the JSON kinds, with
    its own key in a valid header over JSON of another shape (what no render writes)."""
    raw = entry.read_bytes()
    kind, key = entry.name.split("-", 1)
    if damage == "truncate":
        return raw[: len(raw) // 2]
    if damage == "flip":
        return raw[:-3] + bytes([raw[-3] ^ 1]) + raw[-2:]
    payload = raw[raw.index(b"\n") + 1:]
    if damage == "foreign":
        key = "0" * 64
    else:
        payload = {"file": b'{"name":"a","gangs":[{"key":5}],"warnings":[],"idents":[]}', "objects": b"[[[],[]]]",
                   "context": b'{"pools":[],"pool_objects":{}}', "plan": b'[["x"]]',
                   "rows": b'[["workflows/a.yaml#g",true,null,"[]"]]', "inventory": b'[["n",{},"4",0,false,[]]]'}[kind]
    return cache.entry_header(kind, key, payload) + payload


@pytest.mark.parametrize(("kind", "damage"), [
    (kind, damage) for kind in ("file", "objects", "emit", "context", "plan", "rows", "inventory")
    for damage in ("truncate", "flip", "foreign", "another-shape") if (kind, damage) != ("emit", "another-shape")])
def test_a_damaged_entry_is_ignored_and_rewritten(tmp_path: Path, cache_dir: Path, kind: str, damage: str) -> None:
    repo = small_repo(tmp_path / "repo")
    (repo / "nodes.yaml").write_text(inventory(2))
    assert_same(repo)
    read_after = {"objects": ["emit"], "plan": ["rows"], "inventory": ["rows", "plan"]}  # read only without these
    for other in read_after.get(kind, []):
        for path in (cache_dir / "v1").glob(f"{other}-*"):
            path.unlink()
    good = {p: p.read_bytes() for p in (cache_dir / "v1").glob(f"{kind}-*")}
    for path in good:
        path.write_bytes(damaged(path, damage))
    apply(repo, ("lock", ["workflows/a.yaml#g", "workflows/b.yaml#g"]))  # the order they had: only the whole
    assert_same(repo)                                                        # render is new
    assert {p: p.read_bytes() for p in good} == good


def test_a_file_whose_objects_entry_is_gone_is_built_again(tmp_path: Path, cache_dir: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    repo = small_repo(tmp_path / "repo")
    assert_same(repo)
    for path in [*(cache_dir / "v1").glob("emit-*"), *(cache_dir / "v1").glob("objects-*")]:
        path.unlink()
    calls = built_sources(monkeypatch)
    (repo / "nodes.yaml").write_text(inventory(4))
    assert_same(repo)
    assert calls == [["workflows/a.yaml", "workflows/b.yaml"]]
    assert kinds(cache_dir)["objects"] == 2


def test_the_whole_render_lists_its_files_and_misses_when_one_is_gone(tmp_path: Path, cache_dir: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    plain = assert_same(repo)
    [entry] = entries(cache_dir)
    meta = orjson.loads(entry.read_bytes().split(b"\n")[1])
    assert len(meta["parts"]) == 2
    (cache_dir / "v1" / f"emit-{meta['parts'][1]}").unlink()
    assert run_cli("render", str(repo)).stdout == plain.stdout
    assert (cache_dir / "v1" / f"emit-{meta['parts'][1]}").is_file()


def test_errors_across_files_render_as_without_the_cache(tmp_path: Path, cache_dir: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    assert_same(repo)
    (repo / "workflows/c.yaml").write_text(job("A"))  # the same workflow name as a.yaml's, in another case
    result = assert_same(repo)
    assert result.code == 1 and result.stdout == "" and "workflows/c.yaml:" in result.stderr
    (repo / "workflows/c.yaml").write_text(job("c"))
    (repo / "toporender.yaml").write_text(config(strict=True))
    (repo / "nodes.yaml").write_text(inventory(8))
    strict = assert_same(repo)
    assert strict.code == 1 and "strict placement" in strict.stderr


def test_limits_match_the_renderer() -> None:
    from toporender.build.objects import MAX_OBJECTS
    from toporender.load import repo
    from toporender.placement.inventory import MAX_INVENTORY_BYTES

    assert (rerender.MAX_OBJECTS, rerender.MAX_WORKFLOW_FILES, rerender.MAX_TOTAL_BYTES) == \
        (MAX_OBJECTS, repo.MAX_WORKFLOW_FILES, repo.MAX_TOTAL_BYTES)
    assert cache.MAX_INPUT_BYTES == MAX_INVENTORY_BYTES


def test_the_plan_memo_key_reads_the_same_from_json_demands(tmp_path: Path) -> None:
    from toporender.load.repo import load_repo
    from toporender.placement.stage import gang_demand

    repo_dir = write_repo(tmp_path / "repo", {"toporender.yaml": config(), "nodes.yaml": inventory(0),
                                              "workflows/a.yaml": job("a", replicas=2)})
    repo = load_repo(repo_dir)
    sink = pipeline.DiagnosticSink()
    built = pipeline.build_gangs(repo, pipeline._expand(repo, pipeline.RenderOptions(), sink), sink)
    demands = [gang_demand(gang, pods) for gang, _, pods in built]
    text = ("[" + ",".join(outcomes.demand_json(d).decode() for d in demands) + "]").encode()
    assert text == outcomes.demands_json(demands)
    assert [outcomes.demand_from_json(orjson.loads(outcomes.demand_json(d))) for d in demands] == demands
    whole = hashlib.sha256(b"inv")  # the key of the demands written in one piece
    whole.update(orjson.dumps(["nodes.yaml", ["z"], [], orjson.loads(text)]))
    assert outcomes.memo_key(b"inv", "nodes.yaml", ["z"], text, {}) == whole.hexdigest()


@pytest.mark.parametrize("change", [
    lambda d: {"demand": d},
    lambda d: d[:5],
    lambda d: [*d[:2], {"required": d[2][0], "preferred": d[2][1]}, *d[3:]],
    lambda d: [*d[:4], [[*s[:3], [-1]] for s in d[4]], d[5]],
    lambda d: [*d[:4], [[*s[:3], [len(d[3])]] for s in d[4]], d[5]],
    lambda d: [*d[:3], [*d[3], d[3][0]], *d[4:]],
], ids=["not a list", "a field short", "constraint as a mapping", "negative pod index", "pod index past the end",
        "pods share a name"])
def test_a_demand_of_another_shape_is_refused(change: Any) -> None:
    """A stored demand is read back only when it has the shape ``demand_json`` writes (the cache rebuilds it
    otherwise)."""
    from toporender.expand.levels import LevelConstraint
    from toporender.placement.demand import GangDemand, PodDemand, SubgroupDemand

    pods = (PodDemand("a", 4, (("k", None, "NoSchedule"),)), PodDemand("b", 4, (), ("n1",)))
    demand = GangDemand("w.yaml#g", "w/g", LevelConstraint("zone"),
                        (SubgroupDemand("s", None, LevelConstraint("rack", "clique"), pods),), pods,
                        (("a", "s"), ("b", "s")))
    data = orjson.loads(outcomes.demand_json(demand))
    assert outcomes.demand_from_json(data) == demand
    with pytest.raises((IndexError, KeyError, TypeError, ValueError)):
        outcomes.demand_from_json(change(data))


def _demand(gpus: Any = 4, value: Any = None, names: tuple[str, str] = ("a", "b")) -> Any:
    from toporender.expand.levels import LevelConstraint
    from toporender.placement.demand import GangDemand, PodDemand, SubgroupDemand

    pods = (PodDemand(names[0], gpus, (("k", value, "NoSchedule"),)), PodDemand(names[1], 4, (), ("n1",)))
    return GangDemand("w.yaml#g", "w/g", LevelConstraint("zone"),
                      (SubgroupDemand("s", None, LevelConstraint("rack", "clique"), pods),), pods,
                      (("a", "s"), ("b", "s")))


class _Text(str):
    pass


@pytest.mark.parametrize(("demand", "exact"), [
    (_demand(), True),
    (_demand(value="v"), True),
    (_demand(gpus=4.0), True),
    (_demand(gpus=True), True),
    (_demand(value=1), True),
    (_demand(names=(_Text("a"), "b")), True),
    (_demand(gpus=float("nan")), False),
    (_demand(value=float("inf")), False),
    (_demand(value=float("nan")), False),
    (_demand(names=("a", "a")), False),
], ids=["plain", "a value", "float GPUs", "bool GPUs", "int value", "str subclass", "NaN GPUs", "inf value",
        "NaN value", "pods share a name"])
def test_a_demand_is_checked_as_it_reads_back(demand: Any, exact: bool) -> None:
    """``checked_demand_json`` says a demand's text reads back exactly when rebuilding the demand from it gives
    it back, and writes the text ``demand_json`` writes."""
    text, verdict = outcomes.checked_demand_json(demand)
    assert text == outcomes.demand_json(demand)
    try:
        rebuilt = outcomes.demand_from_json(orjson.loads(text)) == demand
    except ValueError:
        rebuilt = False
    assert verdict is exact is rebuilt


def test_a_new_demand_packs_the_stored_inventory_without_reading_it(tmp_path: Path, cache_dir: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from toporender.placement import nodelist

    repo = small_repo(tmp_path / "repo")
    (repo / "nodes.yaml").write_text(inventory(3))
    assert_same(repo)
    reads: list[str] = []
    real = nodelist.read_inventory
    monkeypatch.setattr(nodelist, "read_inventory", lambda path, display: reads.append(display) or real(path, display))
    for gpu in (2, 1):  # a new demand each time, the same inventory: packed again from its stored nodes
        (repo / "workflows/a.yaml").write_text(job("a", gpu=gpu))
        out = run_cli("render", str(repo))
        assert reads == []
        assert out.stdout == run_cli("render", "--no-cache", str(repo)).stdout
        reads.clear()
    assert kinds(cache_dir)["inventory"] == 1
