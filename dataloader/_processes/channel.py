"""One epoch's traffic between the consumer thread and a worker group's I/O thread.

The consumer posts requests (batches of indices, the sampler's end) and
takes replies; the group's I/O thread assigns each batch its position,
sends it to its worker and stores the reply. In order, as torch's, batch
``p`` of the epoch goes to worker ``p % num_workers`` (each worker loads its
batches in turn, so which worker loads what is the same on every run);
with ``in_order=False``, to the least busy worker. Only the I/O
thread reads or writes the pipes, and only the consumer thread takes
replies, so a ``KeyboardInterrupt`` -- raised in the consumer thread alone
-- can never cut a message in half; at worst it loses the batch being
returned, as on threads.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

__all__ = ["Channel"]


class Channel:
    """What an epoch's consumer and its group's I/O thread share (``condition`` guards it).

    Attributes
    ----------
    token : int
        The epoch's identity in requests and replies.
    results : dict
        Replies not yet taken, ``position -> (worker_id, message)``;
        ``worker_id`` is -1 for a batch whose indices failed their check.
    ordered : bool
        The epoch delivers in sampler order (``in_order``).
    first : int
        The epoch's batches delivered before this channel's first (a
        resumed epoch's): position ``p`` here is the epoch's batch ``first + p``.
    arrivals : deque
        Positions in the order their replies arrived (unordered epochs).
    assigned : int
        Positions handed out so far (I/O thread).
    end : int or None
        The epoch's number of batches, once the sampler has ended.
    death : Exception or None
        Why the group stopped serving (a worker died).
    """

    def __init__(self, token: int, size: int, ordered: bool, first: int = 0) -> None:
        self.token = token
        self.ordered = ordered
        self.first = first
        self.condition = threading.Condition()
        self.results: dict[int, tuple[int, Any]] = {}
        self.arrivals: collections.deque[int] = collections.deque()
        self.assigned = 0
        self.end: int | None = None
        self.death: BaseException | None = None
        self._in_flight = [0] * size
        self._owner: dict[int, int] = {}
        self._next_worker = 0

    # -- the I/O thread's side ---------------------------------------------

    def assign(self) -> int:
        """The next batch's position."""
        position = self.assigned
        self.assigned += 1
        return position

    def worker_for(self, position: int) -> int:
        """The worker that loads batch ``position``: in order, the epoch's batch
        ``first + position`` modulo the workers (torch's rule); else the least busy.

        Examples
        --------
        >>> channel = Channel(token=0, size=3, ordered=True, first=4)
        >>> [channel.worker_for(position) for position in range(4)]
        [1, 2, 0, 1]
        """
        if self.ordered:
            return (self.first + position) % len(self._in_flight)
        return self._least_busy()

    def _least_busy(self) -> int:
        """The worker with the fewest batches in flight, taking turns among equals."""
        size = len(self._in_flight)
        order = [(self._next_worker + step) % size for step in range(size)]
        worker_id = min(order, key=self._in_flight.__getitem__)
        self._next_worker = (worker_id + 1) % size
        return worker_id

    def dispatch(self, position: int, worker_id: int) -> None:
        """Record that ``worker_id`` loads batch ``position``."""
        with self.condition:
            self._in_flight[worker_id] += 1
            self._owner[position] = worker_id

    def store(self, position: int, worker_id: int, message: Any) -> None:
        """Keep a reply for the consumer and wake it."""
        with self.condition:
            if worker_id >= 0:
                self._in_flight[worker_id] -= 1
                self._owner.pop(position, None)
            self.results[position] = (worker_id, message)
            if not self.ordered:
                self.arrivals.append(position)
            self.condition.notify_all()

    def finish(self) -> None:
        """The sampler has ended: the epoch has ``assigned`` batches."""
        with self.condition:
            self.end = self.assigned
            self.condition.notify_all()

    def fail(self, death: BaseException) -> None:
        """The group can serve no more; wake the consumer to raise ``death``."""
        with self.condition:
            self.death = death
            self.condition.notify_all()

    # -- the consumer's side -----------------------------------------------

    def loading(self, worker_id: int) -> list[int]:
        """The positions ``worker_id`` was loading, in order."""
        with self.condition:
            return sorted(position for position, owner in self._owner.items()
                          if owner == worker_id)
