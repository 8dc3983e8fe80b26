"""Hostile and broken input: every case exits 1 with a clean message, prints nothing on
stdout, shows no traceback and finishes within 2 s as a whole process (on a machine slower than
the one the bound was set on, within ten ordinary renders, timed in the same session), and its peak
RSS stays under 200 MiB (the child's own ``ru_maxrss``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

CONFIG = "namespace: ml\npools:\n  gpu:\n    topology_keys:\n    - {key: clique, label: nvidia.com/gpu.clique}\n"
WF = "workflow:\n  name: wf\n  tasks:\n  - name: t\n"


def laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    return "\n".join(lines) + "\n"


def group_template(data: str) -> str:
    return (CONFIG + "    common_group_templates: [t]\ngroup_templates:\n  t:\n    apiVersion: v1\n"
            "    kind: ConfigMap\n    metadata: {name: x}\n    data:\n      v: " + data + "\n")


CASES: dict[str, tuple[Callable[[Path], None], str]] = {}


def case(name: str, expect: str) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    def register(fn: Callable[[Path], None]) -> Callable[[Path], None]:
        CASES[name] = (fn, expect)
        return fn
    return register


def put(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text if isinstance(text, bytes) else text.encode())


@case("billion-laughs", "alias bomb")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": laughs()})


@case("deep-nesting", "nesting deeper than")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": "workflow: " + "[" * 50_000 + "]" * 50_000})


@case("huge-file", "file is larger than 2 MiB")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": WF + "#" + "x" * (3 * 1024 * 1024) + "\n"})


@case("many-values", "more than 100000 values")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": "x: [" + "1," * 150_000 + "1]\n"})


@case("not-utf8", "not valid UTF-8")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": b"workflow:\n  name: \xff\xfe\n"})


@case("empty-workflow", "file is empty")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": ""})


@case("empty-config", "toporender.yaml:1:1: file is empty")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": "", "workflows/a.yaml": WF})


@case("config-is-directory", "toporender.yaml:1:1: expected a file but found a directory")
def _(root: Path) -> None:
    (root / "toporender.yaml").mkdir(parents=True)


@case("symlink-outside", "symlink points outside the repo")
def _(root: Path) -> None:
    outside = root.parent / f"{root.name}-secret.yaml"
    outside.write_text(WF)
    put(root, {"toporender.yaml": CONFIG})
    (root / "workflows").mkdir()
    (root / "workflows" / "a.yaml").symlink_to(outside)


@case("python-tag", "unsupported YAML tag")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": "workflow: !!python/object/apply:os.system [id]\n"})


@case("huge-gpu", "expected at most 1024")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": WF + "  resources:\n    default: {gpu: 1000000000000}\n"})


@case("negative-cpu", "cpu: expected more than 0, found -2")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": WF + "  resources:\n    default: {cpu: -2}\n"})


@case("nan-cpu", "cpu")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": WF + "  resources:\n    default: {cpu: .nan}\n"})


@case("giant-integer", "cannot read")
def _(root: Path) -> None:
    big = "9" * 6000
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": WF + "  resources:\n    default: {gpu: " + big + "}\n"})


@case("duplicate-keys", "duplicate key 'name'")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": "workflow:\n  name: a\n  name: b\n"})


@case("sandbox-escape", "refused by the template sandbox")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": group_template("\"{{ ''.__class__.__mro__[1].__subclasses__() }}\""),
               "workflows/a.yaml": WF})


@case("template-memory-bomb", "refused by the template sandbox")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": group_template("\"{{ 'x' * 1000000000 }}\""), "workflows/a.yaml": WF})


@case("template-cpu-bomb", "took longer than")
def _(root: Path) -> None:
    loops = "{% for i in range(9000) %}{% for j in range(9000) %}{% endfor %}{% endfor %}"
    put(root, {"toporender.yaml": group_template(f"'{loops}'"), "workflows/a.yaml": WF})


@case("template-namespace-escape", "objects are always created in the workflow namespace")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG + "    common_group_templates: [t]\ngroup_templates:\n  t:\n"
               "    apiVersion: v1\n    kind: Secret\n    metadata: {name: x, namespace: kube-system}\n",
               "workflows/a.yaml": WF})


@case("template-owns-our-label", "which toporender owns")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG + "    common_pod_template: [p]\npod_templates:\n  p:\n"
               "    metadata: {labels: {kai.scheduler/queue: someone-else}}\n", "workflows/a.yaml": WF})


@case("workflow-pattern-escape", "must be relative to the repo and stay inside it")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG + "workflows: ['../**/*.yaml']\n"})


@case("inventory-alias-bomb", "alias bomb")
def _(root: Path) -> None:
    lines = ["apiVersion: toporender.dev/v1alpha1", "kind: NodeInventory",
             "a0: &a0 [{name: n, gpus: 1, labels: {nvidia.com/gpu.clique: c}}]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, 25)]
    put(root, {"toporender.yaml": CONFIG + "inventory: nodes.yaml\n", "workflows/a.yaml": WF,
               "nodes.yaml": "\n".join(lines) + "\nnodes: *a24\n"})


@case("inventory-absurd-gpus", "more than any node has")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG + "inventory: nodes.yaml\n", "workflows/a.yaml": WF,
               "nodes.yaml": "apiVersion: toporender.dev/v1alpha1\nkind: NodeInventory\nnodes:\n- {name: n, "
                             "gpus: 1000000000000000000000000000000, labels: {nvidia.com/gpu.clique: c}}\n"})


@case("template-percent-width-bomb", "format width or precision over")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": group_template("\"{{ '%0999999999d' % 1 }}\""), "workflows/a.yaml": WF})


@case("template-format-filter-bomb", "format width or precision over")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": group_template("\"{{ '%999999999s'|format('x') }}\""), "workflows/a.yaml": WF})


@case("template-str-format-bomb", "format width or precision over")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": group_template("\"{{ '{:>999999999}'.format('x') }}\""), "workflows/a.yaml": WF})


@case("template-replace-bomb", "replace() result over")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": group_template("\"{{ ('x' * 100000).replace('x', 'y' * 100000) }}\""),
               "workflows/a.yaml": WF})


@case("template-mutates-tasks", "unsafe")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": group_template("\"{{ TASKS.append(1) }}\""), "workflows/a.yaml": WF})


@case("workflow-is-a-pipe", "is a named pipe")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": WF})
    os.mkfifo(root / "workflows" / "b.yaml")


@case("workflow-link-dangles", "points nowhere")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": WF})
    (root / "workflows" / "b.yaml").symlink_to("missing.yaml")


@case("gpu-base-60", "base-60 number")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": WF + "  resources:\n    default: {gpu: 1:30}\n"})


@case("gpu-boolean", "is a boolean, not a quantity")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": WF + "  resources:\n    default: {gpu: yes}\n"})


@case("binary-garbage", "")
def _(root: Path) -> None:
    put(root, {"toporender.yaml": CONFIG, "workflows/a.yaml": bytes(range(256)) * 4})


@pytest.fixture(scope="module")
def time_bound() -> float:
    """2 s, or ten renders of the smallest example where this machine is too slow for that."""
    example = Path(__file__).resolve().parents[2] / "examples" / "single-rack"
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "toporender", "render", str(example)], capture_output=True, check=True)
    return max(2.0, 10 * (time.monotonic() - start))


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input(name: str, tmp_path: Path, time_bound: float) -> None:
    build, expect = CASES[name]
    root = tmp_path / "repo"
    root.mkdir()
    build(root)
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("TOPORENDER_DEBUG", None)
    returncode, stdout, stderr, elapsed, peak_mib = _run(root, env)
    assert returncode == 1, stderr
    assert stdout == ""
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert expect in stderr, stderr
    first = stderr.splitlines()[0]
    assert first.count(":") >= 3, f"no path:line:col in {first!r}"
    assert elapsed < time_bound, f"took {elapsed:.2f} s (bound {time_bound:.2f} s)"
    assert peak_mib < MAX_RSS_MIB, f"peak RSS {peak_mib:.0f} MiB (bound {MAX_RSS_MIB} MiB)"


MAX_RSS_MIB = 200


# A process's peak RSS (ru_maxrss) survives exec, and a child forked from the test runner starts with the
# runner's pages mapped, so the command is started from a small launcher: its child's peak is the command's own.
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-m", "toporender", "render", sys.argv[1]])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[2], "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _run(root: Path, env: dict[str, str]) -> tuple[int, str, str, float, float]:
    """``toporender render root`` as a whole process: exit code, stdout, stderr, wall seconds, peak RSS (MiB)."""
    with tempfile.TemporaryDirectory() as tmp:
        peak = Path(tmp) / "peak"
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", LAUNCHER, str(root), str(peak)], capture_output=True,
                              env=env, timeout=30)
        elapsed = time.monotonic() - start
        return (proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"),
                elapsed, int(peak.read_text()) / 1024)
