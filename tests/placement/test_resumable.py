"""A search resumed budget by budget: the same answer and steps as one run with the budgets' sum, and nothing
left running once it is closed."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from tests.placement.conftest import cyclic_garbage

from toporender.placement.resumable import ResumableSearch


class _Out(Exception):
    pass


class _Walk:
    """A depth-first search over bit strings of ``depth`` bits for one whose value is ``target``: one step per
    node visited, recursive like the exact search, with a ``finally`` that records each frame it unwinds."""

    def __init__(self, depth: int, target: int | None, fail_at: int | None = None):
        self.depth, self.target, self.fail_at = depth, target, fail_at
        self.steps = 0
        self.budget = 0
        self.pause: Callable[[], None] | None = None
        self.unwound = 0

    def _step(self) -> None:
        self.steps += 1
        if self.steps == self.fail_at:
            raise ValueError("broken search")
        while self.steps > self.budget:
            if self.pause is None:
                raise _Out
            self.pause()

    def _visit(self, bits: int, level: int) -> int | None:
        self._step()
        try:
            if level == self.depth:
                return bits if bits == self.target else None
            return self._visit(bits << 1, level + 1) or self._visit(bits << 1 | 1, level + 1)
        finally:
            self.unwound += 1

    def solve(self) -> int | None:
        try:
            return self._visit(1, 0)
        except _Out:
            return None


def _one_run(depth: int, target: int | None, budget: int) -> tuple[_Walk, int | None]:
    walk = _Walk(depth, target)
    walk.budget = budget
    return walk, walk.solve()


@pytest.mark.parametrize(("depth", "target", "slices"), [
    (8, 0b1_1011_0110, [50, 50, 400]),  # found in the third slice
    (8, 0b1_0000_0001, [1, 1, 1, 1]),  # found in the fourth, one step a slice
    (6, None, [30, 100]),  # proven absent in the second
    (10, 0b111_1111_1111, [100, 100]),  # still searching after both
])
def test_slices_give_what_one_run_with_their_sum_gives(depth: int, target: int | None, slices: list[int]) -> None:
    whole, found = _one_run(depth, target, sum(slices))
    walk = _Walk(depth, target)
    runner = ResumableSearch(walk, _Out)
    ended = False
    for more in slices:
        ended = runner.run(more)
        if ended:
            break
    assert ended == (whole.steps <= whole.budget)
    assert runner.found == found
    assert walk.steps == whole.steps
    runner.close()
    assert walk.pause is None


def test_a_paused_search_closed_unwinds_and_its_thread_ends() -> None:
    before = threading.active_count()
    walk = _Walk(12, None)
    runner = ResumableSearch(walk, _Out)
    assert runner.run(40) is False
    assert threading.active_count() == before + 1
    assert walk.unwound < 40
    runner.close()
    assert threading.active_count() == before
    assert walk.unwound == 40  # every node it entered, the path it stood on included, left through its finally
    assert (runner.done, runner.found) == (False, None)
    assert runner.run(1000) is False  # closed: nothing runs again
    assert walk.steps == 41


def test_an_error_in_the_search_reaches_the_caller() -> None:
    walk = _Walk(6, None, fail_at=25)
    runner = ResumableSearch(walk, _Out)
    assert runner.run(10) is False
    with pytest.raises(ValueError, match="broken search"):
        runner.run(100)
    runner.close()
    assert not any(t.name == "toporender-search" for t in threading.enumerate())


@pytest.mark.parametrize("resumed", [False, True])
def test_nothing_is_left_to_the_cyclic_collector(resumed: bool) -> None:
    def run() -> None:
        walk = _Walk(8, 0b1_0101_0101)
        runner = ResumableSearch(walk, _Out)
        runner.run(20)
        if resumed:
            runner.run(10_000)
        runner.close()

    assert [o for o in cyclic_garbage(run) if isinstance(o, (ResumableSearch, _Walk))] == []
