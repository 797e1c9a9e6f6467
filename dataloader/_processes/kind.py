"""Worker processes as a kind of worker (see ``dataloader._worker_kinds``).

The kind owns the loader's persistent worker group (``persistent_workers``)
and the engines running on a group, which ``close()`` stops; without
``persistent_workers`` each epoch starts a group of its own, stopped with it.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from dataloader._processes.epoch import ProcessEngine
from dataloader._processes.group import (
    WorkerGroup,
    close_with,
    start_method,
    warn_if_more_than_cpus,
)
from dataloader._processes.stream import ProcessStream
from dataloader._processes.worker import WorkerSpec

if TYPE_CHECKING:
    from dataloader._loader import DataLoader
    from dataloader._loading.plans import EpochPlan, StreamPlan

__all__ = ["Processes"]


class Processes:
    """Batches loaded by worker processes, handed back through shared memory."""

    loads_ahead = True
    other_processes = True

    def __init__(self) -> None:
        self.group: WorkerGroup | None = None
        self._engines: weakref.WeakSet[ProcessEngine | ProcessStream] = weakref.WeakSet()

    def map_engine(self, loader: DataLoader, plan: EpochPlan) -> ProcessEngine:
        engine = ProcessEngine(plan, self._group_for(loader), seed=loader.seed,
                               epoch=loader.epoch, owns_group=not loader.persistent_workers)
        self._engines.add(engine)
        return engine

    def stream_engine(self, loader: DataLoader, plan: StreamPlan,
                      states: dict[int, Any]) -> ProcessStream:
        engine = ProcessStream(self._group_for(loader), plan, states, seed=loader.seed,
                               owns_group=not loader.persistent_workers)
        self._engines.add(engine)
        return engine

    def _group_for(self, loader: DataLoader) -> WorkerGroup:
        """The loader's persistent worker processes, or new ones for one epoch."""
        group = self.group
        if group is not None and not group.closed:
            return group
        spec = WorkerSpec.of_loader(loader, loader._worker_base_seed(), loader._auto_collation,
                                    loader._iterable)
        if not loader._auto_workers:  # a count auto chose is meant (for items that wait)
            warn_if_more_than_cpus(spec.num_workers)
        group = WorkerGroup(spec, start_method(loader.multiprocessing_context))
        if loader.persistent_workers:
            self.group = group
            close_with(loader, group)
        return group

    def close(self, seconds: float) -> None:
        """Stop the engines running and the persistent group (``seconds``: not waited for,
        workers are stopped at once)."""
        for engine in list(self._engines):
            engine.cancel()
        if self.group is not None:
            self.group.close()
            self.group = None
