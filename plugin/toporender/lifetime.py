"""Objects the console script keeps until it exits, instead of freeing them one by one on the way out.

A large render builds millions of small dicts, lists and strings. The console script ends its process
with ``os._exit`` (:func:`toporender.cli.main`), which frees nothing. Without this module the pipeline's
data was still freed object by object as soon as the render returned: the parsed repo, the gangs and
the rendered objects of a 10,000-Pod render took 0.06-0.08 s to free, just before an exit that makes
the work pointless.

Only the console script switches holding on (:func:`hold_until_exit`). Library callers and tests, which
may run many renders in one process, never do, so for them :func:`keep` does nothing and memory is
freed as usual.
"""

from __future__ import annotations

_held: list[object] | None = None


def hold_until_exit() -> None:
    """From now on :func:`keep` holds what it is given until the process ends (call only when it ends with
    ``os._exit``)."""
    global _held
    if _held is None:
        _held = []


def keep(*objects: object) -> None:
    """Hold ``objects`` until the process ends, when the console script asked for that; else do nothing."""
    if _held is not None:
        _held.extend(objects)
