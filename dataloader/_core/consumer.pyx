"""The consumer's side of the threaded engines, shared by map-style and stream epochs.

``Consumer`` is the base of ``epoch.Epoch`` and ``stream.Stream``. It owns
what the consumer thread does the same way in both:

* ``next()`` refuses a second thread calling it at the same time, refuses
  an epoch started before ``os.fork()`` (its workers do not exist in the
  child), and counts the call and its duration in the consumer's ``WAIT``
  column;
* ``wait_ready()`` waits for the subclass's ``ready()`` without the
  interpreter, in slices of at most 100 ms so that signal handlers
  (Ctrl-C) run between slices, until ``timeout``.

A subclass implements ``ready()`` (with ``mutex`` held: a non-negative
value when something can be taken, -1 to keep waiting) and ``take()`` (the
result of one ``next()``), and broadcasts ``ready_cond`` when what
``ready()`` reads changes.
"""
from cpython.exc cimport PyErr_CheckSignals

from dataloader._core._sync cimport (
    dl_cond_init_monotonic, dl_deadline_after, dl_monotonic_seconds, pthread_cond_destroy,
    pthread_cond_timedwait, pthread_mutex_destroy, pthread_mutex_init, pthread_mutex_lock,
    pthread_mutex_unlock,
)
from dataloader._core._typedefs cimport int64_t
from dataloader._core._waiting cimport next_wait_slice
from dataloader._core.pool cimport fork_generation
from dataloader._core.stats cimport Row, WAIT_COUNT, now_ns, record
from posix.time cimport timespec


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
            raise RuntimeError(
                "this DataLoader epoch was started before os.fork(); its workers do not "
                "exist in the child process: start a new epoch with iter(loader)"
            )
        return 0

    cdef Py_ssize_t ready(self) noexcept nogil:
        return -1

    cdef object take(self):
        raise NotImplementedError

    cdef Py_ssize_t wait_ready(self) except -2:
        """Wait until ``ready()`` is non-negative and return it; ``TimeoutError`` after ``timeout``."""
        cdef Py_ssize_t found
        cdef double started, slice_seconds
        cdef timespec deadline
        # What is ready already is returned without detaching.
        pthread_mutex_lock(&self.mutex)
        found = self.ready()
        pthread_mutex_unlock(&self.mutex)
        started = dl_monotonic_seconds()
        while found < 0:
            slice_seconds = next_wait_slice(started, self.timeout, self.delivered)
            with nogil:
                dl_deadline_after(&deadline, slice_seconds)
                pthread_mutex_lock(&self.mutex)
                found = self.ready()
                if found < 0:
                    pthread_cond_timedwait(&self.ready_cond, &self.mutex, &deadline)
                    found = self.ready()
                pthread_mutex_unlock(&self.mutex)
            if found < 0:
                PyErr_CheckSignals()
                self.check_same_process()
        return found


def wait_slice(double started, double timeout, Py_ssize_t position):
    """Seconds the consumer of batch ``position`` may wait next (``time.monotonic``'s
    clock), or ``TimeoutError`` once ``timeout`` has passed since ``started``: the
    wait rule of every engine, for the worker-process epochs."""
    return next_wait_slice(started, timeout, position)
