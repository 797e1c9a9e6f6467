# Per-thread stage counters (stats.pyx): one Row per thread, written only by it.
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

from dataloader._core._typedefs cimport int64_t

cdef enum:  # the columns of a Row: (count, nanoseconds) per stage
    FETCH_COUNT
    FETCH_NS
    TRANSFORM_COUNT
    TRANSFORM_NS
    COLLATE_COUNT
    COLLATE_NS
    WAIT_COUNT
    WAIT_NS
    SKIPPED_COUNT   # items dropped by on_error="skip", and the time spent on them
    SKIPPED_NS
    N_COLUMNS

cdef class Row:
    cdef int64_t values[10]   # N_COLUMNS


cdef inline int64_t now_ns() noexcept nogil:
    """The monotonic clock (``time.perf_counter_ns``'s), without the interpreter."""
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return <int64_t> now.tv_sec * 1000000000 + now.tv_nsec


cdef inline int64_t record(Row row, int stage, int64_t count, int64_t since) noexcept:
    """Add ``count`` and the time since ``since`` to ``stage``; return the time now."""
    cdef int64_t now = now_ns()
    row.values[stage] += count
    row.values[stage + 1] += now - since
    return now

