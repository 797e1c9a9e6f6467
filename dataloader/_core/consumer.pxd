# The consumer's side of a threaded engine (consumer.pyx): epoch.pyx and
# stream.pyx derive from it.
from dataloader._core._sync cimport pthread_cond_t, pthread_mutex_t
from dataloader._core.stats cimport Row

cdef class Consumer:
    cdef pthread_mutex_t mutex      # guards the subclass's counters and `consuming`
    cdef pthread_cond_t ready_cond  # broadcast when something may be ready to take
    cdef bint consuming, sync_ready
    cdef bint waiting               # the consumer is detached, waiting in wait_ready()
    cdef int changes                # counts wake(): the awake consumer's cue to look again
    cdef readonly Py_ssize_t delivered
    cdef long generation
    cdef double timeout
    cdef Row consumer_row

    cdef int check_same_process(self) except -1
    cdef Py_ssize_t ready(self) noexcept nogil
    cdef bint busy(self) noexcept nogil
    cdef void wake(self) noexcept nogil
    cdef void spin_ended(self) noexcept
    cdef Py_ssize_t _spin(self, bint* ended) noexcept nogil
    cdef object take(self)
    cdef Py_ssize_t wait_ready(self) except -2
