"""Shared helpers of the benchmarks: timing, tables and JSON output."""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable

RESULTS = Path(__file__).parent / "results"


class Indices:
    """A map-style dataset of ``n`` items whose item ``i`` is ``i``: only the loader's work is left."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return index


def median_seconds(run: Callable[[], Any], *, repeats: int = 5, warmup: int = 1) -> float:
    """The median wall time of ``run()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def machine() -> dict[str, Any]:
    import os

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2))
    return path


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    cells = [headers] + [[_format(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths)))
        if n == 0:
            print("  ".join("-" * width for width in widths))


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    return str(value)


def per_image_seconds(function: Callable[[Any], Any], items: list[Any],
                      repeats: int) -> tuple[float, float]:
    """Seconds per item of ``function`` over ``items``, on one thread and on two.

    Each figure is the best of ``repeats`` runs. The two are measured
    alternately, in short runs, so that both see the same conditions on a
    shared machine and the best runs are the least disturbed.
    """
    from concurrent.futures import ThreadPoolExecutor

    count = len(items)
    best = {1: float("inf"), 2: float("inf")}
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(function, items[:4]))   # warm up both threads
        for _ in range(repeats):
            start = time.perf_counter()
            for item in items:
                function(item)
            best[1] = min(best[1], (time.perf_counter() - start) / count)
            start = time.perf_counter()
            list(pool.map(function, items, chunksize=max(count // 2, 1)))
            best[2] = min(best[2], (time.perf_counter() - start) / count)
    return best[1], best[2]


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    import os

    return [round(value, 2) for value in os.getloadavg()]
