"""The Argo CD health checks in argocd/health/ run under a real Lua interpreter over status samples.

Argo CD runs a check as a Lua chunk with the live object in the global ``obj`` and reads the table it
returns. Each sample becomes a Lua table literal, the chunk runs in ``lua5.4``, and the status and message
are compared. The samples follow the status schemas of the vendored CRDs, which the test also checks.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hostutil import PROJECT, require_tool

HEALTH = PROJECT / "argocd" / "health"
SAMPLES = yaml.safe_load((Path(__file__).parent / "fixtures" / "health_samples.yaml").read_text())
CASES = [(script, name) for script, cases in sorted(SAMPLES.items()) for name in sorted(cases)]
SCHEMAS = {"scheduling.run.ai_PodGroup": "kai-main_scheduling.run.ai_podgroups.json",
           "scheduling.sigs.k8s.io_PodGroup": "koordinator-v1.8.0_scheduling.sigs.k8s.io_podgroups.json",
           "resource.nvidia.com_ComputeDomain": "dra-main_resource.nvidia.com_computedomains.json",
           "scheduling.volcano.sh_PodGroup": "volcano-v1.15.1_scheduling.volcano.sh_podgroups.json"}


def lua(value: Any) -> str:
    """``value`` as a Lua table literal (JSON null becomes an absent key, as Argo CD's converter does)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{json.dumps(k)}] = {lua(v)}" for k, v in value.items() if v is not None) + "}"
    if isinstance(value, list):
        return "{" + ", ".join(lua(v) for v in value) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value)


def run_check(script: str, obj: dict[str, Any], tmp_path: Path) -> tuple[str, str]:
    lua_bin = require_tool("lua5.4")
    body = (HEALTH / f"{script}.lua").read_text()
    program = tmp_path / "check.lua"
    program.write_text(f"obj = {lua(obj)}\nlocal function check()\n{body}\nend\nlocal hs = check()\n"
                       "io.write(hs.status, '\\t', hs.message or '')\n")
    proc = subprocess.run([lua_bin, str(program)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    status, _, message = proc.stdout.partition("\t")
    return status, message


@pytest.mark.parametrize(("script", "name"), CASES, ids=[f"{s}-{n}" for s, n in CASES])
def test_health_check(script: str, name: str, tmp_path: Path) -> None:
    case = SAMPLES[script][name]
    status, message = run_check(script, case["obj"], tmp_path)
    assert status == case["status"], message
    assert case["message"] in message, message


def test_every_check_has_samples_of_each_outcome_it_can_give() -> None:
    assert sorted(p.stem for p in HEALTH.glob("*.lua")) == sorted(SAMPLES)
    for script, cases in SAMPLES.items():
        outcomes = {c["status"] for c in cases.values()}
        assert {"Healthy", "Progressing"} <= outcomes, script
        if script != "resource.nvidia.com_ComputeDomain":  # its CRD has no failed state
            assert "Degraded" in outcomes, script


@pytest.mark.parametrize("script", sorted(SCHEMAS))
def test_samples_fit_the_crd_status_schema(script: str) -> None:
    from jsonschema import Draft202012Validator

    raw = json.loads((PROJECT / "plugin" / "toporender" / "schemas" / SCHEMAS[script]).read_text())
    status_schema = raw["versions"][0]["schema"]["properties"]["status"]
    validator = Draft202012Validator(status_schema)
    for name, case in SAMPLES[script].items():
        if "status" in case["obj"]:
            errors = [e.message for e in validator.iter_errors(case["obj"]["status"])]
            assert not errors, (name, errors)
