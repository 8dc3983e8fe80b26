"""Re-renders from the render cache (target 5 of the benchmark table), measured as whole processes.

On the 10,000-Pod repo, each round: edit one workflow (a new image tag, no new demand) and render; render again
with nothing changed; add a node to the inventory (which forces a repack) and render; then render the same
state with ``--no-cache``, the same-run baseline. Every cached stream is compared byte for byte with the
uncached render of the same inputs. The cache lives in a temporary directory.

``python benchmarks/cache/bench.py [--runs N]`` prints table rows; the exit status is 1 when a target is missed.
The CPU time (user + system) of each case goes to stderr: on a shared machine it moves less than wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "render"), str(HERE.parent)]

from bench import toporender_command  # noqa: E402
from generate import TOTAL_PODS, WORKFLOWS, generate  # noqa: E402
from timing import Child, Figure, precompile, row, run_child, verdict  # noqa: E402

UNCHANGED_TARGET_S = 0.10
ONE_CHANGED_TARGET_S = 0.30
REPACK_TARGET_S = 0.40
IMAGE = "nvcr.io/nvidia/pytorch:24.10-py3"


def edit_workflow(repo: Path, n: int) -> None:
    """A new image tag on the first task of one workflow: its objects change, its demands do not."""
    path = repo / "workflows" / "train-07.yaml"
    text = path.read_text()
    head, sep, tail = text.partition("image: '")
    path.write_text(head + sep + f"{IMAGE}-r{n}" + tail[tail.index("'"):])


def add_node(repo: Path, n: int) -> None:
    """One more node in the inventory: a different cluster, so the plan is packed again."""
    with (repo / "inventory" / "nodes.yaml").open("a") as f:
        f.write(f"- {{name: extra-{n:03d}, gpus: 4, labels: {{topology.kubernetes.io/zone: zone-a, "
                f"nvidia.com/gpu.clique: clique-a-9{n:02d}, nvidia.com/gpu.product: NVIDIA-GB200}}}}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "7")),
                        help="measured rounds, after one warm-up (default 7, env BENCH_RUNS)")
    args = parser.parse_args(argv)
    cmd = toporender_command()
    precompile()
    samples: dict[str, list[Child]] = {"one": [], "hit": [], "repack": [], "cold": []}
    with tempfile.TemporaryDirectory(prefix="toporender-bench-cache-") as tmp:
        work = Path(tmp)
        repo = generate(work / "repo")
        os.environ["TOPORENDER_CACHE_DIR"] = str(work / "cache")
        os.environ.pop("TOPORENDER_NO_CACHE", None)
        render = [*cmd, "render", "--format", "json", str(repo)]
        outs = {name: work / f"{name}.json" for name in samples}
        for n in range(args.runs + 1):
            edit_workflow(repo, n)
            one = run_child(render, stdout_path=outs["one"])
            hit = run_child(render, stdout_path=outs["hit"])
            add_node(repo, n)
            repack = run_child(render, stdout_path=outs["repack"])
            cold = run_child([*render[:-1], "--no-cache", str(repo)], stdout_path=outs["cold"])
            if outs["one"].read_bytes() != outs["hit"].read_bytes() or \
                    outs["repack"].read_bytes() != outs["cold"].read_bytes():
                raise SystemExit("a cached render printed a different stream than the uncached one")
            if n:  # round 0 is the warm-up
                for name, child in (("one", one), ("hit", hit), ("repack", repack), ("cold", cold)):
                    samples[name].append(child)

    label = f"{WORKFLOWS} workflows / {TOTAL_PODS:,} Pods, render --format json"
    cold = Figure([s.wall for s in samples["cold"]], "s")
    baseline = f"uncached render (--no-cache): {cold.text()}"
    failed = False
    rows = []
    for name, what, limit in (("hit", "nothing changed", UNCHANGED_TARGET_S),
                              ("one", f"one of {WORKFLOWS} workflows changed", ONE_CHANGED_TARGET_S),
                              ("repack", "inventory changed (repack)", REPACK_TARGET_S)):
        fig = Figure([s.wall for s in samples[name]], "s")
        ok = verdict(fig.median, limit)
        failed |= ok != "pass"
        rows.append(row(f"5. re-render from the cache, {what}, {label} <= {limit} s", fig.text(), baseline,
                        f"{fig.median / cold.median:.2f}x", ok))
    print("\n".join(rows), flush=True)
    print("\n".join(f"cpu (user + system), {name}: {Figure([s.cpu for s in samples[name]], 's').text()}"
                    for name in ("hit", "one", "repack", "cold")), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
