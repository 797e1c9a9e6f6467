"""Where an epoch's batches are loaded: one object per kind of worker.

``iter(loader)`` resolves the loader's kind (:func:`kind_name`), plans the
epoch, and iterates over the engine the kind makes for the plan:

=============  ======================================  ===========================================
kind           map-style engine                        stream engine
=============  ======================================  ===========================================
``inline``     ``InlineEngine``: on the calling        ``InlineStreamEngine``
               thread, when ``next()`` asks
``thread``     ``_core.epoch.Epoch`` on the pool       ``_core.stream.Stream`` (or ``Epoch``)
``process``    ``ProcessEngine`` over a worker group   ``ProcessStream``
``auto``       ``MeasuredEngine``: batch 0 inline,     (not measured)
               the rest on threads or processes
=============  ======================================  ===========================================

The iterators (``MapIterator``, ``StreamIterator``) are the same for every
kind. A kind owns what its workers run on (the pool of threads, the
persistent group of processes) and stops it in ``close(seconds)``. A new
kind of worker is one module with such a class, its entry in
:data:`WORKER_KINDS`, and its name among ``worker_type``'s values
(``dataloader._processes.choice``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from dataloader._auto import Auto
from dataloader._core.epoch import Epoch
from dataloader._core.pool import CLOSE_WAIT_SECONDS, Pool
from dataloader._lifetime import pool_finalizer, stop_pool
from dataloader._loading.iterators import Engine, InlineEngine
from dataloader._loading.streaming import inline_stream_engine, threaded_stream_engine
from dataloader._loading.worker import WorkerSetup
from dataloader._processes.kind import Processes

if TYPE_CHECKING:
    from dataloader._loader import DataLoader
    from dataloader._loading.plans import EpochPlan, StreamPlan

__all__ = ["WORKER_KINDS", "Inline", "Threads", "WorkerKind", "kind_name"]


class WorkerKind(Protocol):
    """A kind of worker: makes the engines of epochs, owns what they run on."""

    #: Batches load on other threads while the consumer works: pinned memory
    #: is then pinned on a thread of its own.
    loads_ahead: bool
    #: Items load in other processes (an async dataset's coroutines on their
    #: own event loops, not the loader's).
    other_processes: bool

    def map_engine(self, loader: DataLoader, plan: EpochPlan) -> Engine: ...
    def stream_engine(self, loader: DataLoader, plan: StreamPlan,
                      states: dict[int, Any]) -> Any: ...
    def close(self, seconds: float) -> None: ...


class Inline:
    """No workers: each batch is loaded on the calling thread when ``next()`` asks."""

    loads_ahead = False
    other_processes = False

    def map_engine(self, loader: DataLoader, plan: EpochPlan) -> InlineEngine:
        return InlineEngine(plan)

    def stream_engine(self, loader: DataLoader, plan: StreamPlan,
                      states: dict[int, Any]) -> Any:
        return inline_stream_engine(plan, states)

    def close(self, seconds: float) -> None:
        pass


class Threads:
    """Worker threads of the loader's pool (``dataloader._core.pool``).

    The pool is created on the loader's first threaded epoch and kept after
    it (a new one when ``num_workers`` or ``item_concurrency`` changed); it
    is stopped by ``close()`` or, once the loader is collected, by its
    finalizer (``dataloader._lifetime``).
    """

    loads_ahead = True
    other_processes = False

    def __init__(self, threads: int | None = None) -> None:
        # A fixed number of threads (``worker_type="auto"`` runs a Python
        # dataset on one), or None: ``num_workers``.
        self.threads = threads
        self.pool: Pool | None = None
        self._finalizer: Any = None
        self._setup: WorkerSetup | None = None

    def map_engine(self, loader: DataLoader, plan: EpochPlan) -> Epoch:
        pool = self._live_pool(loader)
        engine = Epoch(pool, dataclasses.replace(plan, worker_setup=self._setup))
        engine.start()
        return engine

    def stream_engine(self, loader: DataLoader, plan: StreamPlan,
                      states: dict[int, Any]) -> Any:
        pool = self._live_pool(loader)
        return threaded_stream_engine(dataclasses.replace(plan, worker_setup=self._setup),
                                      states, pool)

    def _live_pool(self, loader: DataLoader) -> Pool:
        workers = self.threads if self.threads is not None else max(loader.num_workers, 1)
        size = workers * loader.item_concurrency
        if self.pool is not None and self.pool.alive and self.pool.size == size:
            return self.pool
        self.close()
        self.pool = pool = Pool(size)
        self._setup = WorkerSetup(size, loader._worker_base_seed(), loader.dataset,
                                  loader.worker_init_fn, loader.prefetch_factor)
        loader._stats.ensure_threads(size)
        self._finalizer = pool_finalizer(loader, pool, loader._streams)
        return pool

    def close(self, seconds: float = CLOSE_WAIT_SECONDS) -> None:
        """Stop the pool, waiting at most ``seconds`` for threads in user code."""
        finalizer, self.pool, self._finalizer = self._finalizer, None, None
        if finalizer is not None and (found := finalizer.detach()) is not None:
            pool, streams = found[2]
            stop_pool(pool, streams, seconds)


#: Every kind of worker, by the name :func:`kind_name` gives.
WORKER_KINDS: dict[str, Callable[[], WorkerKind]] = {
    "auto": lambda: Auto(Threads),
    "inline": Inline,
    "process": Processes,
    "thread": Threads,
}


def kind_name(loader: DataLoader) -> str:
    """The kind of worker ``loader``'s next epoch runs on.

    Examples
    --------
    >>> from dataloader import DataLoader
    >>> from dataloader._worker_kinds import kind_name
    >>> kind_name(DataLoader(range(4))), kind_name(DataLoader(range(4), num_workers=2))
    ('inline', 'thread')
    """
    if loader.num_workers > 0:
        return "auto" if loader._worker_type.measured(loader) else loader._worker_type.of(loader)
    return "thread" if loader.item_concurrency > 1 else "inline"
