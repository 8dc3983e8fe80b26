"""The render cache never changes an answer: cached and uncached renders agree byte for byte (stdout, stderr,
exit code) over random edit sequences, a damaged or foreign entry is a miss that gets rewritten, concurrent
renders sharing a cache are safe, and ``--no-cache`` / ``TOPORENDER_NO_CACHE`` write nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CliResult, run_cli, within, write_repo
from toporender import cache
from toporender.cache import Store, find
from toporender.options import RenderOptions
from toporender.pipeline import render_repo


def inventory(used: int) -> str:
    nodes = [{"name": f"r{rack}-n{n}", "gpus": 4,
              "labels": {"example.com/zone": "z1", "example.com/rack": f"rack{rack}"}}
             for rack in range(2) for n in range(4)]
    for node in nodes[:used]:
        node["usedGPUs"] = 4
    return yaml.safe_dump({"apiVersion": "toporender.dev/v1alpha1", "kind": "NodeInventory", "nodes": nodes})


def config(namespace: str = "ml", strict: bool = False, pin: str = "none") -> str:
    return (f"namespace: {namespace}\ninventory: nodes.yaml\npools:\n  p:\n    backend: kai\n    pin: {pin}\n"
            f"    strict: {str(strict).lower()}\n    topology_keys:\n"
            "    - {key: zone, label: example.com/zone}\n    - {key: rack, label: example.com/rack}\n")


def job(name: str, replicas: int = 1, per_replica: int = 2, gpu: int = 4) -> str:
    tasks = "".join(f"    - {{name: r{r}-{i}, resource: rep{r}}}\n"
                    for r in range(replicas) for i in range(per_replica))
    res = "".join(f"    rep{r}:\n      gpu: {gpu}\n      topology:\n      - {{key: rack, group: rep{r}}}\n"
                  f"      - {{key: zone, group: job}}\n" for r in range(replicas))
    return f"workflow:\n  name: {name}\n  groups:\n  - name: g\n    tasks:\n{tasks}  resources:\n{res}"


def small_repo(root: Path) -> Path:
    return write_repo(root, {"toporender.yaml": config(), "nodes.yaml": inventory(1),
                             "workflows/a.yaml": job("a"), "workflows/b.yaml": job("b", replicas=2)})


def render(repo: Path, *args: str) -> tuple[CliResult, CliResult, CliResult]:
    """Uncached, then cached twice (a miss that stores, then a hit when the input is cacheable)."""
    plain = run_cli("render", *args, "--no-cache", str(repo))
    return plain, run_cli("render", *args, str(repo)), run_cli("render", *args, str(repo))


def assert_same(repo: Path, *args: str) -> CliResult:
    plain, first, second = render(repo, *args)
    assert (first.code, first.stdout, first.stderr) == (plain.code, plain.stdout, plain.stderr)
    assert (second.code, second.stdout, second.stderr) == (plain.code, plain.stdout, plain.stderr)
    return plain


def entries(directory: Path) -> list[Path]:
    return sorted((directory / "v1").glob("render-*")) if (directory / "v1").is_dir() else []


EDITS = st.one_of(
    st.tuples(st.just("workflow"), st.sampled_from(["a", "b", "c"]), st.integers(1, 2), st.integers(1, 3),
              st.sampled_from([1, 2, 4, 8])),
    st.tuples(st.just("delete"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("image"), st.sampled_from(["a", "b", "c"]), st.integers(1, 3)),
    st.tuples(st.just("broken"), st.sampled_from(["a", "b", "c"]),
              st.sampled_from(["workflow: [\n", "workflow:\n  name: Bad_Name\n  tasks: []\n", "- just\n- a list\n",
                               "workflow:\n  name: x\n  tasks:\n  - {name: t, image: 5, gpu: -1}\n"])),
    st.tuples(st.just("config"), st.sampled_from(["ml", "team-b"]), st.booleans(), st.sampled_from(["none", "soft"])),
    st.tuples(st.just("config-broken"), st.sampled_from(["pools: 3\n", "{", "namespace: ml\n"])),
    st.tuples(st.just("inventory"), st.integers(0, 8)),
    st.tuples(st.just("lock"), st.permutations(["workflows/a.yaml#g", "workflows/b.yaml#g", "workflows/c.yaml#g"])),
    st.tuples(st.just("unlock")),
    st.tuples(st.just("evict"), st.sampled_from(["render", "file", "objects", "emit", "context", "plan", "rows",
                                                         "inventory"])),
)


def apply(repo: Path, edit: tuple[object, ...]) -> None:
    kind = edit[0]
    if kind == "workflow":
        _, name, replicas, per_replica, gpu = edit
        (repo / f"workflows/{name}.yaml").write_text(job(str(name), int(replicas), int(per_replica), int(gpu)))
    elif kind == "image":  # new objects, the same demands: the plan is reused, the file is built again
        path = repo / f"workflows/{edit[1]}.yaml"
        lines = (path.read_text() if path.exists() else job(str(edit[1]))).splitlines(keepends=True)
        path.write_text("".join(re.sub(r"(, image: '[^']*')?\}\n$", f", image: 'img:{edit[2]}'}}\n", line)
                                if "resource: rep" in line else line for line in lines))
    elif kind == "delete":
        (repo / f"workflows/{edit[1]}.yaml").unlink(missing_ok=True)
    elif kind == "broken":
        (repo / f"workflows/{edit[1]}.yaml").write_text(str(edit[2]))
    elif kind == "config":
        (repo / "toporender.yaml").write_text(config(str(edit[1]), bool(edit[2]), str(edit[3])))
    elif kind == "config-broken":
        (repo / "toporender.yaml").write_text(str(edit[1]))
    elif kind == "inventory":
        (repo / "nodes.yaml").write_text(inventory(int(edit[1])))
    elif kind == "evict":  # the cache dropped every entry of one kind (its size cap, or someone cleaning up)
        for path in (Path(os.environ["TOPORENDER_CACHE_DIR"]) / "v1").glob(f"{edit[1]}-*"):
            path.unlink()
    elif kind == "lock":
        order = "".join(f'- "{key}"\n' for key in edit[1])  # type: ignore[union-attr]
        (repo / "toporender.lock").write_text(f"version: 1\norder:\n{order}")
    else:
        (repo / "toporender.lock").unlink(missing_ok=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(EDITS, min_size=1, max_size=6),
       args=st.sampled_from([(), ("--format", "json"), ("--strict",), ("--namespace", "other")]))
def test_random_edits_render_the_same_with_and_without_the_cache(tmp_path_factory: pytest.TempPathFactory,
                                                                edits: list[tuple[object, ...]],
                                                                args: tuple[str, ...]) -> None:
    base = tmp_path_factory.mktemp("edits")
    after_each_edit(base / "cache", small_repo(base / "repo"), edits, lambda repo: assert_same(repo, *args))


def after_each_edit(cache: Path, repo: Path, edits: list[tuple[object, ...]], check: Callable[[Path], object]
                    ) -> None:
    """``check(repo)`` with the cache folder ``cache``, then again after each of ``edits`` (hypothesis examples
    cannot take function-scoped fixtures, so the environment is set and restored here)."""
    before = os.environ.get("TOPORENDER_CACHE_DIR")
    os.environ["TOPORENDER_CACHE_DIR"] = str(cache)
    try:
        check(repo)
        for edit in edits:
            apply(repo, edit)
            check(repo)
    finally:
        if before is None:
            os.environ.pop("TOPORENDER_CACHE_DIR", None)
        else:
            os.environ["TOPORENDER_CACHE_DIR"] = before


def test_a_hit_serves_the_stored_render_and_an_edit_misses(tmp_path: Path, cache_dir: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    first = assert_same(repo)
    assert first.code == 0 and len(entries(cache_dir)) == 1
    (repo / "workflows/c.yaml").write_text(job("c"))
    assert "name: c-" in assert_same(repo).stdout
    assert len(entries(cache_dir)) == 2
    (repo / "workflows/c.yaml").unlink()
    assert assert_same(repo).stdout == first.stdout


def test_a_broken_input_fails_as_without_the_cache_after_a_cached_success(tmp_path: Path, cache_dir: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    assert assert_same(repo).code == 0
    (repo / "workflows/a.yaml").write_text("workflow: [\n")
    broken = assert_same(repo)
    assert broken.code == 1 and broken.stdout == "" and "workflows/a.yaml:" in broken.stderr
    (repo / "workflows/a.yaml").write_text(job("a"))
    (repo / "nodes.yaml").write_text("nodes: 3\n")
    assert assert_same(repo).code == 1
    (repo / "nodes.yaml").unlink()
    missing = assert_same(repo)
    assert missing.code == 1 and "not found" in missing.stderr


def test_warnings_come_back_from_the_cache(tmp_path: Path, cache_dir: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    (repo / "nodes.yaml").write_text(inventory(8))
    result = assert_same(repo)
    assert result.code == 0 and "warning: group 'g' cannot be placed" in result.stderr


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign", "garbage", "bad-meta", "empty"])
def test_a_damaged_or_foreign_entry_is_a_miss_and_is_rewritten(tmp_path: Path, cache_dir: Path,
                                                               damage: str) -> None:
    repo = small_repo(tmp_path / "repo")
    good = run_cli("render", "--no-cache", str(repo))
    run_cli("render", str(repo))
    [entry] = entries(cache_dir)
    raw = entry.read_bytes()
    if damage == "flip":
        bad = raw[:-10] + bytes([raw[-10] ^ 1]) + raw[-9:]
    elif damage == "truncate":
        bad = raw[: len(raw) // 2]
    elif damage == "foreign":
        payload = b'{"lock":null,"warnings":[]}\nkind: Secret\n'
        other = "0" * 64
        bad = cache.entry_header("render", other, payload) + payload
    elif damage == "garbage":
        bad = os.urandom(200)
    elif damage == "bad-meta":  # a writer who knows the format, with a meta part no render writes
        payload = b'{"lock":5,"warnings":"x"}\nkind: Secret\n'
        bad = cache.entry_header("render", entry.name.split("-", 1)[1], payload) + payload
    else:
        bad = b""
    entry.write_bytes(bad)
    again = run_cli("render", str(repo))
    assert (again.code, again.stdout, again.stderr) == (good.code, good.stdout, good.stderr)
    assert entry.read_bytes() == raw
    assert run_cli("render", str(repo)).stdout == good.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
@pytest.mark.parametrize("planted", ["pipe", "link-to-pipe", "link-to-device", "link-to-entry", "huge", "directory"])
def test_an_entry_that_is_no_regular_file_is_a_miss(tmp_path: Path, cache_dir: Path, planted: str) -> None:
    """Whoever can write the cache directory can put anything under an entry's name; reading a pipe would wait
    forever and a device need not end. Each is a miss, and the render is the uncached one."""
    repo = small_repo(tmp_path / "repo")
    good = run_cli("render", "--no-cache", str(repo))
    run_cli("render", str(repo))
    [entry] = entries(cache_dir)
    raw = entry.read_bytes()
    entry.unlink()
    if planted == "pipe":
        os.mkfifo(entry)
    elif planted == "link-to-pipe":
        os.mkfifo(tmp_path / "pipe")
        entry.symlink_to(tmp_path / "pipe")
    elif planted == "link-to-device":
        entry.symlink_to(os.devnull)
    elif planted == "link-to-entry":  # even an intact entry is not read through a link
        (tmp_path / "elsewhere").write_bytes(raw)
        entry.symlink_to(tmp_path / "elsewhere")
    elif planted == "huge":
        with entry.open("wb") as fh:
            fh.truncate(cache.MAX_ENTRY_BYTES + cache.HEADER_BYTES + 1)
    else:
        entry.mkdir()
    found = within(30, lambda: find(Store(cache_dir), repo, "stream-yaml", RenderOptions()))
    assert found is not None and found.meta is None
    again = run_cli("render", str(repo))
    assert (again.code, again.stdout, again.stderr) == (good.code, good.stdout, good.stderr)
    if planted != "directory":
        assert not entry.is_symlink() and entry.read_bytes() == raw


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
def test_the_key_does_not_wait_on_a_file_replaced_by_a_pipe(tmp_path: Path) -> None:
    """The key hashes the files the walk classified a moment before; one replaced by a pipe since then is an
    error (the render then goes uncached and reports it), not a wait for a writer."""
    os.mkfifo(tmp_path / "a.yaml")
    with pytest.raises(OSError, match="not a regular file"):
        within(30, lambda: cache._file_hash(tmp_path, "a.yaml", found=True))


def test_a_link_at_the_temporary_name_is_not_written_through(tmp_path: Path, cache_dir: Path) -> None:
    """The writer creates its temporary file anew: a link planted at that name (it is predictable: the entry's
    name and the writer's pid) is replaced, and the file it points to is left as it was."""
    repo = small_repo(tmp_path / "repo")
    run_cli("render", str(repo))
    [entry] = entries(cache_dir)
    raw = entry.read_bytes()
    entry.unlink()
    victim = tmp_path / "victim.txt"
    victim.write_text("not toporender's\n")
    (cache_dir / "v1" / f".tmp-{entry.name}.{os.getpid()}").symlink_to(victim)
    assert run_cli("render", str(repo)).code == 0
    assert victim.read_text() == "not toporender's\n"
    assert entry.read_bytes() == raw
    assert not list((cache_dir / "v1").glob(".tmp-*"))


def test_no_cache_flag_and_env_write_nothing(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = small_repo(tmp_path / "repo")
    assert run_cli("render", "--no-cache", str(repo)).code == 0
    assert run_cli("golden", "--no-cache", "--check", str(repo)).code in (0, 1)
    monkeypatch.setenv("TOPORENDER_NO_CACHE", "1")
    assert run_cli("render", str(repo)).code == 0
    assert not cache_dir.exists()
    monkeypatch.setenv("TOPORENDER_NO_CACHE", "0")
    assert run_cli("render", str(repo)).code == 0
    assert entries(cache_dir)


def test_the_cache_never_writes_into_the_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = small_repo(tmp_path / "repo")
    monkeypatch.setenv("TOPORENDER_CACHE_DIR", str(repo / ".cache"))
    before = sorted(p.relative_to(repo) for p in repo.rglob("*"))
    assert run_cli("render", str(repo)).code == 0
    assert sorted(p.relative_to(repo) for p in repo.rglob("*")) == before


def test_cache_directory_follows_the_environment(tmp_path: Path) -> None:
    assert cache.cache_directory({"TOPORENDER_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/c")
    assert cache.cache_directory({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/toporender")
    assert cache.cache_directory({"HOME": "/h"}) == Path("/h/.cache/toporender")
    assert cache.cache_directory({"HOME": "/h", "TOPORENDER_NO_CACHE": "yes"}) is None
    assert cache.cache_directory({}) is None


def test_golden_and_render_repo_agree_with_the_uncached_render(tmp_path: Path, cache_dir: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    (repo / "nodes.yaml").write_text(inventory(7))
    store = cache.open_store(repo)
    plain = render_repo(repo)
    for _ in range(2):
        cached = render_repo(repo, RenderOptions(), store)
        assert [(f.source, f.objects) for f in cached.files] == [(f.source, f.objects) for f in plain.files]
        assert (cached.warnings, cached.lock) == (plain.warnings, plain.lock)
    assert store is not None and find(store, repo, "result", RenderOptions()).meta is not None  # type: ignore[union-attr]
    first = run_cli("golden", str(repo))
    assert first.code == 1
    assert run_cli("golden", "--check", str(repo)).code == 0
    assert run_cli("golden", "--check", "--no-cache", str(repo)).code == 0


def test_the_key_covers_code_options_and_format(tmp_path: Path, cache_dir: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    repo = small_repo(tmp_path / "repo")
    store = Store(cache_dir)
    keys = {find(store, repo, kind, options).key  # type: ignore[union-attr]
            for kind in ("stream-yaml", "stream-json")
            for options in (RenderOptions(), RenderOptions(namespace="x"), RenderOptions(strict=True))}
    assert len(keys) == 6
    before = find(store, repo, "stream-yaml", RenderOptions())
    monkeypatch.setattr(cache, "_CODE", ["another build"])
    assert find(store, repo, "stream-yaml", RenderOptions()).key != before.key  # type: ignore[union-attr]


def test_entries_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path, max_bytes=10_000)
    for i in range(30):
        store.write("render", f"{i:064x}", os.urandom(1_000))
    total = sum(p.stat().st_size for p in (tmp_path / "v1").iterdir())
    assert total <= 10_000 and store.read("render", f"{29:064x}") is not None
    monkeypatch.setattr(cache, "MAX_ENTRY_BYTES", 100)
    store.write("render", "f" * 64, b"x" * 101)
    assert store.read("render", "f" * 64) is None


def test_concurrent_renders_share_a_cache(tmp_path: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    env = {**os.environ, "TOPORENDER_CACHE_DIR": str(tmp_path / "cache")}
    for edit in (None, None, ("image", "a", 2), ("inventory", 5)):  # all built, a hit, one file, a repack
        if edit is not None:
            apply(repo, edit)
        plain = run_cli("render", "--no-cache", str(repo))
        procs = [subprocess.Popen([sys.executable, "-m", "toporender", "render", str(repo)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0] * 4
        assert all((out.decode(), err.decode()) == (plain.stdout, plain.stderr) for out, err in outs)
    names = [p.name for p in (tmp_path / "cache" / "v1").iterdir()]
    assert len([n for n in names if n.startswith("render-")]) == 3 and not any(n.startswith(".tmp-") for n in names)


def test_argocd_generate_uses_the_cache(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toporender.hosts.argocd import generate

    repo = small_repo(tmp_path / "repo")
    environ = {"TOPORENDER_CACHE_DIR": str(cache_dir), "ARGOCD_APP_NAMESPACE": "ml"}
    plain = generate(repo, {**environ, "TOPORENDER_NO_CACHE": "1"})
    assert not entries(cache_dir)
    for _ in range(2):
        out, warnings = generate(repo, environ)
        assert b"".join(out) == b"".join(plain[0]) and warnings == plain[1]
    assert len(entries(cache_dir)) == 1


def plans(directory: Path) -> list[Path]:
    return sorted((directory / "v1").glob("plan-*"))


def test_the_plan_is_reused_while_demands_and_inventory_hold(tmp_path: Path, cache_dir: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    (repo / "nodes.yaml").write_text(inventory(3))
    assert_same(repo)
    [plan] = plans(cache_dir)
    (repo / "toporender.yaml").write_text(config(namespace="team-b", pin="soft"))  # same demands, same nodes
    assert_same(repo)
    assert plans(cache_dir) == [plan]
    plan.write_bytes(plan.read_bytes()[:-3])  # a damaged plan entry is packed again and rewritten
    for rows in (cache_dir / "v1").glob("rows-*"):  # (read when the rows kept beside it are gone)
        rows.unlink()
    (repo / "toporender.yaml").write_text(config(namespace="team-c"))
    assert assert_same(repo).code == 0
    assert plans(cache_dir) == [plan] and plan.read_bytes().endswith(b"]]")
    (repo / "workflows/a.yaml").write_text(job("a", gpu=2))  # a new demand is a new plan
    assert_same(repo)
    (repo / "nodes.yaml").write_text(inventory(4))  # and so is a new inventory
    assert_same(repo)
    assert len(plans(cache_dir)) == 3
