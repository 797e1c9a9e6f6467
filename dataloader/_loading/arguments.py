"""The checks of ``DataLoader``'s counting arguments, and their limits.

Each limit is declared once, here or where the resource it protects lives
(``MAX_THREADS`` with the pool), and every message derives from it. As in
torch, a value of the wrong type is a ``TypeError`` and a value out of
range a ``ValueError``, raised when the loader is built, never when it is
first iterated.
"""

from __future__ import annotations

from typing import Any

from dataloader._core.pool import MAX_THREADS

__all__ = ["MAX_PREFETCH_FACTOR", "MAX_THREADS", "check_counts", "epoch_window", "is_int"]

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
    _check_int("num_workers", num_workers, 0, MAX_THREADS,
               "worker threads; 0 loads on the calling thread")
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
        _check_int("prefetch_factor", prefetch_factor, 1, MAX_PREFETCH_FACTOR,
                   "batches loaded ahead per worker")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout should be a number of seconds, but got timeout={timeout!r}")
    if not timeout >= 0:  # NaN too
        raise ValueError(f"timeout should be a non-negative number, but got timeout={timeout!r}")


def epoch_window(num_workers: int, prefetch_factor: int, total: int | None) -> int:
    """Batches an epoch loads ahead: ``max(num_workers, 1) * prefetch_factor``, capped.

    No epoch has more batches in flight than it has batches, so a known
    batch count caps the window (and the memory its slots take).
    """
    window = max(num_workers, 1) * prefetch_factor
    if total is not None:
        window = min(window, max(total, 1))
    return window
