"""Shuffled epochs at scale: the first batch, the first index of a rank, indices per second.

Three ways of making an epoch's order, side by side in one run:

- ``dataloader``: the keyed bijection (``dataloader._sampling.shuffle``): any
  position is computed directly, natively;
- ``numpy permutation``: the approach it replaced, one array of all ``n``
  indices shuffled by numpy (``int32`` below 2^31) per epoch;
- ``torch``: ``torch.utils.data``'s ``RandomSampler`` / ``DistributedSampler``
  (``torch.randperm(n).tolist()``).

Each measurement runs in a fresh process, which reports its wall time and
how much its peak resident memory grew over the measurement. Sizes whose
order would not fit in memory (an array of 10^10 indices is 74.5 GiB) are
not run; their size is printed instead. Run with
``python benchmarks/shuffle.py``; ``--skip-large-peers`` leaves out the
peers at 2*10^8 items (about 12 s and 1 GiB for numpy, 25 s and 9 GiB for
torch).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import deque
from itertools import islice
from pathlib import Path

from dataloader._cli.measure import Indices as Huge
from dataloader._cli.measure import print_table, write_json

RESULTS = Path(__file__).parent / "results"

BIG = 10**10
LARGE = 2 * 10**8
BATCH = 64
ITERATED = 2 * 10**7   # indices iterated one by one for the rate
EPOCH = 10**7          # items of the whole-epoch rate, small enough for every peer


class NumpyPermutationSampler:
    """The order as it was made before: a shuffled array of all ``n`` indices."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n, self.seed = n, seed

    def permutation(self):
        import numpy as np

        from dataloader._sampling.seeding import epoch_generator

        order = np.arange(self.n, dtype=np.int32 if self.n < 2**31 else np.int64)
        epoch_generator(self.seed, 0).shuffle(order)
        return order

    def __iter__(self):
        order = self.permutation()
        for start in range(0, self.n, 1 << 16):
            yield from order[start : start + (1 << 16)].tolist()

    def __len__(self) -> int:
        return self.n


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """Make the peak resident size (VmHWM) the current one (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


# ---- one measurement, in a child process --------------------------------------------


def first_batch(kind: str, n: int) -> float:
    if kind == "dataloader":
        from dataloader import DataLoader

        loader = DataLoader(Huge(n), batch_size=BATCH, shuffle=True, seed=0)
    elif kind == "numpy":
        from dataloader import DataLoader

        loader = DataLoader(Huge(n), batch_size=BATCH, sampler=NumpyPermutationSampler(n))
    else:
        import torch.utils.data

        loader = torch.utils.data.DataLoader(Huge(n), batch_size=BATCH, shuffle=True)
    start = time.perf_counter()
    next(iter(loader))
    return time.perf_counter() - start


def first_rank_index(kind: str, n: int) -> float:
    if kind == "dataloader":
        from dataloader import DistributedSampler

        sampler = DistributedSampler(Huge(n), num_replicas=8, rank=3, seed=0)
        start = time.perf_counter()
        next(iter(sampler))
    elif kind == "numpy":
        import numpy as np

        start = time.perf_counter()
        order = NumpyPermutationSampler(n).permutation()
        next(iter(order[3:n:8].astype(np.int64).tolist()))
    else:
        import torch.utils.data

        sampler = torch.utils.data.DistributedSampler(Huge(n), num_replicas=8, rank=3)
        start = time.perf_counter()
        next(iter(sampler))
    return time.perf_counter() - start


def index_rate(kind: str, n: int) -> tuple[float, float]:
    """Indices per second (wall, CPU) iterating ``min(n, ITERATED)`` indices one by one."""
    count = min(n, ITERATED)
    if kind == "dataloader":
        from dataloader import RandomSampler

        sampler = RandomSampler(Huge(n), seed=0)
    elif kind == "dataloader-batches":
        from dataloader import BatchSampler, RandomSampler

        sampler = BatchSampler(RandomSampler(Huge(n), seed=0), BATCH, False)
        count //= BATCH
    elif kind == "numpy":
        sampler = NumpyPermutationSampler(n)
    else:
        import torch.utils.data

        sampler = torch.utils.data.RandomSampler(Huge(n))
    wall, cpu = time.perf_counter(), time.process_time()
    # Consumed by C (no Python loop of the benchmark's own in the figure).
    deque(islice(iter(sampler), count), maxlen=0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if kind == "dataloader-batches":
        count *= BATCH
    return count / wall, count / cpu


def kernel_rate(n: int) -> tuple[float, float]:
    """Indices per second (wall, CPU) of the native kernel alone, into one buffer."""
    import numpy as np

    from dataloader._sampling.shuffle import Order

    order = Order(n, (1, 2))
    out = np.empty(1 << 16, dtype=np.int64)
    rounds = ITERATED // len(out)
    wall, cpu = time.perf_counter(), time.process_time()
    for r in range(rounds):
        order._native.fill_into(r * len(out), 1, out)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return rounds * len(out) / wall, rounds * len(out) / cpu


def child(case: str, kind: str, n: int) -> None:
    # Imports (and any rebuild of the extensions) are not measured.
    import numpy.random  # noqa: F401

    import dataloader  # noqa: F401

    if kind == "torch":
        import torch  # noqa: F401
    _reset_peak()
    baseline = _status_bytes("VmRSS")
    if case == "first_batch":
        result: object = first_batch(kind, n)
    elif case == "first_rank_index":
        result = first_rank_index(kind, n)
    elif case == "kernel_rate":
        result = kernel_rate(n)
    else:
        result = index_rate(kind, n)
    print(json.dumps({"result": result, "memory_growth": _status_bytes("VmHWM") - baseline}))


def measure(case: str, kind: str, n: int) -> dict:
    output = subprocess.run(
        [sys.executable, __file__, "--child", case, kind, str(n)],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(output.splitlines()[-1])


# ---- the report -----------------------------------------------------------------------


def _gib(n: int, itemsize: int) -> str:
    return f"not run: needs {n * itemsize / 2**30:.1f} GiB"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def _mib(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-large-peers", action="store_true")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        case, kind, n = args.child
        child(case, kind, int(n))
        return
    try:
        import torch  # noqa: F401

        peers = ["numpy", "torch"]
    except ImportError:
        print("torch is not installed: comparing with the numpy permutation only")
        peers = ["numpy"]

    results: dict = {"first_batch": {}, "first_rank_index": {}, "index_rate": {}}
    rows = []
    for case, title in (("first_batch", "DataLoader(shuffle=True), first batch of 64"),
                        ("first_rank_index", "DistributedSampler rank 3 of 8, first index")):
        for n in (BIG, LARGE):
            ours = measure(case, "dataloader", n)
            entry = {"dataloader": ours}
            row = [title, f"{n:.0e}", f"{_ms(ours['result'])}, +{_mib(ours['memory_growth'])}"]
            for peer in peers:
                if n == BIG:
                    # numpy's array is int64 past 2^31; torch's randperm is int64.
                    row.append(_gib(n, 8))
                elif args.skip_large_peers:
                    row.append("skipped")
                else:
                    theirs = measure(case, peer, n)
                    entry[peer] = theirs
                    row.append(f"{_ms(theirs['result'])}, +{_mib(theirs['memory_growth'])} "
                               f"({theirs['result'] / ours['result']:,.0f}x)")
            results[case][str(n)] = entry
            rows.append(row)
    headers = ["measurement", "items", "dataloader"] + [
        {"numpy": "numpy permutation (before)", "torch": "torch"}[peer] for peer in peers]
    print_table(headers, rows)

    print()
    rate_rows = []
    for label, kind, n in (("native kernel (no Python)", "kernel", BIG),
                           ("RandomSampler, batches of 64", "dataloader-batches", BIG),
                           ("RandomSampler, one index at a time", "dataloader", BIG),
                           ("RandomSampler, one index at a time", "dataloader", EPOCH),
                           ("numpy permutation (before), one at a time", "numpy", EPOCH),
                           ("torch RandomSampler, one at a time", "torch", EPOCH)):
        if kind == "torch" and "torch" not in peers:
            continue
        if kind == "kernel":
            measured = measure("kernel_rate", kind, n)
        else:
            measured = measure("index_rate", kind, n)
        wall, cpu = measured["result"]
        results["index_rate"][f"{label} ({n:.0e})"] = {"wall": wall, "cpu": cpu}
        rate_rows.append([label, f"{n:.0e}", f"{wall / 1e6:,.1f} M/s", f"{cpu / 1e6:,.1f} M/s"])
    print(f"Shuffled indices per second: the first {ITERATED:.0e} of an epoch of 10^10, "
          f"a whole epoch of {EPOCH:.0e} (the peers' permutation included)")
    print_table(["iterating", "items", "wall", "per CPU second"], rate_rows)
    print(f"\nload average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results["load_average"] = os.getloadavg()
    path = write_json(RESULTS, "shuffle", results)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
