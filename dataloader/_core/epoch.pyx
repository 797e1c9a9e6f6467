"""The threaded epoch engine: a window of batches loaded on the pool.

Data flow (see ``docs/architecture.md``, "The threaded epoch"):

* The consumer thread pulls batches of indices from the sampler, at most
  ``window`` ahead of the batch it delivers, and submits one task per batch
  (or ``item_concurrency`` lane tasks per batch, and one per pool thread for the
  first batch) to the pool.
* Batches wait in a queue, in submission order, for a runner: a pool task
  that attaches once and claims queued batches one after the other, loading
  each whole (``load.load_batch``; a stream's fetched batch by
  ``load.load_fetched``) and publishing it in its slot, until the queue is
  empty. It then detaches and stays awake for up to ``DL_SPIN_NS``
  (``_idle``), attaching again for the batches queued meanwhile once the
  consumer has detached to wait for one; one that saw no batch then ends,
  and one at a time stays awake. A new runner starts only when more
  batches wait than runners are free to claim them and none is awake (at
  most one per pool thread): when the consumer queues a batch, when a
  runner claims one while the consumer is away, and when the consumer's
  spin ends without a hand-off: a worker keeping up attaches once per run.
* Lanes share a batch: each claims the batch's next item, attaching once
  per item (``load.load_lane_item``); the last lane to finish collates
  (``load.collate_lanes``) and publishes.
* The consumer delivers slots in sampler order (``in_order``) or in
  completion order, waiting as every engine does (``consumer.Consumer``).

Locking rule: ``mutex`` guards every field of ``slots`` and the counters
below; it is held only for a few instructions and no thread ever waits to
attach to the interpreter while holding it, so holding the interpreter
while taking it cannot deadlock. Python objects of a slot (its indices,
items and result) live in Python lists that the collector can see; slot
``s`` is written only by the tasks of the batch that occupies it.
"""
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from libc.stdlib cimport calloc, free, malloc

from dataloader._core._sync cimport (
    DL_ATTACHED_ONE_AT_A_TIME, dl_peek_int, dl_peek_ssize, dl_spin_again,
    dl_spin_start, dl_spin_t, pthread_mutex_lock, pthread_mutex_unlock,
)
from dataloader._core.consumer cimport Consumer
from dataloader._core.load cimport (
    Fetched, Recipe, collate_lanes, load_batch, load_fetched, load_lane_item,
)
from dataloader._core.pool cimport Pool, current_thread_index, fork_generation, may_attach
from dataloader._core.stats cimport Row

from dataloader._core.load import EMPTY_BATCH
from dataloader._errors import (
    BATCH, CHECK, COLLATE, ITEM, EpochClosedError, LoadingContext, add_context,
)


cdef enum SlotState:
    SLOT_FREE
    SLOT_PENDING
    SLOT_DONE


cdef struct Slot:
    SlotState state
    Py_ssize_t position     # the batch's place in the epoch
    # Item lanes (item_concurrency > 1):
    Py_ssize_t n_items
    Py_ssize_t next_item    # the next item a lane claims
    Py_ssize_t failed_item  # lowest failing item position, or -1
    int lanes
    int lanes_done


cdef struct Task:
    PyObject* epoch         # a reference owned by the task
    Py_ssize_t slot         # a lane's batch (a runner claims its batches)
    bint lane


cdef inline void _ring_push(Py_ssize_t* ring, Py_ssize_t head, Py_ssize_t* count,
                            Py_ssize_t window, Py_ssize_t slot) noexcept nogil:
    """Append ``slot`` to a ring of ``window`` entries starting at ``head``."""
    ring[(head + count[0]) % window] = slot
    count[0] += 1


cdef inline Py_ssize_t _ring_pop(Py_ssize_t* ring, Py_ssize_t* head, Py_ssize_t* count,
                                 Py_ssize_t window) noexcept nogil:
    """The ring's first slot, taken out of it, or -1 when it is empty."""
    if count[0] == 0:
        return -1
    cdef Py_ssize_t slot = ring[head[0]]
    head[0] = (head[0] + 1) % window
    count[0] -= 1
    return slot


cdef class Epoch(Consumer):
    """One threaded epoch: the consumer's side and the workers' side.

    Parameters
    ----------
    pool : Pool
    plan : EpochPlan
        What the epoch loads and how (``dataloader._loading.plans``):
        ``recipe`` (a ``load.Recipe``), ``batches`` (the sampler's batches
        of indices, or single indices, or a stream's ``Fetched`` batches),
        ``check_indices`` (validates what the sampler yielded, on the
        consumer thread, or ``None``), ``window`` (batches in flight or
        waiting to be delivered, at most), ``item_concurrency`` (lanes per
        batch; 1 loads a batch in one task unless ``item_lanes``),
        ``in_order``, ``timeout`` (seconds to wait for one batch before
        ``TimeoutError``; 0 is forever), ``worker_setup`` (called as
        ``worker_setup(thread_index)`` by a task before it loads), ``stats``
        (the loader's counters; a task adds to its own thread's row only)
        and ``item_lanes`` (load by lanes even when ``item_concurrency`` is
        1: async datasets, whose items must stop at the first one after a
        cancel).
    """

    cdef Slot* slots
    cdef Py_ssize_t* completed     # slots in completion order (in_order=False)
    cdef Py_ssize_t completed_head, completed_count
    cdef Py_ssize_t* queue         # slots waiting for a runner, in submission order
    cdef Py_ssize_t queue_head, queue_count
    # Runner tasks queued or running, and how many of them are loading a
    # batch (the others are about to claim one); at most max_runners. Of
    # those, `attached` are attached or attaching to the interpreter, `idle`
    # between runs (``_idle``): one of them stays awake at a time.
    cdef int runners, loading, max_runners, attached, idle
    cdef Py_ssize_t window, submitted, end_position
    cdef Py_ssize_t first           # the epoch's number of this engine's first batch
    cdef int item_concurrency
    cdef bint in_order, item_lanes, cancelled, finished
    cdef Pool pool
    cdef Recipe recipe
    cdef object batches, check_indices, worker_setup, sampler_error
    cdef object interrupted_indices, stats
    cdef list slot_indices, slot_items, slot_results, slot_failed
    cdef list slot_assembly        # the split first batch's ``recipe.slots(count)``, or None

    def __cinit__(self, Pool pool not None, plan):
        cdef Py_ssize_t window = plan.window
        self.slots = <Slot*> calloc(window, sizeof(Slot))
        self.completed = <Py_ssize_t*> calloc(window, sizeof(Py_ssize_t))
        self.queue = <Py_ssize_t*> calloc(window, sizeof(Py_ssize_t))
        if self.slots == NULL or self.completed == NULL or self.queue == NULL:
            raise MemoryError()
        self.pool = pool
        self.max_runners = pool.size
        self.recipe = plan.recipe
        self.batches = plan.batches
        self.check_indices = plan.check_indices
        self.worker_setup = plan.worker_setup
        self.stats = plan.stats
        self.consumer_row = plan.stats.rows[0]
        self.window = window
        self.item_concurrency = plan.item_concurrency
        self.in_order = plan.in_order
        self.item_lanes = plan.item_lanes
        self.timeout = plan.timeout
        self.end_position = -1
        self.first = getattr(plan, "first", 0)
        self.slot_indices = [None] * window
        self.slot_items = [None] * window
        self.slot_results = [None] * window
        self.slot_failed = [False] * window
        self.slot_assembly = [None] * window

    def __dealloc__(self):
        free(self.slots)
        free(self.completed)
        free(self.queue)

    # -- the consumer's side ------------------------------------------------

    def start(self):
        """Fill the window: called once by ``iter(loader)``."""
        self.check_same_process()
        self._refill()

    def cancel(self):
        """Stop the epoch: queued tasks skip their work, results are discarded, and a
        consumer waiting in ``next()`` (a pinning thread) gets ``StopIteration``."""
        if self.generation != fork_generation():
            return
        pthread_mutex_lock(&self.mutex)
        self.cancelled = True
        self.finished = True
        pthread_mutex_unlock(&self.mutex)
        self.wake()

    cdef _end(self):
        """The epoch has delivered its last batch: let go of what it loaded with.

        Runners may still hold the engine for a moment (one ends its spin, or
        waits for the interpreter, to drop its reference); without these
        references it keeps nothing of the loader alive, so a loader in a
        reference cycle is collected once its iterator is gone. Every batch
        has been delivered, so no task uses them; ``cancelled`` makes sure.
        """
        pthread_mutex_lock(&self.mutex)
        self.cancelled = True
        self.finished = True
        pthread_mutex_unlock(&self.mutex)
        self.recipe = None
        self.batches = self.check_indices = self.worker_setup = None

    cdef object take(self):
        # A batch whose every item was skipped (on_error="skip") is passed over.
        while True:
            result = self._next()
            if result is not EMPTY_BATCH:
                return result

    cdef _next(self):
        cdef Py_ssize_t slot
        if self.finished:
            raise StopIteration
        # Refilling first means an interrupt raised by the sampler (Ctrl-C)
        # can never lose a batch already taken from its slot.
        self._refill()
        if self.end_position == self.delivered:
            self._end()
            error, self.sampler_error = self.sampler_error, None
            if error is not None:
                raise error
            raise StopIteration
        slot = self.wait_ready()
        if self._is_cancelled():  # by another thread, while this one waited
            raise StopIteration
        result = self.slot_results[slot]
        failed = self.slot_failed[slot]
        self.slot_results[slot] = self.slot_indices[slot] = self.slot_items[slot] = None
        self.slot_assembly[slot] = None
        pthread_mutex_lock(&self.mutex)
        self.slots[slot].state = SLOT_FREE
        self.delivered += 1
        pthread_mutex_unlock(&self.mutex)
        if failed:
            raise result
        return result

    cdef bint busy(self) noexcept nogil:
        """Whether a runner is attached, on a build where it holds the GIL (mutex held)."""
        return DL_ATTACHED_ONE_AT_A_TIME and self.attached > 0

    cdef void spin_ended(self) noexcept:
        """The consumer's spin ended without a hand-off: a batch is taking long, so the
        batches queued behind it get runners of their own."""
        cdef bint start = True
        while start:
            pthread_mutex_lock(&self.mutex)
            start = self._another_runner()
            pthread_mutex_unlock(&self.mutex)
            if start:
                self._start_runner()

    cdef Py_ssize_t ready(self) noexcept nogil:
        """The slot to deliver next if its batch is done, else -1 (mutex held); once
        cancelled, any slot: the consumer then ends."""
        if self.cancelled:
            return 0
        if self.in_order:
            return self._ring_slot(self.delivered, SLOT_DONE)
        return _ring_pop(self.completed, &self.completed_head, &self.completed_count,
                         self.window)

    cdef Py_ssize_t _ring_slot(self, Py_ssize_t position, int state) noexcept nogil:
        """In order, batch ``position`` lives in slot ``position % window``: that slot if
        it is in ``state``, else -1 (mutex held)."""
        cdef Py_ssize_t slot = position % self.window
        return slot if self.slots[slot].state == state else -1

    cdef Py_ssize_t _free_slot(self) noexcept nogil:
        """A slot for the next batch, or -1 when the window is full (mutex held)."""
        cdef Py_ssize_t slot
        if self.in_order:
            return self._ring_slot(self.submitted, SLOT_FREE)
        for slot in range(self.window):
            if self.slots[slot].state == SLOT_FREE:
                return slot
        return -1

    cdef _refill(self):
        """Submit batches from the sampler until the window is full or it ends."""
        cdef Py_ssize_t slot
        while self.end_position < 0 and not self.finished:
            pthread_mutex_lock(&self.mutex)
            slot = self._free_slot()
            pthread_mutex_unlock(&self.mutex)
            if slot < 0:
                return
            if self.interrupted_indices is not None:
                indices, self.interrupted_indices = self.interrupted_indices, None
            else:
                try:
                    indices = next(self.batches)
                except StopIteration:
                    self.end_position = self.submitted
                    return
                except Exception as exc:
                    # Raised at its own position, after the batches before it.
                    self.end_position = self.submitted
                    self.sampler_error = exc
                    return
                except BaseException:
                    # Ctrl-C inside the sampler: raised now; a Python generator
                    # that raised cannot go on, so the epoch ends here.
                    self.cancel()
                    raise
            self._submit(slot, indices)

    cdef _submit(self, Py_ssize_t slot, indices):
        cdef Py_ssize_t position = self.submitted
        cdef int lanes
        cdef bint use_lanes, first
        checked = indices
        error = None
        if self.check_indices is not None:
            try:
                checked = self.check_indices(indices)
            except Exception as exc:
                add_context(exc, LoadingContext(CHECK, batch=self.first + position,
                                                indices=indices))
                error = exc
            except BaseException:
                # Ctrl-C: these indices are submitted by the next refill.
                self.interrupted_indices = indices
                raise
        self.submitted += 1
        pthread_mutex_lock(&self.mutex)
        self.slots[slot].state = SLOT_PENDING
        self.slots[slot].position = position
        pthread_mutex_unlock(&self.mutex)
        if error is not None:
            self._publish(slot, error, True)
            return
        self.slot_indices[slot] = checked
        # A stream's batch (Fetched) has its items already: never split into lanes. The
        # first goes to every pool thread if the recipe allows ("First batch", architecture.md).
        first = position == 0 and self.max_runners > 1 and self.recipe.split_first
        use_lanes = ((self.item_concurrency > 1 or self.item_lanes or first)
                     and self.recipe.batched and type(checked) is not Fetched)
        if not use_lanes:
            self._enqueue(slot)
            return
        lanes = max(1, min(max(self.item_concurrency, self.max_runners if first else 1),
                           len(checked)))
        self.slot_items[slot] = [None] * len(checked)
        if first and self.recipe.slots is not None:   # items straight into the batch
            self.slot_assembly[slot] = self.recipe.slots(len(checked))
        pthread_mutex_lock(&self.mutex)
        self.slots[slot].n_items = len(checked)
        self.slots[slot].next_item = 0
        self.slots[slot].failed_item = -1
        self.slots[slot].lanes = lanes
        self.slots[slot].lanes_done = 0
        pthread_mutex_unlock(&self.mutex)
        for _ in range(lanes):
            if not self._submit_task(slot, True):
                self._publish(slot, EpochClosedError("the DataLoader was closed"), True)
                return

    cdef _enqueue(self, Py_ssize_t slot):
        """Queue a batch for the runners, starting one if no runner is free to claim it."""
        cdef bint start
        cdef Py_ssize_t orphan
        pthread_mutex_lock(&self.mutex)
        _ring_push(self.queue, self.queue_head, &self.queue_count, self.window, slot)
        start = self._another_runner()
        pthread_mutex_unlock(&self.mutex)
        if not start or self._submit_task(-1, False):
            return
        # The pool is closed: with no runner left, nothing will claim the queue.
        while True:
            pthread_mutex_lock(&self.mutex)
            if start:
                self.runners -= 1
                start = False
            orphan = self._claim_batch() if self.runners == 0 else -1
            pthread_mutex_unlock(&self.mutex)
            if orphan < 0:
                return
            self._publish(orphan, EpochClosedError("the DataLoader was closed"), True)

    cdef bint _another_runner(self) noexcept nogil:
        """Whether to start a runner, counted already (mutex held): more batches wait than
        runners are free to claim them, and (with the GIL) no runner is idle: it claims
        them all."""
        if (self.runners < self.max_runners
                and (self.idle == 0 or not DL_ATTACHED_ONE_AT_A_TIME)
                and self.queue_count > self.runners - self.loading):
            self.runners += 1
            return True
        return False

    cdef Py_ssize_t _claim_batch(self) noexcept nogil:
        """The queue's first batch, taken out of it, or -1 when it is empty (mutex held)."""
        return _ring_pop(self.queue, &self.queue_head, &self.queue_count, self.window)

    cdef bint _submit_task(self, Py_ssize_t slot, bint lane):
        cdef Task* task = <Task*> malloc(sizeof(Task))
        if task == NULL:
            raise MemoryError()
        task.epoch = <PyObject*> self
        task.slot = slot
        task.lane = lane
        Py_INCREF(self)
        if self.pool.submit(_run_task, task) != 0:
            Py_DECREF(self)
            free(task)
            return False
        return True

    # -- the workers' side (interpreter attached) ---------------------------

    cdef _publish(self, Py_ssize_t slot, result, bint failed):
        """Store a batch's result and wake the consumer. Called at most once per batch."""
        cdef bint discard
        pthread_mutex_lock(&self.mutex)
        discard = self.cancelled
        pthread_mutex_unlock(&self.mutex)
        if not discard:
            self.slot_results[slot] = result
            self.slot_failed[slot] = failed
        pthread_mutex_lock(&self.mutex)
        self.slots[slot].state = SLOT_DONE
        if not self.in_order:
            _ring_push(self.completed, self.completed_head, &self.completed_count, self.window,
                       slot)
        pthread_mutex_unlock(&self.mutex)
        # After unlocking: a consumer woken here does not then sleep on the
        # mutex (this task holds a reference, so the epoch is still alive).
        self.wake()

    cdef bint _skipping(self, bint pool_cancelled) noexcept:
        return self._is_cancelled() or pool_cancelled

    cdef bint _is_cancelled(self) noexcept:
        cdef bint cancelled
        pthread_mutex_lock(&self.mutex)
        cancelled = self.cancelled
        pthread_mutex_unlock(&self.mutex)
        return cancelled

    cdef _note(self, BaseException exc, Py_ssize_t slot, str stage, index=None):
        """Attach the batch's context (and its note) to a worker's error."""
        add_context(exc, LoadingContext(
            stage, batch=self.first + self.slots[slot].position, indices=self.slot_indices[slot],
            index=index, worker=current_thread_index(),
        ))

    cdef void _run_batches(self, bint pool_cancelled) noexcept:
        """A runner's run: claim and load queued batches until the queue is empty."""
        cdef Py_ssize_t slot
        cdef bint skip, start, loaded = False, set_up = False
        cdef Row row = self._row()
        while True:
            # Shutting the pool down stops the batches still queued, as it
            # cancels the tasks still queued.
            pool_cancelled = pool_cancelled or not self.pool.accepting()
            pthread_mutex_lock(&self.mutex)
            if loaded:
                self.loading -= 1
            slot = self._claim_batch()
            if slot >= 0:
                self.loading += 1
            skip = self.cancelled or pool_cancelled
            # The batches still queued load in parallel while the consumer is
            # away; while it waits, once its spin ends (``spin_ended``).
            start = (slot >= 0 and not skip and not (DL_ATTACHED_ONE_AT_A_TIME and self.waiting)
                     and self._another_runner())
            pthread_mutex_unlock(&self.mutex)
            if slot < 0:
                return
            if start:
                self._start_runner()
            loaded = True
            if skip:
                self._publish(slot, EpochClosedError("the DataLoader was closed"), True)
                continue
            indices = self.slot_indices[slot]
            try:
                if not set_up:
                    # Once per thread and loader; a failure is retried by the next batch.
                    self.worker_setup(current_thread_index())
                    set_up = True
                if type(indices) is Fetched:
                    result = load_fetched(self.recipe, <Fetched> indices, row)
                else:
                    result = load_batch(self.recipe, indices, row)
            except BaseException as exc:
                self._note(exc, slot, BATCH)
                self._publish(slot, exc, True)
            else:
                self._publish(slot, result, False)
            indices = result = None

    cdef void _start_runner(self) noexcept:
        """Start a runner counted by ``_another_runner`` (unless the pool is closing)."""
        try:
            if self._submit_task(-1, False):
                return
        except MemoryError:
            pass
        pthread_mutex_lock(&self.mutex)
        self.runners -= 1
        pthread_mutex_unlock(&self.mutex)

    cdef Row _row(self):
        return self.stats.rows[current_thread_index() + 1]

    cdef bint _idle(self, bint* pool_cancelled) noexcept nogil:
        """A runner between runs, detached and awake for up to ``DL_SPIN_NS``.

        Returns whether it is to attach and run the queued batches (once
        the consumer waits for one, or at the end of the spin); else the
        runner has ended.
        """
        cdef int outcome = 2
        cdef bint expired, stopping
        cdef dl_spin_t spin
        dl_spin_start(&spin)
        pthread_mutex_lock(&self.mutex)
        # Another runner awake already: this one ends unless batches need it.
        expired = self.idle > 0
        self.idle += 1
        pthread_mutex_unlock(&self.mutex)
        while outcome == 2:
            pool_cancelled[0] = pool_cancelled[0] or not self.pool.accepting()
            # The mutex is taken only when there may be something to do.
            if not (expired or pool_cancelled[0] or dl_peek_int(<int*> &self.cancelled)
                    or (dl_peek_ssize(&self.queue_count) > 0
                        and (dl_peek_int(<int*> &self.waiting) or not DL_ATTACHED_ONE_AT_A_TIME))):
                expired = not dl_spin_again(&spin)
                continue
            pthread_mutex_lock(&self.mutex)
            stopping = expired or self.cancelled or pool_cancelled[0]
            # Batches that the runners already attached will not claim soon;
            # with the GIL, a second runner attaching at once would only wait
            # for the first to detach (unless its batches release the GIL,
            # which the end of the spin allows for).
            if (self.queue_count > self.attached - self.loading
                    and (stopping or ((self.waiting or not DL_ATTACHED_ONE_AT_A_TIME)
                                      and not self.busy()))):
                self.attached += 1
                outcome = 1
            elif stopping:  # what is queued, the attached runners claim
                self.runners -= 1
                outcome = 0
            if outcome != 2:
                self.idle -= 1
            pthread_mutex_unlock(&self.mutex)
            if outcome == 2 and not expired:
                expired = not dl_spin_again(&spin)
        return outcome == 1

    cdef void _detached(self) noexcept nogil:
        pthread_mutex_lock(&self.mutex)
        self.attached -= 1
        pthread_mutex_unlock(&self.mutex)
        self.wake()  # busy() may have changed

    cdef Py_ssize_t _claim_item(self, Py_ssize_t slot, bint pool_cancelled) noexcept nogil:
        """The next item of the slot's batch for a lane, or -1 when the lane is done."""
        cdef Py_ssize_t item = -1
        cdef Slot* state = &self.slots[slot]
        pthread_mutex_lock(&self.mutex)
        if (not self.cancelled and not pool_cancelled and state.failed_item < 0
                and state.next_item < state.n_items):
            item = state.next_item
            state.next_item += 1
        pthread_mutex_unlock(&self.mutex)
        return item

    cdef void _load_item(self, Py_ssize_t slot, Py_ssize_t item) noexcept:
        index = self.slot_indices[slot][item]
        try:
            self.worker_setup(current_thread_index())
            # SKIPPED_ITEM for an item dropped within on_error="skip"'s budget.
            self.slot_items[slot][item] = load_lane_item(
                self.recipe, index, self._row(), self.slot_assembly[slot], item)
        except BaseException as exc:
            self._note(exc, slot, ITEM, index)
            pthread_mutex_lock(&self.mutex)
            lowest = self.slots[slot].failed_item < 0 or item < self.slots[slot].failed_item
            if lowest:
                self.slots[slot].failed_item = item
            pthread_mutex_unlock(&self.mutex)
            if lowest:
                self.slot_items[slot][item] = exc

    cdef void _finish_lane(self, Py_ssize_t slot, bint pool_cancelled) noexcept:
        """Count a lane out; the last lane of a batch collates and publishes it."""
        cdef bint last
        cdef Py_ssize_t failed
        pthread_mutex_lock(&self.mutex)
        self.slots[slot].lanes_done += 1
        last = self.slots[slot].lanes_done == self.slots[slot].lanes
        failed = self.slots[slot].failed_item
        pthread_mutex_unlock(&self.mutex)
        if not last:
            return
        if failed >= 0:
            self._publish(slot, self.slot_items[slot][failed], True)
        elif self._skipping(pool_cancelled):
            self._publish(slot, EpochClosedError("the DataLoader was closed"), True)
        else:
            try:
                result = collate_lanes(self.recipe, self.slot_items[slot],
                                       self.slot_assembly[slot], self._row())
            except BaseException as exc:
                self._note(exc, slot, COLLATE)
                self._publish(slot, exc, True)
            else:
                self._publish(slot, result, False)


cdef void _run_task(void* arg, int pool_cancelled) noexcept nogil:
    """A pool task: a runner of whole batches, or one lane of a batch.

    Before each attach it checks ``may_attach()``: a task still running when
    the interpreter finalizes (abandoned at exit) ends there, leaving its
    reference to the epoch with the interpreter.
    """
    cdef Task* task = <Task*> arg
    cdef Py_ssize_t item
    cdef bint cancelled = pool_cancelled
    if not task.lane:
        while (<Epoch> task.epoch)._idle(&cancelled):
            if not may_attach():
                break
            with gil:
                (<Epoch> task.epoch)._run_batches(cancelled)
            (<Epoch> task.epoch)._detached()
        if may_attach():
            with gil:
                Py_DECREF(<object> task.epoch)
        free(task)
        return
    while may_attach():
        # Claiming needs no interpreter; each item attaches once.
        item = (<Epoch> task.epoch)._claim_item(task.slot, pool_cancelled)
        if item < 0:
            break
        with gil:
            (<Epoch> task.epoch)._load_item(task.slot, item)
    if may_attach():
        with gil:
            (<Epoch> task.epoch)._finish_lane(task.slot, pool_cancelled)
            Py_DECREF(<object> task.epoch)
    free(task)
