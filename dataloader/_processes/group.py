"""A loader's worker processes: starting, talking to and stopping them.

A :class:`WorkerGroup` owns ``num_workers`` processes (see
:mod:`dataloader._processes.worker`), one duplex pipe to each, and the
consumer's side of their shared-memory slots. It lives for one epoch, or
for the loader's lifetime with ``persistent_workers=True``; each epoch it
serves gets a fresh token, so that replies to an abandoned epoch are
recognised and their slots recycled.

One I/O thread per group does all the talking (see
:mod:`dataloader._processes.channel`): it sends the requests the consumer
posts, receives replies, and waits on the pipes and the processes'
sentinels together (``multiprocessing.connection.wait``), in slices, so a
worker's death is noticed within one slice. The consumer never touches a
pipe: Ctrl-C cannot cut a message in half.

The workers, and the consumer's ends of their pipes, belong to the
consumer's process alone. A child forked from it (a worker of this group
or another, or any other) closes the ends it inherited, so that when the
consumer dies each worker's pipe reaches end of file and its sends fail,
rather than wait for a reader a sibling keeps alive; and it drops the
workers from multiprocessing's children, whose exit handler would
otherwise terminate them when the child exits.
"""

from __future__ import annotations

import collections
import itertools
import multiprocessing
import os
import pickle
import signal
import threading
import time
import weakref
from collections.abc import Callable
from multiprocessing.connection import wait
from multiprocessing.reduction import recv_handle
from typing import Any, NamedTuple

from dataloader._core.pool import wait_bound
from dataloader._errors import EpochClosedError, WorkerDied, warn_at_caller
from dataloader._processes import worker as _worker
from dataloader._processes.channel import Channel
from dataloader._processes.protocol import (
    BeginEpoch,
    Failed,
    GiveBack,
    InitFailed,
    Load,
    Loaded,
    Ready,
    SlotShared,
    Stop,
    Streamed,
)
from dataloader._processes.transport import Packed, SlotReader, explained_descriptor_limit

__all__ = ["EndOfSampler", "LoadBatch", "LoadStreamBatch", "RejectBatch", "RejectedIndices",
           "WorkerGroup", "close_every_group", "close_with", "start_method"]

# How long stopping a worker waits for it to exit before killing it.
_STOP_SECONDS = 5.0
# The longest the I/O thread waits before looking at its requests again.
_IO_SLICE_SECONDS = 0.1


# What the consumer posts to the group's I/O thread (``WorkerGroup.post``).


class LoadBatch(NamedTuple):
    """Load ``indices`` as the epoch's next batch, on the worker whose turn it is."""

    channel: Channel
    indices: Any


class LoadStreamBatch(NamedTuple):
    """Load the next batch of ``worker_id``'s stream, at ``position``."""

    channel: Channel
    worker_id: int
    position: int


class RejectBatch(NamedTuple):
    """The epoch's next batch failed before loading (its indices' check): ``error``."""

    channel: Channel
    error: BaseException


class EndOfSampler(NamedTuple):
    """The sampler has no more batches: the epoch ends after those posted."""

    channel: Channel


class _OpenEpoch(NamedTuple):
    channel: Channel
    seed: int
    epoch: int
    stream_states: list[Any] | None


class _StopIO(NamedTuple):
    pass


_Posted = LoadBatch | LoadStreamBatch | RejectBatch | EndOfSampler | _OpenEpoch | _StopIO


class RejectedIndices(NamedTuple):
    """The reply a rejected batch gets in its channel, in place of a worker's."""

    error: BaseException

_tokens = itertools.count()

# The groups of this process: for a child forked from it to disown, and
# for the interpreter's exit to close.
_groups: weakref.WeakSet[WorkerGroup] = weakref.WeakSet()


def _disown_in_child() -> None:
    for group in list(_groups):
        group._disown()
    _groups.clear()


os.register_at_fork(after_in_child=_disown_in_child)


def start_method(context: Any) -> Any:
    """The context of ``multiprocessing_context``; without one, multiprocessing's.

    As torch's loader, ``None`` follows the start method chosen with
    ``multiprocessing.set_start_method`` (or fixed by a first
    ``multiprocessing.get_start_method()``); before any is, fork, torch's
    default on Linux (the platform's default of Pythons before 3.14).

    Examples
    --------
    >>> from dataloader._processes.group import start_method
    >>> start_method("spawn").get_start_method()
    'spawn'
    """
    if context is None:
        return multiprocessing.get_context(multiprocessing.get_start_method(allow_none=True)
                                           or "fork")
    if isinstance(context, str):
        return multiprocessing.get_context(context)
    return context


def warn_if_more_than_cpus(num_workers: int) -> None:
    """torch's warning when a loader starts more worker processes than it has CPUs.

    The CPUs are those this process may run on (its affinity, so a
    container's or ``taskset``'s cpuset counts). Worker threads are not
    counted: a thread waiting on I/O takes no CPU, so more threads than
    CPUs is what ``item_concurrency`` and I/O-bound datasets are for.
    """
    cpus = _usable_cpus()
    if cpus is not None and num_workers <= cpus:
        return
    known = f"the {cpus} CPUs" if cpus is not None else "the CPUs (unknown here)"
    warn_at_caller(
        f"This DataLoader will create {num_workers} worker processes in total, more than "
        f"{known} this process may run on. Please be aware that excessive worker creation "
        "might get DataLoader running slow or even freeze: lower num_workers if necessary"
    )


def _usable_cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


class WorkerGroup:
    """``num_workers`` worker processes serving one loader.

    Parameters
    ----------
    spec : WorkerSpec
        What each worker loads with.
    context : multiprocessing context
        How the processes start (``start_method``).
    """

    def __init__(self, spec: _worker.WorkerSpec, context: Any) -> None:
        self.size = spec.num_workers
        self.reader = SlotReader()
        self._kept_slots = spec.kept_slots
        # Slots released by the consumer's garbage collector, from any thread.
        self._released: collections.deque[tuple[int, int]] = collections.deque()
        self._processes: list[Any] = []
        self._conns: list[Any] = []
        self._pids: list[int] = []
        # Requests from the consumer, and a pipe that wakes the I/O thread.
        self._outbox: collections.deque[_Posted] = collections.deque()
        self._wake: Callable[[], None] = _Wake()
        # The epoch being served; ``_lock`` pairs it with ``death``.
        self._channel: Channel | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._io: threading.Thread | None = None
        self.death: BaseException | None = None
        self.closed = False
        # The finalizers that would close this group with its owners (``close_with``):
        # detached once it is closed, so that a closed group is not kept alive by them.
        self._finalizers: list[weakref.finalize] = []
        # The process whose workers these are (not a forked child's copy).
        self._owner = os.getpid()
        _groups.add(self)
        try:
            for worker_id in range(self.size):
                self._start(spec, context, worker_id)
            for worker_id in range(self.size):
                self._await_ready(worker_id)
        except BaseException:
            self.close()
            raise
        self._io = threading.Thread(target=self._serve, name="dataloader-process-io",
                                    daemon=True)
        self._io.start()

    def _start(self, spec: _worker.WorkerSpec, context: Any, worker_id: int) -> None:
        method = context.get_start_method()
        # The parent-death signal follows the thread that starts the worker:
        # one that may end before its process (a loader iterated on a
        # short-lived thread, its persistent workers serving on) must not
        # take the workers with it. Under forkserver the parent is the fork
        # server, which does not end with the consumer.
        is_parent = method != "forkserver"
        lasting = threading.current_thread() is threading.main_thread()
        consumer = _worker.Consumer(os.getpid(), is_parent=is_parent,
                                    death_signal=is_parent and lasting)
        ours, theirs = context.Pipe(duplex=True)
        # Listed before the fork: the worker closes its own copy too.
        self._conns.append(ours)
        process = context.Process(
            target=_worker.run, args=(spec, worker_id, theirs, consumer),
            name=f"dataloader-worker-{worker_id}", daemon=True,
        )
        try:
            process.start()
        except Exception:
            self._conns.pop()
            ours.close()
            theirs.close()
            if method != "fork":  # spawn and forkserver pickle the spec
                _name_unpicklable(spec, method)
            raise
        theirs.close()
        self._processes.append(process)

    def _await_ready(self, worker_id: int) -> None:
        while True:
            message = self._receive_from(worker_id)
            if isinstance(message, Ready):
                self._pids.append(message.pid)
                return
            if isinstance(message, InitFailed):
                raise message.error.restore()

    # -- the consumer's side ---------------------------------------------------

    def open_channel(self, seed: int, epoch: int, ordered: bool, *, first: int = 0,
                     stream_states: list[Any] | None = None) -> Channel:
        """Start an epoch on every worker; its requests and replies go through the channel.

        ``first``: the epoch's batches delivered before (a resumed epoch), so that
        batch ``p`` goes to worker ``p % size`` however the epoch was interrupted.
        ``stream_states``: streaming workers, the state each resumes its stream from.
        """
        channel = Channel(next(_tokens), self.size, ordered, first)
        # Replies are matched against this channel from now on (an older
        # epoch's carry its own token), and a death, even before this
        # epoch's first request, fails it.
        with self._lock:
            self._channel = channel
            death = self.death
        if death is not None:
            channel.fail(death)
        self.post(_OpenEpoch(channel, seed, epoch, stream_states))
        return channel

    def post(self, request: _Posted) -> None:
        """Queue a request for the I/O thread (one atomic append: safe under Ctrl-C)."""
        self._outbox.append(request)
        self._wake()

    def open_batch(self, worker_id: int, packed: Packed) -> Any:
        """The batch of a reply, as views of its slot; the slot is free again once released."""
        # The I/O thread is woken: the worker may choose its next slot soon.
        wake = self._wake if isinstance(self._wake, _Wake) else None
        # Workers fill their lowest free slot, so a steady epoch cycles
        # through the kept ones; a slot beyond them (the consumer kept many
        # batches) returns its pages once released.
        return self.reader.unpack(worker_id, packed, self._released, wake,
                                  keep_pages=packed.slot < self._kept_slots)

    def discard(self, worker_id: int, packed: Packed | None) -> None:
        """Recycle the slot of a reply nobody will read."""
        if packed is not None:
            self._released.append((worker_id, packed.slot))

    # -- the I/O thread ----------------------------------------------------------

    def _serve(self) -> None:
        """Send requests, receive replies, watch the processes; until ``close``."""
        sentinels = [process.sentinel for process in self._processes]
        wake = self._wake
        assert isinstance(wake, _Wake)  # close() sets _no_wake only after this thread ends
        try:
            while not self._stopping:
                self._send_requests()
                ready = wait([*self._conns, *sentinels, wake.fd], _IO_SLICE_SECONDS)
                if wake.fd in ready:
                    wake.clear()
                for worker_id, conn in enumerate(self._conns):
                    if conn in ready:
                        self._deliver(worker_id, self._receive_from(worker_id))
                for worker_id, sentinel in enumerate(sentinels):
                    if sentinel in ready and not self._stopping:
                        raise WorkerDied(self._death_message(worker_id), worker_id)
        except BaseException as error:  # noqa: BLE001 -- raised in the consumer
            self._broken(error)

    def _send_requests(self) -> None:
        self._give_back_slots()
        while self._outbox:
            request = self._outbox.popleft()
            if isinstance(request, _OpenEpoch):
                channel, states = request.channel, request.stream_states
                for worker_id, conn in enumerate(self._conns):
                    state = states[worker_id] if states is not None else None
                    self._send(conn, BeginEpoch(channel.token, request.seed, request.epoch,
                                                state, channel.first))
            elif isinstance(request, LoadBatch):
                self._send_load(request.channel, request.indices)
            elif isinstance(request, LoadStreamBatch):
                self._send_load(request.channel, None, request.worker_id, request.position)
            elif isinstance(request, RejectBatch):
                channel = request.channel
                channel.store(channel.assign(), -1, RejectedIndices(request.error))
            elif isinstance(request, EndOfSampler):
                request.channel.finish()

    def _send_load(self, channel: Channel, indices: Any, worker_id: int | None = None,
                   position: int | None = None) -> None:
        """Send a batch to load: ``indices`` to the worker whose it is (``worker_for``), or
        (``None``) the next batch of ``worker_id``'s stream, at the ``position`` its
        epoch chose."""
        if worker_id is None or position is None:
            position = channel.assign()
            worker_id = channel.worker_for(position)
        channel.dispatch(position, worker_id)
        self._send(self._conns[worker_id], Load(channel.token, position, indices), worker_id)

    def _give_back_slots(self) -> None:
        """Tell each worker which of its slots the consumer has released since."""
        released: dict[int, list[int]] = {}
        while self._released:
            worker_id, slot = self._released.popleft()
            released.setdefault(worker_id, []).append(slot)
        for worker_id, slots in released.items():
            self._send(self._conns[worker_id], GiveBack(slots), worker_id)

    def _send(self, conn: Any, message: Any, worker_id: int | None = None) -> None:
        try:
            conn.send(message)
        except OSError:
            worker_id = self._conns.index(conn) if worker_id is None else worker_id
            raise WorkerDied(self._death_message(worker_id), worker_id) from None

    def _deliver(self, worker_id: int, message: Loaded | Failed | Streamed) -> None:
        channel = self._channel
        if channel is None or message.token != channel.token:
            # A reply to an abandoned epoch of a persistent group.
            self.discard(worker_id, None if isinstance(message, Failed) else message.packed)
            return
        channel.store(message.position, worker_id, message)

    def _broken(self, death: BaseException) -> None:
        """The group cannot serve on: a worker died, or a request could not be sent."""
        with self._lock:
            self.death = death
            channel = self._channel
        if channel is not None:
            channel.fail(death)

    def _receive_from(self, worker_id: int) -> Any:
        conn = self._conns[worker_id]
        try:
            message = conn.recv()
            if isinstance(message, SlotShared):
                with explained_descriptor_limit("the DataLoader's process"):
                    self.reader.attach(worker_id, message.slot, recv_handle(conn))
                message = conn.recv()
        except (EOFError, OSError):
            raise WorkerDied(self._death_message(worker_id), worker_id) from None
        return message

    # -- lifetime -----------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        """The workers' process ids."""
        return list(self._pids)

    @property
    def processes(self) -> list[Any]:
        """The workers' ``multiprocessing.Process`` objects, in worker order (what torch's
        iterators call ``_workers``); they stay usable (``join``, ``is_alive``) after
        ``close``."""
        return list(self._processes)

    def _death_message(self, worker_id: int) -> str:
        process = self._processes[worker_id]
        process.join(0.5)
        code = process.exitcode
        pid = process.pid
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            how = f"was killed by signal {-code} ({name})"
            if -code == signal.SIGKILL:
                how += ", possibly by the kernel's out-of-memory killer"
        elif code is None:
            how = "closed its pipe"
        else:
            how = f"exited with code {code}"
        return f"DataLoader worker {worker_id} (pid {pid}) {how}"

    def _disown(self) -> None:
        """In a child forked from the consumer: let go of the consumer's workers."""
        for conn in self._conns:
            try:
                conn.close()
            except OSError:
                pass
        for process in self._processes:
            # multiprocessing's registry of this process's children (it has no
            # public way to forget one).
            multiprocessing.process._children.discard(process)  # type: ignore[attr-defined]

    def close(self) -> None:
        """Stop every worker: ask, wait up to a few seconds, then kill."""
        if self.closed:
            return
        self.closed = True
        for finalizer in self._finalizers:
            finalizer.detach()
        if os.getpid() != self._owner:
            return  # a forked child's copy: the workers, and their pipes, are not its own
        self._stopping = True
        io = self._io
        if io is not None and io is not threading.current_thread():
            self.post(_StopIO())
            io.join()
        # A thread still waiting for a reply (a pinning thread, say) wakes
        # and raises, rather than wait for replies that will never come.
        if self.death is None:
            self._broken(EpochClosedError("the DataLoader was closed"))
        # The pipe closes once the last batch's release has let go of it too.
        self._wake = _no_wake
        # The slots' mappings hold descriptors; batches still in use keep theirs.
        self.reader = SlotReader()
        for conn in self._conns:
            try:
                conn.send(Stop())
            except OSError:
                pass
        # At interpreter exit, the exit's one deadline (dataloader._core.pool).
        deadline = time.monotonic() + wait_bound(_STOP_SECONDS)
        for process in self._processes:
            process.join(max(deadline - time.monotonic(), 0.0))
            if process.exitcode is None:
                process.kill()
                process.join()
        for conn in self._conns:
            conn.close()
        # The Process objects are not closed, as torch's are not: callers may hold
        # them (``processes``) and join them later. Each one's descriptors are
        # closed when it is collected, with this group once its epoch is gone.


def close_with(owner: Any, group: WorkerGroup) -> weakref.finalize:
    """Close ``group`` once ``owner`` is garbage collected (unless it is closed before:
    then the finalizer lets go of it).

    Not at interpreter exit: there :func:`close_every_group` closes every
    group, after the exit has begun, so that their waits share its one
    deadline however the exit orders finalizers.
    """
    finalizer = weakref.finalize(owner, group.close)
    finalizer.atexit = False
    group._finalizers.append(finalizer)
    return finalizer


def close_every_group() -> None:
    """At interpreter exit: stop every worker group of this process still running."""
    for group in list(_groups):
        group.close()


class _Wake:
    """Wakes the I/O thread: from the consumer's thread, or from a garbage collection
    on any thread releasing a batch, maybe after the group is closed.

    The pipe lives as long as this object, which every batch's lease holds
    (it writes to ``write_fd`` itself): a late release writes into the pipe
    nobody reads any more (until it is full), never into a descriptor since
    reused for something else.
    """

    def __init__(self) -> None:
        self.fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        weakref.finalize(self, _close_pipe, self.fd, self.write_fd)

    def __call__(self) -> None:
        try:
            os.write(self.write_fd, b"!")
        except OSError:
            pass  # the pipe is full: the I/O thread is awake already, or gone

    def clear(self) -> None:
        os.read(self.fd, 4096)


def _no_wake() -> None:
    pass


def _close_pipe(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


def _name_unpicklable(spec: _worker.WorkerSpec, method: str) -> None:
    """After a ``spawn``/``forkserver`` worker failed to start: warn as torch does, and
    raise a ``TypeError`` naming what cannot be pickled."""
    for name in ("dataset", "transform", "collate_fn", "worker_init_fn"):
        value = getattr(spec, name)
        try:
            pickle.dumps(value)
        except Exception as exc:
            warn_at_caller(
                f"Got pickle error when starting a DataLoader worker process with the "
                f"{method!r} start method, which pickles what each worker receives; it was "
                "chosen by multiprocessing_context, or without one by "
                "multiprocessing.set_start_method. 'fork' pickles nothing"
            )
            raise TypeError(
                f"the {method!r} start method starts worker processes that receive the "
                f"loader's {name} by pickling, but {name} ({type(value).__name__}) cannot be "
                f"pickled: {exc}. Make it picklable, or pass multiprocessing_context='fork'"
            ) from exc

