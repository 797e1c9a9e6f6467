"""The loader's own overhead: an in-memory dataset of ints, ours vs torch.

Every item is its index, so the time measured is the loader's: sampling,
fetching, collating, delivering. Run with ``python benchmarks/loader_overhead.py``;
torch's ``DataLoader(num_workers=0)`` runs beside ours when torch is installed.
"""

from __future__ import annotations

import argparse

from _common import median_seconds, print_table, write_json

from dataloader import DataLoader

N_ITEMS = 100_000
BATCH_SIZES = (1, 64, 4096)


def items_per_second(make_loader, batch_size: int, repeats: int) -> float:
    dataset = list(range(N_ITEMS))
    loader = make_loader(dataset, batch_size)

    def epoch() -> None:
        for _ in loader:
            pass

    return N_ITEMS / median_seconds(epoch, repeats=repeats)


def ours(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size)


def torch_direct(dataset, batch_size):
    import torch.utils.data

    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=0)


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
    for batch_size in BATCH_SIZES:
        ours_rate = items_per_second(ours, batch_size, args.repeats)
        torch_rate = items_per_second(torch_direct, batch_size, args.repeats) if torch else None
        ratio = ours_rate / torch_rate if torch_rate else None
        rows.append([batch_size, ours_rate, torch_rate or "-", f"{ratio:.1f}x" if ratio else "-"])
        results.append(
            {"batch_size": batch_size, "dataloader_items_per_s": ours_rate,
             "torch_items_per_s": torch_rate, "ratio": ratio}
        )
    print(f"In-memory dataset of {N_ITEMS:,} ints, num_workers=0 (direct path)")
    print_table(["batch size", "dataloader items/s", "torch items/s", "ratio"], rows)
    path = write_json(
        "loader_overhead",
        {"torch": torch.__version__ if torch else None, "direct": results},
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
