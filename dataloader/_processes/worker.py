"""What a worker process runs: requests in, batches out through its slots.

A worker holds its own copy of the loader's :class:`WorkerSpec` (inherited
by ``fork``, or unpickled under ``spawn`` / ``forkserver``) and loads
whole batches with the engine's one loading routine
(``dataloader._core.load``) -- with ``item_concurrency`` lanes on its own
small pool of threads when asked. It answers the consumer's requests in
order, over its pipe, as :mod:`dataloader._processes.protocol` declares
them: :class:`BeginEpoch` binds an epoch's transform and collate function
(a new worker was seeded as it started, before ``worker_init_fn``; a
persistent one whose seeds follow the loader's seed reseeds ``random``,
numpy and torch for each later epoch; a streaming worker starts its
stream afresh, from its saved state on resume); :class:`Load` loads a
batch into the lowest free slot (see :mod:`dataloader._processes.transport`)
and answers :class:`Loaded` or :class:`Failed`, or for a streaming worker
:class:`Streamed` with the stream's state after the batch (as on threads,
``dataloader._loading.streaming``); :class:`Stop` ends it. Slots come back
in :class:`GiveBack` whenever the consumer releases batches: the worker
reads every message waiting before it chooses a slot, so a batch released
while it was busy frees its slot for the next one.

The worker ignores Ctrl-C (the consumer stops it) and never outlives the
consumer's process, whatever it is doing when that process dies -- loading
an item, in ``worker_init_fn``, waiting, or sending a batch nobody reads:
a watchdog thread, started before ``worker_init_fn``, waits on the
consumer's process (a pidfd) and ends this one the moment it exits; the
kernel's parent-death signal kills it too, even inside C code holding the
GIL, where the thread that started it lives as long as the consumer
(:class:`Consumer`); and its pipe reaches end of file (see "Worker
processes" in ``docs/architecture.md``).
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import gc
import os
import random
import select
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.reduction import sendfds
from typing import Any

import numpy as np

from dataloader._core.epoch import Epoch
from dataloader._core.load import EMPTY_BATCH, load_batch, load_fetched
from dataloader._core.pool import Pool
from dataloader._datasets.asynchronous import is_async_dataset
from dataloader._datasets.event_loop import EventLoop
from dataloader._datasets.hooks import announce_epoch
from dataloader._datasets.worker_info import (
    WorkerInfo,
    answer_torch_worker_info,
    get_worker_info,
    set_process_worker,
)
from dataloader._errors import BATCH, STREAM_START, LoadingContext, add_context
from dataloader._loading.collate import batch_allocator
from dataloader._loading.fetch import SkipBudget, bind_map_epoch
from dataloader._loading.plans import EpochPlan
from dataloader._loading.stats import Stats
from dataloader._loading.streaming import Cursor, bind_stream_epoch, drops_partial
from dataloader._loading.worker import use_one_torch_thread
from dataloader._processes.protocol import (
    BeginEpoch,
    Failed,
    GiveBack,
    InitFailed,
    Load,
    Loaded,
    Ready,
    RemoteError,
    SlotShared,
    Stop,
    Streamed,
)
from dataloader._processes.transport import SlotWriter, explained_descriptor_limit
from dataloader._sampling.seeding import worker_base_seed

__all__ = ["Consumer", "StreamSpec", "WorkerSpec", "run", "seed_globals"]

# Where the kernel has no pidfd: how often the watchdog looks for the consumer.
_WATCHDOG_POLL_SECONDS = 0.25
# prctl(2)'s option for the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1
# The exit status of a worker whose consumer is gone (nobody reads it).
_ORPHANED = 1


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """How a streaming worker batches its stream (what a ``Cursor`` reads of its plan)."""

    dataset: Any
    batch_size: int | None
    drop_last: bool


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """Everything a worker process needs of its loader (picklable for ``spawn``)."""

    dataset: Any
    transform: Any
    collate_fn: Any
    batched: bool
    worker_init_fn: Any
    num_workers: int
    base_seed: int
    # Whether each epoch's worker seeds are worker_base_seed(seed, epoch): a
    # persistent worker reseeds for its later epochs (dataloader.torch's,
    # drawn from torch like torch's, are not: its persistent workers go on).
    seeds_follow_seed: bool
    item_concurrency: int
    # Whether skipped items' errors go back to the consumer, whose budget decides.
    report_skipped: bool
    skipping: bool
    # An iterable-style dataset: each worker iterates its own stream.
    stream: StreamSpec | None = None
    # Slots per worker whose pages stay between batches: the batches in
    # flight, the one the consumer holds and one just released.
    kept_slots: int = 4

    @classmethod
    def of_loader(cls, loader: Any, base_seed: int, batched: bool, iterable: bool) -> WorkerSpec:
        """What ``loader``'s workers load with."""
        stream = None
        if iterable:
            stream = StreamSpec(loader.dataset, loader.batch_size, drops_partial(loader))
        return cls(
            dataset=loader.dataset, transform=loader.transform, collate_fn=loader.collate_fn,
            batched=batched, worker_init_fn=loader.worker_init_fn,
            num_workers=loader.num_workers, base_seed=base_seed,
            seeds_follow_seed=loader._worker_seeds_follow_seed(),
            item_concurrency=loader.item_concurrency,
            report_skipped=loader.max_skipped is not None, skipping=loader.on_error == "skip",
            stream=stream, kept_slots=loader.prefetch_factor + 2,
        )


@dataclass(frozen=True, slots=True)
class Consumer:
    """The process a worker serves, and never outlives.

    Attributes
    ----------
    pid : int
        The consumer's process id.
    is_parent : bool
        The consumer started the worker (``fork``, ``spawn``). Under
        ``forkserver`` the fork server did, which lives on while any of its
        children does: the worker watches the consumer itself.
    death_signal : bool
        The consumer started the worker on a thread that lives as long as
        its process (the main thread), so the kernel's parent-death signal,
        which follows that thread, not the process, may be armed.
    """

    pid: int
    is_parent: bool
    death_signal: bool


def run(spec: WorkerSpec, worker_id: int, conn: Any, consumer: Consumer) -> None:
    """The worker process's main function."""
    # What the parent held when it forked is never collected here: its
    # finalizers (a loader's, stopping threads this process does not have)
    # must not run in a copy, and collecting would only dirty shared pages.
    gc.freeze()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _never_outlive(consumer)
    use_one_torch_thread()
    batch_size = spec.stream.batch_size if spec.stream is not None else None
    seed = spec.base_seed + worker_id
    seed_globals(spec.base_seed, worker_id)
    info = WorkerInfo(worker_id, spec.num_workers, seed, spec.dataset, batch_size,
                      worker_method="multiprocessing")
    set_process_worker(info)
    answer_torch_worker_info()
    try:
        if spec.worker_init_fn is not None:
            spec.worker_init_fn(worker_id)
    except Exception as exc:  # noqa: BLE001 -- raised in the consumer
        conn.send(InitFailed(RemoteError.of(exc)))
        return
    conn.send(Ready(os.getpid()))
    _Worker(spec, worker_id, conn).serve()


def _never_outlive(consumer: Consumer) -> None:
    """End this process as soon as the consumer's is gone, whatever the main thread does.

    The parent-death signal kills at once, even a main thread inside C
    code that holds the GIL, but only where it is armed. The watchdog
    thread covers every case, the first moments included.
    """
    if consumer.death_signal:
        _arm_parent_death_signal()
    # A consumer that died before now (before the signal was armed) left
    # this process to another parent already.
    if not _consumer_alive(consumer):
        os._exit(_ORPHANED)
    threading.Thread(target=_watchdog, args=(consumer,), name="dataloader-watchdog",
                     daemon=True).start()


def _arm_parent_death_signal() -> None:
    """SIGKILL this process when the thread that started it exits (Linux's prctl)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the watchdog alone


def _watchdog(consumer: Consumer) -> None:
    """Wait, on a watchdog thread, for the consumer's process to exit; then end this one."""
    try:
        pidfd = os.pidfd_open(consumer.pid)
    except ProcessLookupError:
        os._exit(_ORPHANED)  # gone already
    except (OSError, AttributeError):
        # No pidfd (a kernel before 5.3, a sandbox refusing it): look.
        while _consumer_alive(consumer):
            time.sleep(_WATCHDOG_POLL_SECONDS)
        os._exit(_ORPHANED)
    # Alive once the pidfd is open: the pidfd is the consumer's, not a later
    # process's given the same pid (for certain when the consumer is the parent).
    if _consumer_alive(consumer):
        # poll, not select: the descriptor may be above select's limit of 1024.
        waiting = select.poll()
        waiting.register(pidfd, select.POLLIN)  # readable once the process has exited
        waiting.poll()
    os._exit(_ORPHANED)


def _consumer_alive(consumer: Consumer) -> bool:
    if consumer.is_parent:
        # A dying parent hands its children to another before it is a zombie.
        return os.getppid() == consumer.pid
    try:
        os.kill(consumer.pid, 0)
    except OSError:
        return False
    return True


class _Worker:
    def __init__(self, spec: WorkerSpec, worker_id: int, conn: Any) -> None:
        self.spec = spec
        self.worker_id = worker_id
        self.served_epochs = 0
        self.conn = conn
        self.writer = SlotWriter()
        # Requests read while looking for slots given back.
        self.requests: collections.deque[BeginEpoch | Load | Stop] = collections.deque()
        self.stats = Stats()
        self.sent_totals = [0] * len(self.stats.rows[0].totals())
        self.pool: Pool | None = None
        self.recipe: Any = None
        self.token: Any = None
        self.first = 0  # the epoch's number of the token's position 0
        self.cursor: Cursor | None = None
        # Batches load on item lanes (this process's pool), and an async
        # dataset's event loop.
        self.lanes = False
        self.event_loop: EventLoop | None = None
        self.skipped: list[tuple[Any, RemoteError]] = []

    def serve(self) -> None:
        try:
            while not isinstance(request := self._next_request(), Stop):
                if isinstance(request, BeginEpoch):
                    self._begin_epoch(request)
                elif isinstance(request, Load):
                    self._load(request)
        except (EOFError, BrokenPipeError, ConnectionResetError):
            pass  # the consumer is gone
        finally:
            if self.event_loop is not None:
                self.event_loop.close()  # awaits the dataset's aclose()
            if self.pool is not None:
                self.pool.shutdown(1.0)
            self.writer.close()

    def _next_request(self) -> BeginEpoch | Load | Stop:
        # Slots given back while the last batch loaded are free for the next.
        while True:
            self._read_waiting()
            if self.requests:
                return self.requests.popleft()
            # A dead consumer ends this process from the watchdog thread.
            self.conn.poll(None)

    def _read_waiting(self) -> None:
        """Read every message waiting: free the slots given back, queue the requests."""
        while self.conn.poll(0):
            message = self.conn.recv()
            if isinstance(message, GiveBack):
                self.writer.give_back(message.slots)
            else:
                self.requests.append(message)

    def _begin_epoch(self, request: BeginEpoch) -> None:
        spec, seed, epoch = self.spec, request.seed, request.epoch
        self.token, self.first = request.token, request.first
        if self.served_epochs and spec.seeds_follow_seed:
            self._reseed(worker_base_seed(seed, epoch))
        self.served_epochs += 1
        if spec.stream is not None:
            self._begin_stream(seed, epoch, request.stream_state)
            return
        if is_async_dataset(spec.dataset) and self.event_loop is None:
            # This process's own event loop, started by its first async epoch.
            self.event_loop = EventLoop(spec.dataset)
        skip = _RecordingBudget(self.skipped, spec.report_skipped) if spec.skipping else None
        bound = bind_map_epoch(spec.dataset, transform=spec.transform, collate=spec.collate_fn,
                               batched=spec.batched, seed=seed, epoch=epoch,
                               lanes=spec.item_concurrency > 1, skip=skip,
                               event_loop=self.event_loop)
        self.recipe = bound.recipe
        # An async __getitems__ takes whole batches: its items need no lanes.
        lanes = spec.item_concurrency > 1 and (self.event_loop is None or bound.item_lanes)
        self.lanes = lanes and spec.batched
        if lanes and self.pool is None:
            self.pool = Pool(spec.item_concurrency)
            self.stats.ensure_threads(spec.item_concurrency)

    def _reseed(self, base_seed: int) -> None:
        """Seed the global generators for a later epoch, and say so in ``WorkerInfo.seed``."""
        seed_globals(base_seed, self.worker_id)
        info = get_worker_info()
        assert info is not None  # set_process_worker ran when this process started
        set_process_worker(dataclasses.replace(info, seed=base_seed + self.worker_id))

    def _begin_stream(self, seed: int, epoch: int, state: Any) -> None:
        """A new epoch of this worker's stream: its transform bound, its iterator not
        yet started (the first request opens it, as a producer task does on threads)."""
        spec, stream = self.spec, self.spec.stream
        assert stream is not None  # _begin_epoch calls this for a streaming spec only
        announce_epoch(spec.dataset, epoch)
        self.recipe = bind_stream_epoch(spec.transform, spec.collate_fn, stream.batch_size,
                                        seed=seed, epoch=epoch, lanes=False)
        self.cursor = Cursor(stream, self.worker_id, None, state)

    def _load(self, request: Load) -> None:
        slot = self.writer.take()
        if not self._load_into(slot, *request):
            self.writer.give_back((slot,))  # no batch came back in it

    def _load_into(self, slot: int, token: int, position: int, indices: Any) -> bool:
        """Load a batch into ``slot`` and send the reply; whether it holds a batch."""
        del self.skipped[:]
        # The batch's arrays are collated straight into its slot when they fit.
        arena = self.writer.arena(slot)
        batch_allocator(arena.empty if arena is not None else None)
        try:
            if self.cursor is not None:
                return self._stream_next(token, position, slot, arena)
            batch = self._load_batch(indices)
        except Exception as exc:  # noqa: BLE001 -- raised in the consumer
            return self._fail(token, position, indices, exc)
        finally:
            batch_allocator(None)
        try:
            # A batch that cannot be pickled, or no descriptor left for a new
            # slot, fails this batch alone; the worker serves on.
            packed = None if batch is EMPTY_BATCH else self._pack(slot, batch, arena)
        except Exception as exc:  # noqa: BLE001 -- raised in the consumer
            return self._fail(token, position, indices, exc)
        del batch
        self.conn.send(Loaded(token, position, packed, self._stats_delta(), list(self.skipped)))
        return packed is not None

    def _fail(self, token: int, position: int, indices: Any, error: Exception) -> bool:
        """Send ``error`` as the batch's outcome; its slot holds no batch (``False``)."""
        add_context(error, LoadingContext(BATCH, batch=self.first + position, indices=indices,
                                          worker=self.worker_id))
        self.conn.send(Failed(token, position, RemoteError.of(error), self._stats_delta()))
        return False

    def _stream_next(self, token: int, position: int, slot: int, arena: Any) -> bool:
        """Load the stream's next batch (see the module docstring for the reply)."""
        cursor = self.cursor
        assert cursor is not None
        packed = state = None
        error: RemoteError | None = None
        try:
            if cursor.iterator is None and not cursor.ended:
                self._open_stream(cursor)
            fetched = None if cursor.ended else cursor.fetch(self.stats.rows[0])
            if fetched is not None:
                payload, failed, _, state = load_fetched(self.recipe, fetched,
                                                         self.stats.rows[0])
                if failed:
                    error = RemoteError.of(payload)
                else:
                    packed = self._pack(slot, payload, arena)
                del payload  # the batch's arrays are in the slot: free the slot's arena
        except Exception as exc:  # noqa: BLE001 -- an error of the iterator ends the stream
            error, state = RemoteError.of(exc), None
        self.conn.send(Streamed(token, position, packed, self._stats_delta(), error, state,
                                cursor.ended))
        return packed is not None

    def _open_stream(self, cursor: Cursor) -> None:
        try:
            cursor.open()
        except Exception as exc:
            cursor.ended = True
            add_context(exc, LoadingContext(STREAM_START, stream=self.worker_id))
            raise

    def _pack(self, slot: int, batch: Any, arena: Any) -> Any:
        """``batch`` packed into ``slot``, whose file goes to the consumer when it is new."""
        with explained_descriptor_limit(f"DataLoader worker process {self.worker_id}"):
            packed = self.writer.pack(slot, batch, arena)
            if self.writer.needs_sharing(slot):
                # The socket (a descriptor) before the announcement: a worker out of
                # descriptors fails before the consumer waits for the file.
                with socket.fromfd(self.conn.fileno(), socket.AF_UNIX,
                                   socket.SOCK_STREAM) as sock:
                    self.conn.send(SlotShared(slot))
                    sendfds(sock, [self.writer.share(slot)])
        return packed

    def _load_batch(self, indices: Any) -> Any:
        if not self.lanes:
            return load_batch(self.recipe, indices, self.stats.rows[0])
        # Item lanes: the threaded engine, for one batch, on this process's pool.
        plan = EpochPlan(iter([indices]), 1, None, self.recipe, None, self.stats,  # type: ignore[arg-type]
                         item_lanes=True, window=1, item_concurrency=self.spec.item_concurrency,
                         worker_setup=_no_setup)
        assert self.pool is not None  # made by _begin_epoch whenever it sets lanes
        engine = Epoch(self.pool, plan)
        engine.start()
        try:
            return engine.next()
        except StopIteration:
            # The engine passes over a batch whose every item was skipped.
            return EMPTY_BATCH

    def _stats_delta(self) -> tuple[int, ...]:
        totals = [sum(column) for column in zip(*(row.totals() for row in self.stats.rows),
                                                strict=True)]
        delta = tuple(now - sent for now, sent in zip(totals, self.sent_totals, strict=True))
        self.sent_totals = totals
        return delta


def _no_setup(thread_index: int) -> None:
    pass


class _RecordingBudget(SkipBudget):
    """A worker's ``on_error="skip"`` budget: never refuses; the consumer's budget decides.

    With a limit on the consumer's side, each skipped item's index and
    error are kept for the reply, so the consumer spends them in delivery
    order.
    """

    __slots__ = ("records", "report")

    def __init__(self, records: list[tuple[Any, RemoteError]], report: bool) -> None:
        super().__init__(None)
        self.records = records
        self.report = report

    def spend(self, error: BaseException, index: Any) -> bool:
        if self.report:
            self.records.append((index, RemoteError.of(error)))
        return True


def seed_globals(base_seed: int, worker_id: int) -> None:
    """Seed ``random`` and torch with ``base_seed + worker_id``, numpy's global generator
    from both, as torch's workers do before ``worker_init_fn``.

    numpy's seed is mixed from the pair (by ``SeedSequence``, where torch
    has its own hash), so it is not the seed ``random`` was given.
    """
    seed = base_seed + worker_id
    random.seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
