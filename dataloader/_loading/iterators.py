"""Epochs: one pass of the loader's sampler, turned into batches.

``iter(loader)`` returns an epoch iterator. Every kind of epoch shares the
same semantics (see ``docs/architecture.md``, "Epoch semantics"):

* batches come out in sampler order;
* ``len(it)`` is the number of batches still to come;
* an error raised while loading a batch is raised from that batch's
  ``next()``, and the following ``next()`` returns the following batch;
* an error of the sampler itself ends the epoch where it is found;
* after the end, ``next()`` raises ``StopIteration`` every time.

The threads that threaded epochs run on live as long as their loader (see
``dataloader._lifetime``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dataloader._core.epoch import Epoch
from dataloader._core.load import EMPTY_BATCH, load_direct
from dataloader._core.pool import Pool
from dataloader._errors import BATCH, LoadingContext, add_context

if TYPE_CHECKING:
    from dataloader._loader import DataLoader
    from dataloader._loading.plans import EpochPlan

__all__ = ["DirectEpoch", "ThreadedEpoch"]


class DirectEpoch:
    """An epoch run on the calling thread: no threads, no queues.

    Each ``next()`` takes the sampler's next batch of indices, then fetches,
    transforms and collates it before returning.
    """

    __slots__ = ("_loader", "_plan", "_progress", "_skipped", "_row", "_finished")

    def __init__(self, loader: DataLoader, plan: EpochPlan) -> None:
        # Holding the loader keeps its dataset alive while the epoch runs.
        self._loader = loader
        self._plan = plan
        # The batch position lives in the loader's progress record alone.
        self._progress = plan.progress
        self._skipped = plan.progress.delivered
        self._row = plan.stats.rows[0]  # the consumer's counters
        self._finished = False

    def __iter__(self) -> DirectEpoch:
        return self

    def __len__(self) -> int:
        if self._plan.total is None:
            raise TypeError("this epoch's length is unknown: its sampler has no __len__")
        if self._finished:
            return 0
        return max(self._plan.total - (self._progress.delivered - self._skipped), 0)

    def __next__(self) -> Any:
        # A batch whose every item was skipped (on_error="skip") is passed over.
        while (batch := self._load_next()) is EMPTY_BATCH:
            pass
        return batch

    def _load_next(self) -> Any:
        if self._finished:
            raise StopIteration
        plan = self._plan
        progress = self._progress
        try:
            indices = next(plan.batches)
        except BaseException:
            # The sampler is exhausted or broken: either way the epoch ends here.
            self._finished = True
            progress.finished = True
            raise
        progress.delivered += 1
        try:
            if plan.check_indices is not None:
                indices = plan.check_indices(indices)
            return load_direct(plan.recipe, indices, self._row)
        except Exception as exc:
            position = progress.delivered - 1 - self._skipped
            add_context(exc, LoadingContext(BATCH, batch=position, indices=indices))
            raise


class ThreadedEpoch:
    """An epoch loaded by the loader's worker threads (``dataloader._core.epoch``).

    Dropping the iterator (``break``, ``del``, garbage collection) cancels
    the epoch at once: batches in flight finish in the background and are
    discarded.
    """

    __slots__ = ("_loader", "_engine", "_total", "_progress", "_skipped", "_on_cancel")

    def __init__(self, loader: DataLoader, plan: EpochPlan, pool: Pool) -> None:
        # Holding the loader keeps its pool and dataset alive while the epoch runs.
        self._loader = loader
        self._total = plan.total
        self._progress = plan.progress
        self._skipped = plan.progress.delivered
        self._on_cancel = plan.on_cancel
        self._engine = Epoch(pool, plan)
        self._engine.start()

    def __iter__(self) -> ThreadedEpoch:
        return self

    def __next__(self) -> Any:
        try:
            return self._engine.next()
        except StopIteration:
            self._progress.finished = True
            raise
        finally:
            self._progress.delivered = self._skipped + self._engine.delivered

    def __len__(self) -> int:
        if self._total is None:
            raise TypeError("this epoch's length is unknown: its sampler has no __len__")
        return max(self._total - self._engine.delivered, 0)

    def cancel(self) -> None:
        """End the epoch now: batches in flight finish in the background, discarded."""
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.cancel()
        on_cancel = getattr(self, "_on_cancel", None)
        if on_cancel is not None:
            on_cancel()

    def __del__(self) -> None:
        self.cancel()
