"""The checks of ``DataLoader``'s arguments, and the limits of its counts.

Each limit is declared once, here or where the resource it protects lives
(``MAX_THREADS`` with the pool), and every message derives from it. As in
torch, a value of the wrong type is a ``TypeError`` and a value out of
range a ``ValueError``, raised when the loader is built, never when it is
first iterated.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import warnings
from collections.abc import Iterator
from typing import Any

from dataloader._core.pool import MAX_THREADS
from dataloader._datasets.dataset import is_iterable_style, is_map_style
from dataloader._sampling.sampler import check_generator, epoch_rng

__all__ = [
    "MAX_PREFETCH_FACTOR", "MAX_THREADS", "check_counts", "check_dataset",
    "check_exclusive_options", "check_memory_budget", "check_process_options",
    "check_randomness", "epoch_window",
    "is_int", "seed_from",
]

# Batches loaded ahead per worker. A worker makes its batches one after
# another, so beyond a few per worker the window only holds memory; the
# limit keeps the engine's bookkeeping (a few dozen bytes per slot of the
# window, allocated when an epoch starts) under 100 MB even at MAX_THREADS
# workers, before any batch is loaded.
MAX_PREFETCH_FACTOR = 1024


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(name: str, value: Any, low: int, high: int, meaning: str) -> None:
    if not is_int(value):
        raise TypeError(f"{name} should be an integer ({meaning}), but got {name}={value!r}")
    if not low <= value <= high:
        raise ValueError(
            f"{name} should be an integer from {low} to {high} ({meaning}), "
            f"but got {name}={value!r}"
        )


def check_counts(
    batch_size: Any, num_workers: Any, prefetch_factor: Any, timeout: Any, item_concurrency: Any
) -> None:
    """Validate the loader's counts and the number of threads they start."""
    # torch's BatchSampler raises ValueError for any batch_size that is not
    # a positive int (2.0 included); kept for parity.
    if batch_size is not None and (not is_int(batch_size) or batch_size <= 0):
        raise ValueError(
            f"batch_size should be a positive integer or None, but got batch_size={batch_size!r}"
        )
    if is_int(num_workers) and num_workers < 0:
        raise ValueError(
            "num_workers option should be non-negative; use num_workers=0 to load on the "
            f"calling thread, but got num_workers={num_workers}"
        )
    _check_int("num_workers", num_workers, 0, MAX_THREADS,
               "worker threads or processes; 0 loads on the calling thread")
    _check_int("item_concurrency", item_concurrency, 1, MAX_THREADS,
               "items of one batch fetched at once")
    threads = max(num_workers, 1) * item_concurrency
    if threads > MAX_THREADS:
        raise ValueError(
            f"max(num_workers, 1) * item_concurrency is the number of threads the loader "
            f"starts and should be at most {MAX_THREADS}, but got num_workers={num_workers} "
            f"and item_concurrency={item_concurrency} ({threads} threads)"
        )
    if prefetch_factor is not None:
        _check_prefetch_factor(prefetch_factor, num_workers, item_concurrency)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout should be a number of seconds, but got timeout={timeout!r}")
    if not timeout >= 0:  # NaN too
        raise ValueError(
            "timeout option should be non-negative (seconds to wait for one batch, 0 for "
            f"ever), but got timeout={timeout!r}"
        )


def _check_prefetch_factor(prefetch_factor: Any, num_workers: int, item_concurrency: int) -> None:
    _check_int("prefetch_factor", prefetch_factor, 1, MAX_PREFETCH_FACTOR,
               "batches loaded ahead per worker")
    if num_workers == 0 and item_concurrency == 1:  # as torch: nothing loads ahead of next()
        raise ValueError(
            "prefetch_factor option could only be specified when batches load ahead, with "
            "num_workers > 0 (or item_concurrency > 1): with num_workers=0 each batch loads "
            "on the calling thread when next() asks for it; leave prefetch_factor unset, "
            f"but got prefetch_factor={prefetch_factor}"
        )


def check_memory_budget(memory_budget: Any, worker_type: str) -> None:
    """``memory_budget``: ``None`` or a positive number of bytes, kept by ``"auto"``."""
    if memory_budget is None:
        return
    if worker_type != "auto":
        raise ValueError("memory_budget is kept by worker_type='auto', which measures the "
                         f"batches in flight, but got worker_type={worker_type!r}")
    if not is_int(memory_budget):
        raise TypeError("memory_budget should be a number of bytes (an int) or None, "
                        f"but got memory_budget={memory_budget!r}")
    if memory_budget <= 0:
        raise ValueError("memory_budget should be a positive number of bytes, "
                         f"but got memory_budget={memory_budget!r}")


def check_process_options(num_workers: int, multiprocessing_context: Any,
                          persistent_workers: Any) -> None:
    """Validate the options of worker processes, as torch does.

    Both need workers: with ``num_workers=0`` no process starts, so torch
    refuses them, and so does this loader (with worker threads they are
    accepted and unused: threads live as long as the loader).

    Examples
    --------
    >>> from dataloader._loading.arguments import check_process_options
    >>> check_process_options(2, "spawn", True)
    >>> try:
    ...     check_process_options(0, None, True)
    ... except ValueError as error:
    ...     print(str(error).split(" (")[0])
    persistent_workers option needs num_workers > 0
    """
    if multiprocessing_context is not None:
        if num_workers == 0:
            raise ValueError(
                "multiprocessing_context can only be used with multi-process loading "
                "(num_workers > 0), but got num_workers=0: batches load on the calling "
                "thread, and no process starts"
            )
        _check_start_method(multiprocessing_context)
    if persistent_workers and num_workers == 0:
        raise ValueError(
            "persistent_workers option needs num_workers > 0 (it keeps worker processes "
            "between epochs), but got num_workers=0"
        )


def _check_start_method(context: Any) -> None:
    methods = multiprocessing.get_all_start_methods()
    if isinstance(context, str):
        if context not in methods:
            raise ValueError(
                f"multiprocessing_context option should specify a valid start method in "
                f"{methods!r}, but got multiprocessing_context={context!r}"
            )
    elif not isinstance(context, multiprocessing.context.BaseContext):
        raise TypeError(
            "multiprocessing_context option should be a valid context object or a string "
            f"specifying the start method ({', '.join(methods)}), but got "
            f"multiprocessing_context={context!r}"
        )


def epoch_window(num_workers: int, prefetch_factor: int, total: int | None) -> int:
    """Batches an epoch loads ahead: ``max(num_workers, 1) * prefetch_factor``, capped.

    No epoch has more batches in flight than it has batches, so a known
    batch count caps the window (and the memory its slots take).
    """
    window = max(num_workers, 1) * prefetch_factor
    if total is not None:
        window = min(window, max(total, 1))
    return window


def check_dataset(dataset: Any) -> None:
    if not is_map_style(dataset) and not is_iterable_style(dataset):
        raise TypeError(
            "dataset should be map-style (define __getitem__ and __len__) or "
            f"iterable-style (define __iter__), got {type(dataset).__name__}"
        )


def check_exclusive_options(
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
    for name, value in (("sampler", sampler), ("batch_sampler", batch_sampler)):
        warn_if_one_pass(name, value)


def warn_if_one_pass(name: str, sampler: Any) -> None:
    """Warn that an iterator (a generator, say) passed as ``name`` serves one epoch only.

    ``iter()`` of an iterator is itself: the first epoch consumes it, and
    every later epoch is empty, without an error.

    Examples
    --------
    >>> import warnings
    >>> from dataloader._loading.arguments import warn_if_one_pass
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_if_one_pass("sampler", (i for i in range(4)))
    ...     warn_if_one_pass("sampler", range(4))
    >>> [str(warning.message)[:51] for warning in caught]
    ['sampler is an iterator (generator): the first epoch']
    """
    if isinstance(sampler, Iterator):
        warnings.warn(
            f"{name} is an iterator ({type(sampler).__name__}): the first epoch consumes it "
            "and every later epoch will be empty. Pass an object whose __iter__ starts "
            "afresh each time (a list, a Sampler), or a new loader per epoch",
            stacklevel=4,
        )


def check_randomness(shuffle: Any, generator: Any, seed: Any, transform: Any) -> None:
    check_generator(generator)
    if seed is None:
        return
    if not is_int(seed):
        raise TypeError(f"seed should be an int, but got seed={seed!r}")
    if not shuffle and transform is None:
        raise ValueError(
            "seed makes shuffle=True and random transforms reproducible; "
            "pass shuffle=True or a transform with seed"
        )
    if generator is not None:
        raise ValueError("pass either seed or generator, not both")


def seed_from(generator: Any) -> int:
    """One draw from the user's generator: the loader's seed, so orders are reproducible."""
    return int(epoch_rng(generator).integers(2**63))
