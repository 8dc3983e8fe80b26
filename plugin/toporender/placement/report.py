"""Plan reports for ``toporender plan``: a terminal table or stable JSON."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from typing import Any

from toporender.placement.plan import PlacementPlan
from toporender.placement.runs import RunsPlan

WIDTH = 100
"""Columns a plan table fits in unless ``--wide``: a terminal, a pull-request comment or a CI log."""

Cell = str | list[str]
"""A table cell: one line, or a list of lines (a gang's domains, one subgroup per line)."""


def _elide(text: str, width: int) -> str:
    """``text`` shortened in the middle to ``width`` characters; domain values differ at both ends (a clique
    is ``<cluster uuid>.<clique id>``), so both ends are kept."""
    if len(text) <= width:
        return text
    head = (width - 2) // 2
    return text[:head] + ".." + text[len(text) - (width - 2 - head):]


def _elide_pair(line: str, width: int) -> str:
    """``name=value`` within ``width``: each side keeps what it can, so two subgroups stay apart."""
    name, sep, value = line.partition("=")
    if not sep or len(line) <= width:
        return _elide(line, width)
    name = _elide(name, max(width // 2, width - 1 - len(value)))
    return name + "=" + _elide(value, width - 1 - len(name))


def _fit(cell: Cell, width: int) -> list[str]:
    if isinstance(cell, list):
        return [_elide_pair(line, width) for line in cell] or [""]
    return textwrap.wrap(cell, width, break_on_hyphens=False) or [""]


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None = None,
           squeeze: Sequence[int] = ()) -> list[str]:
    """Aligned columns. With ``width``, the widest of the ``squeeze`` columns is narrowed (its text wrapped or
    elided) until a line fits, none below 16 characters."""
    cells: list[list[Cell]] = [[str(h) for h in headers]]
    cells += [[c if isinstance(c, list) else str(c) for c in r] for r in rows]

    def natural(i: int) -> int:
        return max((len(line) for r in cells for line in (r[i] if isinstance(r[i], list) else [r[i]])), default=0)

    widths = [natural(i) for i in range(len(headers))]
    floors = {i: min(16, widths[i]) for i in squeeze}
    excess = sum(widths) + 2 * (len(widths) - 1) - width if width else 0
    while excess > 0 and (wider := [i for i in squeeze if widths[i] > floors[i]]):
        widest = max(wider, key=widths.__getitem__)
        widths[widest] -= 1
        excess -= 1
    out = []
    for r in cells:
        lines = [_fit(c, w) for c, w in zip(r, widths, strict=True)]
        for k in range(max(map(len, lines))):
            out.append("  ".join((col[k] if k < len(col) else "").ljust(w)
                                 for col, w in zip(lines, widths, strict=True)).rstrip())
        if r is cells[0]:
            out.append("  ".join("-" * w for w in widths))
    return out


def _compact_domains(domains: dict[str, str]) -> str:
    """The finest shared domain (its value is unique once the hierarchy validated)."""
    return list(domains.values())[-1] if domains else "-"


def format_plan(plan: PlacementPlan | RunsPlan, fmt: str = "table", title: str | None = None,
                wide: bool = False) -> str:
    """Render a plan as ``table`` (for people; within :data:`WIDTH` columns unless ``wide``) or ``json``
    (stable keys, for tools)."""
    if fmt == "json":
        return json.dumps(plan.to_dict(), indent=2, sort_keys=False) + "\n"
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}")
    if isinstance(plan, RunsPlan):
        return _runs_table(plan, title, None if wide else WIDTH)
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
            rows.append([g.display, 0, 0, "", ["-"], "no GPUs to place"])
            continue
        if not g.placed:
            rows.append([g.display, g.gpus, "", "", ["UNPLACEABLE"], g.reason or ""])
            continue
        nodes = sorted(set(g.pod_nodes.values()))
        span = " ".join(f"{k.rsplit('/', 1)[-1]}:{v}" for k, v in g.span.items())
        subs = [f"{k or '(gang)'}={_compact_domains(v)}" for k, v in g.subgroup_domains.items()]
        if wide:
            subs = ["; ".join(subs)]
        rows.append([g.display, g.gpus, len(nodes), span, subs, "moved to admit a later gang" if g.moved else ""])
    width = None if wide else WIDTH
    lines += _table(["gang", "GPUs", "nodes", "span", "domains", "note"], rows, width, squeeze=(0, 3, 4, 5))
    lines.append("")
    for stat in plan.level_stats:
        doms = plan.domains_at(stat.level)
        lines.append(f"{stat.level}: {stat.domains} domains, {stat.empty} empty, {stat.partly_used} partly used, "
                     f"{stat.full} full, largest free {stat.largest_free}")
        if len(doms) <= 64:
            lines += ["  " + x for x in _table(
                ["domain", "total", "preused", "planned", "unavailable", "free"],
                [[["/".join(d.path)], d.total, d.preused, d.planned, d.unavailable, d.free] for d in doms],
                None if width is None else width - 2, squeeze=(0,))]
    lines.append(f"stranded: {plan.stranded_gpus} free GPUs in {plan.levels[-1] if plan.levels else 'pool'} "
                 f"domains smaller than the smallest unit ({plan.smallest_unit} GPUs)")
    return "\n".join(lines) + "\n"


def _runs_table(plan: RunsPlan, title: str | None, width: int | None) -> str:
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
    lines += _table(["run", "group", "GPUs", "domain", "nodes", "spares"], rows, width, squeeze=(4, 5))
    lines.append("")
    lines += _table(["domain", "total", "free"], [[d, plan.total[d], plan.residual[d]] for d in sorted(plan.total)])
    return "\n".join(lines) + "\n"
