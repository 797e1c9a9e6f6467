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

Interpreter exit (see ``docs/execution.md``, "Closing and exit"): once
``begin_exit()`` is called, every wait for workers (``Pool.shutdown``,
``wait_bound``, ``stop_every_pool``) ends by one deadline,
``EXIT_WAIT_SECONDS`` away, however many loaders wait. A thread still in a
task then (a slow ``__getitem__``) is left to the runtime: a thread that
attaches while the interpreter finalizes is stopped by it, and the tasks
check ``may_attach()`` before they attach, so that none attaches through
``PyGILState_Ensure`` (``with gil:``) late in finalization, where it
would crash instead of stopping. Before 3.14 the runtime stops such a
thread with ``pthread_exit``, which aborts the process when the thread was
in C++ code that released the GIL (torch's operators): an exit that
leaves threads behind makes ``std::terminate`` park them instead
(``abandon_threads``), as CPython 3.14 parks them.
"""
import threading
import weakref

from cpython.exc cimport PyErr_SetFromErrno
from libc.errno cimport ETIMEDOUT
from libc.stdlib cimport abort
from posix.dlfcn cimport RTLD_LAZY, dlopen, dlsym
from posix.time cimport timespec
from posix.unistd cimport pause

from dataloader._core._sync cimport (
    dl_cond_init_monotonic, dl_deadline_after, dl_monotonic_seconds, pthread_cond_broadcast,
    pthread_cond_t, pthread_cond_timedwait, pthread_mutex_destroy, pthread_mutex_init,
    pthread_mutex_lock, pthread_mutex_t, pthread_mutex_unlock,
)

cdef extern from "dl_python.h" nogil:
    void dl_thread_enter_interpreter(int index)
    int dl_thread_may_leave_interpreter()
    void dl_thread_leave_interpreter()
    int dl_current_thread_index()
    int dl_interpreter_finalizing()

cdef extern from "<dlfcn.h>" nogil:
    const int RTLD_NOLOAD

ctypedef void (*fork_handler)() noexcept nogil

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    pthread_t pthread_self()
    int pthread_equal(pthread_t a, pthread_t b)
    int pthread_atfork(fork_handler prepare, fork_handler parent, fork_handler child)

ctypedef void (*terminate_handler)() noexcept nogil
ctypedef terminate_handler (*set_terminate_fn)(terminate_handler) noexcept nogil

# Stack size of a pool thread: as deep as the main thread's default, so
# recursion in a dataset goes as far on a worker as on the main thread.
cdef size_t STACK_BYTES = 8 * 1024 * 1024

# The most threads one pool starts. Threads past a few per core help only
# items that wait on I/O (item_concurrency), each wait typically holding a
# file or a socket, and 1024 is Linux's default limit of open files per
# process; at this limit the pool's stacks already reserve 8 GiB
# (STACK_BYTES each), which a strict overcommit policy charges in full.
MAX_THREADS = 1024

# How long closing a loader waits, in all, for worker threads still in a
# task (user code) before it leaves them to finish it on their own.
CLOSE_WAIT_SECONDS = 30.0
# The same at interpreter exit, for every loader together: a user who ends
# a script or presses Ctrl-C gets the prompt back, whatever the dataset does.
EXIT_WAIT_SECONDS = 1.0

cdef long _fork_generation = 0

# The exit's deadline (dl_monotonic_seconds), 0 until the exit begins; the
# thread that began it; and, once the exit abandons threads, std::terminate's
# handler before ours (abandon_threads).
cdef double _exit_deadline = 0.0
cdef pthread_t _exiting_thread
cdef bint _parking = False
cdef terminate_handler _previous_terminate = NULL

# Pool threads of every pool in this process that hold an interpreter thread
# state: counted from their start hook to the end of their stop hook, so the
# exit waits for threads of pools already shut down (and of loaders gone) too.
cdef pthread_mutex_t _threads_lock
cdef pthread_cond_t _thread_left  # broadcast when the count drops
cdef int _threads_inside = 0


cdef void _init_thread_count() noexcept nogil:
    global _threads_inside
    pthread_mutex_init(&_threads_lock, NULL)
    dl_cond_init_monotonic(&_thread_left)
    _threads_inside = 0


_init_thread_count()

# Every pool not yet freed, for the exit to shut down those still running.
_pools = weakref.WeakSet()


cdef long fork_generation() noexcept nogil:
    return _fork_generation


cdef int current_thread_index() noexcept nogil:
    """The calling pool thread's index, or -1 on any other thread."""
    return dl_current_thread_index()


cdef bint may_attach() noexcept nogil:
    """Whether a pool thread may attach to the interpreter: not once it is finalizing.

    A task that finds it may not leaves its references (they go with the
    interpreter) and returns without touching a Python object.
    """
    return not dl_interpreter_finalizing()


cdef void _after_fork_in_child() noexcept nogil:
    global _fork_generation
    _fork_generation += 1
    # The parent's threads do not exist here; its lock may have been held.
    _init_thread_count()


# Inside fork() itself, not through os.register_at_fork: on a free-threaded
# build the child frees objects whose references the parent's other threads
# held (merging their counts) before any Python-level fork hook runs, and a
# loader freed then would shut down its pool, whose threads are the parent's
# (waking them would wait forever), unless the generation has changed already.
pthread_atfork(NULL, NULL, _after_fork_in_child)


def begin_exit():
    """Start the interpreter's exit: waits for workers end ``EXIT_WAIT_SECONDS`` from now.

    Called on the thread that finalizes the interpreter. Later calls keep
    the first deadline, so that loaders closed one after the other at exit
    share it.
    """
    global _exit_deadline, _exiting_thread
    if _exit_deadline == 0.0:
        _exit_deadline = dl_monotonic_seconds() + EXIT_WAIT_SECONDS
        _exiting_thread = pthread_self()


def abandon_threads():
    """The exit leaves threads in user code: have the C++ runtime park them, not abort.

    A thread left in C++ code that released the GIL (a worker in a torch
    operator at the exit's deadline) attaches again through a destructor;
    before 3.14 the runtime ends it with ``pthread_exit``, whose unwinding
    reaches that ``noexcept`` destructor and calls ``std::terminate``,
    aborting the whole process. ``_park_or_terminate`` parks it instead,
    until the process ends. Only a C++ runtime loaded already is changed
    (without one no C++ code runs), once, and only after ``begin_exit``.
    """
    global _previous_terminate, _parking
    cdef set_terminate_fn set_terminate
    cdef void* runtime
    if _parking or _exit_deadline == 0.0:
        return
    # The handle is kept: the library stays as long as the handler.
    runtime = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD)
    if runtime == NULL:
        return
    set_terminate = <set_terminate_fn> dlsym(runtime, "_ZSt13set_terminatePFvvE")
    if set_terminate != NULL:
        _parking = True
        _previous_terminate = set_terminate(_park_or_terminate)


cdef void _park_or_terminate() noexcept nogil:
    """``std::terminate``'s handler once the exit abandons threads: a thread stopped by
    the runtime while the interpreter finalizes is parked for good (the process is
    ending); any other terminates as it would have."""
    if dl_interpreter_finalizing() and not pthread_equal(pthread_self(), _exiting_thread):
        while True:
            pause()
    if _previous_terminate != NULL:
        _previous_terminate()
    abort()


cpdef double wait_bound(double seconds):
    """``seconds``, or what is left of the exit's deadline once the interpreter exits.

    A negative ``seconds`` (forever) is the time left as well. A wait that
    starts while the interpreter finalizes (a finalizer run by the
    collector) begins the exit if nothing has.
    """
    cdef double left
    if _exit_deadline == 0.0 and dl_interpreter_finalizing():
        begin_exit()
    if _exit_deadline == 0.0:
        return seconds
    left = max(_exit_deadline - dl_monotonic_seconds(), 0.0)
    return left if seconds < 0 else min(seconds, left)


def stop_every_pool(double seconds):
    """At exit: shut down every pool still running, without waiting, then wait until no
    pool thread of this process is in the interpreter, up to ``seconds``
    (``wait_bound``). ``True`` when none is."""
    cdef timespec deadline
    cdef double limit
    cdef bint timed_out = False
    for pool in list(_pools):
        pool.shutdown(0.0)
    limit = wait_bound(seconds)
    with nogil:
        dl_deadline_after(&deadline, limit)
        pthread_mutex_lock(&_threads_lock)
        while _threads_inside > 0 and not timed_out:
            timed_out = pthread_cond_timedwait(&_thread_left, &_threads_lock,
                                               &deadline) == ETIMEDOUT
        timed_out = _threads_inside > 0
        pthread_mutex_unlock(&_threads_lock)
    return not timed_out


cdef void _count_thread(int change) noexcept nogil:
    global _threads_inside
    pthread_mutex_lock(&_threads_lock)
    _threads_inside += change
    if change < 0:
        pthread_cond_broadcast(&_thread_left)
    pthread_mutex_unlock(&_threads_lock)


cdef void _thread_start(void* ctx, int index) noexcept nogil:
    _count_thread(1)
    dl_thread_enter_interpreter(index)


cdef void _thread_stop(void* ctx, int index) noexcept nogil:
    if dl_thread_may_leave_interpreter():
        with gil:
            _forget_dummy_thread()
        dl_thread_leave_interpreter()
    # Out of the interpreter either way (while it finalizes, the thread state is
    # left to the runtime and the thread touches nothing of it any more).
    _count_thread(-1)


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
        _pools.add(self)

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
        for the threads to exit, unless called from one of them; once the
        interpreter exits, no later than the exit's deadline (``wait_bound``).
        Threads still in a task then finish it on their own. Returns
        ``True`` when every thread has exited. Calling it again does nothing.
        """
        cdef dl_pool_t* pool
        # None, or no bound at all (inf, which no deadline can hold), waits for them.
        cdef double seconds = wait_bound(
            -1.0 if timeout is None or timeout == float("inf") else timeout)
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
