"""Worker processes: results in order, items taken as the workers need them, every error raised, one start for
several maps; which repos are worth them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from toporender.jobs import SPREAD_FROM_BYTES, SPREAD_FROM_FILES, Workers, map_in_processes, worth_spreading


def _setup(offset: int) -> None:
    _OFFSET[:] = [offset]


_OFFSET: list[int] = [0]


def _square(x: int) -> int:
    if x == 13:
        raise ValueError("thirteen")
    return x * x + _OFFSET[0]


def _pid(_: int) -> int:
    return os.getpid()


@pytest.mark.parametrize(("jobs", "count"), [(1, 5), (2, 1), (2, 13), (3, 7)])
def test_results_come_in_order(jobs: int, count: int) -> None:
    assert map_in_processes(_square, range(count), jobs, initializer=_setup, initargs=(1,)) == \
        [x * x + 1 for x in range(count)]


def test_items_are_taken_as_the_workers_need_them() -> None:
    """With a window, a generator of items is read only that far ahead of the results taken."""
    pulled: list[int] = []
    ahead: list[int] = []

    def items() -> Iterator[int]:
        for x in range(14, 114):
            pulled.append(x)
            yield x

    def meanwhile(results: Iterator[int]) -> None:
        for i, _ in enumerate(results):
            ahead.append(len(pulled) - i)

    with Workers(2, _setup, (0,)) as workers:
        assert workers.map(_square, items(), meanwhile, window=8) == [x * x for x in range(14, 114)]
    assert max(ahead) <= 8 + 1


@pytest.mark.parametrize("swallow", [False, True])
def test_an_error_is_raised_even_when_meanwhile_swallows_it(swallow: bool) -> None:
    """What an item raises is raised by the map, for the first item that raised, whatever ``meanwhile`` did
    with it: results are never cut short."""
    def meanwhile(results: Iterator[int]) -> None:
        try:
            for _ in results:
                pass
        except ValueError:
            if not swallow:
                raise

    with pytest.raises(ValueError, match="thirteen"), Workers(2, _setup, (0,)) as workers:
        workers.map(_square, range(40), meanwhile)


def test_workers_start_once_for_several_maps() -> None:
    with Workers(2, _setup, (0,)) as workers:
        first = set(workers.map(_pid, range(16)))
        assert workers.map(_square, [2, 3]) == [4, 9]
        second = set(workers.map(_pid, range(16)))
    assert len(first | second) <= 2
    assert os.getpid() not in first | second


def test_without_a_window_every_item_is_handed_over_at_once() -> None:
    """The workers never wait for ``meanwhile`` to take results (it reads an inventory first)."""
    pulled: list[int] = []
    seen: list[int] = []

    def items() -> Iterator[int]:
        for x in range(14, 54):
            pulled.append(x)
            yield x

    with Workers(2, _setup, (0,)) as workers:
        workers.map(_square, items(), lambda results: seen.append(len(pulled)))
    assert seen == [40]


MIB = SPREAD_FROM_BYTES


@pytest.mark.parametrize(("sizes", "spread"), [
    ([], False),
    ([1000] * (SPREAD_FROM_FILES - 1), False),  # 255 small files: the workers would cost more than they save
    ([1] * SPREAD_FROM_FILES, True),  # many files, however small
    ([MIB - 1], False),
    ([MIB], True),  # one large file
    ([61_000] * 16, False),  # the render benchmark's files: 16 of them are not quite a MiB
    ([61_000] * 18, True),
])
def test_worth_spreading(sizes: list[int], spread: bool) -> None:
    assert worth_spreading(sizes) is spread


def test_worth_spreading_takes_sizes_only_as_far_as_it_needs() -> None:
    def sizes() -> Iterator[int]:
        yield MIB
        raise AssertionError("read past the decision")

    assert worth_spreading(sizes())
