"""Shared helpers: build throwaway workflow repos and run the CLI in-process."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar, cast

import pytest
from click.testing import CliRunner

from toporender.cli import cli

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliResult:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)


T = TypeVar("T")


def within(seconds: float, fn: Callable[[], T]) -> T:
    """``fn()``, run in a thread so that a call that never returns (a read waiting on a named pipe) fails the test
    after ``seconds`` instead of hanging the suite; what ``fn`` raises is raised here."""
    got: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            got.append((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread as it is
            got.append((False, exc))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if not got:
        pytest.fail(f"did not return within {seconds} s")
    ok, value = got[0]
    if not ok:
        raise value
    return cast(T, value)


def load_script(path: Path, name: str) -> ModuleType:
    """A script outside the package (a benchmark or a tool) imported as module ``name``, afresh each call.

    It is registered in ``sys.modules`` first: dataclasses look their module up while a class is made."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True, scope="session")
def _render_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Renders in tests (and the commands they spawn) share a throwaway cache, never the user's; every test that
    renders twice also checks that the cache gives the same answer."""
    os.environ["TOPORENDER_CACHE_DIR"] = str(tmp_path_factory.mktemp("render-cache"))
    os.environ.pop("TOPORENDER_NO_CACHE", None)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A render cache of the test's own, empty at the start: tests that count or damage its entries."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("TOPORENDER_CACHE_DIR", str(directory))
    return directory


def render_pool_case(backend: str, case: dict[str, Any], image: str) -> Any:
    """Render one case of a backend's table: a pool ``case["pool"]`` of ``backend``, one group of
    ``case["tasks"]`` (each with ``image``) and ``case["resources"]``, read from memory as the KRM host does."""
    import yaml

    from toporender.load.yaml_source import load_text
    from toporender.pipeline import render_documents

    pool = {"backend": backend, **case["pool"]}
    config = yaml.safe_dump({"namespace": "ml", "default_pool": "pool-a", "pools": {"pool-a": pool}})
    tasks = [{"image": image, **t} for t in case["tasks"]]
    workflow = yaml.safe_dump({"workflow": {"name": "wf", "groups": [{"name": "g", "tasks": tasks}],
                                            "resources": case["resources"]}})
    return render_documents(load_text(config, "toporender.yaml")[0], [load_text(workflow, "workflows/wf.yaml")[0]])


def write_repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    counter = iter(range(1_000_000))

    def make(files: dict[str, str]) -> Path:
        return write_repo(tmp_path / f"repo{next(counter)}", files)

    return make


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Report how much fuzzing ran, so a run that generated almost nothing shows."""
    import sys

    fuzz = sys.modules.get("test_fuzz")
    if fuzz is not None and fuzz.STATS["cases"]:
        stats = fuzz.STATS
        terminalreporter.write_line(
            f"fuzz: {stats['cases']} generated repos, {stats['rendered']} rendered and validated, "
            f"{len(stats['errors'])} distinct error messages")
