"""Volcano admission rules (v1.15.1) and the links between Pods, PodGroups and HyperNodes.

* PodGroup: ``pkg/webhooks/admission/podgroups/validate/validate_podgroup.go`` (``validateNetworkTopology``)
  rejects ``highestTierAllowed`` together with ``highestTierName``, on the group and in any subGroupPolicy;
* HyperNode: ``pkg/webhooks/admission/hypernodes/validate/admit_hypernode.go`` rejects a ``regexMatch``
  pattern that does not compile (the one-of selector rule is CEL in the CRD);
* a Pod joins its PodGroup by ``scheduling.k8s.io/group-name`` (``KubeGroupNameAnnotationKey``) and must run
  under the Volcano scheduler for the gang to mean anything.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ._common import Problem, as_dict, as_int, as_list

VOLCANO_PG_GROUP = "scheduling.volcano.sh"
HYPERNODE_GROUP = "topology.volcano.sh"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
_DEFAULT_SCHEDULERS = (None, "", "default-scheduler")


def _topology(nt: Any, path: str) -> list[Problem]:
    nt = as_dict(nt)
    if "highestTierAllowed" in nt and nt.get("highestTierName"):
        return [(path, "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
                       "simultaneously")]
    return []


def volcano_podgroup(obj: dict[str, Any]) -> list[Problem]:
    spec = as_dict(obj.get("spec"))
    out = _topology(spec.get("networkTopology"), "spec.networkTopology")
    names: set[str] = set()
    for i, policy in enumerate(as_list(spec.get("subGroupPolicy"))):
        policy = as_dict(policy)
        out.extend(_topology(policy.get("networkTopology"), f"spec.subGroupPolicy[{i}].networkTopology"))
        name = policy.get("name")
        if isinstance(name, str):
            if name in names:
                out.append((f"spec.subGroupPolicy[{i}].name", f"{name!r} is used twice; each policy is one sub-job "
                                                              "group"))
            names.add(name)
    return out


def volcano_hypernode(obj: dict[str, Any]) -> list[Problem]:
    out: list[Problem] = []
    for i, member in enumerate(as_list(as_dict(obj.get("spec")).get("members"))):
        pattern = as_dict(as_dict(as_dict(member).get("selector")).get("regexMatch")).get("pattern")
        if isinstance(pattern, str) and pattern:
            try:
                re.compile(pattern)
            except re.error as exc:
                out.append((f"spec.members[{i}].selector.regexMatch.pattern",
                            f"member regexMatch pattern is invalid: {exc}"))
    return out


def _matches(selector: dict[str, Any], labels: dict[str, Any]) -> bool:
    return all(labels.get(k) == v for k, v in as_dict(selector.get("matchLabels")).items())


def volcano_links(pgs: dict[tuple[str | None, str], dict[str, Any]], hypernodes: dict[str, dict[str, Any]],
                  pods: Iterable[tuple[Any, str | None, dict[str, Any], dict[str, Any], Any]]
                  ) -> list[tuple[Any, str, str]]:
    """Pods against their PodGroups (present, Volcano scheduler, gang and sub-group sizes), HyperNode members
    against the HyperNodes in the output, and tiers against the highest tier rendered."""
    out: list[tuple[Any, str, str]] = []
    members: dict[tuple[str | None, str], list[dict[str, Any]]] = {k: [] for k in pgs}
    for pod, ns, labels, ann, scheduler in pods:
        name = ann.get(GROUP_ANNOTATION)
        if not isinstance(name, str):
            continue
        if scheduler in _DEFAULT_SCHEDULERS:
            out.append((pod, "spec.schedulerName", "a Pod of a Volcano PodGroup must name the Volcano scheduler "
                                                   "(volcano); the default scheduler ignores gangs"))
        if (ns, name) not in pgs:
            out.append((pod, f"metadata.annotations[{GROUP_ANNOTATION!r}]",
                        f"names PodGroup {name!r}, which is not in this output"))
            continue
        members[(ns, name)].append(labels)
    top_tier = max((t for h in hypernodes.values() if (t := as_int(as_dict(h.get("spec")).get("tier"))) is not None),
                   default=None)
    for key, pg in pgs.items():
        spec = as_dict(pg.get("spec"))
        joined = members[key]
        mm = as_int(spec.get("minMember"))
        if joined and mm is not None and mm > len(joined):
            out.append((pg, "spec.minMember", f"minMember {mm} exceeds the {len(joined)} Pods that join this "
                                              "PodGroup; it can never be scheduled"))
        places = [("spec.networkTopology", spec.get("networkTopology"))]
        for i, policy in enumerate(as_list(spec.get("subGroupPolicy"))):
            policy = as_dict(policy)
            places.append((f"spec.subGroupPolicy[{i}].networkTopology", policy.get("networkTopology")))
            size = as_int(policy.get("subGroupSize"))
            selector = as_dict(policy.get("labelSelector"))
            if joined and size is not None and selector:
                have = sum(1 for labels in joined if _matches(selector, labels))
                if have < size:
                    out.append((pg, f"spec.subGroupPolicy[{i}].subGroupSize",
                                f"subGroupSize {size} exceeds the {have} Pods its labelSelector selects"))
        if top_tier is not None:
            for path, nt in places:
                tier = as_int(as_dict(nt).get("highestTierAllowed"))
                if tier is not None and tier > top_tier:
                    out.append((pg, f"{path}.highestTierAllowed", f"tier {tier} is above the highest HyperNode tier "
                                                                  f"in this output ({top_tier})"))
    tiers = {n: as_int(as_dict(h.get("spec")).get("tier")) for n, h in hypernodes.items()}
    parents: Counter[str] = Counter()
    for name, h in hypernodes.items():
        for i, member in enumerate(as_list(as_dict(h.get("spec")).get("members"))):
            member = as_dict(member)
            child = as_dict(as_dict(member.get("selector")).get("exactMatch")).get("name")
            if member.get("type") != "HyperNode" or not isinstance(child, str):
                continue
            parents[child] += 1
            at = f"spec.members[{i}].selector.exactMatch.name"
            if child not in hypernodes:
                out.append((h, at, f"HyperNode {child!r} is not in this output"))
            elif (tiers[child] or 0) >= (tiers[name] or 0):
                out.append((h, at, f"member {child!r} has tier {tiers[child]}, not below this HyperNode's "
                                   f"{tiers[name]}"))
    for child, n in sorted(parents.items()):
        if n > 1 and child in hypernodes:
            out.append((hypernodes[child], "metadata.name", f"is a member of {n} HyperNodes; a HyperNode has one "
                                                            "parent"))
    return out
