"""``DataLoader``: its arguments, their validation, and the wiring of an epoch.

The signature is ``torch.utils.data.DataLoader``'s, positional order
included; the arguments this library adds are keyword-only.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Generic, Iterable, TypeVar

import numpy as np

from dataloader._async import EpochItems, EventLoop, check_async_dataset, is_async_dataset
from dataloader._collate import default_collate, default_convert
from dataloader._dataset import is_iterable_style, is_map_style
from dataloader._fetch import BatchRecipe, check_batch_indices, check_index
from dataloader._core.pool import Pool
from dataloader._iterators import DirectEpoch, EpochPlan, ThreadedEpoch
from dataloader._worker import WorkerSetup
from dataloader._sampler import (
    BatchSampler,
    RandomSampler,
    SequentialSampler,
    check_generator,
    yields_valid_indices,
)

T_co = TypeVar("T_co", covariant=True)

__all__ = ["DataLoader"]

# Attributes that define what an epoch is; like torch, they are fixed once built.
_FROZEN_ATTRIBUTES = frozenset({"batch_size", "sampler", "batch_sampler", "drop_last", "dataset"})

# How long closing a loader waits for a worker busy in user code.
_JOIN_TIMEOUT_SECONDS = 30.0


class DataLoader(Generic[T_co]):
    """Iterate over a dataset in batches, loading them on a pool of threads.

    Parameters
    ----------
    dataset : map-style dataset
        Any object with ``__getitem__`` and ``__len__`` (a list works).
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
    num_workers : int, default 0
        Worker threads loading batches in parallel; 0 loads each batch on
        the calling thread when ``next()`` asks for it.
    collate_fn : callable, optional
        Turns a list of items into a batch; defaults to :func:`default_collate`.
    pin_memory : bool, default False
        Accepted for compatibility; batches are numpy arrays in host memory.
    drop_last : bool, default False
        Drop the last batch of an epoch when it is short.
    timeout : float, default 0
        Seconds to wait for one batch from the workers before ``TimeoutError``
        (0 waits forever).
    worker_init_fn : callable, optional
        Called as ``worker_init_fn(worker_id)`` once on each worker thread.
    multiprocessing_context : object, optional
        Accepted for compatibility; it has no effect, workers are threads.
    generator : numpy.random.Generator or torch.Generator, optional
        Source of the shuffling order.
    prefetch_factor : int, optional
        Batches loaded ahead per worker (default 2 with workers).
    persistent_workers : bool, default False
        Accepted for compatibility; worker threads always live as long as
        the loader, which is what this option asks of torch's processes.
    in_order : bool, default True
        Deliver batches in sampler order; ``False`` delivers them as they
        complete.
    item_concurrency : int, default 1
        Items of one batch fetched at once (each by its own ``__getitem__``
        call), for datasets that wait on I/O.
    transform : callable, optional
        Called as ``transform(index, item)`` on each item before collation.
    seed : int, optional
        Makes ``shuffle=True`` reproducible: the same seed gives the same
        sequence of epoch orders, each epoch still different.

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

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool = False,
        sampler: Iterable[int] | None = None,
        batch_sampler: Iterable[list[int]] | None = None,
        num_workers: int = 0,
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
        in_order: bool = True,
        item_concurrency: int = 1,
        transform: Callable[[int, Any], Any] | None = None,
        seed: int | None = None,
    ) -> None:
        _check_dataset(dataset)
        check_async_dataset(dataset)
        _check_counts(batch_size, num_workers, prefetch_factor, timeout, item_concurrency)
        _check_exclusive_options(batch_size, shuffle, sampler, batch_sampler, drop_last)
        _check_randomness(shuffle, generator, seed)
        for name, value in (("sampler", sampler), ("batch_sampler", batch_sampler)):
            if value is not None and not isinstance(value, Iterable):
                raise TypeError(
                    f"{name} should be an iterable of indices, got {type(value).__name__}"
                )

        if batch_sampler is not None:
            batch_size, drop_last = None, False
        if sampler is None:
            if shuffle:
                sampler = RandomSampler(dataset, generator=_shuffle_generator(generator, seed))
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor if prefetch_factor is not None else 2
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self.item_concurrency = item_concurrency
        self.transform = transform
        self.seed = seed
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._pool: Pool | None = None
        self._pool_finalizer: weakref.finalize | None = None
        self._worker_setup: WorkerSetup | None = None
        # An async dataset's coroutines run on an event loop owned by the
        # loader (see dataloader/_async.py); the finalizer holds the loop's
        # owner, not the loader, like the pool's.
        self._event_loop = EventLoop(dataset) if is_async_dataset(dataset) else None
        if self._event_loop is not None:
            weakref.finalize(self, self._event_loop.close)
        self._base_seed = int(np.random.default_rng(seed).integers(2**62))
        self._initialized = True

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FROZEN_ATTRIBUTES and getattr(self, "_initialized", False):
            raise ValueError(
                f"{name} attribute should not be set after {type(self).__name__} is initialized"
            )
        super().__setattr__(name, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Iterable[Any]:
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        """The number of batches in one epoch."""
        return len(self._index_sampler)  # type: ignore[arg-type]

    @property
    def _threaded(self) -> bool:
        return self.num_workers > 0 or self.item_concurrency > 1

    def __iter__(self) -> DirectEpoch | ThreadedEpoch:
        plan = self._plan_epoch()
        if not self._threaded:
            return DirectEpoch(self, plan)
        return ThreadedEpoch(self, plan, self._live_pool(), self._worker_setup)

    def _live_pool(self) -> Pool:
        """The loader's pool, created on the first threaded epoch and kept after it."""
        size = max(self.num_workers, 1) * self.item_concurrency
        pool = self._pool
        if pool is not None and pool.alive and pool.size == size:
            return pool
        self._shutdown_pool()
        pool = Pool(size)
        self._pool = pool
        self._worker_setup = WorkerSetup(size, self._base_seed, self.dataset, self.worker_init_fn)
        # The finalizer holds the pool, not the loader; it also runs at exit,
        # before the interpreter finalizes, so no worker outlives Python.
        self._pool_finalizer = weakref.finalize(self, pool.shutdown, _JOIN_TIMEOUT_SECONDS)
        return pool

    def _shutdown_pool(self) -> None:
        if self._pool_finalizer is not None:
            self._pool_finalizer()
        self._pool = None
        self._pool_finalizer = None

    def close(self) -> None:
        """Stop the worker threads; epochs still running raise on their next batch.

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
        # The loop first: it cancels coroutines that pool threads wait for.
        if self._event_loop is not None:
            self._event_loop.close()
        self._shutdown_pool()

    def __enter__(self) -> DataLoader[T_co]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _plan_epoch(self) -> EpochPlan:
        try:
            total: int | None = len(self)
        except TypeError:
            total = None
        index_sampler = self._index_sampler
        if yields_valid_indices(index_sampler):
            check = None
        else:
            check = check_batch_indices if self._auto_collation else check_index
        source, item_lanes, on_cancel = self.dataset, False, None
        if self._event_loop is not None:
            source = EpochItems(self.dataset, self._event_loop)
            item_lanes, on_cancel = source.item_lanes, source.cancel
        recipe = BatchRecipe.for_dataset(
            source,
            transform=self.transform,
            collate=self.collate_fn,
            batched=self._auto_collation,
        )
        return EpochPlan(iter(index_sampler), total, check, recipe, item_lanes, on_cancel)


def _check_dataset(dataset: Any) -> None:
    if is_iterable_style(dataset):
        raise NotImplementedError(
            "DataLoader does not support iterable-style (streaming) datasets yet; "
            "pass a map-style dataset with __getitem__ and __len__"
        )
    if not is_map_style(dataset):
        raise TypeError(
            "dataset should be map-style (define __getitem__ and __len__) or "
            f"iterable-style (define __iter__), got {type(dataset).__name__}"
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_counts(
    batch_size: Any, num_workers: Any, prefetch_factor: Any, timeout: Any, item_concurrency: Any
) -> None:
    if batch_size is not None and (not _is_int(batch_size) or batch_size <= 0):
        raise ValueError(
            f"batch_size should be a positive integer or None, but got batch_size={batch_size!r}"
        )
    if not _is_int(num_workers) or num_workers < 0:
        raise ValueError(
            "num_workers should be a non-negative integer (0 loads on the calling thread), "
            f"but got num_workers={num_workers!r}"
        )
    if prefetch_factor is not None and (not _is_int(prefetch_factor) or prefetch_factor < 1):
        raise ValueError(
            f"prefetch_factor should be a positive integer, but got prefetch_factor={prefetch_factor!r}"
        )
    if not isinstance(timeout, (int, float)) or timeout < 0:
        raise ValueError(f"timeout should be a non-negative number, but got timeout={timeout!r}")
    if not _is_int(item_concurrency) or item_concurrency < 1:
        raise ValueError(
            f"item_concurrency should be an integer >= 1, but got item_concurrency={item_concurrency!r}"
        )


def _check_exclusive_options(
    batch_size: Any, shuffle: Any, sampler: Any, batch_sampler: Any, drop_last: Any
) -> None:
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None:
        if batch_size != 1 or shuffle or sampler is not None or drop_last:
            raise ValueError(
                "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                "sampler, and drop_last"
            )
    elif batch_size is None and drop_last:
        raise ValueError(
            "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
        )


def _check_randomness(shuffle: Any, generator: Any, seed: Any) -> None:
    check_generator(generator)
    if seed is None:
        return
    if not _is_int(seed):
        raise TypeError(f"seed should be an int, but got seed={seed!r}")
    if not shuffle:
        raise ValueError("seed makes shuffle=True reproducible; pass shuffle=True with seed")
    if generator is not None:
        raise ValueError("pass either seed or generator, not both")


def _shuffle_generator(generator: Any, seed: int | None) -> Any:
    if seed is not None:
        return np.random.default_rng(seed)
    return generator
