"""``DataLoader``: its arguments, their validation, and the wiring of an epoch.

The signature is ``torch.utils.data.DataLoader``'s, positional order
included; the arguments this library adds are keyword-only.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar, cast

from dataloader._auto import Auto, usable_cores
from dataloader._core.pool import CLOSE_WAIT_SECONDS, wait_bound
from dataloader._datasets.asynchronous import check_async_dataset, is_async_dataset
from dataloader._datasets.dataset import is_iterable_style
from dataloader._datasets.event_loop import EventLoop
from dataloader._lifetime import close_at_exit
from dataloader._loading import elastic
from dataloader._loading import streaming as _streaming
from dataloader._loading.arguments import (
    check_counts,
    check_dataset,
    check_exclusive_options,
    check_memory_budget,
    check_process_options,
    check_randomness,
    epoch_window,
)
from dataloader._loading.collate import default_collate, default_convert
from dataloader._loading.fetch import (
    SkipBudget,
    bind_map_epoch,
    check_batch_indices,
    check_index,
    check_skip_policy,
)
from dataloader._loading.handles import guarded_dataset
from dataloader._loading.iterators import MapIterator
from dataloader._loading.pinning import (
    InlinePinnedIterator,
    PinnedIterator,
    check_pin_memory_device,
    pinning,
)
from dataloader._loading.plans import EpochPlan, StreamPlan
from dataloader._loading.plugins import EpochBound, item_source
from dataloader._loading.randomness import LoaderRandomness
from dataloader._loading.reported_length import stream_length, warn_past_reported_length
from dataloader._loading.stats import COLLATE, FETCH, TRANSFORM, Stats
from dataloader._loading.streaming import StreamIterator
from dataloader._processes.choice import WorkerTypeChoice, check_worker_type
from dataloader._sampling.distributed import RankGroup
from dataloader._sampling.sampler import (
    BatchSampler,
    SequentialSampler,
    is_epoch_seeded,
    yields_valid_indices,
)
from dataloader._sampling.state import (
    EpochProgress,
    LoaderProgress,
    check_resumable,
    skip_batches,
)
from dataloader._worker_kinds import WORKER_KINDS, WorkerKind, kind_name

T_co = TypeVar("T_co", covariant=True)

__all__ = ["DataLoader"]

# Attributes that define what an epoch is; like torch, they are fixed once built.
_FROZEN_ATTRIBUTES = frozenset({"batch_size", "sampler", "batch_sampler", "drop_last", "dataset"})


class DataLoader(LoaderRandomness, Generic[T_co]):
    """Iterate over a dataset in batches, loading them on worker threads or processes.

    Parameters
    ----------
    dataset : map-style or iterable-style dataset
        Any object with ``__getitem__`` and ``__len__`` (a list works), or
        a stream: an :class:`IterableDataset` or any object with only
        ``__iter__`` (see ``docs/distributed.md``, "Streaming").
    batch_size : int or None, default 1
        Items per batch; ``None`` turns batching off (each item goes through
        ``collate_fn`` alone, by default :func:`default_convert`).
    shuffle : bool, default False
        Visit the dataset in a new random order every epoch.
    sampler : iterable of int, optional
        The order of indices; mutually exclusive with ``shuffle``.
    batch_sampler : iterable of lists of int, optional
        Yields whole batches of indices; mutually exclusive with
        ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last``.
    num_workers : int or "auto", default 0
        Workers loading batches in parallel (threads or processes, see
        ``worker_type``); 0 loads each batch on the calling thread when
        ``next()`` asks for it. At most 1024 threads in all:
        ``max(num_workers, 1) * item_concurrency <= 1024``. ``"auto"``
        starts with one worker per core and, with ``worker_type="auto"``,
        lets the loader choose the count from what it measures (see
        ``docs/execution.md``, "How auto chooses"); ``num_workers`` then
        reads the current count.
    collate_fn : callable, optional
        Turns a list of items into a batch; defaults to :func:`default_collate`.
    pin_memory : bool, default False
        With torch and an accelerator, deliver batches as torch tensors in
        page-locked memory (nested structures included), pinned on a
        dedicated thread; without an accelerator, torch's warning and plain
        batches (see ``docs/execution.md``, "Pinned memory").
    drop_last : bool, default False
        Drop the last batch of an epoch when it is short.
    timeout : float, default 0
        Seconds to wait for one batch from the workers before ``TimeoutError``
        (0 waits forever).
    worker_init_fn : callable, optional
        Called as ``worker_init_fn(worker_id)`` once on each worker thread,
        or once in each worker process when it starts.
    multiprocessing_context : str or multiprocessing context, optional
        How worker processes start: ``"fork"`` (the default, as torch's on
        Linux), ``"spawn"`` or ``"forkserver"``, which pickle the dataset,
        transform, collate function and ``worker_init_fn``.
    generator : numpy.random.Generator or torch.Generator, optional
        Source of the shuffling order.
    prefetch_factor : int, optional
        Batches loaded ahead per worker (default 2, at most 1024); an
        epoch never has more in flight than it has batches.
    persistent_workers : bool, default False
        Keep worker processes alive between epochs; without it they end
        with each epoch, as torch's do. Worker threads always live as long
        as the loader.
    pin_memory_device : str, default ""
        Accepted as torch accepts it (deprecated there): a non-empty value
        gives torch's deprecation warning, and the current accelerator is
        used.
    in_order : bool, default True
        Deliver batches in sampler order; ``False`` delivers them as they
        complete.
    item_concurrency : int, default 1
        Items of one batch fetched at once (each by its own ``__getitem__``
        call), for datasets that wait on I/O; the loader starts
        ``max(num_workers, 1) * item_concurrency`` threads (see
        ``docs/execution.md``, "Limits").
    transform : callable, optional
        Called as ``transform(index, item)`` on each item before collation.
    seed : int, optional
        Makes ``shuffle=True`` reproducible: the order of epoch ``e`` is a
        function of ``(seed, e)``. Without it the loader draws one (from
        ``generator`` when given), readable as ``loader.seed``.
    equal_batches : bool, default False
        Streaming datasets only: stop every rank of a distributed job at
        the same number of batches, the smallest rank's, all full (partial
        batches are dropped as with ``drop_last``), so every rank sees the
        same number of samples (see ``docs/distributed.md``, "Equal batches").
    on_error : {"raise", "skip"}, default "raise"
        Map-style datasets: with ``"skip"``, an item whose fetch or
        ``transform`` raises an ``Exception`` is dropped from its batch and
        counted in ``stats()["skipped"]``; a batch left empty is passed over.
    max_skipped : int or float, optional
        With ``on_error="skip"``, the most items an epoch may drop (an int,
        or a float fraction of the epoch's items); the next failing item
        raises its error. ``None`` drops any number.
    worker_type : {"auto", "thread", "process"}, default "auto"
        What the ``num_workers`` workers are. Threads share the process and
        run native work in parallel; processes run Python ``__getitem__``
        (or ``__iter__``: each process iterates its own stream) code in
        parallel on a build with the GIL, and hand batches back through
        shared memory. ``"auto"`` runs native work and items in memory on
        threads; a map-style dataset doing Python work loads its first batch
        on the calling thread, measures it, and goes on with one worker
        thread or with processes, whichever is faster; ``worker_type`` reads
        the choice and ``stats()["workers"]`` says why (see
        ``docs/execution.md``, "How auto chooses").
    memory_budget : int, optional
        With ``worker_type="auto"``: the bytes that batches in flight may
        take, the one the loop holds included; the loader loads fewer
        batches ahead (and, with ``num_workers="auto"``, starts fewer
        workers) to stay within it, with one more batch at most while it
        is collated.

    Examples
    --------
    >>> from dataloader import DataLoader
    >>> loader = DataLoader(list(range(10)), batch_size=4)
    >>> len(loader)
    3
    >>> [batch.tolist() for batch in loader]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    >>> loader = DataLoader(list(range(10)), batch_size=4, shuffle=True, seed=0)
    >>> sorted(sum((batch.tolist() for batch in loader), []))
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """

    #: ``worker_type="auto"`` measures a map-style dataset doing Python work
    #: (``dataloader._auto``); ``dataloader.torch``'s loader gives it worker
    #: processes, as torch does.
    _measures_python_work = True
    # The collate_fn of batches and of single items when none is given.
    _collate = staticmethod(default_collate)
    _convert = staticmethod(default_convert)

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool = False,
        sampler: Iterable[int] | None = None,
        batch_sampler: Iterable[list[int]] | None = None,
        num_workers: int | str = 0,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
        item_concurrency: int = 1,
        transform: Callable[[int, Any], Any] | EpochBound | None = None,
        seed: int | None = None,
        equal_batches: bool = False,
        on_error: str = "raise",
        max_skipped: int | float | None = None,
        worker_type: str = "auto",
        memory_budget: int | None = None,
    ) -> None:
        auto_workers = num_workers == "auto"
        if auto_workers:
            num_workers = usable_cores()
        check_dataset(dataset)
        check_async_dataset(dataset)
        check_skip_policy(on_error, max_skipped)
        check_counts(batch_size, num_workers, prefetch_factor, timeout, item_concurrency)
        num_workers = cast(int, num_workers)  # checked
        check_process_options(num_workers, multiprocessing_context, persistent_workers)
        check_pin_memory_device(pin_memory_device)
        check_worker_type(worker_type)
        check_memory_budget(memory_budget, worker_type)
        iterable = is_iterable_style(dataset)
        if iterable:
            _streaming.check_options(shuffle, sampler, batch_sampler)
            if on_error != "raise":
                raise ValueError("on_error='skip' applies to map-style datasets")
        elif equal_batches:
            raise ValueError(
                "equal_batches applies to iterable-style datasets; a map-style dataset gets "
                "equal shares on every rank from DistributedSampler"
            )
        check_exclusive_options(batch_size, shuffle, sampler, batch_sampler, drop_last)
        check_randomness(shuffle, generator, seed, item_source(dataset, transform)[1])
        for name, value in (("sampler", sampler), ("batch_sampler", batch_sampler)):
            if value is not None and not isinstance(value, Iterable):
                raise TypeError(
                    f"{name} should be an iterable of indices, got {type(value).__name__}"
                )

        user_seeded = seed is not None
        if seed is None:
            seed = self._default_seed(generator)
        if batch_sampler is not None:
            batch_size, drop_last = None, False
        if sampler is None and not iterable:
            if shuffle:
                sampler = self._shuffled_sampler(dataset, seed, generator, user_seeded)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            assert sampler is not None  # set just above for a map-style dataset
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self._iterable = iterable
        self.equal_batches = bool(equal_batches)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers: int = num_workers
        self._auto_workers = auto_workers
        self.memory_budget = memory_budget
        self.prefetch_factor = prefetch_factor if prefetch_factor is not None else 2
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self.item_concurrency = item_concurrency
        self.transform = transform
        self.on_error = on_error
        self.max_skipped = max_skipped
        self._seed = seed
        self._worker_type = WorkerTypeChoice(worker_type, dataset)
        if collate_fn is None:
            collate_fn = self._collate if self._auto_collation else self._convert
        self.collate_fn = collate_fn
        # What each kind of worker runs on (its pool, its processes), made when
        # an epoch first needs it and stopped by close().
        self._worker_kinds = {name: make() for name, make in WORKER_KINDS.items()}
        # An async dataset's coroutines run on an event loop owned by the
        # loader (see dataloader/_datasets/event_loop.py); the finalizer holds the loop's
        # owner, not the loader, like the pool's.
        self._event_loop = EventLoop(dataset) if is_async_dataset(dataset) else None
        if self._event_loop is not None:
            weakref.finalize(self, self._event_loop.close)
        self._progress = LoaderProgress()
        self._stats = Stats()
        # Streaming epochs still running, cancelled before the pool stops.
        self._streams: weakref.WeakSet[Any] = weakref.WeakSet()
        # Epochs whose batches a pinning thread pins, stopped by close().
        self._pinned: weakref.WeakSet[PinnedIterator] = weakref.WeakSet()
        # equal_batches without known counts: the ranks' own process group
        # (it makes its torch group when the first epoch that needs it starts).
        self._rank_group = RankGroup() if equal_batches else None
        self._initialized = True

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FROZEN_ATTRIBUTES and getattr(self, "_initialized", False):
            raise ValueError(
                f"{name} attribute should not be set after {type(self).__name__} is initialized"
            )
        super().__setattr__(name, value)

    # LoaderRandomness declares ``epoch: int`` only to read it; it is never set.
    @property
    def epoch(self) -> int:
        """The number of the epoch started last (before any, of the one to come).

        Each ``iter(loader)`` starts the next epoch, unless ``set_epoch``
        was called on the sampler since: then the sampler's epoch.
        """
        return self._progress.epoch

    @property
    def _auto_collation(self) -> bool:
        if self._iterable:
            return self.batch_size is not None
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Iterable[Any]:
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        """The number of batches in one epoch."""
        if self._iterable:
            return stream_length(self)
        return len(self._index_sampler)  # type: ignore[arg-type]

    @property
    def _auto(self) -> Auto:
        """The measuring kind of worker (``worker_type="auto"``, ``dataloader._auto``)."""
        return cast(Auto, self._worker_kinds["auto"])

    @property
    def worker_type(self) -> str:
        """``"thread"`` or ``"process"``: what the workers are, ``"auto"`` resolved.

        A measured loader (``stats()["workers"]["why"]``) reads what its
        last epoch chose, ``"thread"`` before its first.

        Examples
        --------
        >>> from dataloader import DataLoader
        >>> DataLoader(list(range(4)), num_workers=2).worker_type  # items in memory
        'thread'
        """
        if self.num_workers > 0 and self._worker_type.measured(self):
            return self._auto.kind
        return self._worker_type.of(self)

    def __iter__(self) -> Any:
        self._begin_iteration()
        pin = pinning(self.pin_memory, self.pin_memory_device)
        kind = self._worker_kinds[kind_name(self)]  # resolved once per epoch
        iterator = self._start_stream(kind) if self._iterable else self._start_map_epoch(kind)
        if pin is None:
            return iterator
        if not kind.loads_ahead:
            return InlinePinnedIterator(iterator)
        pinned = PinnedIterator(iterator, self._progress, pin)
        self._pinned.add(pinned)
        close_at_exit(self)
        return pinned

    def close(self) -> None:
        """Stop the workers; epochs still running raise on their next batch (or end).

        Items still loading are waited for, up to 30 s in all (not at all
        when a ``with`` block ends with an exception; 1 s at interpreter exit);
        past that they finish in the background, discarded (``docs/execution.md``).
        For an async dataset, the coroutines in flight are cancelled, its
        ``aclose()`` is awaited and its event loop stops, before the pool.
        The loader stays usable: its next threaded epoch starts a new pool
        (and its next async epoch a new event loop).

        Examples
        --------
        >>> from dataloader import DataLoader
        >>> with DataLoader(list(range(4)), batch_size=2, num_workers=2) as loader:
        ...     [batch.tolist() for batch in loader]
        [[0, 1], [2, 3]]
        """
        self._close(CLOSE_WAIT_SECONDS)

    def _close(self, seconds: float) -> None:
        """``close()``, waiting at most ``seconds`` in all for workers in user code."""
        deadline = time.monotonic() + wait_bound(seconds)
        # The loop first: it cancels coroutines that pool threads wait for.
        if self._event_loop is not None:
            self._event_loop.close()
        # Then the pinning threads, which take batches from the pool's epochs.
        for pinned in list(self._pinned):
            pinned.close(max(deadline - time.monotonic(), 0.0))
        for kind in self._worker_kinds.values():
            kind.close(max(deadline - time.monotonic(), 0.0))

    def __enter__(self) -> DataLoader[T_co]:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        # An error (Ctrl-C) is not held up for items that are discarded anyway.
        self._close(CLOSE_WAIT_SECONDS if exc_type is None else 0.0)

    def stats(self) -> dict[str, Any]:
        """Counts and cumulative seconds of each loading stage, the workers, and their load.

        ``fetch`` and ``transform`` count items, ``collate`` counts batches
        (their seconds add up over all workers, worker processes included),
        and ``wait`` counts the consumer's ``next()`` calls and the time
        spent in them: waiting for workers, or (with ``num_workers=0``)
        loading the batch. ``workers`` says what loads: ``{"type":
        loader.worker_type, "count": num_workers}``, and for a measured
        ``worker_type="auto"`` (``docs/execution.md``, "How auto chooses")
        ``"why"``: the figures it chose by. Then:

        * ``item_seconds``: what an item costs to load, on average (its
          fetch and transform, and its share of its batch's collation);
        * ``interpreter_share``: the share of that time in Python code,
          which holds the interpreter (on a build with its lock, Python code
          on threads runs one at a time);
        * ``wait_share``: the share of the consumer's time spent waiting
          in ``next()``; near 0, loading keeps up and is not what limits
          training.

        Each is ``None`` until it has been measured.

        Examples
        --------
        >>> from dataloader import DataLoader
        >>> loader = DataLoader(list(range(10)), batch_size=5)
        >>> _ = list(loader)
        >>> figures = loader.stats()
        >>> figures["fetch"]["count"], figures["collate"]["count"]
        (10, 2)
        >>> figures["wait"]["seconds"] >= 0, figures["workers"]
        (True, {'type': 'thread', 'count': 0})
        >>> 0 <= figures["wait_share"] <= 1 and figures["item_seconds"] > 0
        True
        """
        figures = self._stats.snapshot()
        workers: dict[str, Any] = {"type": self.worker_type, "count": self.num_workers}
        if self.num_workers > 0 and self._worker_type.measured(self):
            choice = self._auto.choice
            workers["why"] = choice.why if choice is not None else "not measured yet"
            if choice is not None:  # one thread may run a dataset not safe on several
                workers["count"] = choice.workers
        stages = [figures[stage]["seconds"] for stage in ("fetch", "transform", "collate")]
        items = figures["fetch"]["count"]
        native = self._worker_type.native_stages(self)
        python = sum(seconds for column, seconds in zip((FETCH, TRANSFORM, COLLATE), stages,
                                                        strict=True) if column not in native)
        return {
            **figures, "workers": workers,
            "item_seconds": sum(stages) / items if items else None,
            "interpreter_share": python / sum(stages) if sum(stages) else None,
            "wait_share": self._stats.wait_share(),
        }

    def state_dict(self) -> dict[str, Any]:
        """Where this loader is: a small JSON-serialisable dict for ``load_state_dict``.

        It holds the epoch, the batches delivered in it, the seed, and the
        sampler's own ``state_dict`` when it has one, a seeded batch
        sampler's too (streaming: each stream iterator's state). See
        ``docs/distributed.md``, "Resume".

        Examples
        --------
        >>> from dataloader import DataLoader
        >>> loader = DataLoader(list(range(8)), batch_size=2, shuffle=True, seed=4)
        >>> it = iter(loader)
        >>> first = [next(it).tolist() for _ in range(2)]
        >>> state = loader.state_dict()
        >>> state["epoch"], state["batches"]
        (0, 2)
        >>> resumed = DataLoader(list(range(8)), batch_size=2, shuffle=True)
        >>> resumed.load_state_dict(state)
        >>> rest = [batch.tolist() for batch in resumed]
        >>> rest == [batch.tolist() for batch in it]
        True
        """
        state = self._progress.state_dict(self.seed, self.sampler, self.in_order)
        share = elastic.describe_rank(self)  # for a job of another size (merge_states)
        if share is not None:
            state["elastic"] = share
        if is_epoch_seeded(self.batch_sampler):
            state["batch_sampler"] = self.batch_sampler.state_dict()
        if state["batches"]:
            if self._iterable:
                _streaming.check_resumable_state(state)
            else:
                check_resumable(self.sampler)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state``: the next ``iter(loader)`` resumes its epoch.

        The resumed epoch gives exactly the batches the interrupted run
        would have given after the saved point, and later epochs follow as
        they would have. Raises ``ValueError`` when the state cannot be
        resumed here (see ``state_dict``).

        Examples
        --------
        >>> from dataloader import DataLoader
        >>> loader = DataLoader(list(range(6)), batch_size=2)
        >>> loader.load_state_dict({"format": 1, "epoch": 3, "batches": 2, "seed": 0})
        >>> loader.epoch, [batch.tolist() for batch in loader]
        (3, [[4, 5]])
        """
        state = dict(elastic.prepare_load(self, state))  # a merged state: this rank's share
        if self._iterable and state.get("batches"):
            _streaming.check_resumable_state(state)
        if "sampler" in state and hasattr(self.sampler, "load_state_dict"):
            self.sampler.load_state_dict(state["sampler"])
        if "batch_sampler" in state and is_epoch_seeded(self.batch_sampler):
            self.batch_sampler.load_state_dict(state["batch_sampler"])
        self.seed = self._progress.load_state_dict(state)

    def _length_before_epoch(self, progress: EpochProgress) -> int | None:
        """The epoch's batch count, when known before its first batch. A sampler whose
        ``len()`` plans its whole epoch (``length_plans_epoch``) is asked when the count
        is first needed, so that its first batch waits for no more than its own plan."""
        if getattr(self._index_sampler, "length_plans_epoch", False):
            progress.length = self.__len__
            return None
        try:
            progress.total = len(self)
        except TypeError:
            progress.total = None
        return progress.total

    def _start_map_epoch(self, kind: WorkerKind) -> MapIterator:
        """``iter(loader)`` over a map-style dataset: plan the epoch, start its engine."""
        progress, _resume = self._progress.start_epoch(self._epoch_samplers())
        skipped = progress.delivered
        total = self._length_before_epoch(progress)
        if total is not None:
            total = max(total - skipped, 0)
        index_sampler = self._index_sampler
        if yields_valid_indices(index_sampler):
            check = None
        else:
            check = check_batch_indices if self._auto_collation else check_index
        source = guarded_dataset(self, kind.other_processes)  # warns of open files once
        skip = SkipBudget.for_epoch(self.on_error, self.max_skipped, self.sampler)
        if kind.other_processes:  # the workers bind the epoch, each in its own process
            recipe, item_lanes, on_cancel = None, False, None
        else:
            bound = bind_map_epoch(
                self.dataset, transform=self.transform, collate=self.collate_fn,
                batched=self._auto_collation, seed=self.seed, epoch=self.epoch,
                lanes=self.item_concurrency > 1, skip=skip, event_loop=self._event_loop,
                fetch_from=source,
            )
            recipe, item_lanes, on_cancel = bound.recipe, bound.item_lanes, bound.on_cancel
        batches = skip_batches(index_sampler, self._auto_collation, skipped)
        plan = EpochPlan(
            batches, total, check, recipe, progress, self._stats, item_lanes, on_cancel,
            skip=skip,
            window=epoch_window(self.num_workers, self.prefetch_factor, total),
            item_concurrency=self.item_concurrency,
            in_order=self.in_order,
            timeout=float(self.timeout),
            first=skipped,
        )
        return MapIterator(self, plan, kind.map_engine(self, plan))

    def _start_stream(self, kind: WorkerKind) -> StreamIterator:
        """``iter(loader)`` over a stream: end the previous epoch, plan this one, start it."""
        # The previous epoch's workers are needed by the new one.
        for previous in list(self._streams):
            previous.cancel(replaced=True)
        progress, resume = self._progress.start_epoch(())
        recipe = _streaming.bind_stream_epoch(self.transform, self.collate_fn, self.batch_size,
                                              seed=self.seed, epoch=self.epoch,
                                              lanes=self.item_concurrency > 1)
        limit = _streaming.epoch_limit(self, self._rank_group)
        plan = StreamPlan(
            dataset=self.dataset,
            num_workers=self.num_workers,
            recipe=recipe,
            batch_size=self.batch_size,
            drop_last=_streaming.drops_partial(self),
            progress=progress,
            resume=resume,
            limit=limit,
            stats=self._stats,
            base_seed=self._worker_base_seed(),
            prefetch_factor=self.prefetch_factor,
            timeout=float(self.timeout),
            rank_group=self._rank_group,
            in_order=self.in_order,
        )

        def engine_for(plan: StreamPlan, states: dict[int, Any]) -> Any:
            return kind.stream_engine(self, plan, states)

        epoch = _streaming.start_epoch(self, plan, engine_for)
        warn_past_reported_length(epoch, self)
        self._streams.add(epoch)
        return epoch
