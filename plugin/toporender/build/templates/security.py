"""What a repo may create: the kinds its group templates render, and the Pod Security Standard of its Pods.

Workflow repos are often writable by more people than the cluster, and a host applies what toporender
renders with its own, broad rights. So ``policy:`` in ``toporender.yaml`` bounds both:

* ``allowed_kinds``: a group template may only render these kinds (namespaced ones by default);
* ``pod_security``: every Pod meets the Kubernetes Pod Security Standard of that name (``baseline`` by
  default). The rules are those of the standard's "Baseline" and "Restricted" profiles
  (kubernetes.io/docs/concepts/security/pod-security-standards).

toporender's own Pod has no field either profile forbids, and a task cannot set one, so a violation can only
come from a pod template: the forbidding rules are checked on each pod template when the config is read, at
the template's line. A value written as a ``{{ }}`` template in one of those fields cannot be judged there and
is refused. What "restricted" requires to be present (``runAsNonRoot``, no privilege escalation, a seccomp
profile, dropping all capabilities) depends on the merged Pod, so those rules run on every rendered Pod.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from toporender.load.yaml_source import Loc

BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
SAFE_SYSCTLS = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                          "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
                          "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
                          "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                                "projected", "secret"})
APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
LEVELS = ("privileged", "baseline", "restricted")

Problem = tuple[Loc, str]


def kind_allowed(api_version: Any, kind: Any, allowed: list[str]) -> bool:
    """Whether ``allowed`` (entries ``Kind`` for the core group, ``Kind.group``, or ``*``) admits the kind."""
    if "*" in allowed:
        return True
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    return (f"{kind}.{group}" if group else str(kind)) in allowed


def _templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _containers(spec: dict[str, Any]) -> Iterator[tuple[Loc, dict[str, Any]]]:
    for field in CONTAINER_LISTS:
        for i, c in enumerate(_list(spec.get(field))):
            if isinstance(c, dict):
                yield ("spec", field, i), c


def _contexts(spec: dict[str, Any]) -> Iterator[tuple[Loc, dict[str, Any]]]:
    """The Pod's security context and every container's."""
    yield ("spec", "securityContext"), _dict(spec.get("securityContext"))
    for loc, c in _containers(spec):
        yield loc + ("securityContext",), _dict(c.get("securityContext"))


def forbidden(pod: dict[str, Any], level: str) -> list[Problem]:
    """What ``pod`` (a whole Pod or a pod template's partial one) sets that ``level`` forbids.

    A ``{{ }}`` value in a field the level restricts is a problem too: it cannot be judged before it renders."""
    if level == "privileged":
        return []
    out: list[Problem] = []
    spec = _dict(pod.get("spec"))

    def check(loc: Loc, value: Any, ok: bool, what: str) -> None:
        if _templated(value):
            out.append((loc, f"is set from a template ({value}); pod_security {level} needs a plain value here"))
        elif not ok:
            out.append((loc, f"{what} (pod_security {level})"))

    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if field in spec:
            check(("spec", field), spec[field], spec[field] in (None, False), f"{field} is not allowed")
    for loc, ctx in _contexts(spec):
        win = _dict(ctx.get("windowsOptions"))
        if "hostProcess" in win:
            check(loc + ("windowsOptions", "hostProcess"), win["hostProcess"], win["hostProcess"] in (None, False),
                  "HostProcess containers are not allowed")
        if "privileged" in ctx:
            check(loc + ("privileged",), ctx["privileged"], ctx["privileged"] in (None, False),
                  "privileged containers are not allowed")
        caps = _dict(ctx.get("capabilities"))
        allowed_caps = {"NET_BIND_SERVICE"} if level == "restricted" else BASELINE_CAPABILITIES
        for i, cap in enumerate(_list(caps.get("add"))):
            check(loc + ("capabilities", "add", i), cap, cap in allowed_caps,
                  f"adding capability {cap} is not allowed (allowed: {', '.join(sorted(allowed_caps))})")
        se = _dict(ctx.get("seLinuxOptions"))
        if "type" in se:
            check(loc + ("seLinuxOptions", "type"), se["type"], se["type"] in SELINUX_TYPES or se["type"] is None,
                  f"SELinux type {se['type']} is not allowed")
        for field in ("user", "role"):
            if se.get(field):
                check(loc + ("seLinuxOptions", field), se[field], False, f"setting the SELinux {field} is not allowed")
        if "procMount" in ctx:
            check(loc + ("procMount",), ctx["procMount"], ctx["procMount"] in (None, "Default"),
                  "a procMount other than Default is not allowed")
        for field in ("seccompProfile", "appArmorProfile"):
            kind = _dict(ctx.get(field)).get("type")
            if kind is not None:
                check(loc + (field, "type"), kind, kind != "Unconfined", f"{field} Unconfined is not allowed")
        if level == "restricted":
            if ctx.get("runAsUser") is not None:
                check(loc + ("runAsUser",), ctx["runAsUser"], ctx["runAsUser"] != 0, "running as user 0 is not allowed")
            if "runAsNonRoot" in ctx:
                check(loc + ("runAsNonRoot",), ctx["runAsNonRoot"], ctx["runAsNonRoot"] is not False,
                      "runAsNonRoot false is not allowed")
            if "allowPrivilegeEscalation" in ctx:
                check(loc + ("allowPrivilegeEscalation",), ctx["allowPrivilegeEscalation"],
                      ctx["allowPrivilegeEscalation"] is False, "privilege escalation must be off")
            kind = _dict(ctx.get("seccompProfile")).get("type")
            if kind is not None:
                check(loc + ("seccompProfile", "type"), kind, kind in ("RuntimeDefault", "Localhost"),
                      "seccompProfile must be RuntimeDefault or Localhost")
    for i, sysctl in enumerate(_list(_dict(spec.get("securityContext")).get("sysctls"))):
        name = _dict(sysctl).get("name")
        check(("spec", "securityContext", "sysctls", i, "name"), name, name in SAFE_SYSCTLS,
              f"sysctl {name} is not in the safe set")
    for i, volume in enumerate(_list(spec.get("volumes"))):
        volume = _dict(volume)
        if "hostPath" in volume:
            check(("spec", "volumes", i, "hostPath"), volume["hostPath"], False, "hostPath volumes are not allowed")
        elif level == "restricted":
            kinds = sorted(set(volume) - {"name"})
            for k in kinds:
                check(("spec", "volumes", i, k), volume[k], k in RESTRICTED_VOLUMES, f"{k} volumes are not allowed")
    for loc, c in _containers(spec):
        for i, port in enumerate(_list(c.get("ports"))):
            host = _dict(port).get("hostPort")
            if host is not None:
                check(loc + ("ports", i, "hostPort"), host, host == 0, "host ports are not allowed")
    for key, value in _dict(_dict(pod.get("metadata")).get("annotations")).items():
        if isinstance(key, str) and key.startswith(APPARMOR_PREFIX):
            check(("metadata", "annotations", key), value,
                  isinstance(value, str) and (value == "runtime/default" or value.startswith("localhost/")),
                  f"AppArmor profile {value} is not allowed")
    return out


def restricted_missing(pod: dict[str, Any]) -> list[Problem]:
    """What the "restricted" profile requires of a whole Pod that ``pod`` lacks."""
    spec = _dict(pod.get("spec"))
    pod_ctx = _dict(spec.get("securityContext"))
    out: list[Problem] = []
    containers = list(_containers(spec))
    for loc, c in containers:
        ctx = _dict(c.get("securityContext"))
        if ctx.get("allowPrivilegeEscalation") is not False:
            out.append((loc + ("securityContext", "allowPrivilegeEscalation"),
                        "must be false (pod_security restricted)"))
        if pod_ctx.get("runAsNonRoot") is not True and ctx.get("runAsNonRoot") is not True:
            out.append((loc + ("securityContext", "runAsNonRoot"),
                        "must be true here or in the Pod's securityContext (pod_security restricted)"))
        if (_dict(pod_ctx.get("seccompProfile")).get("type") not in ("RuntimeDefault", "Localhost")
                and _dict(ctx.get("seccompProfile")).get("type") not in ("RuntimeDefault", "Localhost")):
            out.append((loc + ("securityContext", "seccompProfile"), "must be RuntimeDefault or Localhost, here or "
                                                                    "in the Pod's securityContext (pod_security "
                                                                    "restricted)"))
        if "ALL" not in _list(_dict(ctx.get("capabilities")).get("drop")):
            out.append((loc + ("securityContext", "capabilities", "drop"),
                        "must include ALL (pod_security restricted)"))
    return out
