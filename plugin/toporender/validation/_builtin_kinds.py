"""Built-in Kubernetes kinds: the upstream OpenAPI schema via kubernetes-validate, or a built-in fallback.

kubernetes-validate's own ``validate()`` re-reads and re-parses its 1.3 MB definitions file on every call
(about 50 ms) and stops at the first error. We use its bundled strict schemas and its exact file lookup, but
compile one checker per (Kubernetes minor, kind) with :mod:`._schema_compiler` (property-tested to report exactly what
jsonschema reports) and report every error. Only built-in groups are routed here: its
lookup drops the API group's domain, so a CRD such as ``scheduling.sigs.k8s.io/PodGroup`` would be checked
against the core ``scheduling.k8s.io`` PodGroup.

Without kubernetes-validate, a compact built-in schema covers the Pod and Service fields the renderer emits
and rejects unknown field names at the levels it knows (PodSpec, Container, ServiceSpec); deeper structures
that only user templates add (affinity, volumes, probes, ...) are then not type-checked.
"""

from __future__ import annotations

import importlib
import re
from fractions import Fraction
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

from toporender.kube_schema import BUILTIN as _BUILTIN

from ._common import dns_label_problem, format_path, label_value_problem, qualified_name_problem
from ._schema_compiler import Check, FastCompiler, compile_schema

Problem = tuple[str, str]

DEFAULT_K8S_MINOR = "1.32"


_CLUSTER_SCOPED = frozenset(
    "Namespace Node PersistentVolume ClusterRole ClusterRoleBinding PriorityClass DeviceClass StorageClass "
    "CSIDriver CSINode RuntimeClass IngressClass CustomResourceDefinition APIService "
    "ValidatingWebhookConfiguration MutatingWebhookConfiguration ValidatingAdmissionPolicy "
    "ValidatingAdmissionPolicyBinding ResourceSlice VolumeAttachment CertificateSigningRequest".split()
)


def core_scope(kind: str) -> str:
    """'Cluster' for the built-in cluster-scoped kinds, else 'Namespaced'."""
    return "Cluster" if kind in _CLUSTER_SCOPED else "Namespaced"


def is_core_group(group: str) -> bool:
    """Groups served by Kubernetes itself: core ("") and ``*.k8s.io``, except the SIG/x- CRD domains."""
    if group == "":
        return True
    return group.endswith(".k8s.io") and not group.endswith(".sigs.k8s.io") and not group.endswith(".x-k8s.io")


@lru_cache(maxsize=1)
def kubernetes_validate_version() -> str | None:
    """Installed kubernetes-validate version, or None when the optional package is absent."""
    try:
        module = importlib.import_module("kubernetes_validate.version")
    except ImportError:
        return None
    return str(module.__version__)


def core_backend(core: bool = True) -> str:
    """Which checker core kinds get: 'kubernetes-validate <ver>' or 'builtin' (say so in reports)."""
    ver = kubernetes_validate_version() if core else None
    return f"kubernetes-validate {ver}" if ver else "builtin"


def _minor_tuple(v: str) -> tuple[int, int]:
    m = re.match(r"^v?(\d+)\.(\d+)", v)
    if not m:
        raise ValueError(f"not a Kubernetes version: {v!r}")
    return int(m.group(1)), int(m.group(2))


@cache
def _kv_definitions(minor: str) -> tuple[str, dict[str, Any]]:
    """(bundled Kubernetes version, its strict ``_definitions.json``) for ``minor``; exact minors only."""
    utils = importlib.import_module("kubernetes_validate.utils")
    wanted = _minor_tuple(minor)
    candidates = [v for v in utils.all_versions() if _minor_tuple(v) <= wanted]
    if not candidates:
        raise ValueError(f"kubernetes-validate has no schemas for Kubernetes {minor}")
    version = candidates[-1]
    if _minor_tuple(version) != wanted:
        raise ValueError(
            f"kubernetes-validate {kubernetes_validate_version()} has no schemas for Kubernetes "
            f"{minor} (newest not newer: {version})"
        )
    defs = utils.schema_contents(f"kubernetes-json-schema/v{version}-local-strict/_definitions.json", minor)
    return version, defs


def _kv_schema(minor: str, kind: str, api_version: str) -> dict[str, Any] | None:
    """kubernetes-validate's own lookup: the API group's domain is dropped (``rbac.authorization.k8s.io/v1`` ->
    ``rbac-v1``), which is why only built-in groups may come here."""
    utils = importlib.import_module("kubernetes_validate.utils")
    version, _ = _kv_definitions(minor)
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema: dict[str, Any] = utils.schema_contents(
            f"kubernetes-json-schema/v{version}-local-strict/{kind.lower()}-{api}.json", minor
        )
    except FileNotFoundError:
        return None
    return schema


@cache
def kv_jsonschema_validator(minor: str, kind: str, api_version: str) -> Validator | None:
    """The same schema as a jsonschema validator; the reference :func:`_kv_check` is tested against."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schema = _kv_schema(minor, kind, api_version)
    if schema is None:
        return None
    registry = Resource.from_contents(_kv_definitions(minor)[1]) @ Registry()
    validator: Validator = Draft202012Validator(schema, registry=Resource.from_contents(schema) @ registry)
    return validator


@cache
def _kv_compiler(minor: str) -> FastCompiler:
    defs = _kv_definitions(minor)[1]

    def resolve(ref: str) -> dict[str, Any]:
        node: Any = defs
        for part in ref.partition("#")[2].strip("/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return dict(node)

    return FastCompiler(f"Kubernetes {minor}", resolve)


@cache
def _kv_check(minor: str, kind: str, api_version: str) -> Check | None:
    schema = _kv_schema(minor, kind, api_version)
    return None if schema is None else _kv_compiler(minor).compile(schema)


# What the built-in fallback knows exists; it type-checks only Pod and Service (see _BUILTIN).
_BUILTIN_KINDS: dict[str, frozenset[str]] = {
    "v1": frozenset(
        "Pod Service ConfigMap Secret ServiceAccount PersistentVolumeClaim Namespace Endpoints LimitRange "
        "ResourceQuota PodTemplate ReplicationController".split()
    ),
    "apps/v1": frozenset("Deployment StatefulSet DaemonSet ReplicaSet".split()),
    "batch/v1": frozenset("Job CronJob".split()),
    "policy/v1": frozenset({"PodDisruptionBudget"}),
    "scheduling.k8s.io/v1": frozenset({"PriorityClass"}),
    "networking.k8s.io/v1": frozenset("NetworkPolicy Ingress".split()),
    "rbac.authorization.k8s.io/v1": frozenset("Role RoleBinding ClusterRole ClusterRoleBinding".split()),
    "resource.k8s.io/v1beta1": frozenset("ResourceClaim ResourceClaimTemplate DeviceClass".split()),
    "resource.k8s.io/v1beta2": frozenset("ResourceClaim ResourceClaimTemplate DeviceClass".split()),
    "resource.k8s.io/v1": frozenset("ResourceClaim ResourceClaimTemplate DeviceClass".split()),
}


@cache
def _builtin_check(kind: str) -> Check:
    return compile_schema(_BUILTIN[kind])


def validate_core(
    obj: dict[str, Any], group: str, version: str, kind: str, *, core: bool, k8s_minor: str
) -> list[Problem]:
    """Schema problems of a built-in kind plus the API-server rules for the Pod and Service fields we emit."""
    api_version = f"{group}/{version}" if group else version
    out: list[Problem] = []
    if core and kubernetes_validate_version():
        check = _kv_check(k8s_minor, kind, api_version)
        if check is None:
            return [("kind", f"Kubernetes {k8s_minor} has no built-in kind {kind} in {api_version}")]
        found: list[Problem] = []
        check(obj, (), found)
        out.extend(sorted(set(found)))
    elif kind not in _BUILTIN_KINDS.get(api_version, frozenset()):
        return [("kind", f"{kind} in {api_version} is not a built-in kind the fallback check knows")]
    elif group == "" and version == "v1" and kind in _BUILTIN:
        found = []
        _builtin_check(kind)(obj, (), found)
        out.extend(sorted(set(found)))
    if group == "" and version == "v1" and kind == "Pod":
        out.extend(_pod_rules(obj))
    elif group == "" and version == "v1" and kind == "Service":
        out.extend(_service_rules(obj))
    return out


_SUFFIX: dict[str, Fraction | int] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
_QTY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")


def parse_quantity(value: Any) -> Fraction | None:
    """A Kubernetes quantity as an exact number, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Fraction(value)
    if not isinstance(value, str):
        return None
    m = _QTY.match(value)
    if not m:
        return None
    number = Fraction(m.group(1))
    if m.group(2):
        return number * Fraction(10) ** int(m.group(2)[1:])
    return number * _SUFFIX[m.group(3) or ""]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


_NATIVE = ("cpu", "memory", "ephemeral-storage", "storage")


def _container_rules(c: Any, path: str) -> list[Problem]:
    if not isinstance(c, dict):
        return []
    out: list[Problem] = []
    if not c.get("image"):
        out.append((f"{path}.image", "required field is missing (the API server rejects a Pod without it)"))
    res = c.get("resources")
    if not isinstance(res, dict):
        return out
    raw_req, raw_lim = res.get("requests"), res.get("limits")
    req: dict[str, Any] = raw_req if isinstance(raw_req, dict) else {}
    lim: dict[str, Any] = raw_lim if isinstance(raw_lim, dict) else {}
    for name in sorted(set(req) | set(lim)):
        rq, lm = parse_quantity(req.get(name)), parse_quantity(lim.get(name))
        where = f"{path}.resources"
        if (name in req and rq is None) or (name in lim and lm is None):
            out.append((where, f"{name}: not a valid quantity"))
            continue
        if (rq is not None and rq < 0) or (lm is not None and lm < 0):
            out.append((where, f"{name}: must not be negative"))
        native = name in _NATIVE or "/" not in name or name.startswith("kubernetes.io/")
        if not native:
            msg = qualified_name_problem(name)
            if msg:
                out.append((where, f"resource name {msg}"))
            if lm is None:
                out.append((where, f"{name}: extended resources must set limits (requests alone are rejected)"))
            elif rq is not None and rq != lm:
                out.append(
                    (
                        where,
                        f"{name}: request {req[name]} must equal limit {lim[name]} "
                        "(extended resources cannot be overcommitted)",
                    )
                )
            elif lm.denominator != 1:
                out.append((where, f"{name}: must be a whole number"))
        elif rq is not None and lm is not None and rq > lm:
            out.append((where, f"{name}: request {req[name]} is greater than limit {lim[name]}"))
    return out


def _pod_rules(obj: dict[str, Any]) -> list[Problem]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "required field is missing")] if spec is None else []
    out: list[Problem] = []
    names: set[str] = set()
    for field in ("initContainers", "containers"):
        items = spec.get(field)
        if not isinstance(items, list):
            continue
        for i, c in enumerate(items):
            path = f"spec.{field}[{i}]"
            name = c.get("name") if isinstance(c, dict) else None
            if isinstance(name, str):
                msg = dns_label_problem(name)
                if msg:
                    out.append((f"{path}.name", msg))
                if name in names:
                    out.append((f"{path}.name", f"duplicate container name {name!r}"))
                names.add(name)
            out.extend(_container_rules(c, path))
    for field in ("hostname", "subdomain"):
        value = spec.get(field)
        if isinstance(value, str):
            msg = dns_label_problem(value)
            if msg:
                out.append((f"spec.{field}", msg))
    claims = {
        rc["name"]
        for rc in _list(spec.get("resourceClaims"))
        if isinstance(rc, dict) and isinstance(rc.get("name"), str)
    }
    for i, c in enumerate(_list(spec.get("containers"))):
        res = c.get("resources") if isinstance(c, dict) else None
        for j, claim in enumerate(_list(res.get("claims")) if isinstance(res, dict) else []):
            if isinstance(claim, dict) and (not isinstance(claim.get("name"), str) or claim["name"] not in claims):
                out.append(
                    (
                        f"spec.containers[{i}].resources.claims[{j}].name",
                        f"{claim.get('name')!r} is not declared in spec.resourceClaims",
                    )
                )
    out.extend(_selector_map(spec.get("nodeSelector"), "spec.nodeSelector"))
    return out


def _service_rules(obj: dict[str, Any]) -> list[Problem]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    out: list[Problem] = []
    ports = _list(spec.get("ports"))
    headless = spec.get("clusterIP") == "None"
    if not ports and not headless and spec.get("type") != "ExternalName":
        out.append(("spec.ports", "a Service that is not headless needs at least one port"))
    seen: set[Any] = set()
    for i, port in enumerate(ports if isinstance(ports, list) else []):
        if not isinstance(port, dict):
            continue
        name = port.get("name")
        if len(ports) > 1 and not name:
            out.append((f"spec.ports[{i}].name", "required when a Service has more than one port"))
        if isinstance(name, str) and name:
            msg = dns_label_problem(name)
            if msg:
                out.append((f"spec.ports[{i}].name", msg))
            if name in seen:
                out.append((f"spec.ports[{i}].name", f"duplicate port name {name!r}"))
            seen.add(name)
    out.extend(_selector_map(spec.get("selector"), "spec.selector"))
    return out


def _selector_map(value: Any, path: str) -> list[Problem]:
    if not isinstance(value, dict):
        return []
    out: list[Problem] = []
    for key, val in value.items():
        where = format_path([*path.split("."), str(key)])
        msg = qualified_name_problem(str(key))
        if msg:
            out.append((where, msg))
        if isinstance(val, str):
            msg = label_value_problem(val)
            if msg:
                out.append((where, msg))
    return out
