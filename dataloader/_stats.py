"""Per-stage throughput figures of one loader: ``loader.stats()``.

Every stage of a batch (fetch, transform, collate) and every ``next()`` of
the consumer is timed with ``time.perf_counter_ns`` and added to a row of
counters. Each thread writes only its own row (row 0 is the consumer, row
``i + 1`` is pool thread ``i``), so counting needs no lock, and the cost
is a few integer additions per batch. Reading sums the rows; a read while
workers run may miss the batch being counted, never corrupt a total.
"""

from __future__ import annotations

from time import perf_counter_ns
from typing import Any

__all__ = ["STAGES", "Stats", "perf_counter_ns"]

# Column layout of a row: (count, nanoseconds) per stage, in this order.
STAGES = ("fetch", "transform", "collate", "wait")
FETCH_COUNT, FETCH_NS, TRANSFORM_COUNT, TRANSFORM_NS = 0, 1, 2, 3
COLLATE_COUNT, COLLATE_NS, WAIT_COUNT, WAIT_NS = 4, 5, 6, 7
_COLUMNS = 2 * len(STAGES)


def new_row() -> list[int]:
    return [0] * _COLUMNS


class Stats:
    """The counters of one loader, kept across its epochs.

    Rows are added (on the consumer thread, when a pool starts) but never
    removed or replaced, so a worker may keep a reference to its row.
    """

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[list[int]] = [new_row()]

    @property
    def consumer(self) -> list[int]:
        return self.rows[0]

    def ensure_threads(self, n_threads: int) -> None:
        """Make sure pool threads ``0 .. n_threads - 1`` have rows."""
        while len(self.rows) < n_threads + 1:
            self.rows.append(new_row())

    def snapshot(self) -> dict[str, Any]:
        """Totals over every row (see ``DataLoader.stats``)."""
        totals = [sum(column) for column in zip(*list(self.rows))]
        return {
            stage: {"count": totals[2 * i], "seconds": totals[2 * i + 1] * 1e-9}
            for i, stage in enumerate(STAGES)
        }
