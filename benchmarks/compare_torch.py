"""Ours vs torch's DataLoader on the same workloads, in one run.

Workloads (batch size 32, 2 workers, whole epochs including iterator
creation, 1 warm-up + 5 timed runs, median):

* ``in_memory``  -- the item is its index: the loader's own overhead.
* ``io_wait``    -- each item sleeps 10 ms (releasing the GIL), as a read
  from a network store would; ours adds ``item_concurrency=16``.
* ``numpy_work`` -- each item is a 128x128x3 uint8 image, cropped, flipped
  and normalised in numpy.
* ``first_batch`` -- ``iter()`` + the first ``next()`` on a new loader.
* ``images``     -- JPEG files to normalised float32 NCHW batches of 64 with
  the train and eval chains, against torchvision-style Pillow code, the raw
  decode + resize limit, and peak memory; see ``images.py``, which also
  draws ``docs/images/benchmark_images.png``.

torch runs with fresh workers each epoch and with ``persistent_workers=True``;
ratios are against torch's best. Run ``python benchmarks/compare_torch.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import median_seconds, print_table, write_json

from dataloader import DataLoader

BATCH_SIZE = 32
NUM_WORKERS = 2


class InMemory:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return index


class IoWait(InMemory):
    def __getitem__(self, index: int) -> int:
        time.sleep(0.010)
        return index


class NumpyWork(InMemory):
    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.image = np.random.default_rng(0).integers(0, 256, (128, 128, 3), dtype=np.uint8)
        self.mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)
        self.std = np.array([0.229, 0.224, 0.225], dtype=np.float32)

    def __getitem__(self, index: int) -> np.ndarray:
        top = index % 16
        crop = self.image[top : top + 112, top : top + 112]
        flipped = crop[:, ::-1] if index % 2 else crop
        return ((flipped.astype(np.float32) / 255.0 - self.mean) / self.std).transpose(2, 0, 1)


WORKLOADS = {
    # name: (dataset, extra arguments for our loader)
    "in_memory": (lambda: InMemory(20_000), {}),
    "io_wait": (lambda: IoWait(640), {"item_concurrency": 16}),
    "numpy_work": (lambda: NumpyWork(4_000), {}),
}


def epoch_seconds(make_loader, repeats: int) -> float:
    loader = make_loader()

    def epoch() -> None:
        for _ in loader:
            pass

    seconds = median_seconds(epoch, repeats=repeats)
    close = getattr(loader, "close", None)
    if close is not None:
        close()
    return seconds


def first_batch_seconds(make_loader, repeats: int) -> float:
    def first_batch() -> None:
        loader = make_loader()
        it = iter(loader)
        next(it)
        del it
        close = getattr(loader, "close", None)
        if close is not None:
            close()

    return median_seconds(first_batch, repeats=repeats)


def loaders(dataset, ours_extra: dict):
    import torch.utils.data

    def ours():
        return DataLoader(dataset, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS, **ours_extra)

    def torch_fresh():
        return torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS)

    def torch_persistent():
        return torch.utils.data.DataLoader(
            dataset, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS, persistent_workers=True
        )

    return {"dataloader": ours, "torch": torch_fresh, "torch_persistent": torch_persistent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=[*WORKLOADS, "first_batch", "images"], nargs="*")
    parser.add_argument("--rounds", type=int, default=3,
                        help="images: fresh processes per chain and library")
    parser.add_argument("--no-chart", action="store_true",
                        help="images: do not redraw docs/images/benchmark_images.png")
    args = parser.parse_args()
    import torch

    selected = args.only or [*WORKLOADS, "first_batch", "images"]
    if "images" in selected:
        import images

        images.compare(args.repeats, args.rounds,
                       chart=None if args.no_chart else images.CHART)
        selected = [name for name in selected if name != "images"]
        if not selected:
            return
    rows, results = [], {}
    for name in selected:
        make_dataset, extra = WORKLOADS.get(name, WORKLOADS["in_memory"])
        dataset = make_dataset()
        makers = loaders(dataset, extra)
        if name == "first_batch":
            makers.pop("torch_persistent")  # the first batch of a new loader: always fresh
            seconds = {key: first_batch_seconds(make, args.repeats) for key, make in makers.items()}
            best_torch = seconds["torch"]
            rows.append([name, f"{seconds['dataloader'] * 1e3:.1f} ms",
                         f"{seconds['torch'] * 1e3:.1f} ms", "-",
                         f"{best_torch / seconds['dataloader']:.1f}x"])
        else:
            seconds = {key: epoch_seconds(make, args.repeats) for key, make in makers.items()}
            items = len(dataset)
            rate = {key: items / value for key, value in seconds.items()}
            best_torch = min(seconds["torch"], seconds["torch_persistent"])
            rows.append([name, f"{rate['dataloader']:,.0f}/s", f"{rate['torch']:,.0f}/s",
                         f"{rate['torch_persistent']:,.0f}/s",
                         f"{best_torch / seconds['dataloader']:.1f}x"])
        results[name] = {"seconds": seconds, "ratio_vs_best_torch": best_torch / seconds["dataloader"]}
        print(f"  {name}: done", flush=True)

    print(f"\nbatch size {BATCH_SIZE}, {NUM_WORKERS} workers, median of {args.repeats}")
    print_table(["workload", "dataloader", "torch (fresh)", "torch (persistent)", "speed-up"], rows)
    path = write_json("compare_torch", {"torch": torch.__version__, "workloads": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
