"""``toporender inventory import`` of large ``kubectl get nodes`` dumps: time and peak memory.

Three dumps from ``generate.py``: 150 MB of JSON and of YAML with nodes as kubectl prints them (conditions,
images, node info), and a 216,000-node YAML dump with labels and allocatable only (a cluster of 1.7 million
GPUs, the most nodes per byte). Each import runs as a whole process (``toporender inventory import DUMP -o
OUT``); the same-run baseline reads the same dump whole with the fastest parser at hand (``json.load``,
``yaml_rs.loads``), which is what the import did before it streamed, minus the conversion. A last row
(reference, no target) reads the imported 216,000-node inventory as ``plan`` and ``render`` do, against the
same read with every batch parsed as YAML.

``python benchmarks/inventory/bench.py [--runs N]`` prints table rows; exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from generate import write  # noqa: E402
from timing import Child, Figure, precompile, row, run_child, verdict  # noqa: E402

TARGET_S = 30.0
TARGET_MIB = 1024
READ_COMPACT = ("import sys; from pathlib import Path; from toporender.placement import nodelist; "
                "nodelist._plain_batch = nodelist._plain_batch if sys.argv[2] == 'plain' else lambda text, c: False; "
                "nodelist.read_inventory(Path(sys.argv[1]), 'inventory/nodes.yaml')")
"""Read a compact inventory as ``plan`` and ``render`` do, with the plain reader (``plain``) or with every batch
parsed as YAML (the same-run baseline: how it was read before the plain reader)."""
READ_WHOLE = {
    ".json": "import json, sys; json.load(open(sys.argv[1], encoding='utf-8'))",
    ".yaml": "import sys, yaml_rs; yaml_rs.loads(open(sys.argv[1], encoding='utf-8').read())",
}


def toporender() -> list[str]:
    script = shutil.which("toporender", path=str(Path(sys.executable).parent)) or shutil.which("toporender")
    return [script] if script else [sys.executable, "-m", "toporender"]


def alternating(ours: list[str], baseline: list[str], runs: int) -> tuple[list[Child], list[Child]]:
    """``runs`` runs of each command in turn, after one unmeasured run of ours."""
    run_child(ours)
    mine, base = [], []
    for _ in range(runs):
        mine.append(run_child(ours))
        base.append(run_child(baseline))
    return mine, base


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    precompile()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases = [("150 MB JSON NodeList", work / "nodes.json", None, False),
                 ("150 MB YAML NodeList", work / "nodes.yaml", None, False),
                 ("216,000 lean nodes, YAML", work / "lean.yaml", 216_000, True)]
        for title, dump, nodes, lean in cases:
            count, size = write(dump, nodes, lean, 150.0)
            ours = [*toporender(), "inventory", "import", str(dump), "-o", str(work / "inventory.yaml")]
            whole = [sys.executable, "-c", READ_WHOLE[dump.suffix], str(dump)]
            mine, base = alternating(ours, whole, args.runs)
            wall, rss = Figure([c.wall for c in mine], "s"), Figure([c.rss_mib for c in mine], "MiB")
            base_wall, base_rss = Figure([c.wall for c in base], "s"), Figure([c.rss_mib for c in base], "MiB")
            ok = verdict(wall.median, TARGET_S) == "pass" and verdict(rss.median, TARGET_MIB) == "pass"
            failed |= not ok
            print(row(f"inventory import, {title} ({count:,} nodes, {size / 1e6:.0f} MB) <= {TARGET_S:.0f} s, "
                      f"<= 1 GiB", f"{wall.text()}, {rss.median:.0f} MiB",
                      f"reading it whole: {base_wall.text()}, {base_rss.median:.0f} MiB",
                      f"{wall.median / base_wall.median:.2f}x time, {rss.median / base_rss.median:.2f}x memory",
                      "pass" if ok else "FAIL"), flush=True)
        # the last import wrote the 216,000 lean nodes: the inventory a 1.7M-GPU repo commits
        plain, parsed = ([sys.executable, "-c", READ_COMPACT, str(work / "inventory.yaml"), how]
                         for how in ("plain", "yaml"))
        mine, base = alternating(plain, parsed, args.runs)
        wall, base_wall = Figure([c.wall for c in mine], "s"), Figure([c.wall for c in base], "s")
        print(row("reading that imported 216,000-node inventory, as plan and render do (reference)",
                  f"{wall.text()}, {Figure([c.rss_mib for c in mine], 'MiB').median:.0f} MiB",
                  f"every batch parsed as YAML: {base_wall.text()}", f"{wall.median / base_wall.median:.2f}x",
                  "info"), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
