"""Re-arranging earlier gangs when a new one does not fit as things stand.

The gangs lying inside one region (a domain of the new gang's required level, then coarser ones up to the
pool) are lifted, assigned whole to domains of their required level (a search of its own), and each domain is
re-packed by a depth-first search over leaf groups, largest pods first, with forward checking. In small regions
the gangs of an admission are then placed again, together and one by one, where that spans fewer domains; in
small pools exact searches first bind them to finer levels than they ask (see ``Repairer._tighten``), and one
places them leaving no new hole; then, where a gang is left over more than one block, every gang of the pool is
bound to one block (``Repairer.tight_pool``), and every gang of the pool is placed again leaving no new hole, with
the two finest levels left free (``Repairer.no_hole_pool``); a gang best fit leaves a hole with is placed again
so, alone (``Repairer._no_hole_place``).
When that fails in a small pool, one to three earlier gangs are lifted and placed again after the new one,
before the whole pool is re-packed exactly (the costliest search). An exact search that runs out of steps in its
first two orders is tried with gangs bound to nothing as parts, then restarted in other orders (each both as parts
and plain), many short searches where a long one spent its steps under one early choice.
Earlier gangs move only when this admits the new gang, and never when it fits as they are. Step budgets bound the
work.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from toporender.placement import fit
from toporender.placement.compiled import CompiledGang, LeafCheck, SearchContext, search_over
from toporender.placement.exact import EXACT_MAX_NODES, ExactRepack
from toporender.placement.fit import Fitter
from toporender.placement.node_fill import NodeFill
from toporender.placement.tree import ROOT

# Budgets of the repair search in steps; they depend only on the gangs seen so far.
REPAIR_BASE_STEPS = 20_000
REPAIR_STEPS_PER_TRY = 2_000
REPAIR_STEPS_PER_DOMAIN = 1_500
REPAIR_STEPS_PER_GANG = 10
MAX_MOVABLE = 300
REPAIR_REGIONS = 3
REPAIR_KEEP_STEPS = 1_000
"""Steps of each of the repair's first searches of a small region that keep moved gangs inside the domains of
their preferred level they used (``Repairer._kept_search``): the plain search takes the first arrangement, which
often spreads such gangs over more domains than an admission needs. Regions of more than ``EXACT_MAX_NODES``
nodes are not searched so: there a step costs many times more, and of 33 such searches packing the 1,000-node
scale case none found an arrangement."""
REPAIR_KEEP_BREAKS = 2
"""Domains of their preferred level those searches may add to the kept gangs in all, at most."""
REPAIR_KEEP_RUN_STEPS = 50_000
"""Steps of all those searches of one run that find nothing."""
EXACT_STEPS = 400_000
"""Steps of one exact re-packing of a small region (see :mod:`toporender.placement.exact`): as many as one gang may take
(``EXACT_GANG_STEPS``), since a tight region can need most of them and the run's budget bounds the worst case all the
same. Half go to a first search (after short searches: ``EXACT_QUICK_STEPS`` in its order, then
``EXACT_SHORT_RESTARTS``; so that it does not repeat the short one's first steps, units that are the only ones with
room for some group come first) and, if it runs out, ``EXACT_SECOND_STEPS`` to one in another order,
``EXACT_WIDE_STEPS`` to the first order with gangs bound to nothing as parts, then restarts in orders of their own (a
depth-first search can spend any budget under one wrong early choice, and orders fail on different regions): where
gangs are given whole domains first, each gang's old domain first, then the plain order; elsewhere units fewest free
GPUs first, then most free first."""
EXACT_SECOND_STEPS = 50_000
"""Steps of the second order's search; restarts (``EXACT_RESTART_STEPS``) take the rest of the gang's share."""
EXACT_WIDE_STEPS = 100_000
"""Steps of the search in the first order with gangs bound to nothing as parts (``wide`` in
:class:`ExactRepack`), after the second order and before the restarts, where such gangs make parts: a pool of
23 gangs, eleven of them one pod bound to nothing, ran out of 1,000,000 steps in both plain orders and is
admitted so in 94,192, which restarts of Luby's lengths never reach."""
EXACT_RESTART_STEPS = 1_500
"""Steps of the shortest restart: the n-th restart's search takes this times the n-th term of Luby's sequence
(1, 1, 2, 1, 1, 2, 4, ...), each in an order of its own (``shuffle`` in :class:`ExactRepack`). A depth-first
search's steps to an arrangement vary by orders of magnitude with its first choices, so many short searches
in different orders find what one long one misses, and any of them that ends within its steps proves as much as
the long one. In a tight zone as few as 2 of 100 orders admit the gang, each in under 1,300 steps, while others
run out of 10,000: so the restarts are many and short, and Luby's sequence makes some of them long. Not shorter:
in a zone of 10 gangs where 9 of 200 orders admit the gang, the fastest needs 1,335 steps and ran at the 42nd
restart, a term of 1 (4 of 200 need 1,335-3,203); with 1,000 its 470,000 steps of restarts found none, with 1,500
the 42nd admits it (2,000 missed a pool that 1,500 admits). Where gangs bound to nothing make parts only as
``wide``, each length is searched so and then plain, in the same order: which of the two finds an arrangement
sooner differs from pool to pool (a pool of 15 gangs with no GPU to spare: 1 of 60 orders admits it as parts
within 10,000 steps, 3 of 30 plain ones within 8,500, where restarts as parts alone left it out), and running
both loses at most a factor of two to the better one."""
EXACT_MAX_RESTARTS = 256
"""Restarts of one region's search at most."""
EXACT_SHORT_RESTARTS = 16
"""Restarts of one region's search that come before its first order's long search (the first terms of the
sequence, 33 times ``EXACT_RESTART_STEPS`` in all, within ``EXACT_SHORT_RUN_STEPS``); the others come after the
second order. A region whose first order needs more than 200,000 steps often has an order that needs a few
hundred, and a gang that the first order cannot admit would otherwise take the run's steps from the gangs after
it. Every region's short searches come before any region's long ones (``Repairer._exact_after``)."""
EXACT_SHORT_RUN_STEPS = 100_000
"""Steps of all short searches (short restarts, and the short search in the first order where no fluid one
follows) of one run that end without an answer: kept apart from ``EXACT_RUN_STEPS`` like the fluid searches'."""
EXACT_PREFERRED_STEPS = 10_000
"""Steps of the exact search that first keeps every gang inside one domain of its preferred level."""
EXACT_QUICK_STEPS = 5_000
"""Steps of the short search only as required in the first order that comes before the fluid one (or, where
that does not apply, before the short restarts): it admits the gang, or proves that nothing does, in most
regions, where the fluid search could only run out of steps."""
EXACT_FLUID_RUN_STEPS = 200_000
"""Steps of all those short and fluid searches of one run that end without an answer: kept apart from
``EXACT_RUN_STEPS``, so that where they fail the other searches have the steps they had without them."""
EXACT_FLUID_STEPS = 50_000
"""Steps of the search that gives the one-GPU pods bound to nothing nodes after the other groups (``fluid`` in
:class:`~toporender.placement.exact.ExactRepack`), tried before the two plain orders: in a tight pool with many
such pods the plain search spends its steps choosing which of them fill each unit."""
NODE_FILL_SLACK = 8
"""Free GPUs beyond those asked up to which a region is tight: searched node by node last."""
NODE_FILL_STEPS = 30_000
"""Steps of one node-by-node search."""
NODE_FILL_RUN_STEPS = 60_000
"""Steps of all node-by-node searches of one run."""
TIGHT_STEPS = 20_000
"""Steps of one exact search that keeps every moved gang as tight as it was (see ``Repairer._tighten``)."""
TIGHT_COARSE_STEPS = 100_000
"""Steps of the exact search that keeps every moved gang inside one domain of the level below the region's, where
keeping each as tight as it was fails (see ``Repairer._tighten``): such a search often needs more than
``TIGHT_STEPS``, and runs at most once an admission."""
TIGHT_RUN_STEPS = 500_000
"""Steps of all those searches of one run together."""
TIGHT_POOL_RUN_STEPS = 500_000
"""Steps of one run's searches of ``Repairer.tight_pool`` together: a budget of their own, so the searches of
each admission keep the steps they had."""
TIGHT_ROUNDS = 3
"""Rounds of binding one gang at a time to a finer level (see ``Repairer._tighten``)."""
HOLE_STEPS = 20_000
"""Steps of one exact search that leaves no new hole (``Repairer._no_hole_try``, ``_no_hole_place`` and
``no_hole_pool``)."""
HOLE_RUN_STEPS = 500_000
"""Steps of one run's searches of ``Repairer._no_hole_place`` together, and again of ``Repairer.no_hole_pool``'s
(the one after a repair's tight searches counts as a tight search)."""
MIN_HOLE_LEVELS = 4
"""Levels a pool needs for the searches that leave no new hole (``Repairer._holes_searched``)."""
SIDE_RUN_STEPS = {"fluid": EXACT_FLUID_RUN_STEPS, "short": EXACT_SHORT_RUN_STEPS, "keep": REPAIR_KEEP_RUN_STEPS,
                  "node": NODE_FILL_RUN_STEPS, "tight": TIGHT_RUN_STEPS,
                  "hole": HOLE_RUN_STEPS, "pool": HOLE_RUN_STEPS, "tight-pool": TIGHT_POOL_RUN_STEPS}
"""Per side budget, the steps of one run's searches charged to it when they end without an answer (the tight
searches' whatever they find)."""
EXACT_REGIONS = 3
"""Regions smaller than the pool searched exactly per gang that the bounded repair could not admit (finest
first); the pool itself, when small, is searched after them all the same. It holds every gang, so it stands in
for the coarser regions the limit left out: three blocks searched, say, where the arrangement moves zone-bound
gangs between the blocks of a zone."""
POLISH_STEPS = 20_000
"""Steps of re-placing the gangs of one admitting re-arrangement on fewer domains (see ``Repairer._polish``)."""
EXACT_RUN_STEPS = 1_000_000
"""Steps of all exact searches of one run together: the worst case stays bounded however many gangs fail (with
``EXACT_LATE_RUN_STEPS`` more once they are spent)."""
EXACT_GANG_STEPS = 875_000
"""Steps of the run's (``EXACT_RUN_STEPS``) that the exact searches for one gang may take; its regions not yet
searched then have late steps (``EXACT_LATE_STEPS``). A gang that no arrangement admits can spend any budget
without a verdict, and the run's steps are then left to the gangs after it: in a tight zone the next gang's
search may need 322,000 steps (both orders, then restarts). A pool's search may need more: a gang whose short
searches find nothing, where 37 of 200 orders admit it within 20,000 steps and none within 3,700, needs long
restarts after both long orders (670,000 steps in all), and the pool's search for an 18-GPU gang after 12
earlier ones admits it only with a share of about 815,000 (and the run's 853,000). Since the exact search checks
each group a unit takes against the later units' subset sums, none of the 40 slowest varied development pools
and the tests' cases places fewer GPUs with the run's steps cut to one gang's share, nor eight of them with the
share as large as the run: the margin and the share now bound the worst case more than they admit gangs."""
EXACT_LATE_STEPS = 20_000
"""Steps of the exact searches of one region once the run's ``EXACT_RUN_STEPS`` (or the gang's
``EXACT_GANG_STEPS``) are spent: a gang that no arrangement admits can spend them all, and a later region, or a
later, smaller gang's, often needs only a few thousand. A short search with units most free first
(``EXACT_QUICK_STEPS``) then comes right after the preferred one: the first order's, sized for 200,000 steps,
seldom ends within these, and where it runs out another order often finds an arrangement in a few hundred (the
heavy tails that restarts address)."""
EXACT_LATE_RUN_STEPS = 100_000
"""Steps of all those late searches of one run together."""
EJECT_CANDIDATES = 16
"""Earlier gangs of a region an ejection may choose from (see ``Repairer._eject_candidates``)."""
EJECT_MAX_LIFTED = 3
"""Earlier gangs one ejection lifts at most (each set in every order: the lifted gangs are placed in turn)."""
EJECT_RUN_STEPS = 200_000
"""Steps of all greedy ejection tries of one run together."""
EJECT_EXACT_STEPS = 2_000
"""Steps of one exact search of a set of lifted gangs together with the new one."""
EJECT_EXACT_RUN_STEPS = 200_000
"""Steps of all those exact searches of one run together."""


@dataclass(slots=True)
class RegionSearch:
    """One region's exact searches for a gang, run in two parts (every region's short searches before any
    region's long ones): what the first part leaves to the second."""

    region: int
    movable: list[int]
    late_left: int = EXACT_LATE_STEPS
    """The region's late steps not yet spent (``EXACT_LATE_STEPS`` for both parts together)."""
    refuted: set[tuple[int, frozenset[int]]] = field(default_factory=set)
    """Sets of groups left that failed from some unit on, shared by the region's searches."""
    proven: bool = False
    """Whether a search ended within its steps without an arrangement: no other search of it can find one."""
    ways: tuple[bool, bool] | None = None
    """Whether gangs bound to nothing make parts in a wide search, and a plain one makes none (worked out at the
    first wide try of either part: it depends on the gangs and the region's domains, not on what is free)."""


@dataclass(frozen=True, slots=True)
class ExactTry:
    """One exact search of a region, as :meth:`Repairer._exact` runs them in turn."""

    steps: int
    old: dict[int, dict[int, int]] | None = None
    """Where the moved gangs were: a gang given a whole domain tries its old one first."""
    preferred: bool = False
    """Each gang inside one domain of its preferred level."""
    fluid: bool = False
    """One-GPU pods bound to nothing given nodes after the other groups (``fluid`` in :class:`ExactRepack`)."""
    seed: int = 0
    """A restart's seed: units and domains in an order mixed from it."""
    wide: bool = False
    """Gangs bound to nothing as parts (``wide`` in :class:`ExactRepack`)."""
    side: str = ""
    """The side budget (``SIDE_RUN_STEPS``) charged if the search ends undecided; "" for none."""
    only_first: bool = False
    """Units that are the only ones with room for some group first."""


def _luby() -> Iterator[int]:
    """Luby's sequence, the restart lengths that lose at most a log factor to the best fixed length (Luby,
    Sinclair and Zuckerman, 1993), for ``EXACT_MAX_RESTARTS`` restarts."""
    terms = [1]
    while len(terms) < EXACT_MAX_RESTARTS:
        terms = [*terms, *terms, 2 * terms[-1]]  # 1; 1, 1, 2; 1, 1, 2, 1, 1, 2, 4; ...
    yield from terms[:EXACT_MAX_RESTARTS]


def _item_order(item: tuple[CompiledGang, int]) -> tuple[int, int, int, int]:
    """Largest pods first, then largest groups: for divisible pod sizes this makes first-fit node packing exact."""
    gang, gi = item
    g = gang.groups[gi]
    return (-g.sizes[0][0] if g.sizes else 0, -g.need, gang.idx, gi)


class Repairer(Fitter):
    """A :class:`Fitter` that may also re-pack earlier gangs to admit a new one."""

    ejects = True
    """Whether a gang the region searches could not admit is tried by lifting a few earlier gangs (:meth:`_eject`)."""

    # ---- re-arranging earlier gangs ------------------------------------------------------------------------------
    def _inside(self, region: int, charge: bool = True) -> list[int]:
        """The movable gangs placed inside ``region``; the scan is charged to the bounded repair's steps unless
        ``charge`` is off (the exact and lifting searches keep budgets of their own)."""
        tree = self.tree
        if charge:
            self.spent += len(self.lca) // 64 + 1
        fixed = self.fixed
        if region == ROOT:
            return sorted(g for g in self.lca if g not in fixed)
        # Tree.inside inlined: this scans every placed gang for each region a repair tries
        lvl = tree.dom_level[region] + 1
        anc = tree.dom_anc
        return sorted(g for g, d in self.lca.items() if len(anc[d]) > lvl and anc[d][lvl] == region and g not in fixed)

    def _lift(self, gangs: Iterable[int]) -> dict[int, int]:
        """Take earlier gangs out of the plan (their pods stay in the undo log); returns their domains, for
        :meth:`_unlift` once the log is rolled back."""
        saved: dict[int, int] = {}
        for m in gangs:
            self._release(m)
            saved[m] = self.lca.pop(m)
            self.placed.discard(m)
        return saved

    def _unlift(self, saved: dict[int, int], placed: Iterable[int] = ()) -> None:
        """After a rollback: the lifted gangs placed again as they were, and ``placed`` (gangs placed while they
        were out) out of the plan's bookkeeping."""
        for i in placed:
            self.lca.pop(i, None)
            self.placed.discard(i)
        self.lca.update(saved)
        self.placed.update(saved)

    def _take_found(self, gangs: Iterable[CompiledGang], found: dict[int, dict[int, int]]) -> None:
        """Assign the pods an exact search found for ``gangs`` (its pod -> node map per gang)."""
        for x in gangs:
            self._take_pairs(x.idx, sorted(found.get(x.idx, {}).items()))

    def _settle(self, gangs: Iterable[int]) -> None:
        """Record gangs whose pods a search has just assigned as placed."""
        for i in gangs:
            self.lca[i] = self._lca(i)
            self.placed.add(i)

    def repair(self, gang: CompiledGang) -> bool:
        """Re-pack the gangs of one region together with ``gang``; earlier gangs move only if this succeeds."""
        tree = self.tree
        self.gang_exact_spent = 0
        allowance = min(REPAIR_BASE_STEPS + REPAIR_STEPS_PER_GANG * (gang.idx + 1), self.spent + REPAIR_STEPS_PER_TRY)
        r = gang.groups[0].req
        # moving earlier gangs onto tainted nodes they tolerate frees the nodes they leave: those count too
        tol = self.tolerated[gang.idx]
        regions: list[int] = []
        for lvl in range(r, -1, -1):
            if tol:
                roomy = sorted((d for d in tree.level_domains[lvl] if self._free(d, tol) >= gang.need),
                               key=lambda d: (-self._free(d, tol), -tree.rank[d]))
            else:
                lst = tree.index.get((ROOT, lvl), [])
                roomy = [tree.dom_of(k) for k in reversed(lst) if tree.free_of(k) >= gang.need]
            regions.extend(roomy[:REPAIR_REGIONS])
        if self._free(ROOT, tol) >= gang.need:
            regions.append(ROOT)
        tried: set[tuple[int, ...]] = set()
        for region in regions:
            if self.spent >= allowance:
                break
            movable = tuple(self._inside(region))
            if movable in tried:
                continue
            tried.add(movable)
            if self._repack(gang, region, list(movable), allowance):
                return True
        # lifting a few gangs comes before the exact search of the whole pool, which re-packs every gang in it;
        # every region's short searches come before any region's long ones
        lifted = False
        undecided: list[RegionSearch] = []
        for region, inside in self._exact_regions(gang, regions):
            search = RegionSearch(region, inside)
            if region == ROOT:
                lifted = True
                if self._eject(gang, regions, (search, undecided)):
                    return True
            if self._exact_short(gang, search, undecided):
                return True
        return self._exact_after(gang, None, undecided) or (not lifted and self._eject(gang, regions))

    def _exact_short(self, gang: CompiledGang, search: RegionSearch, undecided: list[RegionSearch]) -> bool:
        """``search``'s short exact searches; a region they leave undecided joins ``undecided`` for its long ones."""
        if self._exact(gang, search, short=True):
            return True
        if not search.proven:
            undecided.append(search)
        return False

    def _exact_after(self, gang: CompiledGang, search: RegionSearch | None, undecided: list[RegionSearch]) -> bool:
        """``search``'s short exact searches, if given, then the long ones of each region that its short ones left
        undecided, in order. A gang the first region cannot admit otherwise spent the gang's steps there while
        a coarser region's short searches would have admitted it in a few thousand (and the gangs after it were
        left the late steps)."""
        if search is not None and self._exact_short(gang, search, undecided):
            return True
        for rs in undecided:
            if self._late() and self.late_spent >= EXACT_LATE_RUN_STEPS:
                return False
            if self._exact(gang, rs, short=False):
                return True
        return False

    def _eject(self, gang: CompiledGang, regions: list[int],
               then: tuple[RegionSearch, list[RegionSearch]] | None = None) -> bool:
        """Lift one to three earlier gangs of a small pool, place ``gang``, then place the lifted ones again
        wherever their own constraints allow; of the tries that admit ``gang``, keep the one that leaves the
        most room for later gangs (:meth:`_room`).

        Runs after the exact searches of regions smaller than the pool failed, and before the pool's own. Those
        re-pack every gang of the region from nothing, and in a tight region (a few free GPUs left, many one-GPU
        pods) a depth-first search can spend millions of steps without reaching an arrangement that differs from
        the plan by a few gangs only; the pool's search, the largest, spent the run's exact steps that later
        gangs' small searches needed where lifting a gang or two admitted the new one. Each set of lifted
        gangs is tried greedily first (the new gang, then the lifted ones in the given order); only when no
        greedy try admits the gang is each set searched exactly together with it (a small search: the other
        gangs stay). Steps are counted per run, so the result depends on steps only. The first admitting try was
        often a cramped one that cost a larger later gang its place, hence the choice by room. ``then``: the exact
        searches that come after this one (the pool's, and the long ones of the regions left undecided), which
        the copy of the run kept at the first lift makes instead (:meth:`_before_lift`)."""
        tree = self.tree
        if not self.ejects or sum(tree.dom_hist[ROOT]) > EXACT_MAX_NODES:
            return False
        seen: set[tuple[int, ...]] = set()
        best: tuple[tuple[int, ...], tuple[int, ...], dict[int, list[tuple[int, int]]]] | None = None
        for region in regions:
            movable = self._inside(region, charge=False)
            if not movable or tuple(movable) in seen:
                continue
            seen.add(tuple(movable))
            order = self._eject_candidates(gang, movable)
            # greedy tries of every ordered set first; exact searches of the sets only if none admitted the gang
            for exact, sets in ((False, itertools.permutations), (True, itertools.combinations)):
                if exact and best is not None:
                    break
                for lifted in (t for k in range(1, EJECT_MAX_LIFTED + 1) for t in sets(order, k)):
                    if (self.eject_exact_spent >= EJECT_EXACT_RUN_STEPS if exact
                            else self.eject_spent >= EJECT_RUN_STEPS):
                        break
                    got = self._eject_try(gang, region, lifted, exact)
                    if got is not None and (best is None or got[0] > best[0]):
                        best = (got[0], lifted, got[1])
        if best is None:
            return False
        self._before_lift(gang, then)
        _, chosen, found = best
        before = {m: dict(self.assign.get(m, {})) for m in chosen}
        self._lift(chosen)
        for x, pairs in found.items():
            self._take_pairs(x, pairs)
        self._settle(found)
        self._polish([gang, *(self.gangs[m] for m in chosen)], ROOT)
        self.moved.update(m for m in chosen if self.assign.get(m, {}) != before[m])
        self.exact_notes.pop(gang.idx, None)
        return True

    def _eject_candidates(self, gang: CompiledGang, movable: list[int]) -> list[int]:
        """The earlier gangs an ejection chooses from: those whose lifting frees room for the most of ``gang``'s
        largest pods on their nodes (up to as many as it has) first, then the smallest. Ranked by size alone, a
        gang of whole-node pods in a pool of partly used nodes found only small gangs to lift, whose GPUs free no
        whole node, while a larger gang that holds parts of two otherwise empty nodes was left out."""
        node_free = self.tree.node_free
        size, wanted = gang.groups[0].sizes[0]  # the gang's largest pods and how many (it needs GPUs: size > 0)

        def unlocked(m: int) -> int:
            freed: dict[int, int] = {}
            gpus = self.gangs[m].pod_gpus
            for pod, node in self.assign.get(m, {}).items():
                freed[node] = freed.get(node, 0) + gpus[pod]
            return min(wanted, sum((node_free[n] + f) // size - node_free[n] // size
                                   for n, f in freed.items() if n not in gang.excluded))

        return sorted(movable, key=lambda m: (-unlocked(m), self.gangs[m].need, m))[:EJECT_CANDIDATES]

    def _before_lift(self, gang: CompiledGang, then: tuple[RegionSearch, list[RegionSearch]] | None) -> None:
        """Called once a lift will admit ``gang``, before anything moves: the plan is still the one a run
        without lifts has at this point, which would make the exact searches ``then`` next
        (:meth:`_exact_after`)."""

    def _eject_try(self, gang: CompiledGang, region: int, lifted: tuple[int, ...], exact: bool
                   ) -> tuple[tuple[int, ...], dict[int, list[tuple[int, int]]]] | None:
        """One ejection: lift ``lifted``; place ``gang`` in ``region`` and the lifted gangs in the pool, one at a
        time, or (``exact``) all together by an exact search of the pool. Undone either way; returns the room it
        leaves and the pods of the gangs it placed, if it admits ``gang``."""
        mark = len(self.log)
        saved = self._lift(lifted)
        ok = False
        if exact:
            gs = [self.gangs[m] for m in sorted(lifted)] + [gang]
            if ExactRepack.applies(self.tree, ROOT, gs):
                search = ExactRepack(self.tree, ROOT, gs, EJECT_EXACT_STEPS)
                found = search.solve()
                self.eject_exact_spent += search.steps + 1
                if found is not None:
                    self._take_found(gs, found)
                    ok = True
        else:
            ok, steps = self.place(gang, region, fit.GANG_STEPS)
            self.eject_spent += steps + 1
            for m in lifted if ok else ():
                ok, steps = self.place(self.gangs[m], ROOT, fit.GANG_STEPS)
                self.eject_spent += steps
                if not ok:
                    break
        got = None
        if ok:
            got = self._room(), {x: sorted(self.assign.get(x, {}).items()) for x in (gang.idx, *lifted)}
        self._rollback(mark, None)
        self._unlift(saved, (gang.idx, *lifted))
        return got

    def _room(self) -> tuple[int, ...]:
        """The most free GPUs in one domain of each level, coarsest first: what a later gang bound to a domain
        can hope for."""
        tree = self.tree
        return tuple(tree.free_of(lst[-1]) if (lst := tree.index.get((ROOT, lvl))) else 0
                     for lvl in range(len(tree.level_domains)))

    def _exact_regions(self, gang: CompiledGang, regions: list[int]) -> Iterator[tuple[int, list[int]]]:
        """The small regions to re-pack exactly for ``gang``, with their movable gangs: at most
        :data:`EXACT_REGIONS` of them smaller than the pool, then the pool, while the run's exact steps (or, once
        they are spent, its late ones) last.

        Runs only after the bounded search failed, so it changes no plan the bounded search already admits."""
        tree = self.tree
        searched = 0
        # a wider region holding the same gangs is a new search only if it has more free GPUs
        seen: set[tuple[tuple[int, ...], int]] = set()
        for region in regions:
            if searched >= EXACT_REGIONS and region != ROOT:
                continue
            # cheap size test first: the bounded search's budgets (and so large pools' plans) stay untouched
            if sum(tree.dom_hist[region]) > EXACT_MAX_NODES:
                continue
            movable = self._inside(region, charge=False)
            free = self._free(region, self.tolerated[gang.idx])
            if (tuple(movable), free) in seen or free < gang.need:
                continue
            seen.add((tuple(movable), free))
            if not ExactRepack.applies(tree, region, [*(self.gangs[m] for m in movable), gang]):
                continue
            if self._late() and self.late_spent >= EXACT_LATE_RUN_STEPS:
                return
            searched += 1
            yield region, movable

    def _exact(self, gang: CompiledGang, rs: RegionSearch, short: bool) -> bool:
        """Re-pack the gangs ``rs.movable`` of a small region together with ``gang`` exactly (within a fixed step
        budget): with ``short``, the region's short searches, else the rest of them."""
        tree = self.tree
        region, movable = rs.region, rs.movable
        gs = [self.gangs[m] for m in movable] + [gang]
        before = {m: dict(self.assign.get(m, {})) for m in movable}
        was_in = {m: tree.dom_level[self.lca[m]] for m in movable if m in self.lca}
        mark = len(self.log)
        for m in movable:
            self._release(m)
        found = None
        proven = False
        # short: each gang inside one domain of its preferred level first (fewest domains), then only as required:
        # a short search (where one-GPU pods bind nothing, followed by one giving those pods nodes last, fluid),
        # then short restarts. Long: old domains first for half the steps (units that are the only ones with room
        # for some group first), then in the plain order; where old domains order no choice, units fewest free
        # GPUs first for half the steps (the same units first), then most free first; then the
        # first order with gangs bound to nothing as parts, then long restarts. Once the run's steps are spent, a
        # short search with units most free first comes right after the first try
        steered = False
        # one sequence of restarts: its first terms short, the rest after the long searches
        restarts = list(enumerate(_luby(), 1))
        first, rest = restarts[:EXACT_SHORT_RESTARTS], restarts[EXACT_SHORT_RESTARTS:]
        tries: list[ExactTry]
        if short:
            tries = [ExactTry(EXACT_PREFERRED_STEPS, before, preferred=True)]
            if self._late():
                tries.append(ExactTry(EXACT_QUICK_STEPS))
            if ExactRepack(tree, region, gs, 0, fluid=True).fluid:
                # the fluid search proves nothing: a short search only as required first, which ends most searches
                tries += [ExactTry(EXACT_QUICK_STEPS, before, side="fluid"),
                          ExactTry(EXACT_FLUID_STEPS, before, fluid=True, side="fluid")]
            else:
                tries.append(ExactTry(EXACT_QUICK_STEPS, before, side="short"))
            tries += [ExactTry(EXACT_RESTART_STEPS * n, seed=seed, wide=wide, side="short")
                      for seed, n in first for wide in (True, False)]
        else:
            tries = [ExactTry(EXACT_STEPS // 2, before, only_first=True), ExactTry(EXACT_SECOND_STEPS),
                     ExactTry(EXACT_WIDE_STEPS, wide=True)]
            tries += [ExactTry(EXACT_RESTART_STEPS * n, seed=seed, wide=wide)
                      for seed, n in rest for wide in (True, False)]
        # where a wide search makes parts and a plain one none, each restart's length is searched both ways
        refuted = rs.refuted
        for t in tries:
            late = self._late()
            left = (min(rs.late_left, EXACT_LATE_RUN_STEPS - self.late_spent) if late
                    else min(EXACT_RUN_STEPS - self.exact_spent, EXACT_GANG_STEPS - self.gang_exact_spent))
            side_left = SIDE_RUN_STEPS[t.side] - self.side_spent[t.side] if t.side else t.steps
            budget = min(t.steps, left, side_left)
            if budget <= 0 or (t.preferred and all(g.pref is None for x in gs for g in x.groups)):
                if t.seed and not t.side:
                    break  # the run's (or the gang's) steps are spent: no later try has any
                continue
            if t.wide:
                # gangs bound to nothing as parts, only where that makes parts; for a restart, only where a plain
                # search makes none (a plain one with parts is the restart's one form)
                if rs.ways is None:
                    made = bool(ExactRepack(tree, region, gs, 0, wide=True).whole_of)
                    rs.ways = (made, made and not ExactRepack(tree, region, gs, 0).whole_of)
                if not rs.ways[0] or (t.seed and not rs.ways[1]):
                    continue
                search = ExactRepack(tree, region, gs, budget, wide=True, shuffle=t.seed)
            else:
                search = ExactRepack(tree, region, gs, budget, t.preferred, t.old,
                                     most_free_first=t.old is None and not steered, fluid=t.fluid,
                                     refuted=None if t.preferred or t.fluid else refuted, shuffle=t.seed,
                                     only_first=t.only_first)
            if not t.preferred and not t.fluid and t.old is not None:
                steered = search.steers
            found = search.solve()
            proven = not t.preferred and not t.fluid and search.steps <= search.budget
            if late:
                self.late_spent += search.steps
                rs.late_left -= search.steps
            elif t.side and found is None and not proven:
                self.side_spent[t.side] += search.steps
            else:
                self.exact_spent += search.steps
                self.gang_exact_spent += search.steps
            if found is not None or proven:
                break  # admitted, or proven impossible
        rs.proven = proven
        if found is None and not short and not proven:
            found = self._node_fill(region, gs)
        if found is None:
            self._rollback(mark, None)
            if movable:
                self.exact_notes[gang.idx] = self._exact_note(region, len(movable), proven)
            return False
        self._take_found(gs, found)
        self._tighten(gs, region, was_in, before)
        self._settle(x.idx for x in gs)
        self._polish(gs, region)
        self.moved.update(m for m in movable if self.assign.get(m, {}) != before[m])
        self.exact_notes.pop(gang.idx, None)
        return True

    def _tighten(self, gs: list[CompiledGang], region: int, was_in: dict[int, int],
                 before: dict[int, dict[int, int]]) -> None:
        """Re-arrange the just placed ``gs`` on fewer domains, by exact searches that bind gangs to finer levels
        than they ask: first each moved gang to the finest level it lay in one domain of before (``was_in``), or
        where no such arrangement is found, to one domain of the level below the region's (a block of the zone,
        say: the old levels are often racks that the admitted gang needs), the admitted gang too, else all but
        one (:meth:`_one_each`), then,
        one gang at a time, a gang to the level below the one it now lies in one domain of, with every other gang
        kept in one domain of its own such level. A result is kept only if it spans fewer domains (coarsest level
        first). Small pools only, within ``TIGHT_STEPS`` a search and ``TIGHT_RUN_STEPS`` a run.

        The repair keeps the first arrangement that admits the new gang, and the moved gangs often come out of
        it spread over more racks and blocks than they were, where greedy BestFit would have kept them in one.
        Re-placing one or two gangs at a time (:meth:`_polish`) cannot reach an arrangement where each gang's
        tighter place is held by another; an exact search can. Its steps are a budget of their own, so what the
        admitting searches may spend does not change; the tighter arrangement can still change what a later gang's
        search finds within its steps (``test_a_tighter_arrangement_can_cost_a_later_gang``)."""
        tree = self.tree
        if not self.small_pool or not ExactRepack.applies(tree, region, gs):
            return
        rlvl = tree.dom_level[region]
        finest = len(tree.levels) - 1
        if not self._tight_try(gs, region, was_in, before, TIGHT_STEPS):
            coarse = {m: min(lvl, rlvl + 1) for m, lvl in was_in.items()}
            if coarse != was_in and rlvl + 1 < finest:
                self._one_each(gs, region, coarse, before, "tight")
        failed: set[tuple[int, int]] = set()
        for _ in range(TIGHT_ROUNDS):
            better = False
            for x in gs:
                now = {y.idx: tree.dom_level[self._lca(y.idx)] for y in gs}
                if rlvl <= now[x.idx] < finest and (x.idx, now[x.idx]) not in failed:
                    now[x.idx] += 1
                    if self._tight_try(gs, region, now, before, TIGHT_STEPS):
                        better = True
                        failed.clear()
                    else:
                        failed.add((x.idx, now[x.idx] - 1))
            if not better:
                break
        self._no_hole_try(gs, region, before)

    def _one_each(self, gs: list[CompiledGang], region: int, coarse: dict[int, int],
                  before: dict[int, dict[int, int]], side: str, in_all: bool = False) -> bool:
        """Searches of ``gs`` with gangs bound to one domain of their level in ``coarse`` (one level, or none),
        until one spans fewer domains: every gang of ``gs`` not in ``coarse`` bound to that level too, then those
        of ``coarse``, then those of ``coarse`` but one, each in turn (but one that is not bound to that level, or
        must lie in one such domain anyway). Whether one was kept.

        Where every gang in one block leaves the admitted gang no room, one gang spread over two is often what
        it needs; which one, only a search tells. The first two searches have ``TIGHT_COARSE_STEPS``, each of
        the others ``TIGHT_STEPS``, all within the ``side`` budget."""
        level = max(coarse.values())
        every = {**{x.idx: level for x in gs}, **coarse}
        if every != coarse and self._tight_try(gs, region, every, before, TIGHT_COARSE_STEPS, side, in_all):
            return True
        if self._tight_try(gs, region, coarse, before, TIGHT_COARSE_STEPS, side, in_all):
            return True
        return any(self._tight_try(gs, region, {m: lvl for m, lvl in coarse.items() if m != y}, before, TIGHT_STEPS,
                                   side, in_all)
                   for y, lvl in coarse.items() if lvl == level and self.gangs[y].groups[0].req < level)

    def _tight_try(self, gs: list[CompiledGang], region: int, levels: dict[int, int],
                   before: dict[int, dict[int, int]], steps: int, side: str = "tight",
                   in_all: bool = False) -> bool:
        """One search of :meth:`_tighten`, within ``steps`` and the ``side`` budget: ``gs`` placed again with each
        gang bound to its level in ``levels`` (where finer than its own); kept if it spans fewer domains
        (coarsest level first), with ``in_all`` only if it spans no more domains over all levels together."""
        was = self._spans(gs, region)
        mark = len(self.log)
        if self._bound_search(gs, region, levels, before, steps, side=side):
            now = self._spans(gs, region)
            if now < was and (not in_all or sum(now) <= sum(was)):
                return True
        self._rollback(mark, None)
        return False

    def _no_hole_try(self, gs: list[CompiledGang], region: int, before: dict[int, dict[int, int]],
                     side: str = "tight", free_levels: int = 1) -> bool:
        """``gs`` placed again by an exact search that leaves no unit a new hole (fewer free GPUs than any leaf
        group seen so far asks for), the ``free_levels`` finest levels left free: each gang bound to the finest
        level it lies in one domain of, but to none of the free ones (a gang in one clique is held to its block
        when two are free), unless it lies in one domain of its preferred level (the one above the finest, where
        it prefers the finest): then to that. Kept if no level above the free ones spans more domains and fewer
        GPUs lie in holes of the levels above the finest. Whether it was kept.

        The searches before it keep the first arrangement each finds, and bin completion leaves the slack
        wherever the first filling of each unit put it: often a few GPUs in many racks, which no later gang
        can use. Leaving the finest level free lets gangs trade cliques for whole racks; leaving racks free too
        lets a gang that fills one rack but for a GPU or two take parts of two, which (where its preference does
        not ask for one rack) is what fills the racks whole."""
        tree = self.tree
        finest = len(tree.levels) - 1
        rlvl = tree.dom_level[region]
        bind = finest - free_levels
        if not self._holes_searched or bind <= rlvl or not ExactRepack.applies(tree, region, gs):
            return False
        hole = self.hole[max(x.idx for x in gs)]
        doms = [tree.dom_of(k) for lvl in range(rlvl + 1, finest) for k in tree.index.get((region, lvl), [])]
        coarse = slice(0, bind - rlvl)
        levels = {}
        for x in gs:
            lvl = tree.dom_level[self._lca(x.idx)]
            levels[x.idx] = min(lvl, bind)
            if (pref := x.groups[0].pref) is not None and lvl >= pref:
                levels[x.idx] = max(levels[x.idx], min(pref, finest - 1))
        was_spans, was_holes = self._spans(gs, region)[coarse], self._holes(doms, hole)
        if not was_holes:
            return False
        mark = len(self.log)
        if self._bound_search(gs, region, levels, before, HOLE_STEPS, hole, side):
            spans = self._spans(gs, region)[coarse]
            if all(a <= b for a, b in zip(spans, was_spans, strict=True)) and self._holes(doms, hole) < was_holes:
                return True
        self._rollback(mark, None)
        return False

    @property
    def _holes_searched(self) -> bool:
        """Whether the searches that leave no new hole run: in small pools of at least four levels. They leave
        the finest level free; with three (zone, block, rack) that is the rack itself, whose holes are the ones
        that strand GPUs, and on the first generator they spread gangs over more racks for more stranded GPUs."""
        return self.small_pool and len(self.tree.levels) >= MIN_HOLE_LEVELS

    def _no_hole_place(self, gang: CompiledGang) -> None:
        """Re-place a gang best fit just placed, when it left a domain coarser than the finest level a hole, by
        :meth:`_no_hole_try` of the gang alone over the pool, its two finest levels free, with steps of its own.

        Best fit places one group at a time and ranks span before holes, so a gang's last groups often leave a
        few GPUs in a rack that no gang seen so far can use. Only the gang just placed moves, and the search
        depends only on the plan so far, so appends that fit still move nothing. Small pools only, within
        ``HOLE_STEPS`` a search and ``HOLE_RUN_STEPS`` a run."""
        if not self._holes_searched:
            return
        tree = self.tree
        finest = len(tree.levels) - 1
        asg = self.assign.get(gang.idx, {})
        mine = {d for n in set(asg.values()) for d in tree.node_path[n] if d != ROOT and tree.dom_level[d] < finest}
        if self._holes(mine, self.hole[gang.idx]) and self._no_hole_try([gang], ROOT, {gang.idx: dict(asg)}, "hole",
                                                                         free_levels=2):
            self._settle([gang.idx])

    def tight_pool(self, admitted: CompiledGang) -> None:
        """After a re-arrangement admitted a gang: where a gang of a small pool now spans more than one domain
        of the level below the pool's coarsest (a block of the zone), every movable gang placed again by exact
        searches that bind gangs to one such domain, kept if the pool spans fewer domains (coarsest level
        first) and no more over all levels together: first each gang held as tight as it lies, but at least to one
        block; then :meth:`_one_each`.

        The admission's own searches move the gangs of one region, or the few it lifted, and bind them to where
        they lay; the blocks they leave a gang spread over are often freed only by moving gangs the admission
        did not touch. Runs only after an admission, so appends that fit still move nothing; small pools of at
        least four levels, like the searches that leave no new hole; steps of its own (``TIGHT_POOL_RUN_STEPS``
        a run). Bound to blocks only, gangs that lay in one rack each can come out spread over the racks of their
        block: on the fragmented benchmark family that saved a block for several racks more, so a block is saved
        only where the racks and cliques added do not outnumber it."""
        if not self._holes_searched:
            return
        tree = self.tree
        movable = self._inside(ROOT, charge=False)
        gs = [self.gangs[m] for m in movable]
        block = tree.dom_level[ROOT] + 2
        now = {m: tree.dom_level[self.lca[m]] for m in movable}
        if all(lvl >= block for lvl in now.values()) or not ExactRepack.applies(tree, ROOT, gs):
            return
        before = {m: dict(self.assign.get(m, {})) for m in movable}
        if (self._tight_try(gs, ROOT, {m: max(lvl, block) for m, lvl in now.items()}, before, TIGHT_COARSE_STEPS,
                            "tight-pool", in_all=True)
                or self._one_each(gs, ROOT, {m: block for m in movable}, before, "tight-pool", in_all=True)):
            self._settle(movable)
            self.moved.update(m for m in movable if m != admitted.idx and self.assign[m] != before[m])

    def no_hole_pool(self, admitted: CompiledGang) -> None:
        """After a re-arrangement admitted a gang: every movable gang of a small pool placed again by
        :meth:`_no_hole_try`, its two finest levels free, with steps of its own (``HOLE_STEPS`` a search,
        ``HOLE_RUN_STEPS`` a run).

        The admission may move earlier gangs anyway, and the holes left then are mostly not its own: best fit's
        gangs before it left them where no gang could move. Runs only after an admission, so appends that fit
        still move nothing. The gang just admitted is not flagged as moved: it had no place before."""
        if not self._holes_searched:
            return
        movable = self._inside(ROOT, charge=False)
        gs = [self.gangs[m] for m in movable]
        before = {m: dict(self.assign.get(m, {})) for m in movable}
        if gs and self._no_hole_try(gs, ROOT, before, "pool", free_levels=2):
            self._settle(movable)
            self.moved.update(m for m in movable if m != admitted.idx and self.assign[m] != before[m])

    def _bound_search(self, gs: list[CompiledGang], region: int, levels: dict[int, int],
                      before: dict[int, dict[int, int]], steps: int, no_hole: int = 0,
                      side: str = "tight") -> bool:
        """``gs`` released and placed again by an exact search with each gang bound to its level in ``levels``
        (where finer than its own and the region's), leaving no unit a hole below ``no_hole`` GPUs (0: any),
        within ``steps`` and the ``side`` budget; whether it found an arrangement (then it is taken; else the
        caller rolls back)."""
        tree = self.tree
        rlvl = tree.dom_level[region]
        tight = {m: lvl for m, lvl in levels.items() if lvl > rlvl and lvl > self.gangs[m].groups[0].req}
        steps = min(steps, SIDE_RUN_STEPS[side] - self.side_spent[side])
        if (not tight and not no_hole) or steps <= 0:
            return False
        bound = [dataclasses.replace(x, groups=[dataclasses.replace(g, req=max(g.req, tight[x.idx]))
                                                for g in x.groups]) if x.idx in tight else x for x in gs]
        for x in gs:
            self._release(x.idx)
        # a gang larger than every domain of its level there has no arrangement: no search needed
        if any(x.need > max((self._free(tree.dom_of(k), self.tolerated[x.idx])
                             for k in tree.index.get((region, tight[x.idx]), [])), default=0)
               for x in gs if x.idx in tight):
            return False
        search = ExactRepack(tree, region, bound, steps, before=before, no_hole=no_hole)
        got = search.solve()
        self.side_spent[side] += search.steps
        if got is None:
            return False
        self._take_found(gs, got)
        return True

    def _node_fill(self, region: int, gs: list[CompiledGang]) -> dict[int, dict[int, int]] | None:
        """The last try of a tight region (slack of at most ``NODE_FILL_SLACK`` GPUs) that the unit-by-unit searches
        left undecided: :class:`~toporender.placement.node_fill.NodeFill`, within its own steps."""
        left = SIDE_RUN_STEPS["node"] - self.side_spent["node"]
        if left <= 0 or not NodeFill.applies(gs):
            return None
        search = NodeFill(self.tree, region, gs, min(NODE_FILL_STEPS, left))
        if search.slack > NODE_FILL_SLACK:
            return None
        found = search.solve()
        self.side_spent["node"] += search.steps
        return found

    def _late(self) -> bool:
        """Whether the exact searches for the current gang have only late steps left: the run's are spent, or the
        gang's share of them (``EXACT_GANG_STEPS``)."""
        return self.exact_spent >= EXACT_RUN_STEPS or self.gang_exact_spent >= EXACT_GANG_STEPS

    def _exact_note(self, region: int, gangs: int, proven: bool) -> str:
        """What the exact search of ``region`` found, for the reason of a gang it could not admit: whether no
        arrangement of the earlier gangs there leaves room for it, or the search ran out of steps first."""
        where = self.tree.where(region)
        earlier = f"{gangs} earlier gang{'s' if gangs != 1 else ''}"
        if proven:
            return f"; no arrangement of the {earlier} in {where} leaves room for it (exact search)"
        return f"; an exact search over the {earlier} in {where} ran out of steps"

    def _polish(self, gs: list[CompiledGang], region: int) -> None:
        """Re-place the gangs of an admitting re-arrangement: all together first (:meth:`_place_together`), then one
        at a time, and those that span several domains of their preferred level also together with one other gang
        of it; keep a new place only if it spans fewer of those domains, or as few and leaves fewer GPUs in holes
        (domains of the region with fewer free GPUs than any leaf group seen so far asks for).

        The re-arrangement takes the first arrangement that admits the new gang; among those, one with fewer
        domains per gang and fewer unusable GPUs is as good an admission (Kueue's BestFit keeps each gang in one
        domain of its preferred level when one holds it). Only gangs this admission moves are touched, so appends
        that fit still move nothing. Small regions only, like the exact search: in large ones the re-placing
        changed which later gangs fit, for fewer GPUs placed at scale."""
        tree = self.tree
        if sum(tree.dom_hist[region]) > EXACT_MAX_NODES:
            return
        level = tree.dom_level
        order = sorted(gs, key=lambda x: x.idx)
        hole = self.hole[order[-1].idx]
        doms: list[int] = []
        todo = list(tree.dom_children[region])
        while todo:
            d = todo.pop()
            doms.append(d)
            todo.extend(tree.dom_children[d])

        def score(pair: list[CompiledGang], pref: int) -> tuple[int, int]:
            return sum(self._span(z, pref) for z in pair), self._holes(doms, hole)

        budget = POLISH_STEPS
        budget -= self._place_together(order, region, doms, hole)
        for x in order:
            pref = x.groups[0].pref
            if pref is None or x.idx in self.fixed or x.idx not in self.lca:
                continue
            tries = [[x]]
            if level[self.lca[x.idx]] < pref:
                tries += [[x, y] for y in order if y is not x]
            for pair in tries:
                if budget <= 0:
                    return
                if any(z.idx in self.fixed or z.idx not in self.lca for z in pair):
                    continue
                was = score(pair, pref)
                mark = len(self.log)
                saved = self._lift(z.idx for z in pair)
                ok = True
                for z in pair:
                    got, steps = self.place(z, region, fit.GANG_STEPS)
                    budget -= steps
                    if not got:
                        ok = False
                        break
                if ok and score(pair, pref) < was:
                    break
                self._rollback(mark, None)
                self._unlift(saved)

    def _place_together(self, gs: list[CompiledGang], region: int, doms: list[int], hole: int) -> int:
        """Place the movable gangs of ``gs`` again inside ``region``: all lifted at once, then each placed by
        :meth:`place`, largest first; keep that only if they then span fewer domains (coarsest level first), or as
        many and leave fewer GPUs in holes (:meth:`_holes`). Returns the steps spent.

        The exact search stops at the first arrangement that admits the new gang, with no regard for span; placed
        afresh, gangs take the domains the placement rule picks (their preferred level first, best fit), which
        one-at-a-time re-placing cannot reach where each gang's better place is held by another."""
        movable = [x for x in gs if x.idx not in self.fixed and x.idx in self.lca]
        if len(movable) < 2:
            return 0

        def score() -> tuple[int, ...]:
            return (*self._spans(movable, region), self._holes(doms, hole))

        was = score()
        mark = len(self.log)
        saved = self._lift(x.idx for x in movable)
        spent = 0
        for x in sorted(movable, key=lambda x: (-x.need, x.idx)):
            got, steps = self.place(x, region, fit.GANG_STEPS)
            spent += steps
            if not got:
                break
        else:
            if score() < was:
                return spent
        self._rollback(mark, None)
        self._unlift(saved)
        return spent

    def _holes(self, doms: Iterable[int], hole: int) -> int:
        """Free GPUs in ``doms`` that lie in holes: domains with fewer free GPUs than ``hole``, but some."""
        free = self.tree.dom_free
        return sum(f for d in doms if 0 < (f := free[d]) < hole)

    def _spans(self, gs: list[CompiledGang], region: int) -> tuple[int, ...]:
        """Domains the gangs ``gs`` lie in together, per level finer than ``region``'s, coarsest first: how
        re-arrangements of the same gangs inside ``region`` are compared."""
        finer = range(self.tree.dom_level[region] + 1, len(self.tree.levels))
        return tuple(sum(self._span(x, lvl) for x in gs) for lvl in finer)

    def _span(self, x: CompiledGang, lvl: int) -> int:
        """Domains of level ``lvl`` the gang's pods lie in."""
        return self._span_of(self.assign.get(x.idx, {}).values(), lvl)

    def _span_of(self, nodes: Iterable[int], lvl: int) -> int:
        """Domains of level ``lvl`` the ``nodes`` lie in."""
        path = self.tree.node_path
        return len({path[n][-lvl - 2] for n in nodes})

    def _repack(self, gang: CompiledGang, region: int, movable: list[int], allowance: int) -> bool:
        if not movable or len(movable) > MAX_MOVABLE:
            return False
        if self.tree.dom_free[region] < gang.need:
            return False
        before = {m: dict(self.assign.get(m, {})) for m in movable}
        was_in = {m: self.tree.dom_level[self.lca[m]] for m in movable}
        mark = len(self.log)
        saved = self._lift(movable)
        alone = len(self.log)
        fits_alone, steps = self.place(gang, region, fit.GANG_STEPS)
        self.spent += steps
        if fits_alone:
            self.lca.pop(gang.idx, None)
            self.placed.discard(gang.idx)
        self._rollback(alone, None)
        if not fits_alone:
            self._rollback(mark, None)
            self._unlift(saved)
            return False
        gs = [self.gangs[m] for m in movable] + [gang]
        items = [(x, gi) for x in gs for gi, g in enumerate(x.groups) if g.pods]
        split = min(x.groups[0].req for x in gs)
        attempts: list[Callable[[], bool]] = []
        prefs = [x.groups[0].pref for x in gs]
        tree = self.tree
        if sum(tree.dom_hist[region]) <= EXACT_MAX_NODES and all(p is not None for p in prefs):
            # a small region: first keep every gang whole inside one domain of its preferred level
            pref_split = min(p for p in prefs if p is not None)
            if pref_split > max(split, tree.dom_level[region]):
                attempts.append(lambda: self._decomposed(gs, region, pref_split, allowance))
        if split > self.tree.dom_level[region]:
            attempts.append(lambda: self._decomposed(gs, region, split, allowance))
        if sum(tree.dom_hist[region]) <= EXACT_MAX_NODES:
            # the moved gangs that lay inside one domain of their preferred level
            keep = frozenset(m for m in movable if (pref := self.gangs[m].groups[0].pref) is not None
                             and self._span_of(before[m].values(), pref) == 1)
            if keep:
                attempts.append(lambda: self._kept_search(sorted(items, key=_item_order), region, allowance, keep))
        attempts.append(lambda: self._search_items(
            sorted(items, key=_item_order), region, allowance))
        for attempt in attempts:
            if attempt():
                self._tighten(gs, region, was_in, before)
                self._settle(x.idx for x in gs)
                self._polish(gs, region)
                self.moved.update(m for m in movable if self.assign.get(m, {}) != before[m])
                return True
            if self.spent >= allowance:
                break
        self._rollback(mark, None)
        self._unlift(saved)
        return False

    def _kept_search(self, items: list[tuple[CompiledGang, int]], region: int, allowance: int,
                     keep: frozenset[int]) -> bool:
        """:meth:`_search_items` with the gangs of ``keep`` inside the domains of their preferred level they
        used, but for at most none, one, then two more in all (fewest first), each on ``REPAIR_KEEP_STEPS`` of
        its own. Where they find nothing, their steps are charged to the run's ``REPAIR_KEEP_RUN_STEPS`` instead
        of the repair's, so the plain search after them has the steps it had."""
        for breaks in range(REPAIR_KEEP_BREAKS + 1):
            if self.side_spent["keep"] >= SIDE_RUN_STEPS["keep"]:
                return False
            was = self.spent
            if self._search_items(items, region, min(allowance, was + REPAIR_KEEP_STEPS), keep, breaks):
                return True
            self.side_spent["keep"] += self.spent - was
            self.spent = was
        return False

    def _decomposed(self, gs: list[CompiledGang], region: int, split: int, allowance: int) -> bool:
        """Assign whole gangs to domains of level ``split`` first (free GPUs permitting), then pack each domain
        on its own; a domain that cannot hold its gangs sends the search back to the gang-to-domain choice."""
        tree = self.tree
        doms = [tree.dom_of(k) for k in tree.index.get((region, split), [])]
        cap = {d: tree.dom_free[d] for d in doms}
        members: dict[int, list[CompiledGang]] = {d: [] for d in doms}
        order = sorted(gs, key=lambda x: (-x.need, -x.max_leaf, x.idx))
        failed: set[tuple[int, frozenset[int]]] = set()
        rank = tree.rank

        def pack_domains() -> bool:
            mark = len(self.log)
            for d in doms:
                if not members[d]:
                    continue
                key = (d, frozenset(x.idx for x in members[d]))
                if key in failed:
                    self._rollback(mark, None)
                    return False
                items = [(x, gi) for x in members[d] for gi, g in enumerate(x.groups) if g.pods]
                items.sort(key=_item_order)
                if not self._search_items(items, d, min(allowance, self.spent + REPAIR_STEPS_PER_DOMAIN)):
                    failed.add(key)
                    self._rollback(mark, None)
                    return False
            return True

        def assign(i: int) -> bool:
            if self.spent >= allowance:
                return False
            if i == len(order):
                return pack_domains()
            x = order[i]
            for d in sorted((d for d in doms if cap[d] >= x.need), key=lambda d: (cap[d] - x.need, rank[d])):
                self.spent += 1
                members[d].append(x)
                cap[d] -= x.need
                if (d, frozenset(m.idx for m in members[d])) not in failed and assign(i + 1):
                    return True
                members[d].pop()
                cap[d] += x.need
            return False

        try:
            return assign(0)
        finally:
            assign = search_over

    def _search_items(self, items: list[tuple[CompiledGang, int]], region: int, allowance: int,
                      keep: frozenset[int] = frozenset(), breaks: int = 0) -> bool:
        """Iterative depth-first search placing leaf groups of many gangs, largest first (bin-packing order).

        A gang's group domains are fixed by the first of its leaves placed, so later leaves of the same gang only
        see domains inside them. The gangs of ``keep`` leave the domains of their preferred level they use for
        another at most ``breaks`` times in all.
        """
        tree = self.tree
        self.active = {x.idx: SearchContext(x.idx, 0) for x, _ in items}
        # plain best fit: holding domains back here cost an admission (a perfect fill on a tuning seed)
        self.avoid_holes = False
        fixed: dict[tuple[int, int], int] = {}
        stack: list[tuple[Iterator[int], int, list[tuple[int, int]], bool]] = []
        i = 0
        broken = 0
        it = self._item_candidates(items[0], region, fixed, items[0][0].idx in keep and broken >= breaks)
        base = len(self.log)
        checks = [self._check(gang, gi) for gang, gi in items]
        try:
            while True:
                if self.spent >= allowance:
                    self._rollback(base, None)
                    return False
                self.spent += 1
                d = next(it, -1)
                if d < 0:
                    if not stack:
                        return False
                    i -= 1
                    it, mark, fixes, broke = stack.pop()
                    broken -= broke
                    self._rollback(mark, None)
                    for key in fixes:
                        del fixed[key]
                    continue
                gang, gi = items[i]
                ctx = self.active[gang.idx]
                broke = gang.idx in keep and self._breaks_preferred(gang, ctx, d)
                mark = len(self.log)
                g = gang.groups[gi]
                if not self._distribute(ctx, d, g.pods, g.tol):
                    self._rollback(mark, None)
                    continue
                fixes = []
                a = gi
                while a >= 0:
                    grp = gang.groups[a]
                    if grp.req >= 0 and (gang.idx, a) not in fixed:
                        fixed[(gang.idx, a)] = tree.dom_anc[d][grp.req + 1]
                        fixes.append((gang.idx, a))
                    a = grp.parent
                if i + 1 < len(items) and not self._still_possible(checks, i + 1, region, fixed):
                    self._rollback(mark, None)
                    for key in fixes:
                        del fixed[key]
                    continue
                stack.append((it, mark, fixes, broke))
                broken += broke
                i += 1
                if i == len(items):
                    return True
                it = self._item_candidates(items[i], region, fixed, items[i][0].idx in keep and broken >= breaks)
        finally:
            self.active = {}
            self.avoid_holes = self.small_pool

    def _breaks_preferred(self, gang: CompiledGang, ctx: SearchContext, d: int) -> bool:
        """Whether a leaf group of ``gang`` placed in ``d`` takes a domain of the gang's preferred level besides
        those it uses."""
        tree = self.tree
        pref = gang.groups[0].pref
        if pref is None or tree.dom_level[d] <= pref:
            return False
        own = self._preferred_used(ctx, pref)
        return bool(own) and tree.dom_anc[d][pref + 1] not in own

    def _preferred_used(self, ctx: SearchContext, pref: int) -> list[int]:
        """The domains of level ``pref`` the gang of ``ctx`` uses."""
        tree = self.tree
        return [u for u in ctx.used if tree.dom_level[u] == pref and tree.dom_real[u]]

    @staticmethod
    def _check(gang: CompiledGang, gi: int) -> LeafCheck | None:
        """What the forward check needs of one leaf group (None: it may use tainted nodes, so it is not checked)."""
        g = gang.groups[gi]
        if g.tol_any:
            return None
        keys = []
        a = gi
        while a >= 0:
            keys.append((gang.idx, a))
            a = gang.groups[a].parent
        return g.need, g.req, tuple(keys)

    def _still_possible(self, checks: list[LeafCheck | None], start: int, region: int,
                        fixed: dict[tuple[int, int], int]) -> bool:
        """Forward check: every remaining leaf still has a domain with enough free GPUs, and no fixed domain or
        the region is asked for more than it has free."""
        tree = self.tree
        free = tree.dom_free
        level = tree.dom_level
        index = tree.index
        stride = tree.stride
        left: dict[int, int] = {}
        total = 0
        for check in checks[start:]:
            if check is None:
                continue
            need, req, keys = check
            total += need
            w = region
            for key in keys:
                d = fixed.get(key)
                if d is not None:
                    left[d] = left.get(d, 0) + need
                    if level[d] > level[w]:
                        w = d
            if req > level[w]:
                lst = index.get((w, req))
                if not lst or lst[-1] < need * stride:
                    return False
            elif free[w] < need:
                return False
        if total > free[region]:
            return False
        return all(free[d] >= n for d, n in left.items())

    def _item_candidates(self, item: tuple[CompiledGang, int], region: int, fixed: dict[tuple[int, int], int],
                         kept: bool = False) -> Iterator[int]:
        """Domains for one leaf group inside its gang's already fixed domains, best fit first; ``kept``: only
        inside the domains of its preferred level the gang uses, once it uses one."""
        tree = self.tree
        gang, gi = item
        g = gang.groups[gi]
        w = region
        a = gi
        while a >= 0:
            d = fixed.get((gang.idx, a))
            if d is not None and tree.dom_level[d] > tree.dom_level[w]:
                w = d
            a = gang.groups[a].parent
        lvl = max(g.req, tree.dom_level[w])
        ctx = self.active[gang.idx]
        ctx.limit = 1 << 60
        seen: set[tuple[int, ...]] = set()
        tried: set[int] = set()
        pref = gang.groups[0].pref
        scopes: list[int] = []
        if pref is not None and tree.dom_level[w] < pref < lvl:
            # keep the gang inside the preferred-level domains it already uses before spreading further
            scopes = sorted((d for d in self._preferred_used(ctx, pref) if tree.inside(d, w)),
                            key=lambda d: tree.rank[d])
        for scope in scopes if kept and scopes else [*scopes, w]:
            for d in self._candidates(ctx, g, scope, lvl):
                if d in tried:
                    continue
                tried.add(d)
                if not tree.dom_children[d] and d not in ctx.used:
                    sig = (tree.dom_parent[d], *tree.dom_hist[d])
                    if sig in seen:
                        continue
                    seen.add(sig)
                yield d

