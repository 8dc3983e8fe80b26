"""Where a render's time goes, stage by stage: ``python benchmarks/render/phases.py [--runs N] [REPO]``.

Each run is a fresh process (so imports and caches start cold, as for the CLI) that times the
pipeline's stages in order: imports, load (read, parse and validate every file), expand (validate
and expand topology), build (render objects), place (inventory, packer, annotations), then the JSON
and YAML emitters (``toporender.emit.stream``). The medians over the runs are printed; without REPO the benchmark repo
is generated into a temporary directory. Not a target of its own: the figures explain the whole-process
rows of ``bench.py``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGES = ("imports", "load", "expand", "build", "place", "emit json", "emit yaml")
EMITTERS = {"json": "emit json", "yaml": "emit yaml"}  # what the CLI runs


def one_run(root: Path) -> dict[str, float]:
    """Time every stage once in this process (the collector off, as in the CLI)."""
    gc.disable()
    times: dict[str, float] = {}
    start = time.perf_counter()
    from toporender import pipeline as render
    from toporender.build.objects import build_gangs
    from toporender.emit import stream as emit
    from toporender.errors import DiagnosticSink
    from toporender.load.repo import load_repo
    from toporender.placement import stage as placing

    times["imports"] = time.perf_counter() - start

    def stage(name: str, fn: object) -> object:
        t = time.perf_counter()
        result = fn()  # type: ignore[operator]
        times[name] = time.perf_counter() - t
        return result

    repo = stage("load", lambda: load_repo(root))
    sink = DiagnosticSink()
    options = render.RenderOptions()
    gangs = stage("expand", lambda: render._expand(repo, options, sink))
    built = stage("build", lambda: build_gangs(repo, gangs, sink))

    def place() -> list[dict[str, object]]:
        placing.pack_stage(repo, built, inventory=None, inventory_docs=None, strict=None, sink=sink)
        return [obj for _, group_objs, pods in built for obj in group_objs + pods]

    objects = stage("place", place)
    stage("emit json", lambda: emit.dump_chunks(objects, "json"))
    stage("emit yaml", lambda: emit.dump_chunks(objects, "yaml"))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("repo", nargs="?", type=Path)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(args.repo)))
        return 0
    with tempfile.TemporaryDirectory(prefix="toporender-phases-") as tmp:
        root = args.repo
        if root is None:
            sys.path.insert(0, str(HERE))
            from generate import generate

            root = generate(Path(tmp) / "repo")
        runs = [json.loads(subprocess.run([sys.executable, __file__, "--one", str(root)], check=True,
                                          capture_output=True, text=True).stdout) for _ in range(args.runs)]
    for name in STAGES:
        values = [r[name] for r in runs]
        print(f"{name:22s} {statistics.median(values):.3f} s  ({min(values):.3f}-{max(values):.3f})")
    for fmt, emitter in EMITTERS.items():
        total = [sum(v for k, v in r.items() if not k.startswith("emit") or k == emitter) for r in runs]
        print(f"{'sum, ' + fmt:22s} {statistics.median(total):.3f} s  "
              "(the CLI's emitter; interpreter start not included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
