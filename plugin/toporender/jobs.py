"""Work spread over worker processes, for the commands that read a large repo (``toporender plan``, ``render``).

Reading, validating and expanding 10,000 workflow files is most of a large plan, and each file is read on its own,
so worker processes can read chunks of them while this process does something else (reads the inventory, then
takes their results as they come). Results come back in the order of the chunks, so the output never depends on
which worker was faster. Workers start the platform's way (fork on Linux up to Python 3.13); nothing relies on
it. Only our own processes exchange pickled data here, never anything read from disk.

A worker that dies (killed, out of memory) ends the command with :class:`WorkerLost`; Ctrl-C stops the workers
(they ignore it themselves, so none prints a traceback) and the command writes nothing.
"""

from __future__ import annotations

import gc
import itertools
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from toporender.errors import Diagnostic, UserError, WorkerLost

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

T = TypeVar("T")
R = TypeVar("R")

JOBS_ENV = "TOPORENDER_JOBS"
START_METHOD: str | None = None
"""The platform's start method unless set (tests run each one)."""


SPREAD_FROM_FILES = 256
SPREAD_FROM_BYTES = 1 << 20
"""Fewer workflow files to read than :data:`SPREAD_FROM_FILES`, adding up to less than :data:`SPREAD_FROM_BYTES`,
are read in the command's own process: starting workers would cost more than it saves. Measured on two cores
with the render benchmark's files (250 Pods, 61 KB each): 8 files (0.5 MB) render in the same time either way,
16 (1 MB) in 10% less spread, 40 (2.4 MB) in 16% less, and plan them in 19% less, for about a quarter more CPU."""


def worth_spreading(sizes: Iterable[int]) -> bool:
    """Whether workflow files of these sizes (bytes) are worth reading in worker processes: at least
    :data:`SPREAD_FROM_FILES` of them, or :data:`SPREAD_FROM_BYTES` in all. Takes ``sizes`` only as far as it
    needs to."""
    total = 0
    for count, size in enumerate(sizes, 1):
        total += size
        if count >= SPREAD_FROM_FILES or total >= SPREAD_FROM_BYTES:
            return True
    return False


def default_jobs() -> int:
    """The worker processes a command may use: ``TOPORENDER_JOBS`` when set, else the CPUs this process may
    run on (``os.sched_getaffinity``: a container limited to two CPUs of a large host gets two)."""
    value = os.environ.get(JOBS_ENV)
    if value:
        try:
            jobs = int(value)
        except ValueError:
            jobs = 0
        if jobs < 1:
            raise UserError(Diagnostic(f"{JOBS_ENV} must be a whole number of processes, 1 or more; got {value!r}"))
        return jobs
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return os.cpu_count() or 1


def _worker_setup(initializer: Callable[..., None], *args: Any) -> None:
    """Set a worker up: Ctrl-C is the main process's to handle (a worker would print a traceback), and the
    cyclic collector is off as in the console process (the work builds many small objects and no cycles)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.disable()
    initializer(*args)


def map_in_processes(fn: Callable[[T], R], items: Sequence[T], jobs: int, *,
                     initializer: Callable[..., None], initargs: tuple[Any, ...],
                     meanwhile: Callable[[Iterator[R]], None] = lambda results: None) -> list[R]:
    """``[fn(item) for item in items]`` run in ``jobs`` worker processes, each set up once by
    ``initializer(*initargs)``; ``meanwhile`` runs in this process while they work, and may take the results
    as they come, in order, from the iterator it is given (which raises what taking them raises).

    ``fn`` and ``initializer`` must be module-level functions and ``initargs`` picklable, so that any start method
    works. An exception ``fn`` raises is raised here (for the first item, in order, that raised one). Raises
    :class:`WorkerLost` when a worker dies."""
    with Workers(jobs, initializer, initargs) as workers:
        return workers.map(fn, items, meanwhile)


class Workers:
    """``jobs`` worker processes for one map after another (:meth:`map`): a command that works in two passes
    starts its workers once, while it is still small, rather than forking its grown self for the second pass.
    Started by the first map; stopped on leaving the ``with`` block."""

    def __init__(self, jobs: int, initializer: Callable[..., None], initargs: tuple[Any, ...]) -> None:
        self.jobs = jobs
        self.initializer = initializer
        self.initargs = initargs
        self.pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def map(self, fn: Callable[[T], R], items: Iterable[T],
            meanwhile: Callable[[Iterator[R]], None] = lambda results: None, window: int | None = None) -> list[R]:
        """:func:`map_in_processes` in these workers. With a ``window``, at most that many items are handed over
        at a time, the next one as a result is taken in order, so a caller that makes large items one by one in
        a generator holds only those in flight; a ``meanwhile`` that does not take results then leaves the
        workers idle once they have done the window. Without one, every item is handed over at once."""
        from concurrent.futures.process import BrokenProcessPool  # imported by the commands that start workers only

        pending = iter(items)
        futures: deque[Future[R]] = deque()
        results: list[R] = []

        def fill() -> None:
            if self.pool is None:
                first = list(itertools.islice(pending, self.jobs))
                if not first:
                    return
                started = _start(fn, first, self.jobs, self.initializer, self.initargs)
                self.pool = started.pool
                futures.extend(started.first)
            while (window is None or len(futures) < window) and (item := next(pending, _END)) is not _END:
                futures.append(self.pool.submit(fn, item))  # type: ignore[arg-type]

        def take() -> R:
            """The next result in order; a future leaves the queue only once it gave one, so what it raised is
            raised again by the next take, whoever swallowed it before."""
            results.append(futures[0].result())
            futures.popleft()
            fill()
            return results[-1]

        def inorder() -> Iterator[R]:
            while futures:
                yield take()

        try:
            fill()
            meanwhile(inorder())
            while futures:
                take()
            return results
        except BrokenProcessPool:
            raise WorkerLost("a worker process ended without finishing its work (killed, or out of memory?); "
                             "nothing was written. Run with --jobs 1 to use this process only") from None
        except BaseException:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)  # the workers finish the chunk they hold, no more
            raise


_END = object()


@dataclass(frozen=True)
class _Started:
    pool: ProcessPoolExecutor
    first: list[Future[Any]]


def _start(fn: Callable[[T], R], first: Sequence[T], jobs: int, initializer: Callable[..., None],
           initargs: tuple[Any, ...]) -> _Started:
    """The pool with its first items submitted, one per worker, which starts every worker. Ctrl-C is ignored
    meanwhile, so that a worker ignores it (the setting is inherited) before it has run any code of ours."""
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(START_METHOD),
                                   initializer=_worker_setup, initargs=(initializer, *initargs))
        try:
            return _Started(pool, [pool.submit(fn, item) for item in first])
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    finally:
        if main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
