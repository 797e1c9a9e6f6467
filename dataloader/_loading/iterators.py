"""Epochs: one pass of the loader's sampler, turned into batches.

``iter(loader)`` over a map-style dataset returns a :class:`MapIterator`
over the engine of the loader's kind of worker (see
``dataloader._worker_kinds``): :class:`InlineEngine` on the calling
thread, ``dataloader._core.epoch.Epoch`` on worker threads,
``dataloader._processes.epoch.ProcessEngine`` on worker processes. The
iterator gives every kind the same semantics (see
``docs/architecture.md``, "Epoch semantics"):

* batches come out in sampler order;
* ``len(it)`` is the number of batches still to come;
* an error raised while loading a batch is raised from that batch's
  ``next()``, and the following ``next()`` returns the following batch;
* an error of the sampler itself ends the epoch where it is found;
* after the end, ``next()`` raises ``StopIteration`` every time.

An engine's ``next()`` gives the next batch -- ``EMPTY_BATCH`` for one
whose every item was skipped (``on_error="skip"``), which the iterator
passes over -- or raises ``StopIteration`` at the end; ``delivered``
counts the batches it gave; ``cancel()`` ends it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from dataloader._core.load import EMPTY_BATCH, load_direct
from dataloader._errors import BATCH, LoadingContext, add_context

if TYPE_CHECKING:
    from dataloader._loading.plans import EpochPlan

__all__ = ["Engine", "InlineEngine", "MapIterator"]


class Engine(Protocol):
    """What loads an epoch's batches, for one kind of worker (see the module docstring)."""

    @property
    def delivered(self) -> int: ...
    def next(self) -> Any: ...
    def cancel(self) -> None: ...


class MapIterator:
    """The iterator of a map-style epoch: progress, length and skipped batches, over an
    engine of any kind.

    ``owner`` (the loader) is held so that its dataset, and its pool or
    worker processes, stay alive while the epoch runs. Dropping the
    iterator (``break``, ``del``, garbage collection) cancels the epoch at
    once: batches in flight finish in the background and are discarded.
    """

    __slots__ = ("_owner", "_engine", "_progress", "_skipped", "_on_cancel", "_stats")

    def __init__(self, owner: Any, plan: EpochPlan, engine: Engine) -> None:
        self._owner = owner
        self._engine = engine
        # The batch position lives in the loader's progress record alone.
        self._progress = plan.progress
        self._skipped = plan.progress.delivered
        self._on_cancel = plan.on_cancel
        self._stats = plan.stats

    def __iter__(self) -> MapIterator:
        return self

    @property
    def _workers(self) -> list[Any]:
        """Worker processes only: their ``multiprocessing.Process`` objects, as torch's
        iterator names them (``AttributeError`` for other kinds, as torch's single-process
        one)."""
        return self._engine._workers  # type: ignore[attr-defined]

    def __len__(self) -> int:
        total = self._progress.batches()
        if total is None:
            raise TypeError("this epoch's length is unknown: its sampler has no __len__")
        if self._progress.finished:
            return 0
        return max(total - self._skipped - self._engine.delivered, 0)

    def __next__(self) -> Any:
        engine = self._engine
        self._stats.asked()
        more = False
        try:
            # A batch whose every item was skipped (on_error="skip") is passed over.
            while (batch := engine.next()) is EMPTY_BATCH:
                pass
            more = True
        except StopIteration:
            self._progress.finished = True
            raise
        finally:
            self._progress.delivered = self._skipped + engine.delivered
            self._stats.answered(more)
        return batch

    def cancel(self) -> None:
        """End the epoch now: batches in flight finish in the background, discarded."""
        self._engine.cancel()
        if self._on_cancel is not None:
            self._on_cancel()

    def __del__(self) -> None:
        if hasattr(self, "_on_cancel"):  # not when __init__ failed
            self.cancel()


class InlineEngine:
    """An epoch loaded on the calling thread: no threads, no queues.

    Each ``next()`` takes the sampler's next batch of indices, then fetches,
    transforms and collates it before returning.
    """

    __slots__ = ("_plan", "_recipe", "_row", "delivered", "_finished")

    def __init__(self, plan: EpochPlan) -> None:
        assert plan.recipe is not None  # bound by the loader: items load in this process
        self._plan = plan
        self._recipe = plan.recipe
        self._row = plan.stats.rows[0]  # the consumer's counters
        self.delivered = 0
        self._finished = False

    def next(self) -> Any:
        if self._finished:
            raise StopIteration
        plan = self._plan
        try:
            indices = next(plan.batches)
        except BaseException:
            # The sampler is exhausted or broken: either way the epoch ends here.
            self._finished = True
            plan.progress.finished = True
            raise
        self.delivered += 1
        try:
            if plan.check_indices is not None:
                indices = plan.check_indices(indices)
            return load_direct(self._recipe, indices, self._row)
        except Exception as exc:
            add_context(exc, LoadingContext(BATCH, batch=plan.first + self.delivered - 1,
                                             indices=indices))
            raise

    def cancel(self) -> None:
        self._finished = True
