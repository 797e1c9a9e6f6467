"""``worker_type="auto"`` on a Python dataset: load at once, measure, then choose.

A map-style dataset whose ``__getitem__`` is Python code may run fastest
on one worker thread (cheap items: a process would spend longer receiving
the request and sending the batch back than loading it) or on worker
processes (items that hold the interpreter for long). No fixed rule knows
which, so the :class:`Auto` kind measures. Each epoch:

1. batch 0 loads on the calling thread, as with ``num_workers=0``: the
   first batch is as fast as the direct path's, and it measures what a
   batch costs (seconds, the share of them on a CPU and in Python code,
   its bytes), with no other thread in the dataset's code;
2. from the second batch on, the epoch runs on what :func:`decide`
   predicts to deliver batches fastest -- worker threads (one, unless the
   dataset is known to be safe on several, see
   ``dataloader._processes.choice``) or worker processes -- given the
   consumer's own time between batches; or, where the workers measured
   slower than the calling thread would be (loading, then the consumer
   working, in turn), on the calling thread;
3. what the epoch then measures (a batch every how many seconds, how long
   processes took to start) replaces the prediction for the next epoch,
   so the loader moves back to threads when processes turned out slower;
   unless it is an outlier, far slower than the kind was expected to be
   (an epoch slowed by the rest of the machine): that is set aside once,
   and the kind measured again (``dataloader._measurements``).

An epoch after one that ran on worker processes, which the measurements
still favour, starts its processes on batches 1, 2, ... before batch 0
loads on the calling thread (the fork comes first, so no thread of ours
is in the dataset's code): the workers start while batch 0 loads. The
items' cost is then read from the workers' own counters.

A dataset safe on several threads (native work, items in memory, a class
declaring ``thread_safe = True``) is measured only to size its threads
and their window: batch 0 of its first epoch alone loads on the calling
thread, later epochs load all their batches on the threads the figures
so far choose.

With ``num_workers="auto"`` the worker count is chosen too (one process
per free core for items that compute, more for items that wait), and
``memory_budget`` caps the batches in flight (and keeps them on threads:
a worker process holds more than its batches). The batches, their
order, their seeds and ``state_dict`` are the same on every kind. The
rule, its figures and its limits: ``docs/execution.md``, "How auto
chooses".
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dataloader._core.pool import CLOSE_WAIT_SECONDS
from dataloader._errors import warn_at_caller
from dataloader._loading.arguments import epoch_window
from dataloader._loading.handles import open_files
from dataloader._loading.iterators import Engine, InlineEngine
from dataloader._loading.stats import COLLATE, FETCH, TRANSFORM, WAIT
from dataloader._loading.worker import one_torch_thread
from dataloader._measurements import (
    MEASUREMENT_EPOCHS,
    OUTLIER,
    Measurements,
    batch_nbytes,
    cpu_demand_ns,
)
from dataloader._processes.kind import Processes

if TYPE_CHECKING:
    from dataloader._loader import DataLoader
    from dataloader._loading.plans import EpochPlan, StreamPlan

__all__ = ["MEASUREMENT_EPOCHS", "Auto", "Choice", "Measurements", "batch_nbytes", "decide",
           "usable_cores"]

logger = logging.getLogger("dataloader")

#: What a batch costs on worker processes besides loading it (posting its
#: indices, a worker's reply, the consumer's views of its slot), and the
#: rate at which its bytes are copied into shared memory.
PROCESS_BATCH_SECONDS = 0.0003
COPY_BYTES_PER_SECOND = 2e9
#: Starting one worker process, until it takes its first batch, when not yet measured.
STARTUP_SECONDS = 0.05
#: Processes are chosen when they would deliver batches this much faster.
GAIN = 1.25
#: ``num_workers="auto"``: at most this many workers per core, for items that wait.
WORKERS_PER_CORE = 4
#: Epoch measurements need this many batches of a kind to replace a prediction.
MEASURED_BATCHES = 4


def usable_cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Choice:
    """What an epoch runs on after its first batch, and why."""

    kind: str  # "thread" or "process"
    workers: int  # 0: no workers, the calling thread loads (kind "thread")
    window: int
    why: str
    #: A batch every how many seconds this choice was made on (measured or
    #: predicted): what the epoch's own measurement is judged against.
    expected: float | None = dataclasses.field(default=None, compare=False)


def decide(measured: Measurements, *, workers: int | None, safe_on_threads: bool,
           cores: int, remaining: int | None, prefetch_factor: int,
           memory_budget: int | None = None, open_files: list[str] | None = None,
           current: str | None = None) -> Choice:
    """The kind and count of workers that deliver the rest of an epoch fastest.

    ``workers`` is ``num_workers``, or ``None`` to choose it too;
    ``safe_on_threads`` says whether the dataset may run on several threads
    at once (else one thread runs it); ``remaining`` is the batches left;
    ``current`` is what the last epoch ran on: processes must be ``GAIN``
    times faster to be started, and stay while they are not slower.

    Examples
    --------
    >>> measured = Measurements(load_seconds=0.2, batch_bytes=1 << 20)
    >>> decide(measured, workers=2, safe_on_threads=False, cores=2, remaining=100,
    ...        prefetch_factor=2).kind  # items that compute: a process per core
    'process'
    >>> measured = Measurements(load_seconds=0.0001)
    >>> decide(measured, workers=2, safe_on_threads=False, cores=2, remaining=100,
    ...        prefetch_factor=2).kind  # cheap items: one thread keeps up
    'thread'
    """
    load = measured.load_seconds or 0.0
    count = workers if workers is not None else _workers_for(measured, cores)
    cap = _in_flight_cap(memory_budget, measured.batch_bytes)
    if cap is not None and workers is None:
        count = min(count, cap)
    threads = count if safe_on_threads else 1

    def window(kind_workers: int) -> int:
        size = epoch_window(kind_workers, prefetch_factor, remaining)
        return size if cap is None else max(min(size, cap), 1)

    def on_threads(why: str, expected: float | None = None) -> Choice:
        return Choice("thread", threads, window(threads), why, expected)

    if open_files:
        return on_threads(f"{open_files[0]}: worker processes would share its offset")
    if memory_budget is not None:
        # Each worker process keeps slots for its own batches and its copy of
        # the pages it touches: more than the batches in flight that the budget
        # counts (tens of MiB a process for a numpy dataset, in benchmarks/auto.py).
        return on_threads(f"memory_budget={memory_budget}: worker processes would keep "
                          "more than the batches in flight")
    thread_interval = measured.interval("thread") or _thread_interval(measured, threads)
    process_interval = measured.interval("process") or _process_interval(measured, count, cores)
    figures = (f"a batch every {_ms(thread_interval)} on {_count(threads, 'thread')}, every "
               f"{_ms(process_interval)} on {_count(count, 'process')}")
    # The calling thread loads a batch, then the consumer works on it. Predicted
    # workers never do worse; measured ones may (cheap items' hand-offs cost more
    # than loading them), and then, clearly slower, no worker is started.
    calling = measured.warm_load() + measured.consumer_seconds
    if min(thread_interval, process_interval) > GAIN * calling:
        return Choice("thread", 0, 1, f"{figures}, every {_ms(calling)} on the calling thread",
                      calling)
    needed = 1.0 if current == "process" else GAIN
    if process_interval * needed > thread_interval:
        return on_threads(f"{figures}; items take {_ms(load)} a batch", thread_interval)
    startup = measured.startup_seconds or STARTUP_SECONDS * count
    if remaining is not None and remaining * (thread_interval - process_interval) < startup:
        return on_threads(f"{figures}, but {remaining} batches left do not repay "
                          f"{_ms(startup)} of starting processes", thread_interval)
    return Choice("process", count, window(count), f"{figures}", process_interval)


def _thread_interval(measured: Measurements, threads: int) -> float:
    """A batch every how many seconds on ``threads`` threads, predicted: Python code runs
    on one at a time (with the interpreter lock), the consumer's work beside them."""
    load = measured.load_seconds or 0.0
    held = load * measured.python_share if threads > 1 else load
    return max(held, load / threads, measured.consumer_seconds)


def _process_interval(measured: Measurements, workers: int, cores: int) -> float:
    """A batch every how many seconds on ``workers`` processes, predicted from the cores
    the consumer leaves free."""
    load = measured.load_seconds or 0.0
    overhead = PROCESS_BATCH_SECONDS + measured.batch_bytes / COPY_BYTES_PER_SECOND
    consumer = measured.consumer_seconds
    # Until an epoch has measured the consumer, it is taken to wait for batches.
    busy = 0.0 if measured.wait_share is None else 1.0 - measured.wait_share
    free_cores = max(cores - busy, 1.0)
    return max((load + overhead) / workers, (load * measured.cpu_share + overhead) / free_cores,
               consumer + PROCESS_BATCH_SECONDS)


def _workers_for(measured: Measurements, cores: int) -> int:
    """``num_workers="auto"``: a worker per core for items that compute, more for items
    that wait (as many as keep the cores busy), at most ``WORKERS_PER_CORE`` per core;
    and no more than keep up with the consumer's own work between batches."""
    # Items that mostly compute get a worker per core: one more would only
    # take turns on them (a read of a local file is not worth a process).
    waiting = 1.0 if measured.cpu_share >= 0.5 else 1.0 / max(measured.cpu_share,
                                                             1.0 / WORKERS_PER_CORE)
    count = min(math.ceil(cores * waiting), cores * WORKERS_PER_CORE)
    if measured.consumer_seconds > 0 and measured.load_seconds:
        overhead = PROCESS_BATCH_SECONDS + measured.batch_bytes / COPY_BYTES_PER_SECOND
        # A batch every consumer step, with a fifth to spare.
        count = min(count, math.ceil(1.2 * (measured.load_seconds + overhead)
                                     / measured.consumer_seconds))
    return max(count, 1)


def _in_flight_cap(memory_budget: int | None, batch_bytes: int) -> int | None:
    """The batches ahead that ``memory_budget`` bytes hold beside the one the consumer
    holds (at least one)."""
    if memory_budget is None or batch_bytes <= 0:
        return None
    return max(memory_budget // batch_bytes - 1, 1)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _count(count: int, kind: str) -> str:
    """``"1 worker thread"``, ``"2 worker processes"``, ``"the calling thread"`` (no workers)."""
    if count == 0:
        return "the calling thread"
    if count == 1:
        return f"1 worker {kind}"
    return f"{count} worker {kind}es" if kind == "process" else f"{count} worker {kind}s"


def _phase(choice: Choice) -> str:
    """The name an epoch's measurements of ``choice`` go by: its kind, or ``"inline"``
    for the calling thread (predicted, not measured: see :func:`decide`)."""
    return choice.kind if choice.workers else "inline"


class Auto:
    """The measuring kind of worker: batch 0 on the calling thread, the rest on the
    threads or processes :func:`decide` picks (see the module docstring).

    It keeps its own pool of threads and worker processes, and what it
    measured, for the loader's life.
    """

    loads_ahead = True
    # Batch 0 loads in this process: the loader binds the epoch here.
    other_processes = False

    def __init__(self, threads: Callable[[int], Any]) -> None:
        # ``dataloader._worker_kinds.Threads``: a kind on a fixed number of threads.
        self._make_threads = threads
        self.measured = Measurements()
        self.choice: Choice | None = None
        self.processes = Processes()
        self.threads: Any = None
        self._warned = False  # of a memory budget smaller than two batches

    @property
    def kind(self) -> str:
        """``"thread"`` or ``"process"``: what the last epoch ran on after its first batch."""
        return self.choice.kind if self.choice is not None else "thread"

    @property
    def workers(self) -> int | None:
        """The worker count of the last choice."""
        return self.choice.workers if self.choice is not None else None

    def map_engine(self, loader: DataLoader, plan: EpochPlan) -> MeasuredEngine:
        return MeasuredEngine(self, loader, plan)

    def stream_engine(self, loader: DataLoader, plan: StreamPlan,
                      states: dict[int, Any]) -> Any:
        raise TypeError("worker_type='auto' measures map-style datasets only")

    def close(self, seconds: float) -> None:
        if self.threads is not None:
            self.threads.close(seconds)
        self.processes.close(seconds)

    def warm_processes(self) -> bool:
        """Whether the loader's persistent worker processes are running."""
        group = self.processes.group
        return self.kind == "process" and group is not None and not group.closed

    def choose(self, loader: DataLoader, remaining: int | None) -> Choice:
        """Decide what the rest of an epoch runs on; log the choice when it changes."""
        choice = decide(
            self.measured, workers=None if loader._auto_workers else loader.num_workers,
            safe_on_threads=loader._worker_type.safe_on_threads(loader),
            cores=usable_cores(), remaining=remaining, prefetch_factor=loader.prefetch_factor,
            memory_budget=loader.memory_budget, open_files=open_files(loader.dataset),
            current=self.choice.kind if self.choice is not None else None,
        )
        budget = loader.memory_budget
        if budget is not None and budget < 2 * self.measured.batch_bytes and not self._warned:
            self._warned = True
            warn_at_caller(
                f"memory_budget={budget} holds fewer than two batches of "
                f"{self.measured.batch_bytes} bytes: the batch the loop holds and the one "
                "loading take more")
        previous, self.choice = self.choice, choice
        if previous is None or (previous.kind, previous.workers) != (choice.kind, choice.workers):
            logger.info("DataLoader loads on %s: %s", _count(choice.workers, choice.kind),
                        choice.why)
        return choice

    def engine_for(self, loader: DataLoader, plan: EpochPlan, choice: Choice) -> Engine:
        """Start the engine of ``choice`` on the rest of ``plan``'s batches."""
        plan = dataclasses.replace(plan, window=choice.window)
        if choice.kind == "process":
            # No thread of ours may be in the dataset's code when the workers fork.
            if self.threads is not None:
                self.threads.close(CLOSE_WAIT_SECONDS)
                self.threads = None
            if loader._auto_workers:
                loader.num_workers = choice.workers
            return self.processes.map_engine(loader, dataclasses.replace(plan, recipe=None))
        self.processes.close(0.0)
        if choice.workers == 0:  # no worker keeps up with the calling thread
            return InlineEngine(plan)
        if self.threads is None or self.threads.threads != choice.workers:
            if self.threads is not None:
                self.threads.close(CLOSE_WAIT_SECONDS)
            self.threads = self._make_threads(choice.workers)
        return self.threads.map_engine(loader, plan)


class MeasuredEngine:
    """An epoch of the :class:`Auto` kind: batch 0 inline and measured, then the chosen
    engine; it times the consumer and the batches for the next epoch's choice."""

    __slots__ = ("_kind", "_loader", "_plan", "_engine", "_before", "_phase", "_consumer_at",
                 "_waited_at", "_phase_started", "_first_at", "_last_at", "_phase_batches",
                 "_ended", "_ahead", "_ahead_started", "_remote_at", "_loading_at")

    def __init__(self, kind: Auto, loader: DataLoader, plan: EpochPlan) -> None:
        self._kind = kind
        self._loader = loader
        self._plan = plan
        self._before = 0  # batches delivered by the engines before this one
        # The consumer's own time and its wait so far (the loader's counters).
        self._consumer_at = plan.stats.consumer_ns
        self._waited_at = plan.stats.rows[0].totals()[WAIT + 1]
        self._ended = False
        # Processes started before batch 0 (see ``_start_ahead``), and when.
        self._ahead: Engine | None = None
        self._ahead_started = 0
        self._remote_at: tuple[int, ...] | None = None
        self._loading_at = 0  # the worker threads' loading stages when the phase began
        if kind.warm_processes():  # persistent workers: no need to start on this thread
            assert kind.choice is not None
            self._start_phase(kind.engine_for(loader, plan, kind.choice), "process")
        elif kind.kind == "process" and self._still_on_processes():
            self._start_phase(InlineEngine(plan), "ahead")  # nothing loaded yet
        elif kind.choice is not None and loader._worker_type.safe_on_threads(loader):
            # Threads whatever the items cost: only their count and window are
            # chosen, by what the epochs measured; batch 0 loads on them too.
            choice = kind.choose(loader, plan.total)
            self._loading_at = self._thread_loading_ns()
            self._start_phase(kind.engine_for(loader, plan, choice), _phase(choice))
        else:
            self._start_phase(InlineEngine(plan), "first")

    def _still_on_processes(self) -> bool:
        """Whether the last epoch's measurements choose processes again, before batch 0."""
        total = self._plan.total
        remaining = None if total is None else max(total - 1, 0)
        return self._kind.choose(self._loader, remaining).kind == "process"

    @property
    def delivered(self) -> int:
        return self._before + self._engine.delivered

    @property
    def _workers(self) -> list[Any]:
        return self._engine._workers  # type: ignore[attr-defined]

    def _start_phase(self, engine: Engine, phase: str) -> None:
        self._engine, self._phase = engine, phase
        self._phase_started = time.monotonic_ns()
        self._first_at = self._last_at = 0
        self._phase_batches = 0

    def next(self) -> Any:
        if self._phase == "ahead":
            self._start_ahead()
        elif self._phase == "first" and self._engine.delivered:
            self._hand_over()
        try:
            if self._phase == "first":
                # As a worker loads it: the caller's team of torch threads would spin
                # against the workers starting beside it, and misstate the items' cost.
                with one_torch_thread():
                    if self._ahead is None:
                        batch = self._next_measured()
                    else:  # beside the workers started ahead: their counters measure
                        batch = self._engine.next()
            else:
                batch = self._engine.next()
        except StopIteration:
            self._end(finished=True)
            raise
        ended = time.monotonic_ns()
        self._phase_batches += 1
        if self._phase_batches == 1:
            self._first_at = ended
        self._last_at = ended
        return batch

    def _next_measured(self) -> Any:
        """The next batch, loaded here, with what it cost recorded."""
        row = self._plan.stats.rows[0]
        stages_before = row.totals()
        started, cpu_started = time.monotonic_ns(), cpu_demand_ns()
        batch = self._engine.next()
        seconds = (time.monotonic_ns() - started) * 1e-9
        native = self._loader._worker_type.native_stages(self._loader)
        stages = [now - before for now, before in zip(row.totals(), stages_before, strict=True)]
        columns = (FETCH, TRANSFORM, COLLATE)
        python = sum(stages[column + 1] for column in columns if column not in native) * 1e-9
        # The loading stages alone: an epoch's sampler may spend its first next()
        # setting up its order, which no later batch pays.
        loading = sum(stages[column + 1] for column in columns) * 1e-9 or seconds
        cpu_share = (cpu_demand_ns() - cpu_started) * 1e-9 / seconds if seconds else 1.0
        self._kind.measured.add_load(loading, cpu_share * loading, python, batch_nbytes(batch))
        return batch

    def _start_ahead(self) -> None:
        """Start worker processes on batches 1, 2, ..., then load batch 0 here.

        The workers fork before this thread enters the dataset's code, and
        start while batch 0 loads. That load shares the cores with them,
        so it is not timed: the workers' counters give the items' cost.
        """
        plan = self._plan
        try:
            indices = next(plan.batches)
        except BaseException:
            plan.progress.finished = True  # an empty or broken sampler ends the epoch
            raise
        assert self._kind.choice is not None
        rest = dataclasses.replace(plan, total=None if plan.total is None else plan.total - 1,
                                   first=plan.progress.delivered + 1)
        self._remote_at = plan.stats.remote.totals()
        self._ahead_started = time.monotonic_ns()
        self._ahead = self._kind.engine_for(self._loader, rest, self._kind.choice)
        self._start_phase(InlineEngine(dataclasses.replace(plan, batches=iter([indices]))),
                          "first")

    def _hand_over(self) -> None:
        """Batch 0 is out: run the rest of the epoch on what the measurements choose."""
        if self._ahead is not None:
            self._before += self._engine.delivered
            self._start_phase(self._ahead, "process")
            self._phase_started, self._ahead = self._ahead_started, None
            return
        total = self._plan.total
        remaining = None if total is None else max(total - self._engine.delivered, 0)
        choice = self._kind.choose(self._loader, remaining)
        self._before += self._engine.delivered
        rest = dataclasses.replace(self._plan, total=remaining,
                                   first=self._plan.progress.delivered)
        self._loading_at = self._thread_loading_ns()  # before the workers start
        self._start_phase(self._kind.engine_for(self._loader, rest, choice), _phase(choice))

    def _end(self, finished: bool) -> None:
        """Record what this epoch measured (once), for the next epoch's choice."""
        if self._ended:
            return
        self._ended = True
        measured, stats = self._kind.measured, self._plan.stats
        measured.epochs += 1
        consumer = stats.consumer_ns - self._consumer_at
        waited = stats.rows[0].totals()[WAIT + 1] - self._waited_at
        batches = self._before + self._phase_batches
        if batches > 1:
            measured.consumer_seconds = consumer * 1e-9 / (batches - 1)
        if consumer + waited > 0:
            measured.wait_share = waited / (consumer + waited)
        if self._phase == "first" or self._phase_batches < MEASURED_BATCHES:
            return
        if self._remote_at is not None and finished:
            self._measure_remote_load()
        interval = (self._last_at - self._first_at) * 1e-9 / (self._phase_batches - 1)
        if not measured.add_interval(self._phase, interval, self._expected()):
            # An outlier: this epoch's other figures (the startup, the threads'
            # load) are set aside with it.
            self._log_set_aside(interval)
            return
        if self._phase == "thread":
            loading = (self._thread_loading_ns() - self._loading_at) * 1e-9
            measured.add_thread_load(loading / self._phase_batches)
        if self._phase == "process":
            measured.startup_seconds = (self._first_at - self._phase_started) * 1e-9

    def _expected(self) -> float | None:
        """The interval the epoch's choice was made on, for its kind of worker (the
        calling thread's intervals choose nothing: see :func:`decide`)."""
        choice = self._kind.choice
        if choice is None or not choice.workers or _phase(choice) != self._phase:
            return None
        return choice.expected

    def _log_set_aside(self, interval: float) -> None:
        choice = self._kind.choice
        kind = _count(choice.workers, choice.kind) if choice is not None else self._phase
        logger.info("DataLoader measured a batch every %s on %s, more than %gx slower than "
                    "expected: set aside, measured again next epoch", _ms(interval), kind,
                    OUTLIER)

    def _thread_loading_ns(self) -> int:
        """The nanoseconds of the loading stages counted on the pool threads' rows so far
        (rows are only added, each starting from nothing)."""
        return sum(row.totals()[column + 1] for row in self._plan.stats.rows[1:]
                   for column in (FETCH, TRANSFORM, COLLATE))

    def _measure_remote_load(self) -> None:
        """The seconds a batch took to load on a worker process, from the workers'
        counters (an epoch whose batch 0 loaded beside them; batches still in
        flight would count, so only an epoch that ran to its end)."""
        assert self._remote_at is not None
        now = self._plan.stats.remote.totals()
        seconds = sum(now[column + 1] - self._remote_at[column + 1]
                      for column in (FETCH, TRANSFORM, COLLATE)) * 1e-9
        if seconds > 0:
            self._kind.measured.load_seconds = seconds / self._phase_batches

    def cancel(self) -> None:
        self._end(finished=False)
        if self._ahead is not None:
            self._ahead.cancel()
        self._engine.cancel()
