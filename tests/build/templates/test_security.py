"""The repo's policy: kinds group templates may render, and the Pod Security Standard of every Pod."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_cli, write_repo
from toporender.build.templates.security import forbidden, kind_allowed, restricted_missing

WORKFLOW = "workflow:\n  name: wf\n  groups:\n  - name: g\n    tasks:\n    - {name: a, image: x}\n"


def repo(tmp_path: Path, policy: dict[str, Any] | None = None, pod: dict[str, Any] | None = None,
         group: dict[str, Any] | None = None) -> Path:
    pool: dict[str, Any] = {"backend": "kai"}
    config: dict[str, Any] = {"namespace": "ml", "pools": {"p": pool}}
    if policy is not None:
        config["policy"] = policy
    if pod is not None:
        pool["common_pod_template"] = ["t"]
        config["pod_templates"] = {"t": pod}
    if group is not None:
        pool["common_group_templates"] = ["o"]
        config["group_templates"] = {"o": group}
    return write_repo(tmp_path, {"toporender.yaml": yaml.safe_dump(config, sort_keys=False),
                                 "workflows/wf.yaml": WORKFLOW})


C = "{{USER_CONTAINER_NAME}}"
BASELINE_VIOLATIONS = {
    "host network": ({"spec": {"hostNetwork": True}}, "spec.hostNetwork"),
    "host PID from a template": ({"spec": {"hostPID": "{{ WF_POOL == 'p' }}"}}, "spec.hostPID"),
    "privileged": ({"spec": {"containers": [{"name": C, "securityContext": {"privileged": True}}]}},
                   "spec.containers.0.securityContext.privileged"),
    "SYS_ADMIN": ({"spec": {"containers": [{"name": C, "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}},
                  "spec.containers.0.securityContext.capabilities.add.0"),
    "hostPath /": ({"spec": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}}, "spec.volumes.0.hostPath"),
    "host port": ({"spec": {"containers": [{"name": C, "ports": [{"containerPort": 80, "hostPort": 80}]}]}},
                  "spec.containers.0.ports.0.hostPort"),
    "unsafe sysctl": ({"spec": {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}},
                      "spec.securityContext.sysctls.0.name"),
    "seccomp unconfined": ({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}},
                           "spec.securityContext.seccompProfile.type"),
    "apparmor unconfined": ({"metadata": {"annotations": {
        "container.apparmor.security.beta.kubernetes.io/c": "unconfined"}}}, "metadata.annotations"),
    "init container privileged": ({"spec": {"initContainers": [{"name": "i", "image": "x",
                                                                 "securityContext": {"privileged": True}}]}},
                                  "spec.initContainers.0.securityContext.privileged"),
}


@pytest.mark.parametrize("case", sorted(BASELINE_VIOLATIONS))
def test_baseline_refuses_what_it_forbids_at_the_template(case: str, tmp_path: Path) -> None:
    template, path = BASELINE_VIOLATIONS[case]
    result = run_cli("render", str(repo(tmp_path, pod=template)))
    assert result.code == 1 and result.stdout == ""
    assert "toporender.yaml:" in result.stderr and "pod_security baseline" in result.stderr, result.stderr
    assert f"pod template 't': {path}" in result.stderr


@pytest.mark.parametrize("case", sorted(BASELINE_VIOLATIONS))
def test_privileged_allows_it(case: str, tmp_path: Path) -> None:
    template, _ = BASELINE_VIOLATIONS[case]
    result = run_cli("render", str(repo(tmp_path, policy={"pod_security": "privileged"}, pod=template)))
    assert result.code == 0, result.stderr


def test_the_default_pod_meets_baseline_but_not_restricted(tmp_path: Path) -> None:
    assert run_cli("render", str(repo(tmp_path / "a"))).code == 0
    result = run_cli("render", str(repo(tmp_path / "b", policy={"pod_security": "restricted"})))
    assert result.code == 1 and result.stdout == ""
    assert "workflows/wf.yaml:6:7: Pod 'wf-a': spec.containers.0.securityContext.allowPrivilegeEscalation must be" \
           in result.stderr, result.stderr


def test_restricted_is_met_by_a_hardening_pod_template(tmp_path: Path) -> None:
    hardened = {"spec": {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                         "containers": [{"name": C, "securityContext": {
                             "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}
    result = run_cli("render", str(repo(tmp_path, policy={"pod_security": "restricted"}, pod=hardened)))
    assert result.code == 0, result.stderr


@pytest.mark.parametrize(("kind", "api", "allowed", "ok"), [
    ("ConfigMap", "v1", None, True),
    ("ComputeDomain", "resource.nvidia.com/v1beta1", None, True),
    ("Namespace", "v1", None, False),
    ("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", None, False),
    ("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", ["ClusterRoleBinding.rbac.authorization.k8s.io"], True),
    ("Namespace", "v1", ["*"], True),
])
def test_group_template_kinds(kind: str, api: str, allowed: list[str] | None, ok: bool) -> None:
    from toporender.load.models import Policy

    kinds = allowed if allowed is not None else Policy().allowed_kinds
    assert kind_allowed(api, kind, kinds) == ok


def test_a_kind_the_policy_does_not_allow_is_refused_at_the_template(tmp_path: Path) -> None:
    crb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": "x-{{WF_GROUP_UUID}}"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
           "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "ml"}]}
    result = run_cli("render", str(repo(tmp_path, group=crb)))
    assert result.code == 1 and result.stdout == ""
    assert "group template 'o' renders a ClusterRoleBinding" in result.stderr
    assert "'ClusterRoleBinding.rbac.authorization.k8s.io' to policy.allowed_kinds" in result.stderr


def test_restricted_rules_on_a_whole_pod() -> None:
    pod = {"spec": {"containers": [{"name": "c", "securityContext": {"runAsUser": 0}}],
                    "volumes": [{"name": "v", "nfs": {"server": "s", "path": "/"}}]}}
    paths = {".".join(map(str, p)) for p, _ in forbidden(pod, "restricted") + restricted_missing(pod)}
    assert {"spec.containers.0.securityContext.runAsUser", "spec.volumes.0.nfs",
            "spec.containers.0.securityContext.allowPrivilegeEscalation"} <= paths
    assert forbidden(pod, "baseline") == []
