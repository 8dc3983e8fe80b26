"""Work spread over worker processes, for the commands that read a large repo (``toporender plan``).

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
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from toporender.errors import Diagnostic, UserError

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

T = TypeVar("T")
R = TypeVar("R")

JOBS_ENV = "TOPORENDER_JOBS"
START_METHOD: str | None = None
"""The platform's start method unless set (tests run each one)."""


class WorkerLost(Exception):
    """A worker process ended without giving its results (it was killed, or ran out of memory)."""


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
    from concurrent.futures.process import BrokenProcessPool  # imported by the commands that start workers only

    if not items:
        return []
    executor = _start(fn, items[:jobs], jobs, initializer, initargs)
    pool = executor.pool
    try:
        futures = [*executor.first, *(pool.submit(fn, item) for item in items[jobs:])]
        meanwhile(f.result() for f in futures)
        results = [f.result() for f in futures]
    except BrokenProcessPool:
        pool.shutdown(wait=True)
        raise WorkerLost("a worker process ended without finishing its work (killed, or out of memory?); "
                         "nothing was written. Run with --jobs 1 to use this process only") from None
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # the workers finish the chunk they hold, no more
        raise
    pool.shutdown(wait=True)
    return results


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
