"""Stage counters: each thread's count and time of each loading stage.

A ``Row`` holds, for one thread, the count and nanoseconds of each stage
(fetch, transform, collate, consumer wait). Each thread writes only its own
row, so counting needs no lock; the clock is ``CLOCK_MONOTONIC`` read
without the interpreter (the clock of ``time.perf_counter_ns``), and
adding to a row is a C addition, so timing costs a few tens of nanoseconds
per stage. The loading routine that adds to the rows is ``load.pyx``;
``dataloader._loading.stats`` sums them.
"""
from dataloader._core._typedefs cimport int64_t


def monotonic_ns():
    """The clock of every ``Row``, in nanoseconds."""
    return now_ns()


cdef class Row:
    """One thread's counters: ``(count, nanoseconds)`` per stage."""

    def add(self, int column, int64_t count, int64_t nanoseconds):
        """Add ``count`` to ``column`` and ``nanoseconds`` to the one after it."""
        if not 0 <= column < N_COLUMNS - 1 or column % 2:
            raise ValueError(f"column should be the even index of a stage, got {column}")
        self.values[column] += count
        self.values[column + 1] += nanoseconds

    def totals(self):
        """The counters as a tuple (a read may miss an addition in progress)."""
        cdef int i
        return tuple([self.values[i] for i in range(N_COLUMNS)])
