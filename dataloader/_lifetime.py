"""How a loader's threads and processes end: when it is closed, collected, or at exit.

The threads that threaded epochs run on live as long as their loader: its
pool is stopped by ``close()`` or, once the loader is collected, by
:func:`pool_finalizer`'s finalizer; at interpreter exit every loader still
open is closed by :func:`close_at_exit`, with every worker group still
running, within one shared deadline (see ``docs/execution.md``, "Closing
and exit").
"""

from __future__ import annotations

import atexit
import weakref
from typing import TYPE_CHECKING, Any

from dataloader._core.pool import (
    CLOSE_WAIT_SECONDS,
    EXIT_WAIT_SECONDS,
    Pool,
    abandon_threads,
    begin_exit,
    stop_every_pool,
    wait_bound,
)
from dataloader._processes.group import close_every_group

if TYPE_CHECKING:
    from dataloader._loader import DataLoader

__all__ = ["close_at_exit", "pool_finalizer", "stop_pool"]


# Loaders with worker or pinning threads, closed together at interpreter exit.
_open_loaders: weakref.WeakSet[DataLoader] = weakref.WeakSet()


def stop_pool(pool: Pool, streams: weakref.WeakSet[Any],
              seconds: float = CLOSE_WAIT_SECONDS) -> None:
    """Stop a loader's pool: cancel its streaming epochs (their workers wait for room), join."""
    for stream in list(streams):
        stream.cancel()
    pool.shutdown(seconds)


def pool_finalizer(loader: DataLoader, pool: Pool, streams: weakref.WeakSet[Any]) -> Any:
    """The finalizer that stops ``loader``'s pool when the loader is collected.

    It holds the pool, not the loader. It does not run at exit: there the
    loader is closed with every other (:func:`close_at_exit`), so that they
    share one deadline instead of adding theirs up.
    """
    finalizer = weakref.finalize(loader, stop_pool, pool, streams)
    finalizer.atexit = False
    close_at_exit(loader)
    return finalizer


def close_at_exit(loader: DataLoader) -> None:
    """Have ``loader`` closed at interpreter exit (if it is still alive then)."""
    _open_loaders.add(loader)


@atexit.register
def _close_open_loaders() -> None:
    """Close every loader left open, waiting ``EXIT_WAIT_SECONDS`` in all for workers.

    Everything is stopped first (no waiting), then waited for until one
    deadline: pinning threads, then pool threads, of every pool (those of
    loaders gone or closed already included). A thread still in user code
    at the deadline is left to the interpreter's finalization, which stops
    it when it next attaches (tasks check ``pool.may_attach``; see
    ``pool.abandon_threads`` for threads in C++ code).
    """
    begin_exit()
    loaders = list(_open_loaders)
    pinning = [pinned.thread for loader in loaders for pinned in list(loader._pinned)]
    try:
        for loader in loaders:
            loader._close(0.0)
        close_every_group()
        for thread in pinning:
            thread.join(wait_bound(EXIT_WAIT_SECONDS))
    finally:
        # Even when a loader failed to close: no pool thread may abort the exit.
        if not stop_every_pool(EXIT_WAIT_SECONDS) or any(t.is_alive() for t in pinning):
            abandon_threads()
