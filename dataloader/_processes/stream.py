"""A streaming epoch loaded by worker processes: the consumer's side.

Each worker process iterates its own stream (one ``iter(dataset)``, with
``get_worker_info()`` naming the worker, so that ``__iter__`` splits the
data as under torch) and batches, transforms and collates it, as a
producer task does on threads (``dataloader._core.stream``). The consumer
asks each worker for ``prefetch_factor`` batches ahead, and for one more
each time it takes one of that worker's batches. With the plan's
``in_order`` it takes them by turn, as torch does and as on threads: batch
``j`` of every stream before batch ``j + 1`` of any, an ended stream
leaving the rotation, so the order is the same on every run; with
``in_order=False``, in arrival order.

What ``next()`` returns is the streaming engines' entry, ``(payload,
failed, stream, state)``, so :class:`dataloader._loading.streaming.StreamIterator`
(resume states, ``equal_batches`` limits, the ranks' agreement) is the
same for both kinds of worker. An error of a stream's iterator ends that
stream only; one of ``transform`` or ``collate_fn`` fails its batch only.
"""

from __future__ import annotations

import collections
import os
from typing import TYPE_CHECKING, Any

from dataloader._errors import check_same_process
from dataloader._loading.stats import WAIT, monotonic_ns
from dataloader._processes.epoch import raise_death, wait_for_reply
from dataloader._processes.group import LoadStreamBatch, WorkerGroup, close_with
from dataloader._processes.protocol import Streamed

if TYPE_CHECKING:
    from dataloader._loading.plans import StreamPlan

__all__ = ["ProcessStream"]

# What ``_ready`` says when every stream has ended.
_END = (-1, None)


class ProcessStream:
    """The streams of one epoch, one per process of a :class:`WorkerGroup`.

    ``states``: each stream's saved state on resume (stream -> state).
    ``owns_group``: the group serves this epoch only (``persistent_workers``
    off) and is stopped when the epoch ends or is dropped.
    """

    def __init__(self, group: WorkerGroup, plan: StreamPlan, states: dict[int, Any], *,
                 owns_group: bool, seed: int) -> None:
        self._group = group
        # Its workers answer this process only (not a forked child).
        self._pid = os.getpid()
        self._plan = plan
        self._stop_group = close_with(self, group) if owns_group else None
        streams = group.size
        self._by_turn = plan.in_order
        # By turn: each stream's batches taken (from the resumed position on),
        # and the positions asked of it, in order.
        self._took = list(plan.delivered_by_stream) if plan.in_order else [0] * streams
        self._asked: list[collections.deque[int]] = [collections.deque()
                                                     for _ in range(streams)]
        self._ended = [False] * streams
        self._received = [0] * streams
        self._posted = 0
        self._delivered = 0
        self._finished = False
        self._row = plan.stats.rows[0]
        self._channel = group.open_channel(
            seed, plan.progress.epoch, plan.in_order,
            stream_states=[states.get(stream) for stream in range(streams)])
        for _ in range(max(plan.prefetch_factor, 1)):
            for stream in range(streams):
                self._ask(stream)

    @property
    def _workers(self) -> list[Any]:
        """The worker processes (``multiprocessing.Process``), as torch's iterator names them."""
        return self._group.processes

    def _ask(self, stream: int) -> None:
        """Ask ``stream``'s worker for its next batch (the position is ours to choose)."""
        position = self._posted
        self._posted = position + 1
        self._asked[stream].append(position)
        self._group.post(LoadStreamBatch(self._channel, stream, position))

    def next(self) -> tuple[Any, bool, int, Any]:
        """The next entry, ``(payload, failed, stream, state)``; ``StopIteration`` at the end."""
        check_same_process(self._pid)
        started = monotonic_ns()
        try:
            while not self._finished:
                stream, message = self._wait()
                if message is None:
                    break
                entry = self._open(stream, message)
                if entry is not None:
                    self._delivered += 1
                    return entry
            self.cancel()
            raise StopIteration
        finally:
            self._row.add(WAIT, 1, monotonic_ns() - started)

    def _wait(self) -> tuple[int, Any]:
        channel = self._channel
        found = wait_for_reply(channel, self._ready, self._plan.timeout, self._delivered)
        if found is not None:
            return found
        self.cancel()
        stream = getattr(channel.death, "worker_id", -1)
        raise_death(self._group, channel.death,
                    f" while loading batch {self._received[stream]} of its stream")

    def _ready(self) -> tuple[int, Any] | None:
        """The next reply to take, ``(stream, message)``, or ``_END`` when every stream
        has ended (``condition`` held)."""
        channel = self._channel
        if not self._by_turn:
            while channel.arrivals:
                position = channel.arrivals.popleft()
                stream, message = channel.results.pop(position)
                if not self._ended[stream]:  # else a request the stream's end answered
                    self._asked[stream].popleft()
                    return stream, message
            return _END if all(self._ended) else None
        live = [stream for stream, ended in enumerate(self._ended) if not ended]
        if not live:
            return _END
        turn = min(live, key=self._took.__getitem__)
        position = self._asked[turn][0]
        if position not in channel.results:
            return None
        self._asked[turn].popleft()
        return turn, channel.results.pop(position)[1]

    def _open(self, stream: int, message: Streamed) -> tuple[Any, bool, int, Any] | None:
        """A reply as an entry; ``None`` for the end of a stream that brought no batch."""
        self._plan.stats.add_remote(message.stats)
        self._received[stream] += 1
        if message.ended:
            self._ended[stream] = True
        if message.packed is None and message.error is None:
            return None
        self._took[stream] += 1
        if not message.ended:
            self._ask(stream)
        if message.error is not None:
            return message.error.restore(), True, stream, message.state
        return self._group.open_batch(stream, message.packed), False, stream, message.state

    def cancel(self) -> None:
        """End the epoch now; its workers stop too unless they are persistent."""
        self._finished = True
        if self._stop_group is not None:
            self._stop_group()
