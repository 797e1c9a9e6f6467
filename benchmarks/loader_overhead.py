"""The loader's own overhead: an in-memory dataset of ints, ours vs torch.

Every item is its index, so the time measured is the loader's: sampling,
fetching, collating, delivering. Run with ``python benchmarks/loader_overhead.py``;
torch's ``DataLoader`` runs beside ours when torch is installed: with
``num_workers=0`` against our direct path, and with 2 persistent worker
processes against our 2 worker threads.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dataloader import DataLoader
from dataloader._cli.measure import median_seconds, print_table, write_json

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
        print("torch is not installed: measuring dataloader alone")

    rows, results = [], []
    for num_workers in (0, 2):
        for batch_size in BATCH_SIZES:
            ours_rate = items_per_second(ours(num_workers), batch_size, args.repeats)
            torch_rate = (
                items_per_second(torchs(num_workers), batch_size, args.repeats) if torch else None
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
    path = write_json(RESULTS, "loader_overhead",
                      {"torch": torch.__version__ if torch else None, "results": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
