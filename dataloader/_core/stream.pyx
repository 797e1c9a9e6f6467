"""The streaming engine: worker threads iterating streams, batches in arrival order or by turn.

Data flow (see ``docs/architecture.md``, "The streaming epoch"):

* Each stream (one ``iter(dataset)``) is owned by one producer task, which
  occupies a pool thread for the whole epoch. Before each batch it reserves
  room in the window, waiting without the interpreter; then it attaches,
  lets its cursor fetch the batch's items (``dataloader._loading.streaming``)
  and transforms and collates them (``load.load_fetched``), appends the entry to ``results`` and wakes
  the consumer.
* The consumer takes entries in arrival order, waiting as every engine
  does (``consumer.Consumer``).
  With the plan's ``in_order`` it takes them by turn instead, as torch
  does: batch ``j`` of every stream before batch ``j + 1`` of any, streams
  in index order, an ended stream leaving the rotation; each stream then
  has its own share of the window, so that the stream whose turn it is
  always has room. The order is a function of the streams' batches alone,
  and a resumed epoch continues it from the batches each stream had
  delivered (the plan's ``delivered_by_stream``).
* The epoch ends when every producer has finished and every entry has
  been taken.

Locking rule (as in ``epoch.pyx``): ``mutex`` guards the counters below;
it is held for a few instructions, and no thread waits to attach to the
interpreter while holding it. ``results`` is a deque touched only with the
interpreter attached: a producer appends before it counts the entry ready,
so the consumer always finds as many entries as ``ready_count`` says. By
turn, ``queues[s]`` plays that part for stream ``s`` and ``queued[s]``
counts its ready entries.
"""
from collections import deque

from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from libc.stdlib cimport calloc, free, malloc

from dataloader._core._sync cimport (
    dl_cond_init_monotonic, pthread_cond_broadcast, pthread_cond_destroy, pthread_cond_t,
    pthread_mutex_lock, pthread_mutex_t, pthread_mutex_unlock,
)
from dataloader._core.consumer cimport Consumer
from dataloader._core.load cimport Fetched, Recipe, load_fetched
from dataloader._core.pool cimport Pool, current_thread_index, fork_generation, may_attach

from dataloader._errors import STREAM_START, EpochClosedError, LoadingContext, add_context

# The state of an entry that carries an error of the engine itself: the
# stream's saved state stays as it was.
_KEEP = None


cdef extern from "<pthread.h>" nogil:
    int pthread_cond_wait(pthread_cond_t* cond, pthread_mutex_t* mutex)


cdef struct StreamTask:
    PyObject* engine        # a reference owned by the task
    Py_ssize_t stream


cdef class Stream(Consumer):
    """One streaming epoch on a pool: one producer task per stream.

    Parameters
    ----------
    pool : Pool
    cursors : list
        One cursor per stream: ``open()``, ``fetch(row)`` (the next batch's
        ``Fetched`` items, or ``None``), ``ended`` and ``close()``.
    recipe : Recipe
        How a stream's fetched items become a batch (``load.load_fetched``).
    window : int
        Batches being produced or waiting to be taken, at most.
    plan : StreamPlan
        ``timeout`` (seconds to wait for one batch before ``TimeoutError``;
        0 is forever), ``worker_setup`` (called as
        ``worker_setup(thread_index)`` before a stream opens), ``stats``
        (the loader's counters; a producer adds to its own thread's row
        only), ``in_order`` (deliver by turn, see the module docstring) and
        ``delivered_by_stream`` (each stream's batches delivered before a
        resume, where its turns continue).
    """

    cdef pthread_cond_t room
    cdef Py_ssize_t window, reserved, ready_count, live
    cdef bint cancelled, finished
    cdef Pool pool
    cdef Recipe recipe
    cdef list cursors
    cdef object results, worker_setup, stats
    # By turn: per stream (index s), guarded by mutex except queues (the
    # interpreter): entries ready, room held (reserved or ready), batches
    # taken, and whether its producer has finished. ``turn`` is written by
    # the consumer's ready() and read by its take().
    cdef bint in_order
    cdef Py_ssize_t n_streams, stream_window, turn
    cdef list queues
    cdef Py_ssize_t* queued
    cdef Py_ssize_t* held
    cdef Py_ssize_t* took
    cdef bint* done

    def __cinit__(self, Pool pool not None, list cursors not None, Recipe recipe not None,
                  Py_ssize_t window, plan):
        cdef Py_ssize_t s, n = len(cursors)
        dl_cond_init_monotonic(&self.room)
        self.pool = pool
        self.cursors = cursors
        self.recipe = recipe
        self.window = max(window, 1)
        self.timeout = plan.timeout
        self.worker_setup = plan.worker_setup
        self.stats = plan.stats
        self.consumer_row = plan.stats.rows[0]
        self.results = deque()
        self.in_order = plan.in_order
        self.n_streams = n
        self.stream_window = max(self.window // max(n, 1), 1)
        self.queues = [deque() for _ in range(n)]
        self.queued = <Py_ssize_t*> calloc(max(n, 1), sizeof(Py_ssize_t))
        self.held = <Py_ssize_t*> calloc(max(n, 1), sizeof(Py_ssize_t))
        self.took = <Py_ssize_t*> calloc(max(n, 1), sizeof(Py_ssize_t))
        self.done = <bint*> calloc(max(n, 1), sizeof(bint))
        if not (self.queued and self.held and self.took and self.done):
            raise MemoryError()
        if self.in_order:
            delivered = plan.delivered_by_stream
            for s in range(n):
                self.took[s] = delivered[s]

    def __dealloc__(self):
        # After fork() the condition may be held by a thread that is gone.
        if self.sync_ready and self.generation == fork_generation():
            pthread_cond_destroy(&self.room)
        free(self.queued)
        free(self.held)
        free(self.took)
        free(self.done)

    def start(self):
        """Submit one producer task per stream."""
        cdef Py_ssize_t stream
        cdef StreamTask* task
        for stream in range(len(self.cursors)):
            task = <StreamTask*> malloc(sizeof(StreamTask))
            if task == NULL:
                self.cancel()
                raise MemoryError()
            task.engine = <PyObject*> self
            task.stream = stream
            Py_INCREF(self)
            pthread_mutex_lock(&self.mutex)
            self.live += 1
            pthread_mutex_unlock(&self.mutex)
            if self.pool.submit(_run_producer, task) != 0:
                Py_DECREF(self)
                free(task)
                pthread_mutex_lock(&self.mutex)
                self.live -= 1
                pthread_mutex_unlock(&self.mutex)
                self.cancel()
                raise EpochClosedError("the DataLoader was closed")

    def cancel(self):
        """Stop the epoch: producers stop after their current batch, entries are dropped."""
        if self.generation != fork_generation():
            return
        pthread_mutex_lock(&self.mutex)
        self.cancelled = True
        self.finished = True
        pthread_cond_broadcast(&self.room)
        self.wake()
        pthread_mutex_unlock(&self.mutex)

    cdef object take(self):
        cdef bint ended
        if self.wait_ready() == 0:
            self.finished = True
            pthread_mutex_lock(&self.mutex)
            ended = self.live == 0
            pthread_mutex_unlock(&self.mutex)
            if ended:
                # No producer uses them any more; one may still hold the
                # engine for a moment (on a build without the GIL), and
                # through them it would hold the dataset and collate_fn.
                self.cursors = []
                self.recipe = None
                self.worker_setup = None
            raise StopIteration
        self.delivered += 1
        if self.in_order:
            return self.queues[self.turn].popleft()
        return self.results.popleft()

    cdef Py_ssize_t ready(self) noexcept nogil:
        """1 when an entry was taken, 0 at the end, -1 to keep waiting (mutex held)."""
        if self.finished:
            return 0
        if self.in_order:
            return self._ready_by_turn()
        if self.ready_count > 0:
            self.ready_count -= 1
            self.reserved -= 1
            pthread_cond_broadcast(&self.room)
            return 1
        return 0 if self.live == 0 else -1

    cdef Py_ssize_t _ready_by_turn(self) noexcept nogil:
        """``ready()`` by turn (mutex held): the stream with the fewest batches taken
        (the lowest index of those) that may still give one has the next batch."""
        cdef Py_ssize_t s, turn = -1
        for s in range(self.n_streams):
            if self.done[s] and self.queued[s] == 0:
                continue
            if turn < 0 or self.took[s] < self.took[turn]:
                turn = s
        if turn < 0:
            return 0
        if self.queued[turn] == 0:
            return -1
        self.queued[turn] -= 1
        self.held[turn] -= 1
        self.took[turn] += 1
        self.ready_count -= 1
        self.reserved -= 1
        self.turn = turn
        pthread_cond_broadcast(&self.room)
        return 1

    # -- the producers' side ------------------------------------------------

    cdef bint _reserve(self, Py_ssize_t stream) noexcept nogil:
        """Wait for room in the window (by turn: the stream's share) and take it;
        False once the epoch is cancelled."""
        cdef bint ok
        pthread_mutex_lock(&self.mutex)
        if self.in_order:
            while self.held[stream] >= self.stream_window and not self.cancelled:
                pthread_cond_wait(&self.room, &self.mutex)
        else:
            while self.reserved >= self.window and not self.cancelled:
                pthread_cond_wait(&self.room, &self.mutex)
        ok = not self.cancelled
        if ok:
            self.reserved += 1
            self.held[stream] += 1
        pthread_mutex_unlock(&self.mutex)
        return ok

    cdef bint _open(self, Py_ssize_t stream, bint pool_cancelled) noexcept:
        """Prepare the thread and start the stream; False when there is nothing to run."""
        if pool_cancelled or self._is_cancelled():
            return False
        cursor = self.cursors[stream]
        try:
            self.worker_setup(current_thread_index())
            cursor.open()
        except BaseException as exc:
            add_context(exc, LoadingContext(STREAM_START, stream=stream))
            # The error takes room like a batch (beyond the window: it is one entry).
            pthread_mutex_lock(&self.mutex)
            self.reserved += 1
            self.held[stream] += 1
            pthread_mutex_unlock(&self.mutex)
            self._publish(stream, (exc, True, stream, _KEEP), True)
            return False
        return True

    cdef bint _is_cancelled(self) noexcept:
        cdef bint cancelled
        pthread_mutex_lock(&self.mutex)
        cancelled = self.cancelled
        pthread_mutex_unlock(&self.mutex)
        return cancelled

    cdef bint _produce(self, Py_ssize_t stream) noexcept:
        """Load the stream's next batch into the reserved room; False when the stream ended."""
        cursor = self.cursors[stream]
        row = self.stats.rows[current_thread_index() + 1]
        try:
            # An error of the stream's iterator ends the stream; one of
            # transform or collate_fn fails its batch only (load_fetched).
            fetched = cursor.fetch(row)
            entry = None if fetched is None else load_fetched(self.recipe, <Fetched> fetched, row)
            ended = cursor.ended
        except BaseException as exc:
            entry = (exc, True, stream, _KEEP)
            ended = True
        self._publish(stream, entry, entry is not None)
        return not ended

    cdef void _publish(self, Py_ssize_t stream, entry, bint has_entry) noexcept:
        """Hand an entry to the consumer, or give back the room reserved for it."""
        if has_entry and not self._is_cancelled():
            if self.in_order:
                self.queues[stream].append(entry)
            else:
                self.results.append(entry)
            pthread_mutex_lock(&self.mutex)
            self.ready_count += 1
            self.queued[stream] += 1
            self.wake()
            pthread_mutex_unlock(&self.mutex)
            return
        pthread_mutex_lock(&self.mutex)
        self.reserved -= 1
        self.held[stream] -= 1
        pthread_cond_broadcast(&self.room)
        pthread_mutex_unlock(&self.mutex)

    cdef void _finish(self, Py_ssize_t stream) noexcept:
        try:
            self.cursors[stream].close()
        except BaseException:
            pass
        pthread_mutex_lock(&self.mutex)
        self.live -= 1
        self.done[stream] = True
        self.wake()
        pthread_mutex_unlock(&self.mutex)


cdef void _run_producer(void* arg, int pool_cancelled) noexcept nogil:
    """A pool task: iterate one stream until it ends or the epoch is cancelled.

    As the map-style engine's tasks, it attaches only while ``may_attach()``:
    once the interpreter finalizes, it ends leaving its reference behind.
    """
    cdef StreamTask* task = <StreamTask*> arg
    cdef bint running = False
    if may_attach():
        with gil:
            running = (<Stream> task.engine)._open(task.stream, pool_cancelled)
    while running:
        # Waiting for room needs no interpreter; each batch attaches once.
        if not (<Stream> task.engine)._reserve(task.stream) or not may_attach():
            break
        with gil:
            running = (<Stream> task.engine)._produce(task.stream)
    if may_attach():
        with gil:
            (<Stream> task.engine)._finish(task.stream)
            Py_DECREF(<object> task.engine)
    free(task)
