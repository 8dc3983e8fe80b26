"""Plan reports for ``toporender plan``: a terminal table or stable JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toporender.placement.plan import PlacementPlan
from toporender.placement.runs import RunsPlan


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    out.insert(1, "  ".join("-" * w for w in widths))
    return out


def _compact_domains(domains: dict[str, str]) -> str:
    """The finest shared domain (its value is unique once the hierarchy validated)."""
    return list(domains.values())[-1] if domains else "-"


def format_plan(plan: PlacementPlan | RunsPlan, fmt: str = "table", title: str | None = None) -> str:
    """Render a plan as ``table`` (for people) or ``json`` (stable keys, for tools)."""
    if fmt == "json":
        return json.dumps(plan.to_dict(), indent=2, sort_keys=False) + "\n"
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}")
    if isinstance(plan, RunsPlan):
        return _runs_table(plan, title)
    lines: list[str] = []
    if title:
        lines.append(f"pool {title}")
    placed = sum(1 for g in plan.gangs.values() if g.placed)
    lines.append(f"plan {plan.hash[:16]}  gangs {placed}/{len(plan.gangs)} placed  GPUs {plan.placed_gpus}/"
                 f"{plan.requested_gpus} placed  {plan.free_gpus} free after plan")
    lines.append("")
    rows = []
    for g in plan.gangs.values():
        if g.placed and g.gpus == 0:
            rows.append([g.display, 0, "-", 0, "", "no GPUs to place"])
            continue
        if not g.placed:
            rows.append([g.display, g.gpus, "UNPLACEABLE", "", "", g.reason or ""])
            continue
        nodes = sorted(set(g.pod_nodes.values()))
        span = " ".join(f"{k.rsplit('/', 1)[-1]}:{v}" for k, v in g.span.items())
        subs = "; ".join(f"{k or '(gang)'}={_compact_domains(v)}" for k, v in g.subgroup_domains.items())
        rows.append([g.display, g.gpus, subs, len(nodes), span, "moved to admit a later gang" if g.moved else ""])
    lines += _table(["gang", "GPUs", "domains", "nodes", "span", "note"], rows)
    lines.append("")
    for stat in plan.level_stats:
        doms = plan.domains_at(stat.level)
        lines.append(f"{stat.level}: {stat.domains} domains, {stat.empty} empty, {stat.partly_used} partly used, "
                     f"{stat.full} full, largest free {stat.largest_free}")
        if len(doms) <= 64:
            lines += ["  " + x for x in _table(
                ["domain", "total", "preused", "planned", "unavailable", "free"],
                [["/".join(d.path), d.total, d.preused, d.planned, d.unavailable, d.free] for d in doms])]
    lines.append(f"stranded: {plan.stranded_gpus} free GPUs in {plan.levels[-1] if plan.levels else 'pool'} "
                 f"domains smaller than the smallest unit ({plan.smallest_unit} GPUs)")
    return "\n".join(lines) + "\n"


def _runs_table(plan: RunsPlan, title: str | None) -> str:
    lines = [f"runs {title}" if title else "runs", f"plan {plan.hash[:16]}", ""]
    rows = []
    for r in plan.runs:
        if not r.placed:
            rows.append([r.name, "-", r.requested, "UNPLACEABLE", r.reason or "", ""])
            continue
        for g in r.groups:
            nodes = ",".join(f"{n}:{k}" for n, k in g.nodes.items())
            spare = ""
            if g.spare_domain:
                spare = f"{g.spare_domain} " + ",".join(f"{n}:{k}" for n, k in g.spare_nodes.items())
            if g.spare_missing:
                spare += f" {g.spare_missing} spare GPUs found no room"
            rows.append([r.name, g.index, g.gpus, g.domain, nodes, spare.strip()])
    lines += _table(["run", "group", "GPUs", "domain", "nodes", "spares"], rows)
    lines.append("")
    lines += _table(["domain", "total", "free"], [[d, plan.total[d], plan.residual[d]] for d in sorted(plan.total)])
    return "\n".join(lines) + "\n"
