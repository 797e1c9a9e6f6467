"""Thread scaling of a pure-Python ``__getitem__``: 1 worker vs 2.

Every item runs a small pure-Python loop (no native code releases the
GIL), so with the GIL two worker threads take turns, and on a free-threaded
CPython (``python3.13t``) they run at once. The same items computed by
plain ``threading.Thread``s give the ceiling on the machine at hand. Run it
with each interpreter::

    python benchmarks/thread_scaling.py
    .venv-ft/bin/python benchmarks/thread_scaling.py
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

from dataloader import DataLoader
from dataloader._cli.measure import median_seconds, print_table, write_json

RESULTS = Path(__file__).parent / "results"

N_ITEMS = 2_000
WORK = 2_000  # loop iterations per item: about 0.1 ms of pure Python


class PurePython:
    """Items computed by a Python loop: CPU-bound, holding the GIL throughout."""

    def __len__(self) -> int:
        return N_ITEMS

    def __getitem__(self, index: int) -> int:
        total = index
        for step in range(WORK):
            total = (total * 31 + step) % 1_000_003
        return total


def best_rates(repeats: int) -> dict[int, float]:
    """Items per second with 1 and 2 workers: the best of ``repeats`` epochs each.

    The two loaders' epochs alternate, so that both see the same load on a
    shared machine.
    """
    loaders = {workers: DataLoader(PurePython(), batch_size=32, num_workers=workers,
                                   worker_type="thread")
               for workers in (1, 2)}
    best = {workers: float("inf") for workers in loaders}
    for _ in range(repeats):
        for workers, loader in loaders.items():
            seconds = median_seconds(lambda loader=loader: sum(1 for _ in loader),
                                     repeats=1, warmup=0)
            best[workers] = min(best[workers], seconds)
    for loader in loaders.values():
        loader.close()
    return {workers: N_ITEMS / seconds for workers, seconds in best.items()}


def plain_thread_rates(repeats: int) -> dict[int, float]:
    """The same items computed by 1 and 2 plain ``threading.Thread``s: the ceiling."""
    dataset = PurePython()

    def compute(start: int, stop: int) -> None:
        for index in range(start, stop):
            dataset[index]

    def run(n_threads: int) -> None:
        bounds = [N_ITEMS * k // n_threads for k in range(n_threads + 1)]
        threads = [threading.Thread(target=compute, args=bounds[k:k + 2])
                   for k in range(n_threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    best = {1: float("inf"), 2: float("inf")}
    for _ in range(repeats):
        for n_threads in best:
            best[n_threads] = min(best[n_threads], median_seconds(
                lambda n_threads=n_threads: run(n_threads), repeats=1, warmup=0))
    return {n_threads: N_ITEMS / seconds for n_threads, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    build = "GIL" if gil else "free-threaded"
    rates = best_rates(args.repeats)
    ceiling = plain_thread_rates(args.repeats)
    interpreter = f"{sys.version.split()[0]} ({build})"
    rows = [[interpreter, "DataLoader", f"{rates[1]:,.0f}", f"{rates[2]:,.0f}",
             f"{rates[2] / rates[1]:.2f}x"],
            [interpreter, "plain threads", f"{ceiling[1]:,.0f}", f"{ceiling[2]:,.0f}",
             f"{ceiling[2] / ceiling[1]:.2f}x"]]
    print_table(["interpreter", "runner", "1 thread (items/s)", "2 threads (items/s)",
                 "scaling"], rows)
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    write_json(RESULTS, f"thread_scaling_{'gil' if gil else 'ft'}",
               {"gil": gil, "items_per_second": rates, "plain_threads": ceiling})


if __name__ == "__main__":
    main()
