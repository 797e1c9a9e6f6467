"""The engine of a map-style epoch loaded by worker processes: the consumer's side.

The same semantics as every other engine (``dataloader._loading.iterators``):
sampler order (or completion order with ``in_order=False``), at most
``window`` batches in flight or waiting, an error raised from its own
batch's ``next()``, ``timeout`` per batch, and an engine that stays
usable after Ctrl-C.
What differs is where batches are loaded: each is posted, as its indices,
to the group's I/O thread, which sends it to a worker process -- batch ``p``
of the epoch to worker ``p % num_workers`` in order, as torch does, the
least busy one with ``in_order=False`` (:mod:`dataloader._processes.channel`);
it comes back as views of that worker's shared-memory slot (see
:mod:`dataloader._processes.transport`).

``on_error="skip"`` budgets are spent here, in delivery order, from the
skipped items each batch reports, so that ``max_skipped`` means the same
as on threads.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from dataloader._core.consumer import wait_slice
from dataloader._core.load import EMPTY_BATCH
from dataloader._errors import (
    CHECK,
    EpochClosedError,
    LoadingContext,
    WorkerDied,
    add_context,
    check_same_process,
)
from dataloader._loading.stats import SKIPPED, WAIT, monotonic_ns
from dataloader._processes.group import (
    EndOfSampler,
    LoadBatch,
    RejectBatch,
    RejectedIndices,
    WorkerGroup,
    close_with,
)
from dataloader._processes.protocol import Failed, Loaded

if TYPE_CHECKING:
    from dataloader._loading.plans import EpochPlan

__all__ = ["ProcessEngine", "raise_death", "wait_for_reply"]


class ProcessEngine:
    """An epoch whose batches are loaded by a :class:`WorkerGroup`.

    ``owns_group``: the group serves this epoch only (``persistent_workers``
    off) and is stopped when the epoch ends or is dropped, as torch's
    workers are. Dropping the iterator of a persistent group leaves its
    batches in flight to finish; the next epoch recycles their slots.
    """

    def __init__(self, plan: EpochPlan, group: WorkerGroup, *, owns_group: bool, seed: int,
                 epoch: int) -> None:
        self._plan = plan
        self._group = group
        # Its workers answer this process only (not a forked child).
        self._pid = os.getpid()
        # Stops the group when the epoch ends or is collected: a finalizer,
        # not __del__, because collecting a reference cycle may finalize
        # the group's pipes before the epoch.
        self._stop_group = close_with(self, group) if owns_group else None
        self._budget = plan.skip
        self._consumer_row = plan.stats.rows[0]
        self._posted = 0
        self.delivered = 0
        self._sampler_ended = False
        self._sampler_error: BaseException | None = None
        self._finished = False
        # The batch being taken: (position, delivered before), until it is.
        self._taking: tuple[int, int] | None = None
        self._channel = group.open_channel(seed, epoch, plan.in_order, first=plan.first)
        self._refill()

    @property
    def _workers(self) -> list[Any]:
        """The worker processes (``multiprocessing.Process``), as torch's iterator names them."""
        return self._group.processes

    def next(self) -> Any:
        check_same_process(self._pid)
        started = monotonic_ns()
        try:
            return self._next()
        finally:
            self._consumer_row.add(WAIT, 1, monotonic_ns() - started)

    def _next(self) -> Any:
        if self._finished:
            raise StopIteration
        self._recover()
        self._refill()
        position, entry = self._wait()
        if position < 0:  # the end
            self.cancel()
            error, self._sampler_error = self._sampler_error, None
            if error is not None:
                raise error
            raise StopIteration
        self._take(position)
        self._refill()
        return self._open(*entry)

    # -- posting ------------------------------------------------------------

    def _refill(self) -> None:
        """Post batches from the sampler until the window is full or the sampler ends."""
        plan = self._plan
        while not self._sampler_ended and self._posted - self.delivered < plan.window:
            try:
                indices = next(plan.batches)
            except StopIteration:
                self._end_sampler()
                return
            except Exception as exc:  # noqa: BLE001 -- raised at its position
                # Raised at its own position, after the batches before it.
                self._sampler_error = exc
                self._end_sampler()
                return
            except BaseException:
                self.cancel()
                raise
            self._post(indices)

    def _end_sampler(self) -> None:
        self._sampler_ended = True
        self._group.post(EndOfSampler(self._channel))

    def _post(self, indices: Any) -> None:
        request: LoadBatch | RejectBatch
        try:
            if self._plan.check_indices is not None:
                indices = self._plan.check_indices(indices)
            request = LoadBatch(self._channel, indices)
        except Exception as exc:  # noqa: BLE001 -- raised from its batch
            add_context(exc, LoadingContext(CHECK, batch=self._plan.first + self._posted,
                                                    indices=indices))
            request = RejectBatch(self._channel, exc)
        self._group.post(request)
        self._posted += 1

    # -- taking -------------------------------------------------------------

    def _wait(self) -> tuple[int, Any]:
        """The next reply as ``(position, entry)``, or ``(-1, None)`` at the end."""
        found = wait_for_reply(self._channel, self._ready, self._plan.timeout, self.delivered)
        if found is None:
            self._fail(self._channel.death)
        return found

    def _ready(self) -> tuple[int, Any] | None:
        """The next reply to take, ``(-1, None)`` at the end (``condition`` held)."""
        channel = self._channel
        if self._plan.in_order:
            entry = channel.results.get(self.delivered)
            if entry is not None:
                return self.delivered, entry
        elif channel.arrivals:
            position = channel.arrivals[0]
            return position, channel.results[position]
        if channel.end is not None and self.delivered >= channel.end:
            return -1, None
        return None

    def _take(self, position: int) -> None:
        """Count ``position`` delivered and drop its reply. Ctrl-C at any point leaves a
        state ``_recover`` completes: the batch delivered at most once."""
        self._taking = (position, self.delivered)
        self.delivered += 1
        self._drop(position)
        self._taking = None

    def _recover(self) -> None:
        """Finish a ``_take`` that Ctrl-C interrupted: a batch counted is dropped (lost)."""
        if self._taking is None:
            return
        position, before = self._taking
        if self.delivered > before:
            self._drop(position)
        self._taking = None

    def _drop(self, position: int) -> None:
        channel = self._channel
        with channel.condition:
            if channel.arrivals and channel.arrivals[0] == position:
                channel.arrivals.popleft()
            channel.results.pop(position, None)

    def _open(self, worker_id: int, message: Loaded | Failed | RejectedIndices) -> Any:
        """A reply as what ``next()`` returns or raises."""
        if isinstance(message, RejectedIndices):
            raise message.error
        self._plan.stats.add_remote(message.stats)
        if isinstance(message, Failed):
            raise message.error.restore()
        for index, remote in message.skipped:
            error = remote.restore()
            if self._budget is None or not self._budget.spend(error, index):
                # The worker counted it as skipped; it is raised instead, as on threads.
                self._plan.stats.remote.add(SKIPPED, -1, 0)
                self._group.discard(worker_id, message.packed)
                raise error
        if message.packed is None:
            return EMPTY_BATCH
        return self._group.open_batch(worker_id, message.packed)

    # -- ending -------------------------------------------------------------

    def _fail(self, death: BaseException | None) -> Any:
        self.cancel()
        batches = self._channel.loading(getattr(death, "worker_id", -1))
        where = f" while loading batch {self._channel.first + batches[0]}" if batches else ""
        raise_death(self._group, death, where)

    def cancel(self) -> None:
        """End the epoch now; its workers stop too unless they are persistent."""
        self._finished = True
        if self._stop_group is not None:
            self._stop_group()


def wait_for_reply(channel: Any, ready: Callable[[], Any], timeout: float,
                   delivered: int) -> Any:
    """What ``ready()`` finds, waiting on ``channel.condition`` until it finds something,
    or None once the channel's workers stopped serving (``channel.death``). ``timeout``
    bounds the wait for batch ``delivered``, as on threads."""
    started = time.monotonic()
    with channel.condition:
        while True:
            found = ready()
            if found is not None:
                return found
            if channel.death is not None:
                return None
            channel.condition.wait(wait_slice(started, timeout, delivered))


def raise_death(group: WorkerGroup, death: BaseException | None, loading: str) -> NoReturn:
    """Stop the group and raise why it stopped serving: a worker's death names its pid,
    its signal and (``loading``) the batch it was loading."""
    group.close()
    if isinstance(death, EpochClosedError):
        raise EpochClosedError(str(death))
    if not isinstance(death, WorkerDied):
        raise RuntimeError("the DataLoader's worker processes stopped serving") from death
    raise RuntimeError(f"{death}{loading}; the epoch cannot continue") from None
