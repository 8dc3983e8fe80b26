"""A picture of a placement plan: ``toporender plan --format svg`` (or ``html``, the same SVG in a page).

Each pool is a row of its coarsest domains (zones); inside each, its finest domains (racks, NVLink cliques)
are cells, each with a bar of its GPUs: pre-used, planned per gang (one color per gang), unavailable
(cordoned or tainted) and free. Up to :data:`MAX_NODE_CELLS` nodes, each cell also shows its nodes, sized by
GPUs and filled the same way. Above :data:`MAX_CELLS` finest domains the cells are the next coarser level
instead, so a 10,000-node pool stays readable. Unplaceable gangs are listed with their reasons. The output
is self-contained (no scripts, fonts or links), deterministic, and every mark carries its data as
attributes (``data-gang``, ``data-gpus``, ``data-path``) for tools and tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from toporender.placement.plan import DomainUsage, NodeUsage, PlacementPlan

MAX_CELLS = 400
MAX_NODE_CELLS = 600
NODE_H = 10
COLUMNS = 8
CELL_W, CELL_H, BAR_H, GAP = 150, 52, 14, 8
LABEL_CHARS = 24
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f", "#e15759",
           "#8cd17d", "#499894", "#d37295")
PREUSED, UNAVAILABLE, FREE = "#7f7f7f", "#c9b3b3", "#eef2ee"


def _cells(plan: PlacementPlan) -> tuple[str, list[DomainUsage]]:
    """The level drawn as cells (the finest with at most :data:`MAX_CELLS` domains) and its domains."""
    for level in reversed(plan.levels):
        domains = plan.domains_at(level)
        if len(domains) <= MAX_CELLS:
            return level, domains
    level = plan.levels[0]
    return level, plan.domains_at(level)[:MAX_CELLS]


def _gang_gpus(plan: PlacementPlan, path: tuple[str, ...]) -> list[tuple[str, int]]:
    out = []
    for key, gang in plan.gangs.items():
        gpus = sum(n for own, n in gang.domain_gpus.items() if own[: len(path)] == path)
        if gpus:
            out.append((key, gpus))
    return out


def _pool(name: str, plan: PlacementPlan, colors: dict[str, str], top: int) -> tuple[list[str], int]:
    """SVG elements of one pool starting at ``top``, and the height they take."""
    out = [f'<g class="pool" data-pool={quoteattr(name)}>',
           f'<text class="title" x="{GAP}" y="{top + 18}">pool {escape(name)}: '
           f'{sum(1 for g in plan.gangs.values() if g.placed)} of {len(plan.gangs)} gangs placed, '
           f'{plan.placed_gpus} of {plan.requested_gpus} GPUs, {plan.free_gpus} free</text>']
    y = top + 30
    if not plan.levels:
        return out + ["</g>"], y - top
    level, cells = _cells(plan)
    nodes: dict[tuple[str, ...], list[NodeUsage]] = {}
    if plan.nodes and len(plan.nodes) <= MAX_NODE_CELLS and level == plan.levels[-1]:
        for node in plan.nodes:
            nodes.setdefault(node.path, []).append(node)
    cell_h = CELL_H + (NODE_H + 4 if nodes else 0)
    groups: dict[str, list[DomainUsage]] = {}
    for d in cells:
        groups.setdefault(d.path[0], []).append(d)
    out.append(f'<text class="level" x="{GAP}" y="{y + 12}">cells: {escape(level)}</text>')
    y += 20
    for group, members in groups.items():
        rows = (len(members) + COLUMNS - 1) // COLUMNS
        height = 22 + rows * (cell_h + GAP)
        out.append(f'<g class="zone" data-path={quoteattr(group)}>')
        out.append(f'<rect class="zone-box" x="{GAP / 2}" y="{y}" width="{COLUMNS * (CELL_W + GAP) + GAP}" '
                   f'height="{height}" rx="6"/>')
        out.append(f'<text class="zone-label" x="{GAP * 1.5}" y="{y + 15}">{escape(plan.levels[0])}={escape(group)}'
                   f'</text>')
        for i, d in enumerate(members):
            cx = GAP + (i % COLUMNS) * (CELL_W + GAP)
            cy = y + 22 + (i // COLUMNS) * (cell_h + GAP)
            out += _cell(plan, d, cx, cy, colors, nodes.get(d.path, []) if nodes else None)
        out.append("</g>")
        y += height + GAP
    return out + ["</g>"], y - top


def _cell(plan: PlacementPlan, d: DomainUsage, x: float, y: float, colors: dict[str, str],
          nodes: list[NodeUsage] | None) -> list[str]:
    path = "/".join(d.path)
    extra = NODE_H + 4 if nodes is not None else 0
    out = [f'<g class="domain" data-path={quoteattr(path)} data-total="{d.total}" data-free="{d.free}">',
           f'<rect class="cell" x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H + extra}" rx="3"/>',
           f'<text class="cell-label" x="{x + 4}" y="{y + 13}">{escape(_short(d.path[-1] or "(no label)"))}'
           f'<title>{escape(path)}</title></text>',
           f'<text class="cell-free" x="{x + 4}" y="{y + 47 + extra}">{d.free} of {d.total} GPUs free</text>']
    if nodes:
        out += _nodes(nodes, x + 4, y + 38, colors)
    segments: list[tuple[str, str, int, str]] = [("preused", PREUSED, d.preused, "")]
    segments += [("gang", colors[key], gpus, key) for key, gpus in _gang_gpus(plan, d.path)]
    segments += [("unavailable", UNAVAILABLE, d.unavailable, ""), ("free", FREE, d.free, "")]
    scale = (CELL_W - 8) / max(d.total, 1)
    bx = x + 4
    for cls, color, gpus, key in segments:
        if gpus <= 0:
            continue
        width = gpus * scale
        gang = f" data-gang={quoteattr(key)}" if key else ""
        title = f"{key}: {gpus} GPUs" if key else f"{cls}: {gpus} GPUs"
        out.append(f'<rect class="{cls}"{gang} data-gpus="{gpus}" x="{bx:.2f}" y="{y + 20}" width="{width:.2f}" '
                   f'height="{BAR_H}" fill="{color}"><title>{escape(title)}</title></rect>')
        bx += width
    out.append("</g>")
    return out


def _nodes(nodes: list[NodeUsage], x: float, y: float, colors: dict[str, str]) -> list[str]:
    """A strip of the domain's nodes, each as wide as its GPUs, filled like the domain's bar."""
    scale = (CELL_W - 8 - (len(nodes) - 1)) / max(sum(n.total for n in nodes), 1)
    out: list[str] = []
    nx = x
    for node in nodes:
        width = max(node.total * scale, 1.0)
        out.append(f'<g class="node" data-node={quoteattr(node.name)} data-total="{node.total}">'
                   f'<title>{escape(node.name)}: {node.total} GPUs</title>')
        if node.unavailable:
            out.append(f'<rect class="node-unavailable" x="{nx:.2f}" y="{y}" width="{width:.2f}" height="{NODE_H}" '
                       f'fill="{UNAVAILABLE}"/>')
        else:
            parts = [("node-preused", PREUSED, node.preused, "")]
            parts += [("node-gang", colors[key], gpus, key) for key, gpus in node.gangs]
            used = node.preused + sum(g for _, g in node.gangs)
            parts.append(("node-free", FREE, max(node.total - used, 0), ""))
            px = nx
            for cls, color, gpus, key in parts:
                if gpus <= 0:
                    continue
                w = width * gpus / max(node.total, 1)
                gang = f" data-gang={quoteattr(key)}" if key else ""
                out.append(f'<rect class="{cls}"{gang} data-gpus="{gpus}" x="{px:.2f}" y="{y}" width="{w:.2f}" '
                           f'height="{NODE_H}" fill="{color}"/>')
                px += w
        out.append("</g>")
        nx += width + 1
    return out


def _short(name: str) -> str:
    """A domain name that fits its cell: long ones keep their start and end (``0546fb3d-6b…b7c09c.1``)."""
    if len(name) <= LABEL_CHARS:
        return name
    half = (LABEL_CHARS - 1) // 2
    return name[:half] + "\u2026" + name[-half:]


def plan_svg(plans: Sequence[tuple[str, PlacementPlan]]) -> str:
    """One SVG picture of every pool's plan."""
    keys = [key for _, plan in plans for key in plan.gangs]
    colors = {key: PALETTE[i % len(PALETTE)] for i, key in enumerate(keys)}
    body: list[str] = []
    y = 0
    for name, plan in plans:
        elements, height = _pool(name, plan, colors, y)
        body += elements
        y += height + GAP
    legend_y = y + 10
    body.append(f'<g class="legend"><text class="title" x="{GAP}" y="{legend_y}">gangs</text>')
    placed = [(key, g) for _, plan in plans for key, g in plan.gangs.items() if g.placed]
    for i, (key, gang) in enumerate(placed):
        lx, ly = GAP + (i % 3) * 400, legend_y + 8 + (i // 3) * 18
        body.append(f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{colors[key]}"/>'
                    f'<text x="{lx + 16}" y="{ly + 10}">{escape(gang.display)} ({gang.gpus} GPUs)</text>')
    y = legend_y + 16 + ((len(placed) + 2) // 3) * 18
    for label, color in (("pre-used", PREUSED), ("unavailable", UNAVAILABLE), ("free", FREE)):
        body.append(f'<rect x="{GAP}" y="{y}" width="12" height="12" fill="{color}" stroke="#999"/>'
                    f'<text x="{GAP + 16}" y="{y + 10}">{label}</text>')
        y += 18
    body.append("</g>")
    unplaced = [g for _, plan in plans for g in plan.gangs.values() if not g.placed]
    if unplaced:
        y += 10
        body.append(f'<g class="unplaceable-list"><text class="title" x="{GAP}" y="{y}">unplaceable gangs</text>')
        for gang in unplaced:
            y += 18
            body.append(f'<text class="unplaceable" data-gang={quoteattr(gang.key)} x="{GAP}" y="{y}">'
                        f'{escape(gang.display)}: {escape(gang.reason or "no domain fits")}</text>')
        body.append("</g>")
    width = COLUMNS * (CELL_W + GAP) + 2 * GAP
    style = ("text{font:11px sans-serif;fill:#222}.title{font-weight:bold;font-size:13px}"
             ".zone-box{fill:#fafafa;stroke:#bbb}.cell{fill:#fff;stroke:#ccc}.unplaceable{fill:#a33}")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + 20}" '
            f'viewBox="0 0 {width} {y + 20}"><style>{style}</style>' + "".join(body) + "</svg>\n")


def plan_html(svg: str, title: str) -> str:
    """The SVG in a self-contained page."""
    return (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{escape(title)}</title></head>"
            f"<body style=\"margin:0;background:#fff\">\n{svg}</body></html>\n")
