"""Quality benchmark: GPUs placed as a share of the exact arrival-order optimum (HiGHS), ours vs greedy baselines.

Usage: python benchmarks/placement/quality.py [--family nvl72|mixed|varied|fragmented] [--set tuning|development|
development-2|...|development-6|held-out|held-out-2|...|held-out-7] [--seeds N] [--first S] [--verbose]
[--no-optimum] [--fewest-stranded] [--fewest-blocks] [--excess]

``nvl72`` (the default) is the first generator: 4-GPU nodes in NVL72 racks, one gang shape, seeds 1000 on.
``mixed`` is the broader family (8-GPU and mixed nodes, small racks and leaf groups, cliques, pre-used and cordoned
nodes, several gang shapes): ``--set tuning``, ``--set development`` and ``--set development-2`` the seeds it may
be tuned on, ``--set held-out`` to ``--set held-out-4`` the disjoint seeds kept for reports.
``varied`` is a third family with what the others lack (tainted nodes and gangs that tolerate them, pods outside
every subgroup, gangs bound to no domain, subgroups without a level, 2-GPU nodes): ``--set development`` to
``--set development-6`` (changes were made on them), ``--set held-out`` to ``--set held-out-7``.
``fragmented`` is a fourth family (heavily pre-used HGX-style racks, data x tensor parallel gangs, single-pod jobs,
arrival orders sorted by size): ``--set held-out`` and ``--set held-out-2`` were run with a packer never changed
on it (held-out-2 has since decided against one change), ``--set held-out-3`` is a later unseen set,
``--set development`` is for changes. Prints a summary table: average / worst share of the optimum, instances
where the packer placed fewer GPUs than a baseline, average domains spanned per gang (over the gangs every
packer placed), stranded GPUs (free GPUs in racks smaller than the smallest subgroup) and the time per
instance; then spans and stranded GPUs again, of ours and BestFit, over the instances where BestFit admits
exactly the gangs ours does; with ``--fewest-stranded``, the fewest stranded GPUs any arrangement of the gangs
ours admits leaves (HiGHS, ``instances.fewest_stranded``): how far our stranded GPUs are from what that work
forces; with ``--fewest-blocks``, in the same row, the fewest blocks per gang any arrangement of those gangs
allows (``instances.fewest_blocks``), over the gangs the span columns count; with ``--excess``, a row each for
ours and BestFit: domains spanned and stranded GPUs per instance above the fewest any arrangement of that
packer's own gangs allows, which charges each plan for its arrangement and not for the work it admits.
``--no-optimum`` leaves out the optimum's solves (the share columns show "-"): spans and stranded GPUs of the
200-seed sets in minutes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import (  # noqa: E402
    DEVELOPMENT_2_SEEDS,
    DEVELOPMENT_SEEDS,
    FAMILIES,
    FRAGMENTED_DEVELOPMENT_SEEDS,
    FRAGMENTED_HELD_OUT_2_SEEDS,
    FRAGMENTED_HELD_OUT_3_SEEDS,
    FRAGMENTED_HELD_OUT_SEEDS,
    HELD_OUT_2_SEEDS,
    HELD_OUT_3_SEEDS,
    HELD_OUT_4_SEEDS,
    HELD_OUT_SEEDS,
    TUNING_SEEDS,
    VARIED_DEVELOPMENT_2_SEEDS,
    VARIED_DEVELOPMENT_3_SEEDS,
    VARIED_DEVELOPMENT_4_SEEDS,
    VARIED_DEVELOPMENT_5_SEEDS,
    VARIED_DEVELOPMENT_6_SEEDS,
    VARIED_DEVELOPMENT_SEEDS,
    VARIED_HELD_OUT_2_SEEDS,
    VARIED_HELD_OUT_3_SEEDS,
    VARIED_HELD_OUT_4_SEEDS,
    VARIED_HELD_OUT_5_SEEDS,
    VARIED_HELD_OUT_6_SEEDS,
    VARIED_HELD_OUT_7_SEEDS,
    VARIED_HELD_OUT_SEEDS,
    Instance,
    arrival_optimum,
    bestfit_run,
    check_plan,
    fewest_blocks,
    fewest_stranded,
    firstfit_run,
)

from toporender.placement.demand import GangDemand  # noqa: E402
from toporender.placement.packer import pack  # noqa: E402


def metrics(inst: Instance, assignment: Mapping[str, Mapping[str, str]],
            span_levels: Sequence[str]) -> tuple[int, list[float], int]:
    """(GPUs placed, avg domains per gang at each of ``span_levels``, stranded GPUs)."""
    nodes = {n.name: n for n in inst.inventory.nodes}
    used = {n: 0 for n in nodes}
    spans: list[list[int]] = [[] for _ in span_levels]
    placed = 0
    gpus = {g.key: {p.name: p.gpus for p in g.pods} for g in inst.gangs}
    for key, pods in assignment.items():
        placed += sum(gpus[key][p] for p in pods)
        for p, n in pods.items():
            used[n] += gpus[key][p]
        for i, label in enumerate(span_levels):
            spans[i].append(len({nodes[n].labels[label] for n in pods.values()}))
    unit = stranded_unit(inst)
    free: dict[str, int] = {}
    for n in nodes.values():
        if not n.unschedulable:
            free[n.labels["rack"]] = free.get(n.labels["rack"], 0) + n.gpus - n.used_gpus - used[n.name]
    stranded = sum(f for f in free.values() if 0 < f < unit)
    return placed, [statistics.mean(s or [0]) for s in spans], stranded


def all_spans(inst: Instance, levels: Sequence[str], admitted: Sequence[GangDemand],
              asg: Mapping[str, Mapping[str, str]], time_limit: float, label: str = "block") -> tuple[int, int, int]:
    """``label`` domains all the gangs a plan admits span in it, and in the arrangement of them that spans the
    fewest: (the plan's, best found, proven least). Unlike the table's cells, which count only the gangs every
    packer placed, this shows whether a plan's arrangement of its own work spreads it more than it must. The
    plan is one such arrangement, so the best found is never above it; a solve that finds nothing proves one
    domain a gang. Pods without GPUs are not packed, and count for neither."""
    domain = {n.name: n.labels[label] for n in inst.inventory.nodes}
    spans = [len({domain[asg[g.key][p.name]] for p in g.pods if p.gpus}) for g in admitted]
    ours = sum(spans)
    got = fewest_blocks(inst.inventory, levels, admitted, {g.key for g in admitted}, time_limit, label)
    if got is None:
        return ours, ours, sum(1 for x in spans if x)
    return ours, min(ours, got[0]), min(ours, got[1])


def above_fewest(inst: Instance, levels: Sequence[str], asg: Mapping[str, Mapping[str, str]],
                 span_levels: Sequence[str], time_limit: float) -> tuple[list[int], list[int], int]:
    """How far a plan lies above what its own gangs force: per ``span_levels`` label the domains all its gangs
    span, then its stranded GPUs, each less the fewest any arrangement of the same gangs allows. Returns (above
    the best found, above the least proved, solves that ended at their limit); the true gap lies between.

    Span and stranded GPUs taken whole charge a plan for the work it admits: a plan that places one more gang
    spans that gang's domains and may leave a rack's last GPUs stranded where a plan that refuses it leaves the
    rack empty. Measured against what its own gangs force (the span over the optimum for the same gangs), each
    plan is charged for its arrangement only. Two solves per label and plan: minutes more per 40 instances."""
    admitted = [g for g in inst.gangs if g.key in asg]
    if not admitted:
        # nothing to arrange: the free GPUs strand what they strand whatever the plan
        return [0] * (len(span_levels) + 1), [0] * (len(span_levels) + 1), 0
    found_gap: list[int] = []
    least_gap: list[int] = []
    unproven = 0
    for label in span_levels:
        span, found, least = all_spans(inst, levels, admitted, asg, time_limit, label)
        found_gap.append(span - found)
        least_gap.append(span - least)
        unproven += found != least
    stranded = metrics(inst, asg, ())[2]
    got = fewest_stranded(inst.inventory, levels, admitted, stranded_unit(inst), time_limit)
    found, least = (stranded, 0) if got is None else (min(stranded, got[0]), min(stranded, got[1]))
    found_gap.append(stranded - found)
    least_gap.append(stranded - least)
    return found_gap, least_gap, unproven + (found != least)


def free_gpus(inst: Instance) -> int:
    """Free GPUs of the instance's schedulable nodes before any gang: with the GPUs a plan places, the free GPUs
    it leaves, the room its stranded GPUs are part of."""
    return sum(n.gpus - n.used_gpus for n in inst.inventory.nodes if not n.unschedulable)


def stranded_unit(inst: Instance) -> int:
    """GPUs of the instance's smallest subgroup: a rack with fewer free GPUs (but some) strands them."""
    return min(sum(p.gpus for p in s.pods) for g in inst.gangs for s in g.subgroups)


SETS = {"tuning": TUNING_SEEDS, "development": DEVELOPMENT_SEEDS, "development-2": DEVELOPMENT_2_SEEDS,
        "held-out": HELD_OUT_SEEDS, "held-out-2": HELD_OUT_2_SEEDS, "held-out-3": HELD_OUT_3_SEEDS,
        "held-out-4": HELD_OUT_4_SEEDS}
"""The mixed family's seed sets (``--set``)."""
VARIED_SETS = {"development": VARIED_DEVELOPMENT_SEEDS, "development-2": VARIED_DEVELOPMENT_2_SEEDS,
               "development-3": VARIED_DEVELOPMENT_3_SEEDS, "development-4": VARIED_DEVELOPMENT_4_SEEDS,
               "development-5": VARIED_DEVELOPMENT_5_SEEDS, "development-6": VARIED_DEVELOPMENT_6_SEEDS,
               "held-out": VARIED_HELD_OUT_SEEDS,
               "held-out-2": VARIED_HELD_OUT_2_SEEDS, "held-out-3": VARIED_HELD_OUT_3_SEEDS,
               "held-out-4": VARIED_HELD_OUT_4_SEEDS, "held-out-5": VARIED_HELD_OUT_5_SEEDS,
               "held-out-6": VARIED_HELD_OUT_6_SEEDS, "held-out-7": VARIED_HELD_OUT_7_SEEDS}
"""The varied family's seed sets."""
FRAGMENTED_SETS = {"held-out": FRAGMENTED_HELD_OUT_SEEDS, "development": FRAGMENTED_DEVELOPMENT_SEEDS,
                   "held-out-2": FRAGMENTED_HELD_OUT_2_SEEDS, "held-out-3": FRAGMENTED_HELD_OUT_3_SEEDS}
"""The fragmented family's seed sets (the first two held-out sets were run with a packer never changed on the
family; held-out-2 has since decided against one change, which the log records)."""
FAMILY_SETS = {"mixed": SETS, "varied": VARIED_SETS, "fragmented": FRAGMENTED_SETS}
"""The named seed sets of each family that has them (``--family`` with ``--set``)."""

Baseline = Callable[[Instance, Sequence[str]], dict[str, dict[str, str]]]
BASELINES: dict[str, Baseline] = {
    "first-fit": lambda inst, levels: firstfit_run(inst.inventory, levels, inst.gangs),
    "bestfit": lambda inst, levels: bestfit_run(inst.inventory, levels, inst.gangs),
}


def share(placed: int, opt: int) -> float:
    """GPUs placed as a share of the optimum; where no gang fits at all (optimum 0), placing none is all of it."""
    return placed / opt if opt else float(placed == 0)


def run(seeds: Sequence[int], verbose: bool, family: str = "nvl72", time_limit: float = 30.0,
        fewest_row: bool = False, optimum: bool = True, blocks_row: bool = False,
        excess: bool = False) -> list[list[str]]:
    """The summary table; with ``fewest_row``, a last row of the fewest stranded GPUs ours' gangs allow (a second
    solve per instance: on the first generator's 40 seeds, minutes more); with ``blocks_row``, in that row the
    fewest blocks per gang they allow (another solve per instance), and with ``verbose`` too, per instance and
    summed, the blocks of all the gangs ours admits against the fewest they allow (a third). Without
    ``optimum``, no HiGHS solve of the arrival-order optimum: the share columns show "-" and the solver's row is
    left out, so spans and stranded GPUs of sets of hundreds of instances take minutes, not hours. With
    ``excess``, a row each for ours and BestFit: per instance, the domains all the gangs the packer placed span
    and its stranded GPUs, above the fewest any arrangement of its own gangs allows (:func:`above_fewest`;
    eight solves per instance)."""
    make, levels = FAMILIES[family]
    span_levels = ("rack", "block") if family == "nvl72" else ("clique", "rack", "block")
    names = ["ours", *BASELINES]
    rows: dict[str, list[tuple[float | None, list[float], int, float, int]]] = {name: [] for name in names}
    below = dict.fromkeys(BASELINES, 0)
    # spans and stranded GPUs where BestFit admits the very gangs ours does: the same work, placed two ways
    same_work: dict[str, list[tuple[list[float], int, int]]] = {"ours": [], "bestfit": []}
    solver_s = []
    # per instance the fewest stranded GPUs the gangs ours admits force (proven), and how many solves ended early
    fewest: list[int] = []
    fewest_s: list[float] = []
    # per instance the fewest blocks per gang, over the gangs every packer placed, ours' gangs allow (proven)
    fewest_blocks_per_gang: list[float] = []
    # with ``verbose``: blocks of all the gangs ours places, ours and the fewest found and proven, summed
    all_blocks = [0, 0, 0, 0]
    # with ``excess``: per packer and instance, spans and stranded GPUs above the fewest its own gangs allow
    above: dict[str, list[tuple[list[int], list[int]]]] = {"ours": [], "bestfit": []}
    above_unproven = {name: 0 for name in above}
    # with ``excess``: per instance, whether BestFit admits exactly the gangs ours does
    above_same: list[bool] = []
    unproven = 0
    violations = 0
    for seed in seeds:
        inst = make(seed)
        t0 = time.perf_counter()
        plan = pack(inst.inventory, levels, inst.gangs)
        t_ours = time.perf_counter() - t0
        errors = check_plan(inst.inventory, levels, inst.gangs, plan)
        violations += len(errors)
        if errors:
            print(f"seed {seed}: constraint violations: {errors}", file=sys.stderr)
        asgs: dict[str, tuple[dict[str, dict[str, str]], float]] = {
            "ours": ({k: g.pod_nodes for k, g in plan.gangs.items() if g.placed}, t_ours)}
        for name, baseline in BASELINES.items():
            t0 = time.perf_counter()
            asg = baseline(inst, levels)
            asgs[name] = (asg, time.perf_counter() - t0)
        opt: int | None = None
        if optimum:
            t0 = time.perf_counter()
            opt, _, unknown = arrival_optimum(inst.inventory, levels, inst.gangs, time_limit)
            solver_s.append(time.perf_counter() - t0)
            if unknown:
                raise SystemExit(f"seed {seed}: the solver hit its time limit")
        both = set.intersection(*(set(a) for a, _ in asgs.values()))
        same_gangs = set(asgs["ours"][0]) == set(asgs["bestfit"][0])
        placed = {}
        free = free_gpus(inst)
        # spans over each whole plan, its stranded GPUs and the free GPUs it leaves
        whole: dict[str, tuple[list[float], int, int]] = {}
        for name, (asg, t) in asgs.items():
            placed[name], whole_spans, s = metrics(inst, asg, span_levels)
            whole[name] = (whole_spans, s, free - placed[name])
            _, spans, _ = metrics(inst, {k: v for k, v in asg.items() if k in both}, span_levels)
            rows[name].append((None if opt is None else share(placed[name], opt), spans, s, t, free - placed[name]))
        for name in BASELINES:
            below[name] += placed["ours"] < placed[name]
        admitted = [g for g in inst.gangs if g.key in asgs["ours"][0]]
        t0 = time.perf_counter()
        if fewest_row:
            got = fewest_stranded(inst.inventory, levels, admitted, stranded_unit(inst), time_limit)
            fewest.append(0 if got is None else got[1])
            unproven += got is None or got[0] != got[1]
        if blocks_row and not both:
            fewest_blocks_per_gang.append(0.0)  # as the span columns count an instance with no gang in common
        elif blocks_row:
            got = fewest_blocks(inst.inventory, levels, admitted, both, time_limit)
            # a solve without an answer proves nothing but one block a gang
            fewest_blocks_per_gang.append(1.0 if got is None else got[1] / len(both))
            unproven += got is None or got[0] != got[1]
        if fewest_row or blocks_row:
            fewest_s.append(time.perf_counter() - t0)
        if same_gangs:
            for name in same_work:
                same_work[name].append(whole[name])
        if verbose and opt is not None:
            print(f"seed {seed}: optimum {opt}  " + "  ".join(f"{n} {share(placed[n], opt):.3f}" for n in names))
        elif verbose:
            print(f"seed {seed}: " + "  ".join(f"{n} {placed[n]} GPUs" for n in names))
        if verbose and blocks_row and both:
            at = span_levels.index("block")
            print(f"seed {seed}: blocks of the {len(both)} gangs every packer placed: " + "  ".join(
                f"{n} {round(rows[n][-1][1][at] * len(both))}" for n in names)
                + f"  fewest for ours' gangs {fewest_blocks_per_gang[-1] * len(both):.0f}")
        if verbose and blocks_row and admitted:
            ours_all, found, least = all_spans(inst, levels, admitted, asgs["ours"][0], time_limit)
            all_blocks = [all_blocks[0] + len(admitted), all_blocks[1] + ours_all, all_blocks[2] + found,
                          all_blocks[3] + least]
            print(f"seed {seed}: blocks of all {len(admitted)} gangs ours placed: ours {ours_all}  fewest {found}"
                  + (f" (least proved {least})" if least != found else ""))
        if excess:
            above_same.append(same_gangs)
            for name in above:
                found_gap, least_gap, ended = above_fewest(inst, levels, asgs[name][0], span_levels, time_limit)
                above[name].append((found_gap, least_gap))
                above_unproven[name] += ended
            if verbose:
                print(f"seed {seed}: above the fewest for its own gangs: " + "  ".join(
                    f"{n} " + " ".join(f"{what} {g}" for what, g in zip(
                        [*(f"{lv}s" for lv in span_levels), "stranded"], above[n][-1][0], strict=True))
                    for n in above))
    if verbose and blocks_row:
        print(f"blocks of all {all_blocks[0]} gangs ours placed, summed: ours {all_blocks[1]}  fewest found "
              f"{all_blocks[2]}  least proved {all_blocks[3]}")
    table = [["packer", "avg % of optimum", "worst %", "below it", *(f"{lv}s/gang*" for lv in span_levels),
              "stranded GPUs (avg)", "free GPUs left (avg)", "median time"]]
    for name, vals in rows.items():
        shares = [v[0] for v in vals if v[0] is not None]
        table.append([
            name,
            f"{100 * statistics.mean(shares):.1f}" if shares else "-",
            f"{100 * min(shares):.1f}" if shares else "-",
            f"{violations} violations" if name == "ours" else f"ours below on {below[name]}",
            *(f"{statistics.mean(v[1][i] for v in vals):.2f}" for i in range(len(span_levels))),
            f"{statistics.mean(v[2] for v in vals):.1f}",
            f"{statistics.mean(v[4] for v in vals):.1f}",
            f"{1000 * statistics.median(v[3] for v in vals):.1f} ms",
        ])
    if optimum:
        table.append(["HiGHS (optimum)", "100.0", "100.0", "", *("" for _ in span_levels), "", "",
                      f"{1000 * statistics.median(solver_s):.0f} ms"])
    for name, vals in same_work.items():
        table.append([f"{name}, same gangs**", "", "", f"{len(vals)} of {len(rows['ours'])} instances",
                      *(f"{statistics.mean(v[0][i] for v in vals):.2f}" if vals else "-"
                        for i in range(len(span_levels))),
                      f"{statistics.mean(v[1] for v in vals):.1f}" if vals else "-",
                      f"{statistics.mean(v[2] for v in vals):.1f}" if vals else "-", ""])
    if fewest_row or blocks_row:
        table.append(["HiGHS, ours' gangs***", "", "", f"{unproven} not proven" if unproven else "",
                      *(f"{statistics.mean(fewest_blocks_per_gang):.2f}" if lv == "block" and blocks_row
                        and fewest_blocks_per_gang else "" for lv in span_levels),
                      f"{statistics.mean(fewest):.1f}" if fewest_row else "", "",
                      f"{1000 * statistics.median(fewest_s):.0f} ms"])
    for name, vals in above.items():
        if vals:
            table.append([f"{name}, above fewest****", "", "",
                          f"{above_unproven[name]} not proven" if above_unproven[name] else "",
                          *_mean_cells(vals, len(span_levels) + 1), "", ""])
    for name, vals in above.items():
        same = [v for v, s in zip(vals, above_same, strict=True) if s]
        if same:
            table.append([f"{name}, above fewest, same gangs", "", "", f"{len(same)} of {len(vals)} instances",
                          *_mean_cells(same, len(span_levels) + 1), "", ""])
    return table


def _mean_cells(vals: Sequence[tuple[list[int], list[int]]], n: int) -> list[str]:
    """Per column the mean of the best-found gaps, then a range up to the mean of the least-proved ones."""
    cells = []
    for i in range(n):
        lo = statistics.mean(v[0][i] for v in vals)
        hi = statistics.mean(v[1][i] for v in vals)
        cells.append(f"{lo:.2f}" + (f"-{hi:.2f}" if f"{hi:.2f}" != f"{lo:.2f}" else ""))
    return cells


def set_parser(doc: str, families: Sequence[str] = tuple(FAMILIES)) -> argparse.ArgumentParser:
    """The arguments that choose an instance family and its seeds (``--family``, ``--set``, ``--seeds``,
    ``--first``) and the seconds of each exact solve (``--time-limit``), for a script whose docstring is
    ``doc``; :func:`set_seeds` turns them into seeds."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--family", choices=tuple(families), default=families[0])
    ap.add_argument("--set", choices=tuple(dict.fromkeys([*SETS, *VARIED_SETS])), default="tuning",
                    help="with --family mixed, varied or fragmented: seeds to tune on (tuning, development) or a "
                         "held-out set")
    ap.add_argument("--seeds", type=int, default=None, help="how many seeds (default: 40, or the whole set)")
    ap.add_argument("--first", type=int, default=None, help="first seed (default: 1000, or the set's)")
    ap.add_argument("--time-limit", type=float, default=30.0, help="seconds per exact solve of the oracle")
    return ap


def set_seeds(args: argparse.Namespace) -> range:
    """The seeds :func:`set_parser`'s arguments choose; a range that leaves the named set is an error."""
    if args.family not in FAMILY_SETS:
        first = 1000 if args.first is None else args.first
        return range(first, first + (40 if args.seeds is None else args.seeds))
    sets = FAMILY_SETS[args.family]
    if args.set not in sets:
        raise SystemExit(f"the {args.family} family has the sets {', '.join(sets)}")
    chosen = sets[args.set]
    first = chosen.start if args.first is None else args.first
    seeds = range(first, first + (len(chosen) if args.seeds is None else args.seeds))
    if set(seeds) - set(chosen):
        raise SystemExit(f"seeds {seeds.start}..{seeds.stop - 1} leave the {args.set} set "
                         f"({chosen.start}..{chosen.stop - 1})")
    return seeds


def main() -> None:
    ap = set_parser(__doc__)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--no-optimum", action="store_true",
                    help="no HiGHS solve of the arrival-order optimum: spans, stranded GPUs and the baselines only")
    ap.add_argument("--fewest-stranded", action="store_true",
                    help="a last row: the fewest stranded GPUs any arrangement of the gangs ours admits leaves")
    ap.add_argument("--fewest-blocks", action="store_true",
                    help="in that row: the fewest blocks per gang any arrangement of the gangs ours admits allows")
    ap.add_argument("--excess", action="store_true",
                    help="rows of ours' and BestFit's spans and stranded GPUs per instance above the fewest any "
                         "arrangement of each one's own gangs allows")
    args = ap.parse_args()
    seeds = set_seeds(args)
    table = run(seeds, args.verbose, args.family, args.time_limit, args.fewest_stranded, not args.no_optimum,
                args.fewest_blocks, args.excess)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    what = "random fragmented instances" if args.family == "nvl72" else f"{args.family} family, {args.set} set"
    print(f"quality on {len(seeds)} {what} (seeds {seeds.start}..{seeds.stop - 1})")
    print("* spans averaged over the gangs every packer placed; stranded = free GPUs in racks smaller than the "
          "smallest subgroup")
    print("** the instances where BestFit admits exactly the gangs ours admits: the same work, placed two ways "
          "(elsewhere they admit different gangs, ours never fewer GPUs)")
    if args.fewest_stranded or args.fewest_blocks:
        print("*** the fewest stranded GPUs, or blocks per gang over the gangs every packer placed, any arrangement "
              "of the gangs ours admits allows (where a solve ends at its time limit, the least it proved)")
    if args.excess:
        print("**** per instance, the domains all the gangs a packer placed span (spans summed, not averaged per "
              "gang) and its stranded GPUs, above the fewest any arrangement of its own gangs allows: its "
              "arrangement, not the work it admits (a range where solves ended at their time limit); "
              "\"same gangs\": over the instances where BestFit admits exactly the gangs ours admits, where the "
              "fewest is the same for both")
    for i, r in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main()
