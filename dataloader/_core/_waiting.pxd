# How a consumer waits for a batch: in slices of at most 100 ms, so that
# signal handlers (Ctrl-C) run between slices, until `timeout`.
from dataloader._core._sync cimport dl_monotonic_seconds


cdef inline double next_wait_slice(double started, double timeout,
                                   Py_ssize_t position) except -1.0:
    """Seconds to wait in the next slice, or ``TimeoutError`` once ``timeout`` has passed.

    ``started`` is when the wait for batch ``position`` began; a ``timeout``
    of 0 waits forever.
    """
    cdef double longest_slice = 0.1
    cdef double waited
    if timeout <= 0:
        return longest_slice
    waited = dl_monotonic_seconds() - started
    if waited >= timeout:
        raise TimeoutError(
            f"DataLoader timed out after {timeout} seconds waiting for "
            f"batch {position} (timeout={timeout})"
        )
    return min(longest_slice, timeout - waited)
