"""Render throughput, memory and cold start (targets 1, 2 and 4 of the benchmark table), measured as whole processes.

Each figure is the median of several runs after a warm-up, with the range, and every baseline
is measured in the same run on the same machine, in rounds that run every command once, so ratios
stay meaningful when the machine is busy. Wall time is taken around the child process (interpreter
start included); peak RSS is the child's own ``ru_maxrss`` from ``os.wait4``, and for the 10,000-Pod renders,
which spread over worker processes where there are several CPUs, the sum of the peaks of every process of
the command (``timing.TreePeaks``).

``python benchmarks/render/bench.py [--runs N]`` prints table rows (``benchmarks/run.py`` adds
the header); the exit status is 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from generate import TOTAL_PODS, WORKFLOWS, generate  # noqa: E402
from timing import Child, Figure, precompile, row, run_child, verdict  # noqa: E402

KUSTOMIZE_PODS = 1_000
JSON_TARGET_S = 0.5
YAML_TARGET_S = 1.0
RSS_TARGET_MIB = 300
COLD_TARGET_S = 0.25
SELF_CHECK_SHARE = 0.05
COLD_JSON_S = 0.55
COLD_YAML_S = 0.8
DEPENDENCIES = "yaml, ruamel.yaml, jinja2, jsonpatch, pydantic, click, jsonschema, yaml_rs, orjson"
# The reference figures the render targets were set against, for budgets scaled to the machine the benchmark
# runs on: kustomize re-emitting 1,000 Pods took about 2.4 s where the targets were set, and importing these
# six dependencies about 0.14 s.
REFERENCE_KUSTOMIZE_S = 2.4
REFERENCE_SIX = "yaml, ruamel.yaml, jinja2, jsonpatch, pydantic, click"
REFERENCE_SIX_S = 0.14


def toporender_command() -> list[str]:
    """The installed console script (what users and hosts run), else ``python -m toporender``."""
    script = shutil.which("toporender", path=str(Path(sys.executable).parent)) or shutil.which("toporender")
    return [script] if script else [sys.executable, "-m", "toporender"]


@dataclass(frozen=True)
class Command:
    """One measured command line, and where its stdout goes (dropped when None)."""

    argv: list[str]
    stdout_path: Path | None = None
    tree: bool = False
    """Peak RSS summed over the processes the command starts."""


def spread(k: int, runs: int) -> set[int]:
    """``k`` of the rounds ``0 .. runs - 1``, evenly spread (all of them when ``k >= runs``)."""
    return set(range(runs)) if k >= runs else {i * runs // k for i in range(k)}


def in_rounds(commands: dict[str, Command], runs: int, fewer: dict[str, int] | None = None) -> dict[str, list[Child]]:
    """Every command once as a warm-up, then ``runs`` rounds that run each command once; a command in ``fewer``
    runs in only that many rounds, spread over the sitting.

    Rounds make a change in the machine's load during a sitting reach every figure alike, so the ratios of a run
    (the render against kustomize, the cold start against the imports) compare figures of the same moments."""
    fewer = fewer or {}
    for c in commands.values():
        run_child(c.argv, stdout_path=c.stdout_path, tree=c.tree)
    rounds = {name: spread(fewer.get(name, runs), runs) for name in commands}
    samples: dict[str, list[Child]] = {name: [] for name in commands}
    for r in range(runs):
        for name, c in commands.items():
            if r in rounds[name]:
                samples[name].append(run_child(c.argv, stdout_path=c.stdout_path, tree=c.tree))
    return samples


def walls(samples: list[Child]) -> Figure:
    return Figure([s.wall for s in samples], "s")


def kustomize_command(json_stream: Path, work: Path) -> Command | None:
    """``kubectl kustomize`` re-emitting the first 1,000 rendered Pods, listed as one resource file; None without
    kubectl."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    import yaml

    pods = []
    with json_stream.open() as f:
        for line in f:
            obj = json.loads(line)
            if obj.get("kind") == "Pod":
                pods.append(obj)
                if len(pods) == KUSTOMIZE_PODS:
                    break
    kdir = work / "kustomize"
    kdir.mkdir()
    (kdir / "pods.yaml").write_text(yaml.dump_all(pods, Dumper=yaml.CSafeDumper, sort_keys=False))
    (kdir / "kustomization.yaml").write_text("resources:\n- pods.yaml\n")
    return Command([kubectl, "kustomize", str(kdir)])


def emit_worker(objects_path: str, runs: int) -> None:
    """In one process: our YAML emitter and PyYAML's C emitter on the same objects (CPU-bound)."""
    import yaml

    from toporender.emit.stream import dump_yaml

    with open(objects_path) as f:
        objects = [json.loads(line) for line in f]
    ours_text = dump_yaml(objects)
    if list(yaml.load_all(ours_text, Loader=yaml.CSafeLoader)) != objects:
        raise SystemExit("dump_yaml output does not load back as the rendered objects")

    def pyyaml() -> str:
        return yaml.dump_all(objects, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False,
                             allow_unicode=True, width=2**31 - 1, explicit_start=True)

    times: dict[str, list[float]] = {"ours": [], "pyyaml": []}
    for _ in range(runs + 1):
        for name, fn in (("ours", lambda: dump_yaml(objects)), ("pyyaml", pyyaml)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    print(json.dumps({k: v[1:] for k, v in times.items()}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "7")),
                        help="measured runs per figure, after one warm-up (default 7, env BENCH_RUNS)")
    parser.add_argument("--emit-worker", metavar="OBJECTS", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.emit_worker:
        emit_worker(args.emit_worker, args.runs)
        return 0

    os.environ["TOPORENDER_NO_CACHE"] = "1"  # these targets are cold renders; the cache has its own benchmark
    cmd = toporender_command()
    precompile()
    failed = False
    with tempfile.TemporaryDirectory(prefix="toporender-bench-") as tmp:
        work = Path(tmp)
        repo = generate(work / "repo")
        json_out, yaml_out = work / "out.json", work / "out.yaml"

        render_json = Command([*cmd, "render", "--format", "json", str(repo)], json_out)
        run_child(render_json.argv, stdout_path=json_out)  # the stream the checks and kustomize's input use
        with json_out.open() as f:
            kinds = [json.loads(line)["kind"] for line in f]
        if kinds.count("Pod") != TOTAL_PODS:
            raise SystemExit(f"expected {TOTAL_PODS} Pods, rendered {kinds.count('Pod')}")
        commands = {
            "json": Command(render_json.argv, json_out, tree=True),
            "yaml": Command([*cmd, "render", str(repo)], yaml_out, tree=True),
            "cold": Command([*cmd, "render", str(REPO / "examples" / "single-rack")]),
            "bare": Command([sys.executable, "-c", "pass"]),
            "deps": Command([sys.executable, "-c", f"import {DEPENDENCIES}"]),
            "six": Command([sys.executable, "-c", f"import {REFERENCE_SIX}"]),
            "checked": Command([sys.executable, str(HERE / "selfcheck.py"), "on", "render", "--format", "json",
                                str(repo)], work / "checked.json"),
            "unchecked": Command([sys.executable, str(HERE / "selfcheck.py"), "off", "render", "--format", "json",
                                  str(repo)], work / "unchecked.json"),
            "floor": Command([sys.executable, str(HERE / "floor.py"), "--one", str(repo), str(json_out),
                              str(work / "floor.jsonl")]),
        }
        kustomize_run = kustomize_command(json_out, work)
        if kustomize_run is not None:
            commands["kustomize"] = kustomize_run
        samples = in_rounds(commands, args.runs, {"kustomize": max(3, args.runs // 2)})
        json_runs, yaml_runs, cold, bare, deps, six = (samples[k] for k in ("json", "yaml", "cold", "bare", "deps",
                                                                           "six"))
        kustomize = walls(samples["kustomize"]) if kustomize_run is not None else None

        floor_steps = [json.loads(line) for line in (work / "floor.jsonl").read_text().splitlines()[1:]]
        if (work / "checked.json").read_bytes() != (work / "unchecked.json").read_bytes():
            raise SystemExit("the render with and without its output check printed different streams")
        worker = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--emit-worker", str(json_out),
                                 "--runs", str(args.runs)], check=True, capture_output=True, text=True)
        emit_times = json.loads(worker.stdout)

    label = f"{WORKFLOWS} workflows / {TOTAL_PODS:,} Pods"
    k_text = f"kubectl kustomize, {KUSTOMIZE_PODS:,} Pods: {kustomize.text()}" if kustomize else "kubectl not found"
    rows = []
    for fmt, runs_, limit in (("--format json", json_runs, JSON_TARGET_S), ("YAML", yaml_runs, YAML_TARGET_S)):
        fig = walls(runs_)
        ratio = f"{fig.median / kustomize.median:.2f}x" if kustomize else "n/a"
        ok = verdict(fig.median, limit)
        failed |= ok != "pass"
        rows.append(row(f"1. render {fmt}, {label} <= {limit} s", fig.text(), k_text, ratio, ok))
        if kustomize:
            budget = limit / REFERENCE_KUSTOMIZE_S
            rows.append(row(f"1. render {fmt} as a share of the kustomize run (scaled target: {limit} s / "
                            f"{REFERENCE_KUSTOMIZE_S} s = {budget:.2f}x)", ratio, k_text, ratio,
                            f"info: {'within' if fig.median / kustomize.median <= budget else 'over'}"))

    checked, unchecked = walls(samples["checked"]), walls(samples["unchecked"])
    shares = Figure([a.wall / b.wall - 1 for a, b in zip(samples["checked"], samples["unchecked"])], "")
    ok = verdict(shares.median, SELF_CHECK_SHARE)
    failed |= ok != "pass"
    rows.append(row(f"1. output self-check, share of render --format json, {label} <= {SELF_CHECK_SHARE:.0%}",
                    f"{shares.median:+.1%} ({min(shares.samples):+.1%} to {max(shares.samples):+.1%}, paired)",
                    f"same render without the check: {unchecked.text()}; with it: {checked.text()}",
                    f"{checked.median / unchecked.median:.3f}x", ok))

    ours, theirs = Figure(emit_times["ours"], "s"), Figure(emit_times["pyyaml"], "s")
    rows.append(row(f"1. YAML emit only, {TOTAL_PODS:,} Pods' objects, in-process (reference)", ours.text(),
                    f"PyYAML CSafeDumper: {theirs.text()}", f"{ours.median / theirs.median:.2f}x", "info"))

    # the floor of a round: starting Python (that round's "python -c pass") plus the steps floor.py times
    floor = Figure([b.wall + sum(step.values()) for b, step in zip(bare, floor_steps, strict=True)], "s")
    for fmt, runs_, limit in (("--format json", json_runs, COLD_JSON_S), ("YAML", yaml_runs, COLD_YAML_S)):
        fig = walls(runs_)
        ok = verdict(fig.median, limit)
        failed |= ok != "pass"
        rows.append(row(f"8. cold render {fmt}, {label} <= {limit} s, against the floor", fig.text(),
                        f"floor (start, imports, yaml-rs parse, orjson write; benchmarks/render/floor.py): "
                        f"{floor.text()}", f"{fig.median / floor.median:.2f}x", ok))

    cold_fig, deps_fig, bare_fig = walls(cold), walls(deps), walls(bare)
    ok = verdict(cold_fig.median, COLD_TARGET_S)
    failed |= ok != "pass"
    rows.append(row(f"2. cold start: render examples/single-rack <= {COLD_TARGET_S} s", cold_fig.text(),
                    f"importing all dependencies: {deps_fig.text()}; python -c pass: {bare_fig.text()}",
                    f"{cold_fig.median / deps_fig.median:.2f}x", ok))
    six_fig = walls(six)
    budget = COLD_TARGET_S / REFERENCE_SIX_S
    share = cold_fig.median / six_fig.median
    rows.append(row(f"2. cold start as a multiple of importing the six dependencies (scaled target: "
                    f"{COLD_TARGET_S} s / {REFERENCE_SIX_S} s = {budget:.2f}x)", f"{share:.2f}x",
                    f"import {REFERENCE_SIX}: {six_fig.text()}", f"{share:.2f}x",
                    f"info: {'within' if share <= budget else 'over'}"))

    rss = Figure([max(s.rss_mib for s in runs_) for runs_ in zip(json_runs, yaml_runs)], "MiB")
    small_rss = Figure([s.rss_mib for s in cold], "MiB")
    ok = verdict(rss.median, RSS_TARGET_MIB)
    failed |= ok != "pass"
    rows.append(row(f"4. peak RSS, {label} (larger of JSON/YAML run, all processes) <= {RSS_TARGET_MIB} MiB",
                    rss.text(), f"render examples/single-rack: {small_rss.text()}",
                    f"{rss.median / small_rss.median:.2f}x", ok))
    print("\n".join(rows), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
