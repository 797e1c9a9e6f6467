"""The worker thread pool: pthreads that live inside the interpreter.

A ``Pool`` owns a fixed set of named pthreads (``dataloader-N``, 8 MiB
stacks) running C tasks from one FIFO queue (``src/dl_pool.c``). Each thread
holds one interpreter thread state for its whole life (``src/dl_python.h``),
so a task attaches with ``with gil:`` cheaply, and detaches whenever it does
native work.

Forks: a child process has none of its parent's threads. Every pool and
epoch records the fork generation it was made in; after ``os.fork()`` the
child's generation changes, and objects of an older generation are
abandoned without touching their (possibly locked) mutexes.
"""
import os
import threading

from cpython.exc cimport PyErr_SetFromErrno

from dataloader._core._sync cimport (
    pthread_mutex_destroy, pthread_mutex_init, pthread_mutex_lock, pthread_mutex_unlock,
)

cdef extern from "dl_python.h" nogil:
    void dl_thread_enter_interpreter(int index)
    int dl_thread_may_leave_interpreter()
    void dl_thread_leave_interpreter()
    int dl_current_thread_index()

# Stack size of a pool thread: as deep as the main thread's default, so
# recursion in a dataset goes as far on a worker as on the main thread.
cdef size_t STACK_BYTES = 8 * 1024 * 1024

# The most threads one pool starts. Threads past a few per core help only
# items that wait on I/O (item_concurrency), each wait typically holding a
# file or a socket, and 1024 is Linux's default limit of open files per
# process; at this limit the pool's stacks already reserve 8 GiB
# (STACK_BYTES each), which a strict overcommit policy charges in full.
MAX_THREADS = 1024

cdef long _fork_generation = 0


cdef long fork_generation() noexcept nogil:
    return _fork_generation


cdef int current_thread_index() noexcept nogil:
    """The calling pool thread's index, or -1 on any other thread."""
    return dl_current_thread_index()


def _after_fork_in_child():
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


cdef void _thread_start(void* ctx, int index) noexcept nogil:
    dl_thread_enter_interpreter(index)


cdef void _thread_stop(void* ctx, int index) noexcept nogil:
    if not dl_thread_may_leave_interpreter():
        return
    with gil:
        _forget_dummy_thread()
    dl_thread_leave_interpreter()


cdef void _forget_dummy_thread() noexcept:
    # Code that called threading.current_thread() on this pool thread left a
    # _DummyThread in threading's registry; it would outlive the thread.
    try:
        entry = threading._active.get(threading.get_ident())
        if isinstance(entry, threading._DummyThread):
            del threading._active[threading.get_ident()]
    except BaseException:
        pass


cdef class Pool:
    """A fixed-size pool of worker pthreads.

    Parameters
    ----------
    size : int
        The number of threads, started at once.
    """

    def __cinit__(self, int size):
        if not 1 <= size <= MAX_THREADS:
            raise ValueError(f"a pool has 1 to {MAX_THREADS} threads, got size={size}")
        cdef dl_pool_hooks_t hooks
        hooks.thread_start = _thread_start
        hooks.thread_stop = _thread_stop
        hooks.ctx = NULL
        self.size = size
        self.generation = _fork_generation
        pthread_mutex_init(&self._lock, NULL)
        with nogil:
            self._pool = dl_pool_create(size, STACK_BYTES, b"dataloader-", hooks)
        if self._pool == NULL:
            PyErr_SetFromErrno(OSError)

    @property
    def alive(self):
        """Whether the pool accepts tasks: not shut down, and made in this process."""
        return self.accepting()

    cdef bint accepting(self) noexcept nogil:
        """Whether tasks may still be submitted (a task's loop stops claiming work when not)."""
        cdef bint running
        if self.generation != _fork_generation:
            return False  # the lock may be held by a thread that is gone
        # shutdown() may clear _pool on another thread (a finalizer).
        pthread_mutex_lock(&self._lock)
        running = self._pool != NULL
        pthread_mutex_unlock(&self._lock)
        return running

    cdef int submit(self, dl_task_fn fn, void* arg) noexcept:
        """Queue a task; -1 when the pool is shut down (``arg`` stays the caller's)."""
        cdef int status = -1
        if self.generation != _fork_generation:
            return -1
        pthread_mutex_lock(&self._lock)
        if self._pool != NULL:
            status = dl_pool_submit(self._pool, fn, arg)
        pthread_mutex_unlock(&self._lock)
        return status

    def shutdown(self, timeout=None):
        """Stop the threads once their current task ends; queued tasks are cancelled.

        Waits (without holding the interpreter) up to ``timeout`` seconds
        for the threads to exit, unless called from one of them. Returns
        ``True`` when every thread has exited. Calling it again does nothing.
        """
        cdef dl_pool_t* pool
        cdef double seconds = -1.0 if timeout is None else timeout
        cdef int timed_out
        if self.generation != _fork_generation:
            # Inherited through fork(): the lock may be held by a parent's
            # thread, the pool's threads belong to the parent.
            self._pool = NULL
            return True
        pthread_mutex_lock(&self._lock)
        pool = self._pool
        self._pool = NULL
        pthread_mutex_unlock(&self._lock)
        if pool == NULL:
            return True
        if dl_pool_owns_current_thread(pool):
            dl_pool_shutdown(pool, 0, 0.0)
            return False
        with nogil:
            timed_out = dl_pool_shutdown(pool, 1, seconds)
        return not timed_out

    def __dealloc__(self):
        # Never block here: the owner shuts the pool down and waits; this
        # only makes sure the threads stop if the owner did not.
        if self.generation != _fork_generation:
            return
        if self._pool != NULL:
            dl_pool_shutdown(self._pool, 0, 0.0)
        pthread_mutex_destroy(&self._lock)
