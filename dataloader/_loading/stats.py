"""Per-stage throughput figures of one loader: ``loader.stats()``.

Every stage of a batch (fetch, transform, collate) and the consumer's wait
in ``next()`` are timed on the monotonic clock and added to a ``Row`` of
counters (``dataloader._core.stats``). Each thread writes only its own row
(row 0 is the consumer, row ``i + 1`` is pool thread ``i``), so counting
needs no lock, and the cost is a few clock reads and C additions per
batch. Reading sums the rows; a read while workers run may miss the batch
being counted, never corrupt a total.
"""

from __future__ import annotations

from typing import Any

from dataloader._core import stats as _native
from dataloader._core.stats import Row, monotonic_ns

__all__ = [
    "COLLATE",
    "FETCH",
    "SKIPPED",
    "STAGES",
    "TRANSFORM",
    "WAIT",
    "Stats",
    "monotonic_ns",
]

# A row's columns, declared in ``_core/stats.pxd``: (count, nanoseconds) per
# stage, in order; the constants are the count columns that ``Row.add``
# takes. ``skipped`` counts the items dropped by ``on_error="skip"`` and the
# time spent on them until they failed.
_COUNTS = sorted((value, name) for name, value in vars(_native).items()
                 if name.endswith("_COUNT"))
STAGES = tuple(name.removesuffix("_COUNT").lower() for _, name in _COUNTS)
FETCH, TRANSFORM, COLLATE, WAIT, SKIPPED = (value for value, _ in _COUNTS)


class Stats:
    """The counters of one loader, kept across its epochs.

    Rows are added (on the consumer thread, when a pool starts) but never
    removed or replaced, so a worker may keep a reference to its row.
    """

    __slots__ = ("consumer_ns", "remote", "returned_at", "rows")

    def __init__(self) -> None:
        self.rows: list[Row] = [Row()]
        # What worker processes counted, added as their replies arrive.
        self.remote = Row()
        # The consumer's own time between batches (between a next() returning
        # and the next call, within an epoch), and when next() last returned.
        self.consumer_ns = 0
        self.returned_at = 0

    def asked(self) -> None:
        """The consumer called ``next()``: the time since the last batch was its own."""
        if self.returned_at:
            self.consumer_ns += monotonic_ns() - self.returned_at

    def answered(self, more: bool) -> None:
        """``next()`` returned a batch (``more``) or ended the epoch."""
        self.returned_at = monotonic_ns() if more else 0

    def wait_share(self) -> float | None:
        """The share of the consumer's time spent waiting in ``next()``."""
        waited = self.rows[0].totals()[WAIT + 1]
        total = waited + self.consumer_ns
        return waited / total if total else None

    def add_remote(self, totals: tuple[int, ...]) -> None:
        """Add a worker process's counters (a row's ``totals()``, as a difference)."""
        for column in range(0, len(totals), 2):
            if totals[column] or totals[column + 1]:
                self.remote.add(column, totals[column], totals[column + 1])

    def ensure_threads(self, n_threads: int) -> None:
        """Make sure pool threads ``0 .. n_threads - 1`` have rows."""
        while len(self.rows) < n_threads + 1:
            self.rows.append(Row())

    def snapshot(self) -> dict[str, Any]:
        """Totals over every row (see ``DataLoader.stats``)."""
        rows = [row.totals() for row in [*self.rows, self.remote]]
        totals = [sum(column) for column in zip(*rows, strict=True)]
        return {
            stage: {"count": totals[2 * i], "seconds": totals[2 * i + 1] * 1e-9}
            for i, stage in enumerate(STAGES)
        }
