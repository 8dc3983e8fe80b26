"""A step-counted search that can be given more steps later and goes on where it stopped.

A depth-first search that runs out of steps loses everything it explored when it is searched again with a larger
budget: it spends the old steps once more before any new ground. The search here is recursive, so its state is
its call stack; :class:`ResumableSearch` runs it in a thread of its own that waits, when the steps run out, until
it is given more or is closed. The two threads hand over to each other and only one of them ever runs, so the
outcome and the steps counted are those of one thread: the same on every machine and every run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Steps(Protocol[T_co]):
    """What :class:`ResumableSearch` reads and sets on a search: its steps taken and its step budget, the hook
    it calls when the steps exceed the budget (which returns once the budget is raised, or raises the search's
    own out-of-steps exception to unwind it), and the search itself."""

    steps: int
    budget: int
    pause: Callable[[], None] | None

    def solve(self) -> T_co | None: ...


class ResumableSearch(Generic[T]):
    """``search.solve`` run in a thread of its own, step budget by step budget.

    A search that is closed while paused unwinds by ``out``, the exception it raises itself when its steps run
    out, so ``solve`` must catch that and return None, as it does for a search that is not resumed.
    """

    def __init__(self, search: Steps[T], out: type[Exception]):
        self.search = search
        self.out = out
        self.done = False
        """Whether ``solve`` has returned: an answer, or the proof that there is none."""
        self.found: T | None = None
        self.error: BaseException | None = None
        self._closing = False
        self._ended = False
        self._to_search = threading.Semaphore(0)
        self._to_caller = threading.Semaphore(0)
        self._thread: threading.Thread | None = None
        search.pause = self._pause

    def run(self, more: int) -> bool:
        """Search up to ``more`` further steps; whether the search ended (:attr:`done`) within them."""
        if self._ended or self._closing:
            return self.done
        if self._thread is None:
            self.search.budget = self.search.steps + more
            self._thread = threading.Thread(target=self._work, name="toporender-search", daemon=True)
            self._thread.start()
        else:
            self.search.budget += more
        self._to_search.release()
        self._to_caller.acquire()
        if self._ended:
            self._finish()
        if self.error is not None:
            raise self.error
        return self.done

    def close(self) -> None:
        """Unwind a paused search and wait for its thread: nothing of it outlives the caller's use."""
        self._closing = True
        if self._thread is not None and not self._ended:
            self._to_search.release()
            self._to_caller.acquire()
        self._finish()

    def _finish(self) -> None:
        """Join the ended thread and drop the references between this runner and the search (a cycle the
        cyclic collector, which the packer pauses, would otherwise keep until the pack ends)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.search.pause = None

    def _work(self) -> None:
        self._to_search.acquire()
        try:
            if not self._closing:
                self.found = self.search.solve()
        except BaseException as exc:  # handed to the caller, which raises it in its own thread
            self.error = exc
        finally:
            self.done = not self._closing and self.error is None
            self._ended = True
            self._to_caller.release()

    def _pause(self) -> None:
        """Called by the search, in its thread, when its steps exceed its budget."""
        self._to_caller.release()
        self._to_search.acquire()
        if self._closing:
            raise self.out
