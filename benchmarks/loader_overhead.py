"""The loader's own overhead: an in-memory dataset of ints, ours vs torch and dataloader-rs.

Every item is its index, so the time measured is the loader's: sampling,
fetching, collating, delivering. Run with ``python benchmarks/loader_overhead.py``;
torch's ``DataLoader`` runs beside ours when torch is installed: with
``num_workers=0`` against our direct path, and with 2 persistent worker
processes against our 2 worker threads.

dataloader-rs (a Rust core with worker threads; CPython >= 3.13) runs as a
second peer when it is importable (``make bench-rs`` builds a CPython 3.13
and a virtual environment with both): the same workloads with
``collate_fn=np.array`` on both sides, over a ``Dataset`` subclass whose
item is its index (as dataloader-rs's own benchmark), ``worker_type``
left at its default; ours / dataloader-rs printed per workload.
``--peer rs`` runs that comparison alone.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import time
from pathlib import Path
from statistics import median

import numpy as np

from dataloader import DataLoader, Dataset
from dataloader._cli.measure import Indices, median_seconds, print_table, write_json

RESULTS = Path(__file__).parent / "results"

N_ITEMS = 100_000
BATCH_SIZES = (1, 64, 4096)


def items_per_second(make_loader, batch_size: int, repeats: int) -> float:
    dataset = list(range(N_ITEMS))
    loader = make_loader(dataset, batch_size)

    def epoch() -> None:
        for _ in loader:
            pass

    rate = N_ITEMS / median_seconds(epoch, repeats=repeats)
    if hasattr(loader, "close"):
        loader.close()
    return rate


def ours(num_workers):
    def make(dataset, batch_size):
        return DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)

    return make


def torchs(num_workers):
    def make(dataset, batch_size):
        import torch.utils.data

        return torch.utils.data.DataLoader(
            dataset, batch_size=batch_size, num_workers=num_workers,
            persistent_workers=num_workers > 0,
        )

    return make


# The dataloader-rs comparison: batch size, I/O-bound item latency and items
# in flight (2 workers x 16 items each), first batches timed.
RS_BATCH_SIZE = 64
IO_SECONDS = 0.010
IO_ITEMS = 1_280
IO_WORKERS, IO_ITEMS_PER_WORKER = 2, 16
FIRST_BATCHES = 50


class Ints(Indices, Dataset):
    """Item ``i`` is ``i``: a ``Dataset`` subclass, as dataloader-rs's own benchmark has it
    (our loader then measures it under ``worker_type="auto"``, the default)."""


class SlowInts:
    """Item ``i`` is ``i``, after ``IO_SECONDS`` of waiting (as a network read would)."""

    def __len__(self) -> int:
        return IO_ITEMS

    def __getitem__(self, index: int) -> int:
        time.sleep(IO_SECONDS)
        return index


def rs_loader(dataset, num_workers: int, items_in_parallel: int = 1):
    """dataloader-rs over ``dataset``, with the same collate function as ours."""
    import dataloader_rs

    class Wrapped(dataloader_rs.PyDataset):
        def __init__(self) -> None:
            super().__init__()

        def __len__(self) -> int:
            return len(dataset)

        def __getitem__(self, index: int):
            return dataset[index]

    return dataloader_rs.PyDataloader(Wrapped(), batch_size=RS_BATCH_SIZE, num_workers=num_workers,
                                      collate_fn=np.array, items_in_parallel=items_in_parallel)


def ours_loader(dataset, num_workers: int, item_concurrency: int = 1):
    return DataLoader(dataset, batch_size=RS_BATCH_SIZE, num_workers=num_workers,
                      item_concurrency=item_concurrency, collate_fn=np.array)


def epoch_rate(loader, items: int, repeats: int) -> float:
    def epoch() -> None:
        for _ in loader:
            pass

    return items / median_seconds(epoch, repeats=repeats)


def first_batch_seconds(loader) -> float:
    """The median time from ``iter(loader)`` to its first batch, the loader warm."""
    times = []
    for _ in range(FIRST_BATCHES + 1):  # the first starts the loader's threads
        start = time.perf_counter()
        it = iter(loader)
        next(it)
        times.append(time.perf_counter() - start)
        del it
    return median(times[1:])


def rs_comparison(repeats: int) -> list[dict]:
    """Ours and dataloader-rs, alternating, on each workload; higher ratios are ours."""
    import dataloader_rs  # noqa: F401  (fails early when it is not installed)

    ints = Ints(N_ITEMS)
    workloads = [
        ("direct", ints, {"num_workers": 0}, N_ITEMS),
        ("1 worker", ints, {"num_workers": 1}, N_ITEMS),
        ("2 workers", ints, {"num_workers": 2}, N_ITEMS),
        (f"I/O-bound ({IO_WORKERS * IO_ITEMS_PER_WORKER} in flight)", SlowInts(),
         {"num_workers": IO_WORKERS, "concurrency": IO_ITEMS_PER_WORKER}, IO_ITEMS),
    ]
    results = []
    for name, dataset, config, items in workloads:
        concurrency = config.get("concurrency", 1)
        ours = ours_loader(dataset, config["num_workers"], concurrency)
        peer = rs_loader(dataset, config["num_workers"], concurrency)
        rates: dict[str, list[float]] = {"ours": [], "rs": []}
        for _ in range(repeats):  # alternating, so both see the same machine
            rates["ours"].append(epoch_rate(ours, items, 1))
            rates["rs"].append(epoch_rate(peer, items, 1))
        ours.close()
        ours_rate, rs_rate = median(rates["ours"]), median(rates["rs"])
        results.append({"workload": name, "unit": "items/s", "dataloader": ours_rate,
                        "dataloader_rs": rs_rate, "ratio": ours_rate / rs_rate})
    ours, peer = ours_loader(ints, 2), rs_loader(ints, 2)
    ours_seconds, rs_seconds = first_batch_seconds(ours), first_batch_seconds(peer)
    ours.close()
    # A latency: the ratio is rs / ours, so that above 1 is ours being faster.
    results.append({"workload": "first batch, 2 workers", "unit": "ms",
                    "dataloader": ours_seconds * 1e3, "dataloader_rs": rs_seconds * 1e3,
                    "ratio": rs_seconds / ours_seconds})
    return results


def print_rs_comparison(results: list[dict]) -> None:
    version = importlib.metadata.version("dataloader-rs")
    print(f"\nOurs vs dataloader-rs {version}: in-memory ints (and the I/O-bound dataset), "
          f"batch size {RS_BATCH_SIZE}, collate_fn=np.array, medians of alternating runs")
    print_table(["workload", "dataloader", "dataloader-rs", "ours / rs"],
                [[r["workload"], _cell(r["dataloader"], r["unit"]),
                  _cell(r["dataloader_rs"], r["unit"]), f"{r['ratio']:.2f}"] for r in results])


def _cell(value: float, unit: str) -> str:
    return f"{value:,.2f} ms" if unit == "ms" else f"{value:,.0f}/s"


def rs_installed() -> bool:
    try:
        import dataloader_rs  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--peer", choices=["all", "torch", "rs"], default="all",
                        help="which peers to run beside ours")
    args = parser.parse_args()
    payload: dict = {}
    if args.peer in ("all", "rs"):
        if rs_installed():
            payload["dataloader_rs"] = rs_comparison(args.repeats)
            print_rs_comparison(payload["dataloader_rs"])
        else:
            print("dataloader-rs is not installed (it needs CPython >= 3.13): skipping it")
    if args.peer in ("all", "torch"):
        payload.update(torch_comparison(args.repeats))
    path = write_json(RESULTS, "loader_overhead", payload)
    print(f"wrote {path}")


def torch_comparison(repeats: int) -> dict:
    try:
        import torch
    except ImportError:
        print("torch is not installed: measuring dataloader alone")
        torch = None

    rows, results = [], []
    for num_workers in (0, 2):
        for batch_size in BATCH_SIZES:
            ours_rate = items_per_second(ours(num_workers), batch_size, repeats)
            torch_rate = (
                items_per_second(torchs(num_workers), batch_size, repeats) if torch else None
            )
            ratio = ours_rate / torch_rate if torch_rate else None
            rows.append([num_workers, batch_size, ours_rate, torch_rate or "-",
                         f"{ratio:.1f}x" if ratio else "-"])
            results.append(
                {"num_workers": num_workers, "batch_size": batch_size,
                 "dataloader_items_per_s": ours_rate, "torch_items_per_s": torch_rate,
                 "ratio": ratio}
            )
    print(f"In-memory dataset of {N_ITEMS:,} ints (torch's workers: persistent processes)")
    print_table(["workers", "batch size", "dataloader items/s", "torch items/s", "ratio"], rows)
    return {"torch": torch.__version__ if torch else None, "results": results}


if __name__ == "__main__":
    main()
