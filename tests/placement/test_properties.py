"""Hypothesis properties on random pools: hard rules hold, plans ignore input order, prefixes are stable."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toporender.placement.inventory import Inventory
from toporender.placement.packer import Packer, pack
from toporender.placement.plan import PlanParts
from toporender.placement.tree import Tree

LEVELS = ("zone", "block", "rack")


def _case(seed: int, n_gangs: int, tainted: float) -> tuple[Inventory, list]:
    from instances import random_gang, random_inventory

    rng = random.Random(seed)
    inv = random_inventory(rng, rng.randint(1, 2), rng.randint(1, 2), (1, 2), tainted=tainted)
    return inv, [random_gang(rng, f"g{i}", pods_range=(1, 8)) for i in range(n_gangs)]


SETTINGS = settings(max_examples=15, deadline=None, derandomize=True)


@SETTINGS
@given(seed=st.integers(0, 10_000), n=st.integers(1, 8), tainted=st.sampled_from([0.0, 0.1]))
def test_no_node_over_committed_and_every_required_constraint_holds(seed: int, n: int, tainted: float) -> None:
    from instances import check_plan

    inv, gangs = _case(seed, n, tainted)
    plan = pack(inv, LEVELS, gangs)
    assert check_plan(inv, LEVELS, gangs, plan) == []
    assert plan.placed_gpus == sum(g.gpus for g in gangs if plan.gangs[g.key].placed)


@SETTINGS
@given(seed=st.integers(0, 10_000), n=st.integers(1, 8), shuffle=st.randoms(use_true_random=False))
def test_same_plan_under_permuted_input(seed: int, n: int, shuffle: random.Random) -> None:
    inv, gangs = _case(seed, n, 0.0)
    nodes = list(inv.nodes)
    shuffle.shuffle(nodes)
    assert pack(Inventory(tuple(nodes)), LEVELS, gangs).hash == pack(inv, LEVELS, gangs).hash


@SETTINGS
@given(seed=st.integers(0, 10_000), n=st.integers(2, 8))
def test_appending_a_gang_never_moves_placed_gangs_when_it_fits(seed: int, n: int) -> None:
    inv, gangs = _case(seed, n, 0.0)
    before = pack(inv, LEVELS, gangs[:-1])
    after = pack(inv, LEVELS, gangs)
    same = all(after.gangs[k].pod_nodes == g.pod_nodes and after.gangs[k].placed == g.placed
               for k, g in before.gangs.items())
    if not after.gangs[gangs[-1].key].placed:
        # a gang that does not fit leaves every earlier placement exactly as it was
        assert same
    elif not same:
        # earlier gangs move only to admit the new one, flagged; one is dropped only when another run's plan
        # places more GPUs (or as many in more gangs), and it is flagged and told so
        dropped = [k for k, g in before.gangs.items() if g.placed and not after.gangs[k].placed]
        assert all(after.gangs[k].moved and "left out so that more " in (after.gangs[k].reason or "")
                   for k in dropped)
        count = [sum(g.placed for g in plan.gangs.values()) for plan in (before, after)]
        assert not dropped or (after.placed_gpus, count[1]) >= (before.placed_gpus, count[0])
        assert any(after.gangs[k].moved for k in before.gangs)


@SETTINGS
@given(seed=st.integers(0, 10_000), n=st.integers(1, 10), tainted=st.sampled_from([0.0, 0.1]),
       cuts=st.lists(st.integers(0, 10), max_size=4))
def test_gangs_packed_as_they_come_get_the_plan_of_all_at_once(seed: int, n: int, tainted: float,
                                                               cuts: list[int]) -> None:
    """What lets ``toporender plan`` pack while the demands still arrive: a packer given the gangs a batch at a
    time, each batch packed before the next comes, ends with the plan of packing them all at once."""
    inv, gangs = _case(seed, n, tainted)
    ahead = _packed_ahead(inv, gangs, cuts)
    assert ahead.hole == Packer(Tree(inv, LEVELS, {}), gangs).hole
    assert pack(inv, LEVELS, gangs, ahead=ahead) == pack(inv, LEVELS, gangs)


@pytest.mark.parametrize(("seed", "n"), [(0, 6), (4, 6)])
def test_a_gang_moved_after_its_parts_were_worked_out_gets_them_again(seed: int, n: int) -> None:
    """The plan's parts of a gang are kept with the pods' nodes they were worked out from: a repair that moves
    the gang afterwards (each gang here comes in a batch of its own) leaves the plan that of packing at once."""
    inv, gangs = _case(seed, n, 0.0)
    ahead = _packed_ahead(inv, gangs, list(range(1, n)))
    assert ahead.plan_parts is not None
    moved = [i for i, (_, nodes, _) in ahead.plan_parts.kept.items() if ahead.assign.get(i, {}) != nodes]
    assert moved and set(moved) <= ahead.placed
    assert pack(inv, LEVELS, gangs, ahead=ahead) == pack(inv, LEVELS, gangs)


def _packed_ahead(inv: Inventory, gangs: list, cuts: list[int]) -> Packer:
    """A packer given ``gangs`` a batch at a time, cut at ``cuts``, working out the plan's parts of each batch
    as :class:`~toporender.placement.stage.PackAhead` does."""
    ahead = Packer(Tree(inv, LEVELS, {}), ())
    ahead.plan_parts = PlanParts(ahead.tree)
    for cut in [*sorted(cuts), len(gangs)]:
        start = len(ahead.gangs)
        ahead.add(gangs[start:cut])
        ahead.run()
        ahead.plan_parts.note(ahead, start)
    return ahead


@pytest.mark.parametrize("seed", [1, 4, 5, 17])
@pytest.mark.parametrize("gang_steps", [1_000, 12])
def test_jumping_scan_gives_the_plans_of_the_plain_scan(seed: int, gang_steps: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The candidate scan may jump over domains whose children are too full; plans must not change, also when
    step budgets run out mid-scan (the jumps charge the steps of the domains they skip)."""
    from instances import random_gang, random_inventory

    from toporender.placement import fit, repair

    rng = random.Random(seed)
    inv = random_inventory(rng, 1, 40, (1, 3), partly=0.3)
    gangs = [random_gang(rng, f"g{i}", pods_range=(2, 12)) for i in range(120)]
    monkeypatch.setattr(fit, "GANG_STEPS", gang_steps)
    monkeypatch.setattr(repair, "REPAIR_STEPS_PER_TRY", gang_steps)
    hashes = []
    for threshold in (1, 10**9):
        monkeypatch.setattr(fit, "_MISSES_BEFORE_JUMPING", threshold)
        hashes.append(pack(inv, LEVELS, gangs).hash)
    assert hashes[0] == hashes[1]


@SETTINGS
@given(pairs=st.dictionaries(st.text(min_size=1, max_size=6),
                             st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4), max_size=6),
       levels=st.lists(st.text(max_size=4), max_size=3))
def test_plan_hash_is_the_sha256_of_the_canonical_json(pairs: dict[str, dict[str, str]], levels: list[str]) -> None:
    """The hash is fed gang by gang; it must stay the hash of the one canonical text (plans in Git record it)."""
    import hashlib
    import json

    from toporender.placement.plan import GangPlacement, plan_hash

    gangs = {k: GangPlacement(k, k, 1, bool(v) or len(k) % 2 == 0, None, pod_nodes=v) for k, v in pairs.items()}
    canon = {"levels": levels,
             "gangs": {k: sorted(g.pod_nodes.items()) if g.placed else None for k, g in sorted(gangs.items())}}
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert plan_hash(tuple(levels), gangs) == hashlib.sha256(text.encode()).hexdigest()


def test_orjson_is_standard_only_where_json_dumps_writes_the_same() -> None:
    """Every character up to U+00FF alone, in a key and in a list: where the check lets orjson's bytes stand,
    they are json.dumps's, and every character but DEL below U+0080 is let stand (so the fast path is taken)."""
    import json

    import orjson

    from toporender.placement.plan import orjson_is_standard

    for c in map(chr, range(256)):
        for data in (c, {c: [c, 1, None]}):
            raw = orjson.dumps(data)
            assert orjson_is_standard(raw) == (c < "\x7f"), repr(c)
            if orjson_is_standard(raw):
                assert raw == json.dumps(data, separators=(",", ":")).encode(), repr(c)


@pytest.mark.parametrize("name", ["a\x7fb", "x\x1fy", "\x00", "tab\t", 'q"uote', "back\\slash", "a/b", "é",
                                  "\u2028", "\U0001f600"])
def test_plan_hash_of_text_the_fast_encoder_writes_differently(name: str) -> None:
    """Names the fast encoder writes otherwise than the canonical one (DEL raw, other text unescaped) or escapes
    (control characters, quotes) hash as the canonical text does."""
    import hashlib
    import json

    from toporender.placement.plan import GangPlacement, plan_hash

    gangs = {name: GangPlacement(name, name, 1, True, None, pod_nodes={name: name, "p": name})}
    text = json.dumps({"gangs": {name: sorted(gangs[name].pod_nodes.items())}, "levels": [name]},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert plan_hash((name,), gangs) == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("name", ["plain-name", "a\x7fb", "x\x1fy", "tab\t", 'q"uote', "back\\slash", "é",
                                  "\u2028", "\U0001f600", "\ud800"])
@pytest.mark.parametrize("placed", [True, False])
def test_gang_hash_is_the_sha256_of_the_canonical_json(name: str, placed: bool) -> None:
    """A gang's own hash (its annotation in Git) is that of the standard encoder's text, whichever encoder wrote
    it: orjson for plain text, ``json.dumps`` for text orjson writes otherwise or refuses (a lone surrogate)."""
    import hashlib
    import json

    from toporender.placement.plan import GangPlacement, gang_hash

    gang = GangPlacement(name, name, 8, placed, None if placed else f"no room for {name}",
                         pod_nodes={name: name, "p": "node-1"} if placed else {})
    text = json.dumps({"gang": name, "gpus": 8, "levels": ["zone", name],
                       "nodes": sorted(gang.pod_nodes.items()) if placed else None,
                       "reason": None if placed else f"no room for {name}"},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert gang_hash(("zone", name), gang) == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("name", ["plain-name", "a\x7fb", "x\x1fy", "tab\t", 'q"uote', "back\\slash", "é",
                                  "\u2028", "\U0001f600", "\ud800"])
def test_the_placement_annotation_is_the_canonical_json(name: str) -> None:
    """A gang's placement annotation (subgroup -> level -> domain, keys sorted) is the standard encoder's text
    whichever encoder wrote it, for names sorting before and after the others."""
    import json

    from toporender.placement.outcomes import PLACEMENT, GangOutcome, placement_notes
    from toporender.placement.plan import GangPlacement

    domains = {name: {"zone": name, "rack": "r1"}, "m": {name: "z", "a": name}, "": {}}
    gang = GangPlacement("k", "k", 8, True, None, subgroup_domains=domains, pod_nodes={"p": "n"})
    gang_notes, _ = placement_notes(["p"], GangOutcome(gang, "hash"))
    assert gang_notes[PLACEMENT] == json.dumps(domains, sort_keys=True, separators=(",", ":"))
