"""The pack stage of the pipeline: gangs + committed inventory -> intended domains on the objects.

Placement is advisory: the scheduler still decides, but every PodGroup and Pod says where the
deterministic packer intends it to go, so a reviewer sees fragmentation and unplaceable gangs
in the pull request instead of as Pending pods.

Arrival order (which gang keeps priority) comes from ``toporender.lock`` when the repo has one
(``toporender golden`` appends new gangs to it), then from stream order for gangs not listed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from toporender.errors import DiagnosticSink, Position, UserError, fail
from toporender.expand.gangs import Gang
from toporender.load.repo import Repo, inside
from toporender.load.walk import file_kind
from toporender.load.yaml_source import Document
from toporender.placement.outcomes import (
    GangOutcome,
    annotate_objects,
    arrival_keys,
    demands_json,
    load_order,
    lock_lines,
    memo_key,
    outcomes_from_json,
    outcomes_json,
    same,
)

if TYPE_CHECKING:
    from toporender.placement.compiled import CompiledGang
    from toporender.placement.demand import GangDemand
    from toporender.placement.inventory import Inventory
    from toporender.placement.packer import Packer
    from toporender.placement.plan import PlacementPlan
    from toporender.placement.tree import Tree

class Arriving(Protocol):
    """A gang as arrival order and pools see it (a :class:`Gang`, or a summary of one)."""

    @property
    def key(self) -> str: ...

    @property
    def pool_name(self) -> str: ...


A = TypeVar("A", bound=Arriving)


def arrival(gangs: Sequence[A], order: Sequence[str]) -> list[A]:
    """Gangs listed in the lock first (in its order), then new gangs in stream order."""
    return [gangs[i] for i in arrival_keys([g.key for g in gangs], order)]


def lock_text(gangs: Sequence[Gang], order: Sequence[str]) -> str:
    """The lock file after this render: known gangs keep their place, removed ones go, new ones append."""
    return lock_lines([g.key for g in arrival(gangs, order)])


def _tolerations(pod: dict[str, Any]) -> tuple[tuple[str, str | None, str | None], ...]:
    out = []
    for t in pod.get("spec", {}).get("tolerations", []) or []:
        if isinstance(t, dict):
            value = None if t.get("operator") == "Exists" else t.get("value")
            out.append((str(t.get("key", "")), value, t.get("effect")))
    return tuple(out)


def gang_demand(gang: Gang, pods: Sequence[dict[str, Any]]) -> Any:
    """The packer's view of a gang: pods with GPUs and tolerations, subgroups with their levels."""
    from toporender.placement.demand import GangDemand, PodDemand, SubgroupDemand

    distinct = {id(pod): pod for pod in pods}  # pods may repeat (see build_gang's ``delivery``)
    tolerations = {key: _tolerations(pod) for key, pod in distinct.items()}
    demands = {t.spec.name: PodDemand(t.spec.name, t.resource.gpu or 0, tolerations[id(pod)],
                                      tuple(sorted(set(t.resource.nodesExcluded))))
               for t, pod in zip(gang.tasks, pods)}
    topo = gang.topology
    subgroups = tuple(
        SubgroupDemand(sg.name, sg.parent, sg.constraint, tuple(demands[t] for t in sg.tasks))
        for sg in topo.subgroups
    )
    return GangDemand(gang.key, f"{gang.workflow.name}/{gang.name}",
                      topo.constraint, subgroups,
                      tuple(demands.values()), tuple(topo.task_subgroup.items()))


def _inventory(repo: Repo, path: str | None, docs: list[Document] | None, cache: dict[str, Inventory],
               where: Callable[[], Position]) -> Inventory | None:
    """The inventory a pool packs against (read once per path); ``where`` gives the position for messages.

    Finding a position in the config may mean a second, exact pass over it, so it is looked up only when a
    message needs one.
    """
    from toporender.placement.inventory import inventory_from_documents
    from toporender.placement.nodelist import read_inventory

    if docs is not None:
        if "<documents>" not in cache:
            cache["<documents>"] = inventory_from_documents(docs, "inventory")
        return cache["<documents>"]
    if path is None:
        return None
    if path not in cache:
        if repo.root is None:
            raise fail(f"inventory {path!r} cannot be read: no repo directory was given", where())
        target = repo.root / path
        if Path(path).is_absolute() or ".." in Path(path).parts or not inside(repo.root, target):
            raise fail(f"inventory {path!r} must be a path inside the repo", where())
        if not target.exists():
            raise fail(f"inventory file {path!r} not found", where())
        if not target.is_file():
            kind = file_kind(target.stat().st_mode) or "not a regular file"
            raise fail(f"inventory file {path!r} is {kind}; it must be a regular file", where())
        cache[path] = read_inventory(target, path)
    return cache[path]


def _inventory_path(repo: Repo, pool_name: str, inventory: str | None) -> str | None:
    """The inventory file a pool packs against: the one given for this render, else the pool's, else the repo's."""
    return inventory or repo.config.pools[pool_name].inventory or repo.config.inventory


def pool_inventory(repo: Repo, pool_name: str, inventory: str | None,
                   inventory_docs: list[Document] | None, cache: dict[str, Inventory] | None = None
                   ) -> Inventory | None:
    """The inventory one pool packs against (None when it has none), read once per path through ``cache``."""
    loc = ("pools", pool_name, "inventory") if repo.config.pools[pool_name].inventory else ("inventory",)
    return _inventory(repo, _inventory_path(repo, pool_name, inventory), inventory_docs,
                      {} if cache is None else cache, partial(repo.config_doc.pos, loc))


def uses_placement(repo: Repo, inventory: str | None, inventory_docs: list[Document] | None) -> bool:
    """Whether any inventory is configured or given, i.e. whether this render packs at all."""
    return inventory is not None or inventory_docs is not None or repo.config.inventory is not None or \
        any(p.inventory for p in repo.config.pools.values())


def plan_pools(repo: Repo, gangs: Sequence[A], demands: Mapping[str, Any], *,
               inventory: str | None = None, inventory_docs: list[Document] | None = None,
               order: Sequence[str] | None = None, inventories: dict[str, Inventory] | None = None,
               trees: dict[str, Tree] | None = None,
               ahead: PackAhead | None = None) -> list[tuple[str, PlacementPlan, list[A]]]:
    """Pack every pool that has an inventory; gangs in arrival order (``order``: the lock's, else read it).
    ``inventories``: those read already, by path (:func:`pool_inventory`'s cache); ``trees``: the pools' trees
    built from them already, by pool (:func:`pool_tree`); ``ahead``: pools packed in part while the demands arrived.

    ``demands`` holds each gang's :func:`gang_demand` by gang key: what the packer needs of its built Pods, so a
    caller that only plans can drop each gang's Pods as soon as it has its demand."""
    if not uses_placement(repo, inventory, inventory_docs):
        return []
    from toporender.placement.packer import pack

    arrived = arrival(gangs, load_order(repo.root) if order is None else order)
    cache: dict[str, Inventory] = {} if inventories is None else inventories
    plans: list[tuple[str, PlacementPlan, list[A]]] = []
    for pool_name in sorted(repo.config.pools):
        pool = repo.config.pools[pool_name]
        members = [g for g in arrived if g.pool_name == pool_name]
        if not members:
            continue
        inv = pool_inventory(repo, pool_name, inventory, inventory_docs, cache)
        if inv is None:
            continue
        levels = [k.label for k in pool.topology_keys]
        tree = trees.pop(pool_name, None) if trees else None
        pool_demands = [demands[g.key] for g in members]
        packer = ahead.take(pool_name, pool_demands) if ahead else None
        if ahead is not None and packer is not None:
            plan = pack(inv, levels, pool_demands, node_selector=pool.node_selector, ahead=packer,
                        compiled=ahead.compiled.get(pool_name))
        else:
            plan = pack(inv, levels, pool_demands, node_selector=pool.node_selector, tree=tree)
        plans.append((pool_name, plan, members))
    return plans


class PackAhead:
    """Packs the pools while worker processes still make the demands (``toporender plan`` and ``render``).

    A packer's plan of the first gangs never depends on the gangs after them, so a pool's packer takes the next
    gang in arrival order as soon as it and every gang before it have arrived: at once without a lock, and with
    one, once every gang it lists has arrived (or at the end, when some never do). What is left for the end is
    the gangs that came last, and the greedy baselines of a pool whose packer left a gang out
    (:func:`~toporender.placement.packer.pack`): small pools are packed ahead too, since the render's own
    process mostly waits for the workers meanwhile. Each placed gang's part of the plan is worked out as it is
    placed (:class:`~toporender.placement.plan.PlanParts`), not in the one-core tail. Whatever goes wrong stops all
    of it: :meth:`take` then gives nothing, and the pools are packed from scratch at the end, which reports what
    there is to report in the usual order.
    """

    def __init__(self, trees: dict[str, Tree], order: Sequence[str]):
        """Take the pools' trees out of ``trees`` (packing changes them)."""
        from toporender.placement import packer
        from toporender.placement.plan import PlanParts

        self.packers = {name: packer.Packer(tree, ()) for name, tree in trees.items()}
        trees.clear()
        for p in self.packers.values():
            p.plan_parts = PlanParts(p.tree)
        self.compiled: dict[str, dict[str, CompiledGang]] = {}
        self.rank = {key: i for i, key in enumerate(order)}
        self.locked: list[tuple[str, GangDemand] | None] = [None] * len(order)
        self.fed = 0  # the lock's gangs before this position have all arrived and been fed
        self.new: list[tuple[str, GangDemand]] = []  # arrived gangs the lock does not list, waiting for it

    @property
    def streamed(self) -> int:
        """Gangs packed so far, all pools together."""
        return sum(p.packed for p in self.packers.values())

    def feed(self, gangs: Sequence[tuple[str, str, GangDemand]]) -> None:
        """Take the next arrived gangs (key, pool, demand), in stream order, and pack those whose turn it is."""
        if not self.packers:
            return
        from toporender.placement.packer import cyclic_gc_paused

        try:
            with cyclic_gc_paused():
                self._feed(gangs)
        except Exception:  # noqa: BLE001 - packed again from scratch, and reported then
            self.packers.clear()

    def _feed(self, gangs: Sequence[tuple[str, str, GangDemand]]) -> None:
        compile_ahead({name: p.tree for name, p in self.packers.items()}, gangs, self.compiled)
        for key, pool_name, demand in gangs:
            rank = self.rank.get(key)
            if rank is None:
                self.new.append((pool_name, demand))
            elif self.locked[rank] is None:
                self.locked[rank] = (pool_name, demand)
            else:
                raise ValueError(f"gang key {key} arrived twice")
        due: dict[str, list[GangDemand]] = {}
        while self.fed < len(self.locked) and (got := self.locked[self.fed]) is not None:
            due.setdefault(got[0], []).append(got[1])
            self.fed += 1
        if self.fed == len(self.locked):
            for pool_name, demand in self.new:
                due.setdefault(pool_name, []).append(demand)
            self.new.clear()
        for pool_name, demands in due.items():
            packer = self.packers.get(pool_name)
            if packer is not None:
                start = len(packer.gangs)
                packer.add(demands, self.compiled.get(pool_name))
                packer.run()
                assert packer.plan_parts is not None
                packer.plan_parts.note(packer, start)

    def take(self, pool_name: str, demands: Sequence[GangDemand]) -> Packer | None:
        """The pool's packer when the gangs it packed are the first of ``demands`` (the same ones, in order), for
        :func:`~toporender.placement.packer.pack` to pack the rest; None when the pool must be packed from scratch.
        """
        packer = self.packers.pop(pool_name, None)
        if packer is None or len(packer.gangs) > len(demands) or \
                any(g.demand is not d for g, d in zip(packer.gangs, demands)):
            return None
        return packer


def compile_ahead(trees: Mapping[str, Tree], gangs: Iterable[tuple[str, str, GangDemand]],
                  into: dict[str, dict[str, CompiledGang]]) -> None:
    """Compile the gangs (key, pool, demand) of pools that have a tree in ``trees`` against it, into ``into`` by
    pool and key, for :class:`PackAhead`'s packers and :func:`plan_pools` to pack. A gang that cannot be compiled
    is left for packing to compile again, and report in its turn."""
    from toporender.placement.compiled import compile_gang

    for key, pool_name, demand in gangs:
        tree = trees.get(pool_name)
        if tree is None:
            continue
        try:
            into.setdefault(pool_name, {})[key] = compile_gang(tree, -1, demand)
        except Exception:  # noqa: BLE001, S112 - raised again where the packer compiles it
            continue


def pool_tree(repo: Repo, pool_name: str, inventory: str | None, cache: dict[str, Inventory]) -> Tree | None:
    """The topology tree :func:`plan_pools` packs a pool into, built from the pool's inventory in ``cache`` (read
    into it when missing); None when the pool has no inventory. Raises what reading or building raises."""
    from toporender.placement.tree import Tree

    inv = pool_inventory(repo, pool_name, inventory, None, cache)
    if inv is None:
        return None
    pool = repo.config.pools[pool_name]
    return Tree(inv, [k.label for k in pool.topology_keys], pool.node_selector or {})


class PlanMemo(Protocol):
    """Where :func:`place` keeps the outcomes of a pool's packing between renders (the render cache): plain
    JSON data under a key that names everything the packer read."""

    def get(self, key: str) -> Any | None: ...

    def put(self, key: str, data: Any) -> None: ...


def _memo_key(repo: Repo, path: str | None, levels: list[str], demands: list[Any],
              node_selector: Any) -> str | None:
    """:func:`toporender.placement.outcomes.memo_key` of a pool's packing; None when the inventory is one the
    packer would refuse (the uncached path reports it)."""
    if repo.root is None or path is None:
        return None
    target = repo.root / path
    if Path(path).is_absolute() or ".." in Path(path).parts or not inside(repo.root, target) or \
            not target.is_file():
        return None
    return memo_key(target.read_bytes(), path, levels, demands_json(demands), node_selector)


def _pool_outcomes(repo: Repo, gangs: Sequence[Gang], demands: Mapping[str, Any], *,
                   inventory: str | None, inventory_docs: list[Document] | None, order: Sequence[str],
                   memo: PlanMemo | None) -> list[tuple[str, dict[str, GangOutcome], list[Gang]]]:
    """Outcome per gang of every pool that packs, as :func:`plan_pools` plans it; with ``memo``, a pool whose
    inventory bytes, levels, node selector and demands (in arrival order) were packed before is not packed
    again, and its inventory is not read."""
    import orjson

    from toporender.placement.packer import pack
    from toporender.placement.plan import gang_hash

    if memo is None or inventory_docs is not None:
        return [(name, {g.key: GangOutcome(plan.gangs[g.key], gang_hash(plan.levels, plan.gangs[g.key]))
                        for g in members}, members)
                for name, plan, members in plan_pools(repo, gangs, demands, inventory=inventory,
                                                      inventory_docs=inventory_docs, order=order)]
    if not uses_placement(repo, inventory, inventory_docs):
        return []
    arrived = arrival(gangs, order)
    cache: dict[str, Inventory] = {}
    out = []
    for pool_name in sorted(repo.config.pools):
        pool = repo.config.pools[pool_name]
        members = [g for g in arrived if g.pool_name == pool_name]
        if not members:
            continue
        levels = [k.label for k in pool.topology_keys]
        pool_demands = [demands[g.key] for g in members]
        key = _memo_key(repo, _inventory_path(repo, pool_name, inventory), levels, pool_demands,
                        pool.node_selector)
        cached = outcomes_from_json(memo.get(key)) if key is not None else None
        if cached is not None and list(cached) == [g.key for g in members]:
            out.append((pool_name, cached, members))
            continue
        inv = pool_inventory(repo, pool_name, inventory, None, cache)
        if inv is None:
            continue
        plan = pack(inv, levels, pool_demands, node_selector=pool.node_selector)
        outcomes = {g.key: GangOutcome(plan.gangs[g.key], gang_hash(plan.levels, plan.gangs[g.key]))
                    for g in members}
        data = outcomes_json(outcomes)
        back = outcomes_from_json(orjson.loads(orjson.dumps(data)))
        if key is not None and back is not None and all(same(back[k], o) for k, o in outcomes.items()):
            memo.put(key, data)
        out.append((pool_name, outcomes, members))
    return out


def place(repo: Repo, gangs: Sequence[Gang], pods: dict[str, list[dict[str, Any]]], *, inventory: str | None,
          inventory_docs: list[Document] | None, order: Sequence[str], strict: bool | None, sink: DiagnosticSink,
          memo: PlanMemo | None = None) -> dict[str, GangOutcome]:
    """Outcome per gang key; unplaceable gangs warn, or fail under strict placement."""
    outcomes: dict[str, GangOutcome] = {}
    try:
        demands = {g.key: gang_demand(g, pods[g.key]) for g in gangs}
        pools = _pool_outcomes(repo, gangs, demands, inventory=inventory, inventory_docs=inventory_docs, order=order,
                               memo=memo)
    except UserError as err:
        sink.extend(err)
        return outcomes
    for pool_name, pool_outcomes, members in pools:
        is_strict = strict if strict is not None else repo.config.pools[pool_name].strict
        for gang in members:
            outcome = outcomes[gang.key] = pool_outcomes[gang.key]
            gp = outcome.placement
            if not gp.placed:
                msg = f"group '{gang.name}' cannot be placed: {gp.reason}"
                if is_strict:
                    sink.error(msg + " (strict placement; pass --no-strict to render anyway)", gang.pos)
                else:
                    sink.warn(msg, gang.pos)
    return outcomes


def pack_stage(repo: Repo, built: Sequence[tuple[Gang, list[dict[str, Any]], list[dict[str, Any]]]], *,
               inventory: str | None, inventory_docs: list[Document] | None, strict: bool | None,
               sink: DiagnosticSink, memo: PlanMemo | None = None) -> str | None:
    """The pipeline's pack stage: place the built gangs, write the intended placement onto their objects, and
    return what ``toporender.lock`` holds after this render (None when the repo packs nothing or has no folder).

    ``built`` pairs each gang with its group objects and its Pods, in stream order; they are annotated in place.
    Unplaceable gangs warn, or are errors under strict placement, raised before anything is annotated.
    """
    if not uses_placement(repo, inventory, inventory_docs):
        return None
    gangs = [gang for gang, _, _ in built]
    order = load_order(repo.root)
    outcomes = place(repo, gangs, {gang.key: pods for gang, _, pods in built}, inventory=inventory,
                     inventory_docs=inventory_docs, order=order, strict=strict, sink=sink, memo=memo)
    sink.raise_if_errors()
    for gang, group_objects, pods in built:
        outcome = outcomes.get(gang.key)
        if outcome is not None:
            annotate(gang, group_objects, pods, outcome)
    return lock_text(gangs, order) if repo.root is not None else None


def annotate(gang: Gang, group_objects: list[dict[str, Any]], pods: list[dict[str, Any]],
             outcome: GangOutcome) -> None:
    """Write the intended placement onto the gang's scheduler objects and pods (and pin if asked)."""
    annotate_objects([t.spec.name for t in gang.tasks], gang.pool.pin, group_objects, pods, outcome)
