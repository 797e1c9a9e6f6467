"""Ours vs torch's DataLoader on the same workloads, in one run.

Workloads (batch size 32, 2 workers, whole epochs including iterator
creation, 1 warm-up + 5 timed runs, median):

* ``in_memory``  -- the item is its index: the loader's own overhead.
* ``io_wait``    -- each item sleeps 10 ms (releasing the GIL), as a read
  from a network store would; ours adds ``item_concurrency=16``.
* ``numpy_work`` -- each item is a 128x128x3 uint8 image, cropped, flipped
  and normalised in numpy.
* ``first_batch`` -- ``iter()`` + the first ``next()`` on a new loader.
* ``http``       -- 2,000 items (1 KiB) from a local HTTP server answering
  after 10 ms (``benchmarks/_http_server.py``, a process of its own): ours
  is ``HttpDataset`` with ``item_concurrency=16`` (32 requests in flight),
  torch's workers make blocking ``urllib`` requests (2 in flight). Printed
  against the ideal rate, requests in flight / latency, and against aiohttp
  alone (one event loop, 32 requests in flight, no loader): the ceiling of
  this client and server on this machine. torch takes about 10 s per epoch
  here, so it is timed once after its warm-up.

Ours runs worker threads (``worker_type="thread"``: the threaded path;
``drop_in.py`` compares the default choice); torch runs with fresh workers
each epoch and with ``persistent_workers=True``; ratios are against
torch's best. Run ``python benchmarks/compare_torch.py``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

from dataloader import DataLoader
from dataloader._cli.measure import Indices, median_seconds, print_table, write_json

RESULTS = Path(__file__).parent / "results"

BATCH_SIZE = 32
NUM_WORKERS = 2


InMemory = Indices


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


HTTP_ITEMS = 2_000
HTTP_LATENCY = 0.010
HTTP_CONCURRENCY = 16


class UrlOpen(InMemory):
    """What a torch user writes today: one blocking request per item."""

    def __init__(self, urls: list[str]) -> None:
        super().__init__(len(urls))
        self.urls = urls

    def __getitem__(self, index: int) -> bytes:
        with urllib.request.urlopen(self.urls[index], timeout=30) as response:
            return response.read()


def aiohttp_alone_seconds(urls: list[str], in_flight: int, repeats: int) -> float:
    """An epoch of requests on one event loop with no loader: the client's ceiling."""
    import asyncio

    import aiohttp

    async def run() -> float:
        limit = asyncio.Semaphore(in_flight)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

            async def get(url: str) -> bytes:
                async with limit, session.get(url) as response:
                    return await response.read()

            times = []
            for _ in range(repeats + 1):  # the first is the warm-up
                start = time.perf_counter()
                await asyncio.gather(*map(get, urls))
                times.append(time.perf_counter() - start)
            return sorted(times[1:])[len(times[1:]) // 2]

    return asyncio.run(run())


def http_workload(repeats: int) -> tuple[list[str], dict]:
    """Ours (HttpDataset) and torch (urllib in its workers) against one local server."""
    import torch.utils.data

    from dataloader.sources import HttpDataset

    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("_http_server.py")),
         "--latency", str(HTTP_LATENCY)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        port = int(server.stdout.readline())
        urls = [f"http://127.0.0.1:{port}/items/{n}" for n in range(HTTP_ITEMS)]

        def ours():
            return DataLoader(HttpDataset(urls), batch_size=BATCH_SIZE, num_workers=NUM_WORKERS,
                              item_concurrency=HTTP_CONCURRENCY, collate_fn=list)

        def torch_blocking():
            return torch.utils.data.DataLoader(UrlOpen(urls), batch_size=BATCH_SIZE,
                                               num_workers=NUM_WORKERS, collate_fn=list)

        in_flight = NUM_WORKERS * HTTP_CONCURRENCY
        seconds = {"dataloader": epoch_seconds(ours, repeats),
                   "aiohttp_alone": aiohttp_alone_seconds(urls, in_flight, repeats),
                   "torch": epoch_seconds(torch_blocking, 1)}
    finally:
        server.kill()
        server.wait()
    ideal = in_flight / HTTP_LATENCY
    rate = {key: HTTP_ITEMS / value for key, value in seconds.items()}
    row = [f"http ({in_flight} in flight)", f"{rate['dataloader']:,.0f}/s",
           f"{rate['torch']:,.0f}/s", "-", f"{seconds['torch'] / seconds['dataloader']:.1f}x"]
    result = {"seconds": seconds, "ideal_items_per_second": ideal,
              "fraction_of_ideal": rate["dataloader"] / ideal,
              "fraction_of_aiohttp_alone": rate["dataloader"] / rate["aiohttp_alone"],
              "ratio_vs_best_torch": seconds["torch"] / seconds["dataloader"]}
    print(f"  http: ideal {ideal:,.0f} items/s ({in_flight} in flight / "
          f"{HTTP_LATENCY * 1e3:.0f} ms); ours {rate['dataloader']:,.0f}/s = "
          f"{result['fraction_of_ideal']:.2f} of ideal, "
          f"{result['fraction_of_aiohttp_alone']:.2f} of aiohttp alone "
          f"({rate['aiohttp_alone']:,.0f}/s), "
          f"{result['ratio_vs_best_torch']:.1f}x torch ({rate['torch']:,.0f}/s)", flush=True)
    return row, result


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
        return DataLoader(dataset, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS,
                          worker_type="thread", **ours_extra)

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
    parser.add_argument("--only", choices=[*WORKLOADS, "first_batch", "http"], nargs="*")
    args = parser.parse_args()
    import torch

    selected = args.only or [*WORKLOADS, "first_batch", "http"]
    rows, results = [], {}
    for name in selected:
        if name == "http":
            row, results[name] = http_workload(args.repeats)
            rows.append(row)
            continue
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
        results[name] = {"seconds": seconds,
                         "ratio_vs_best_torch": best_torch / seconds["dataloader"]}
        print(f"  {name}: done", flush=True)

    print(f"\nbatch size {BATCH_SIZE}, {NUM_WORKERS} workers, median of {args.repeats}")
    print_table(["workload", "dataloader", "torch (fresh)", "torch (persistent)", "speed-up"], rows)
    path = write_json(RESULTS, "compare_torch", {"torch": torch.__version__, "workloads": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
