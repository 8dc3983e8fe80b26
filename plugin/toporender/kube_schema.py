"""A compact schema of the Pod and Service fields as plain data, shared by the output validator and the template
checks: reading it needs no schema library.

It covers the fields the renderer emits and type-checks them, and knows the names of the other fields at the
levels it lists (PodSpec, Container, ServiceSpec), so an unknown name there is refused.
"""

from __future__ import annotations

from typing import Any

_QUANTITY_RE = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer"}
_BOOL: dict[str, Any] = {"type": "boolean"}
_STR_MAP: dict[str, Any] = {"type": "object", "additionalProperties": _STR}
_STR_LIST: dict[str, Any] = {"type": "array", "items": _STR}
_QUANTITY: dict[str, Any] = {"anyOf": [_INT, {"type": "number"}, {"type": "string", "pattern": _QUANTITY_RE}]}
_OBJ: dict[str, Any] = {"type": "object"}
_OBJ_LIST: dict[str, Any] = {"type": "array", "items": _OBJ}


def _obj(props: dict[str, Any], required: tuple[str, ...] = (), known: str = "") -> dict[str, Any]:
    allp = {**{k: {} for k in known.split()}, **props}
    return {"type": "object", "properties": allp, "required": list(required), "additionalProperties": False}


_CONTAINER = _obj(
    {
        "name": _STR,
        "image": _STR,
        "command": _STR_LIST,
        "args": _STR_LIST,
        "workingDir": _STR,
        "env": {"type": "array", "items": _obj({"name": _STR, "value": _STR, "valueFrom": _OBJ}, ("name",))},
        "envFrom": _OBJ_LIST,
        "imagePullPolicy": {"enum": ["Always", "Never", "IfNotPresent"]},
        "resources": _obj(
            {
                "requests": {"type": "object", "additionalProperties": _QUANTITY},
                "limits": {"type": "object", "additionalProperties": _QUANTITY},
                "claims": {"type": "array", "items": _obj({"name": _STR, "request": _STR}, ("name",))},
            }
        ),
        "ports": {
            "type": "array",
            "items": _obj(
                {
                    "containerPort": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "name": _STR,
                    "protocol": {"enum": ["TCP", "UDP", "SCTP"]},
                    "hostPort": _INT,
                    "hostIP": _STR,
                },
                ("containerPort",),
            ),
        },
        "volumeMounts": {
            "type": "array",
            "items": _obj(
                {"name": _STR, "mountPath": _STR, "readOnly": _BOOL},
                ("name", "mountPath"),
                "subPath subPathExpr mountPropagation recursiveReadOnly",
            ),
        },
        "securityContext": _OBJ,
        "stdin": _BOOL,
        "tty": _BOOL,
    },
    ("name",),
    "lifecycle livenessProbe readinessProbe startupProbe resizePolicy restartPolicy stdinOnce "
    "terminationMessagePath terminationMessagePolicy volumeDevices",
)

_POD_SPEC = _obj(
    {
        "containers": {"type": "array", "items": _CONTAINER, "minItems": 1},
        "initContainers": {"type": "array", "items": _CONTAINER},
        "restartPolicy": {"enum": ["Always", "OnFailure", "Never"]},
        "schedulerName": _STR,
        "priorityClassName": _STR,
        "hostname": _STR,
        "subdomain": _STR,
        "nodeSelector": _STR_MAP,
        "serviceAccountName": _STR,
        "affinity": _OBJ,
        "tolerations": _OBJ_LIST,
        "volumes": {"type": "array", "items": {"type": "object", "required": ["name"]}},
        "resourceClaims": {
            "type": "array",
            "items": _obj({"name": _STR, "resourceClaimName": _STR, "resourceClaimTemplateName": _STR}, ("name",)),
        },
        "terminationGracePeriodSeconds": _INT,
        "activeDeadlineSeconds": _INT,
        "hostNetwork": _BOOL,
        "imagePullSecrets": _OBJ_LIST,
        "priority": _INT,
    },
    ("containers",),
    "automountServiceAccountToken dnsConfig dnsPolicy enableServiceLinks ephemeralContainers "
    "hostAliases hostIPC hostPID hostUsers nodeName os overhead preemptionPolicy readinessGates resources "
    "runtimeClassName schedulingGates securityContext serviceAccount setHostnameAsFQDN shareProcessNamespace "
    "topologySpreadConstraints",
)

_SERVICE_SPEC = _obj(
    {
        "clusterIP": _STR,
        "selector": _STR_MAP,
        "publishNotReadyAddresses": _BOOL,
        "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]},
        "ports": {
            "type": "array",
            "items": _obj(
                {
                    "name": _STR,
                    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "targetPort": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 65535}, _STR]},
                    "protocol": {"enum": ["TCP", "UDP", "SCTP"]},
                    "appProtocol": _STR,
                    "nodePort": _INT,
                },
                ("port",),
            ),
        },
    },
    (),
    "allocateLoadBalancerNodePorts clusterIPs externalIPs externalName externalTrafficPolicy "
    "healthCheckNodePort internalTrafficPolicy ipFamilies ipFamilyPolicy loadBalancerClass loadBalancerIP "
    "loadBalancerSourceRanges sessionAffinity sessionAffinityConfig trafficDistribution",
)


def _top(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _obj(
        {
            "apiVersion": {"const": "v1"},
            "kind": {"const": kind},
            "metadata": _OBJ,
            "spec": spec,
            "status": _OBJ,
        },
        ("apiVersion", "kind", "metadata", "spec"),
    )


BUILTIN = {"Pod": _top("Pod", _POD_SPEC), "Service": _top("Service", _SERVICE_SPEC)}
"""JSON schemas of the Pod and Service fields this package knows, for when kubernetes-validate is absent."""
