"""The consumer's side of the threaded engines, shared by map-style and stream epochs.

``Consumer`` is the base of ``epoch.Epoch`` and ``stream.Stream``. It owns
what the consumer thread does the same way in both:

* ``next()`` refuses a second thread calling it at the same time, refuses
  an epoch started before ``os.fork()`` (its workers do not exist in the
  child), and counts the call and its duration in the consumer's ``WAIT``
  column;
* ``wait_ready()`` waits for the subclass's ``ready()`` without the
  interpreter: first awake for up to ``DL_SPIN_NS``, yielding the CPU
  between checks, then asleep on ``ready_cond`` in slices of at most
  100 ms so that signal handlers (Ctrl-C) run between slices, until
  ``timeout``.

A subclass implements ``ready()`` (with ``mutex`` held: a non-negative
value when something can be taken, -1 to keep waiting), ``take()`` (the
result of one ``next()``) and, optionally, ``busy()`` (with ``mutex``
held: whether a worker is attached to the interpreter, so that the
awake consumer takes what is ready once it has detached), and calls
``wake()`` when what ``ready()`` or ``busy()`` reads changes. ``waiting``
tells the workers the consumer is detached in ``wait_ready()``.
"""
from cpython.exc cimport PyErr_CheckSignals

from dataloader._core._sync cimport (
    dl_bump, dl_cond_init_monotonic, dl_deadline_after, dl_monotonic_seconds,
    dl_peek_int, dl_spin_again, dl_spin_start, dl_spin_t, pthread_cond_broadcast, pthread_cond_destroy,
    pthread_cond_timedwait, pthread_mutex_destroy, pthread_mutex_init, pthread_mutex_lock,
    pthread_mutex_unlock,
)
from dataloader._core._typedefs cimport int64_t
from dataloader._core.pool cimport fork_generation
from dataloader._core.stats cimport Row, WAIT_COUNT, now_ns, record
from dataloader._errors import STARTED_BEFORE_FORK, BatchTimeoutError
from posix.time cimport timespec


cdef double next_wait_slice(double started, double timeout, Py_ssize_t position) except -1.0:
    """Seconds to wait in the next slice, or ``BatchTimeoutError`` once ``timeout`` has passed.

    ``started`` is when the wait for batch ``position`` began; a ``timeout``
    of 0 waits forever. Slices are at most 100 ms, so that signal handlers
    (Ctrl-C) run between them.
    """
    cdef double longest_slice = 0.1
    cdef double waited
    if timeout <= 0:
        return longest_slice
    waited = dl_monotonic_seconds() - started
    if waited >= timeout:
        # Whole seconds as the user wrote them (torch's message says "after 1 seconds").
        shown = int(timeout) if timeout == int(timeout) else timeout
        raise BatchTimeoutError(
            f"DataLoader timed out after {shown} seconds waiting for "
            f"batch {position} (timeout={shown})"
        )
    return min(longest_slice, timeout - waited)


cdef class Consumer:
    """The consumer's side of a threaded epoch (see the module docstring)."""

    def __cinit__(self, *args, **kwargs):
        pthread_mutex_init(&self.mutex, NULL)
        dl_cond_init_monotonic(&self.ready_cond)
        self.sync_ready = True
        self.generation = fork_generation()

    def __dealloc__(self):
        # Tasks own references to the engine, so none is running now. After
        # fork() the mutex may have been locked by a thread that is gone.
        if self.sync_ready and self.generation == fork_generation():
            pthread_mutex_destroy(&self.mutex)
            pthread_cond_destroy(&self.ready_cond)

    def next(self):
        """Deliver the next batch (or raise its error, or ``StopIteration``)."""
        cdef int64_t started
        self.check_same_process()
        pthread_mutex_lock(&self.mutex)
        if self.consuming:
            pthread_mutex_unlock(&self.mutex)
            raise RuntimeError("another thread is already calling next() on this DataLoader iterator")
        self.consuming = True
        pthread_mutex_unlock(&self.mutex)
        started = now_ns()
        try:
            return self.take()
        finally:
            record(self.consumer_row, WAIT_COUNT, 1, started)
            pthread_mutex_lock(&self.mutex)
            self.consuming = False
            pthread_mutex_unlock(&self.mutex)

    cdef int check_same_process(self) except -1:
        if self.generation != fork_generation():
            raise RuntimeError(STARTED_BEFORE_FORK)
        return 0

    cdef Py_ssize_t ready(self) noexcept nogil:
        return -1

    cdef bint busy(self) noexcept nogil:
        return False

    cdef void wake(self) noexcept nogil:
        """What ``ready()`` or ``busy()`` reads has changed: cue the awake consumer, wake a
        sleeping one. With or without ``mutex`` held."""
        dl_bump(&self.changes)
        pthread_cond_broadcast(&self.ready_cond)

    cdef object take(self):
        raise NotImplementedError

    cdef Py_ssize_t wait_ready(self) except -2:
        """Wait until ``ready()`` is non-negative and return it, or ``BatchTimeoutError``."""
        cdef Py_ssize_t found
        cdef bint ended
        cdef double started, slice_seconds
        cdef timespec deadline
        # What is ready already is returned without detaching.
        pthread_mutex_lock(&self.mutex)
        found = self.ready()
        pthread_mutex_unlock(&self.mutex)
        if found >= 0:
            return found
        started = dl_monotonic_seconds()
        with nogil:
            found = self._spin(&ended)
        if ended:
            self.spin_ended()
        while found < 0:
            slice_seconds = next_wait_slice(started, self.timeout, self.delivered)
            with nogil:
                dl_deadline_after(&deadline, slice_seconds)
                pthread_mutex_lock(&self.mutex)
                found = self.ready()
                if found < 0:
                    self.waiting = True
                    pthread_cond_timedwait(&self.ready_cond, &self.mutex, &deadline)
                    self.waiting = False
                    found = self.ready()
                pthread_mutex_unlock(&self.mutex)
            if found < 0:
                PyErr_CheckSignals()
                self.check_same_process()
        return found

    cdef void spin_ended(self) noexcept:
        """Called when a spin ended without a hand-off (a subclass may start workers)."""

    cdef Py_ssize_t _spin(self, bint* ended) noexcept nogil:
        """Detached and awake, up to ``DL_SPIN_NS``: what ``ready()`` gave, or -1.

        A hand-off within the spin costs no sleep. What is ready is taken
        once ``busy()`` is false, so that attaching again does not sleep
        until the worker detaches; at the end of the spin (``ended``) it is
        taken anyway.
        """
        cdef Py_ssize_t found = -1
        cdef bint done
        cdef int seen, changes = dl_peek_int(&self.changes)
        cdef dl_spin_t spin
        dl_spin_start(&spin)
        ended[0] = False
        while True:
            # The mutex is taken only when wake() was called since the last look.
            seen = changes
            pthread_mutex_lock(&self.mutex)
            if found < 0:
                found = self.ready()
            done = found >= 0 and not self.busy()
            self.waiting = not done
            pthread_mutex_unlock(&self.mutex)
            while not done and changes == seen:
                if dl_spin_again(&spin):
                    changes = dl_peek_int(&self.changes)
                else:
                    done = ended[0] = True
                    pthread_mutex_lock(&self.mutex)
                    self.waiting = False
                    pthread_mutex_unlock(&self.mutex)
            if done:
                return found


def wait_slice(double started, double timeout, Py_ssize_t position):
    """Seconds the consumer of batch ``position`` may wait next (``time.monotonic``'s
    clock), or ``BatchTimeoutError`` once ``timeout`` has passed since ``started``: the
    wait rule of every engine, for the worker-process epochs."""
    return next_wait_slice(started, timeout, position)
