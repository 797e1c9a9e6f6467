"""What ``worker_type="auto"`` measures of a loader's batches, epoch after epoch.

:class:`Measurements` keeps the figures :func:`dataloader._auto.decide`
chooses by: what a batch costs to load, the consumer's own time, and a
batch every how many seconds each kind of worker delivered. A kind's
measured interval stands in for its prediction while items cost about as
much (within 2x) and for ``MEASUREMENT_EPOCHS`` epochs after its own.

An interval is taken over one epoch, while the rest of the machine does
what it does: an epoch measured during a burst of other programs' work
can be several times slower than the kind is. Such a measurement is
judged against what the kind was expected to deliver (its own earlier
measurement, else the prediction the epoch was chosen by): an outlier
(``OUTLIER`` times slower) is set aside once, the figures the loader
chose by stay, and the kind is measured again; its next measurement
stands, whatever it is. A burst over one epoch costs no epoch on the
slower kind; a kind that is really slower costs one more epoch on it.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["MEASUREMENT_EPOCHS", "OUTLIER", "Measurements", "batch_nbytes", "cpu_demand_ns"]

#: A kind's measured interval holds for this many epochs after its own; then
#: the prediction stands in again, so that an epoch slowed by the rest of the
#: machine does not keep the loader off that kind for good.
MEASUREMENT_EPOCHS = 4
#: A measured interval this many times slower than the kind was expected to
#: deliver is an outlier: set aside once (see ``Measurements.add_interval``).
OUTLIER = 1.5


def cpu_demand_ns() -> int:
    """The calling thread's time on a CPU or waiting for one, in nanoseconds.

    On a busy machine an item that computes also waits for a core; the
    wait belongs to its CPU time, not to waiting on I/O, or a computing
    dataset would look like one that waits and get too many workers.
    Linux reports both in ``/proc/thread-self/schedstat``; elsewhere it is
    the thread's CPU time alone.
    """
    try:
        with open("/proc/thread-self/schedstat", "rb") as stat:
            on_cpu, runnable, _ = stat.read().split()
        return int(on_cpu) + int(runnable)
    except (OSError, ValueError):
        return time.thread_time_ns()


def batch_nbytes(batch: Any) -> int:
    """The bytes of the arrays and tensors in ``batch`` (nested lists, tuples and dicts).

    Examples
    --------
    >>> import numpy as np
    >>> batch_nbytes({"image": np.zeros((2, 4), np.uint8), "label": [np.zeros(2)]})
    24
    """
    if isinstance(batch, dict):
        return sum(batch_nbytes(value) for value in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(batch_nbytes(value) for value in batch)
    nbytes = getattr(batch, "nbytes", None)
    return nbytes if isinstance(nbytes, int) else 0


@dataclass
class Measurements:
    """What a loader measured of its batches, over its epochs (seconds are per batch)."""

    #: Loading one batch on one thread (the calling thread's batch 0).
    load_seconds: float | None = None
    #: The share of ``load_seconds`` on a CPU or waiting for one (the rest
    #: waits for I/O, a sleep).
    cpu_share: float = 1.0
    #: The share of ``load_seconds`` in Python code, holding the interpreter.
    python_share: float = 1.0
    batch_bytes: int = 0
    #: The consumer's own work between two batches.
    consumer_seconds: float = 0.0
    #: The share of the epoch's time the consumer waited in ``next()``.
    wait_share: float | None = None
    #: A batch every how many seconds, measured on each kind, with the
    #: ``load_seconds`` of its epoch and the epoch's number (a measurement
    #: holds while items cost about as much, for a few epochs: see ``interval``).
    intervals: dict[str, tuple[float, float, int]] = dataclasses.field(default_factory=dict)
    #: The interval of each kind whose last measurement was an outlier, set
    #: aside until the kind is measured again (see ``add_interval``).
    set_aside: dict[str, float] = dataclasses.field(default_factory=dict)
    #: The epochs measured so far.
    epochs: int = 0
    #: Starting worker processes until their first batch.
    startup_seconds: float | None = None
    #: Loading one batch on worker threads, warm (batch 0 pays for first
    #: calls), with ``load_seconds`` and the epoch, as ``intervals`` are.
    thread_load: tuple[float, float, int] | None = None

    def add_load(self, seconds: float, cpu_seconds: float, python_seconds: float,
                 nbytes: int) -> None:
        """Record a batch loaded on the calling thread."""
        self.load_seconds = seconds
        if seconds > 0:
            self.cpu_share = min(cpu_seconds / seconds, 1.0)
            self.python_share = min(python_seconds / seconds, 1.0)
        self.batch_bytes = max(self.batch_bytes, nbytes)

    def add_interval(self, kind: str, seconds: float, expected: float | None = None) -> bool:
        """Record a batch every ``seconds`` delivered on ``kind`` this epoch, unless it is
        an outlier; say whether it was recorded.

        An outlier is ``OUTLIER`` times slower than the kind's own earlier
        measurement (while items cost about as much, however many epochs
        ago) or, without one, than ``expected``, the interval the epoch was
        chosen by; and than the consumer's own work between batches in the
        same epoch, which no kind delivers faster than. It is set aside
        once: the figures stay as they were, so the next epoch runs on the
        same kind and measures it again, and that measurement is recorded
        whatever it is.

        Examples
        --------
        >>> measured = Measurements(load_seconds=0.025)
        >>> measured.add_interval("process", 0.012)
        True
        >>> measured.add_interval("process", 0.05)  # four times slower: measured again
        False
        >>> measured.interval("process")
        0.012
        >>> measured.add_interval("process", 0.045)  # slow again: it stands
        True
        >>> measured.interval("process")
        0.045
        """
        earlier = self._comparable(self.intervals.get(kind))
        reference = earlier if earlier is not None else expected
        if reference is not None:
            reference = max(reference, self.consumer_seconds)
        if reference is not None and seconds > OUTLIER * reference and kind not in self.set_aside:
            self.set_aside[kind] = seconds
            return False
        self.set_aside.pop(kind, None)
        self.intervals[kind] = (seconds, self.load_seconds or 0.0, self.epochs)
        return True

    def interval(self, kind: str) -> float | None:
        """The interval measured on ``kind``, if its items cost within 2x of today's
        and it was measured within the last ``MEASUREMENT_EPOCHS`` epochs."""
        return self._current(self.intervals.get(kind))

    def add_thread_load(self, seconds: float) -> None:
        """Record loading a batch on worker threads this epoch, warm."""
        self.thread_load = (seconds, self.load_seconds or 0.0, self.epochs)

    def warm_load(self) -> float:
        """Loading one batch once warm: the least of batch 0's and what worker threads
        measured (as long as it holds, as an interval does)."""
        load = self.load_seconds or 0.0
        warm = self._current(self.thread_load)
        return load if warm is None else min(load, warm)

    def _current(self, record: tuple[float, float, int] | None) -> float | None:
        """``record``'s figure, if its items cost within 2x of today's and it was
        measured within the last ``MEASUREMENT_EPOCHS`` epochs."""
        figure = self._comparable(record)
        if record is None or self.epochs - record[2] > MEASUREMENT_EPOCHS:
            return None
        return figure

    def _comparable(self, record: tuple[float, float, int] | None) -> float | None:
        """``record``'s figure, if its items cost within 2x of today's."""
        if record is None:
            return None
        figure, load, _ = record
        now = self.load_seconds or 0.0
        return figure if 0.5 * load <= now <= 2 * load else None
