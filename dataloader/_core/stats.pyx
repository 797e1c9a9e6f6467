"""Stage counters and the timed loading of one batch.

A ``Row`` holds, for one thread, the count and nanoseconds of each stage
(fetch, transform, collate, consumer wait). Each thread writes only its own
row, so counting needs no lock; the clock is ``CLOCK_MONOTONIC`` read
without the interpreter (the clock of ``time.perf_counter_ns``), and
adding to a row is a C addition, so timing costs a few tens of nanoseconds
per stage. ``dataloader._stats`` sums the rows.
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


cpdef object load_batch(object recipe, object indices, Row row, bint consumer):
    """``recipe``'s fetch, transform and collate of one batch, each stage timed into ``row``.

    ``recipe`` is a ``BatchRecipe``. With ``consumer``, the whole load also
    counts as the consumer's wait (the direct path loads while it waits).
    """
    cdef int64_t started = now_ns()
    cdef int64_t stage_end
    cdef Py_ssize_t count
    if not recipe.batched:
        items = recipe.getitem(indices)
        count = 1
    else:
        items = recipe.fetch_items(indices)
        count = len(indices)
    stage_end = record(row, FETCH_COUNT, count, started)
    assemble = recipe.assemble
    if assemble is not None:
        # Transform and collation in one step: each item into its batch slot.
        batch = assemble(indices, items)
        stage_end = record(row, TRANSFORM_COUNT, count, stage_end)
        if consumer:
            row.values[WAIT_COUNT] += 1
            row.values[WAIT_NS] += stage_end - started
        return batch
    transform = recipe.transform
    if transform is not None:
        if recipe.batched:
            items = list(map(transform, indices, items))
        else:
            items = transform(indices, items)
        stage_end = record(row, TRANSFORM_COUNT, count, stage_end)
    batch = recipe.collate(items)
    stage_end = record(row, COLLATE_COUNT, 1, stage_end)
    if consumer:
        row.values[WAIT_COUNT] += 1
        row.values[WAIT_NS] += stage_end - started
    return batch
