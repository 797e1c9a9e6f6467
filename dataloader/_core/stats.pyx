"""Stage counters and the timed loading of one batch.

A ``Row`` holds, for one thread, the count and nanoseconds of each stage
(fetch, transform, collate, consumer wait). Each thread writes only its own
row, so counting needs no lock; the clock is ``CLOCK_MONOTONIC`` read
without the interpreter (the clock of ``time.perf_counter_ns``), and
adding to a row is a C addition, so timing costs a few tens of nanoseconds
per stage. ``dataloader._loading.stats`` sums the rows.

Under ``on_error="skip"`` (``recipe.skip`` is a ``SkipBudget``), an item
whose fetch or transform raises an ``Exception`` is dropped from its batch
and counted in the ``SKIPPED`` columns; a batch left with no items is
``EMPTY_BATCH``, which the epochs pass over.
"""
from dataloader._core._typedefs cimport int64_t


# The result of a batch whose every item was skipped: never delivered.
EMPTY_BATCH = object()
# What ``load_item`` returns for an item it skipped.
SKIPPED_ITEM = object()
# ``load_item``'s ``value`` when the item is still to be fetched.
cdef object NOT_FETCHED = object()


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
    if recipe.skip is not None:
        return _load_skipping(recipe, indices, row, consumer)
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


cpdef object load_item(object recipe, object index, Row row, object value=NOT_FETCHED):
    """Fetch (unless ``value`` is given) and transform one item under ``on_error="skip"``.

    Returns the item, or ``SKIPPED_ITEM`` when it raised an ``Exception``
    that ``recipe.skip`` let it drop; an error beyond the budget (and any
    ``BaseException``, such as ``KeyboardInterrupt``) propagates.
    """
    cdef int64_t started = now_ns()
    try:
        if value is NOT_FETCHED:
            value = recipe.getitem(index)
            started = record(row, FETCH_COUNT, 1, started)
        if recipe.transform is not None:
            value = recipe.transform(index, value)
            record(row, TRANSFORM_COUNT, 1, started)
        return value
    except Exception as exc:
        if not recipe.skip.spend(exc, index):
            raise
        record(row, SKIPPED_COUNT, 1, started)
        return SKIPPED_ITEM


cdef object _load_skipping(object recipe, object indices, Row row, bint consumer):
    """``load_batch`` under ``on_error="skip"``: failing items are dropped and counted."""
    cdef int64_t started = now_ns()
    cdef int64_t stage_end
    cdef Py_ssize_t position
    fetched = None
    if recipe.batched and recipe.fetch is not None:
        # One failing item fails a whole __getitems__ call: the items are
        # then fetched one by one, so that only the failing ones are dropped.
        try:
            fetched = recipe.fetch_items(indices)
        except Exception:
            fetched = None
        else:
            record(row, FETCH_COUNT, len(indices), started)
    if recipe.batched:
        items = []
        for position in range(len(indices)):
            item = load_item(recipe, indices[position], row,
                             NOT_FETCHED if fetched is None else fetched[position])
            if item is not SKIPPED_ITEM:
                items.append(item)
        keep = len(items) > 0
    else:
        items = load_item(recipe, indices, row)
        keep = items is not SKIPPED_ITEM
    stage_end = now_ns()
    if keep:
        batch = recipe.collate(items)
        stage_end = record(row, COLLATE_COUNT, 1, stage_end)
    else:
        batch = EMPTY_BATCH
    if consumer:
        row.values[WAIT_COUNT] += 1
        row.values[WAIT_NS] += stage_end - started
    return batch
