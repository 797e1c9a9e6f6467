"""Timing helpers shared with the Pillow-SIMD child process, which cannot import dataloader.

Pillow-SIMD replaces Pillow, so it lives in its own virtual environment
without this library; ``_pillow_simd.py`` runs there and imports these
helpers as a sibling module, as ``kernels.py`` does. Everything else the
benchmarks share is in ``dataloader._cli.measure``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def per_image_seconds(function: Callable[[Any], Any], items: list[Any],
                      repeats: int) -> tuple[float, float]:
    """Seconds per item of ``function`` over ``items``, on one thread and on two.

    Each figure is the best of ``repeats`` runs. The two are measured
    alternately, in short runs, so that both see the same conditions on a
    shared machine and the best runs are the least disturbed.
    """
    count = len(items)
    best = {1: float("inf"), 2: float("inf")}
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(function, items[:4]))  # warm up both threads
        for _ in range(repeats):
            start = time.perf_counter()
            for item in items:
                function(item)
            best[1] = min(best[1], (time.perf_counter() - start) / count)
            start = time.perf_counter()
            list(pool.map(function, items, chunksize=max(count // 2, 1)))
            best[2] = min(best[2], (time.perf_counter() - start) / count)
    return best[1], best[2]


def one_thread_seconds(function: Callable[[Any], Any], items: list[Any], repeats: int) -> float:
    """CPU seconds per item of ``function`` over ``items`` on this thread, the best of
    ``repeats`` runs after one run to warm up.

    The thread's CPU time, not the wall clock: on a shared machine the time
    other processes hold the CPU is not counted (what they do to the caches
    still is), so that the figures of two processes measured in turn compare.
    """
    best = float("inf")
    for run in range(repeats + 1):
        start = time.thread_time()
        for item in items:
            function(item)
        if run:
            best = min(best, (time.thread_time() - start) / len(items))
    return best


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    return [round(value, 2) for value in os.getloadavg()]
