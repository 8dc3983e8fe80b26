"""What a JSON render of the benchmark repo costs before its own work: ``python benchmarks/render/floor.py [REPO]``.

A render cannot skip starting the interpreter, importing the libraries it needs (pydantic to validate,
Jinja2 for the group template, click for the command line, yaml-rs to read YAML, orjson to write JSON),
parsing every YAML file of the repo, and writing the rendered objects as JSON lines. Each run (``--runs
N``, 7 by default) times those steps in a fresh process, the objects to write read from an earlier
render's output before the clock for writing starts, and ``toporender render --format json`` of the same
repo runs alternately with it. The difference is the render's own work: importing its modules and
building its models, validating, expanding topology, building objects and placing them. Not a target: it
tells how much of the 0.5 s JSON target that work may take. Without REPO the benchmark repo is generated into a
temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from bench import toporender_command  # noqa: E402
from timing import precompile, run_child  # noqa: E402

STEPS = ("imports", "parse", "write")


def one_run(repo: Path, rendered: Path, times_path: Path) -> None:
    """The unavoidable steps once, in this process; their times go to ``times_path``."""
    import gc

    gc.disable()
    start = time.perf_counter()
    import click  # noqa: F401
    import jinja2  # noqa: F401
    import orjson
    import yaml_rs
    from pydantic import BaseModel  # noqa: F401  (a bare "import pydantic" defers loading its models' machinery)

    imported = time.perf_counter()
    for path in sorted(repo.rglob("*.yaml")):
        yaml_rs.loads(path.read_text(), parse_datetime=False)
    parsed = time.perf_counter()
    with rendered.open("rb") as lines:
        objects = [orjson.loads(line) for line in lines]
    ready = time.perf_counter()
    sys.stdout.buffer.write(b"".join(orjson.dumps(o, option=orjson.OPT_APPEND_NEWLINE) for o in objects))
    sys.stdout.flush()
    written = time.perf_counter()
    with times_path.open("a") as times:  # one line per run: a caller running it in rounds reads them all
        times.write(json.dumps({"imports": imported - start, "parse": parsed - imported,
                                "write": written - ready}) + "\n")
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--one", nargs=3, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("repo", nargs="?", type=Path)
    args = parser.parse_args(argv)
    if args.one:
        one_run(*args.one)
    os.environ["TOPORENDER_NO_CACHE"] = "1"  # a cold render; a cache hit would time a file copy
    precompile()
    with tempfile.TemporaryDirectory(prefix="toporender-floor-") as tmp:
        root = args.repo
        if root is None:
            from generate import generate

            root = generate(Path(tmp) / "repo")
        rendered, times_path = Path(tmp) / "rendered.jsonl", Path(tmp) / "times.json"
        render = [*toporender_command(), "render", "--format", "json", str(root)]
        run_child(render, stdout_path=rendered)
        start, floor, steps, renders = [], [], [], []
        for _ in range(args.runs):
            start.append(run_child([sys.executable, "-c", "pass"]).wall)
            run_child([sys.executable, __file__, "--one", str(root), str(rendered), str(times_path)])
            step = json.loads(times_path.read_text().splitlines()[-1])
            steps.append(step)
            floor.append(start[-1] + sum(step.values()))
            renders.append(run_child(render).wall)

    def fig(values: list[float]) -> str:
        return f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"

    print(f"{'python -c pass':32s} {fig(start)}")
    for name in STEPS:
        print(f"{name:32s} {fig([s[name] for s in steps])}")
    print(f"{'floor (the four above)':32s} {fig(floor)}")
    print(f"{'toporender render --format json':32s} {fig(renders)}")
    own = [r - f for r, f in zip(renders, floor, strict=True)]
    print(f"{'render minus floor':32s} {fig(own)}  (the render's own work)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
