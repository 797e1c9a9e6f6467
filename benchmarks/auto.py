"""What ``worker_type="auto"`` chooses, against every explicit choice, in one run.

Six datasets, each loaded (in a fresh interpreter per loader, batch size
64, shuffled) by ``dataloader.DataLoader`` (the torch drop-in,
``dataloader.torch``, keeps torch's worker processes: ``drop_in.py``)
and by torch:

* our loader with ``worker_type`` ``"thread"`` and ``"process"`` on 1, 2,
  3 and 4 workers -- the explicit configurations;
* our loader with ``worker_type="auto"`` and ``num_workers="auto"``, the
  other arguments left at their defaults;
* torch's ``DataLoader(num_workers=2)``.

The datasets: ``in_memory`` (a ``Dataset`` subclass whose item is its
index, as dataloader-rs's benchmark has it), ``pure_python`` (a
tokenizer-like loop, ``drop_in.py``'s), ``numpy_work`` (crop, flip and
normalise in numpy), ``pillow`` (a torchvision-style Pillow pipeline on
photographs), ``io`` (10 ms of waiting per item, as a network read) and
``native`` (``ImageFolder`` with the native chain and ``ImageCollator``;
torch runs the same work on Pillow there).

For each loader: items/s over the epochs after the first (the first is
where auto measures, and where worker processes start: it is reported
apart, as the first batch's time), and which kind auto chose. The ratios
are auto's items/s over the best explicit configuration's and over
torch's, and auto's first batch over the direct path's (``num_workers=0``).
Run ``python benchmarks/auto.py`` (``--workloads`` to pick, ``--epochs``).

Last, ``memory_budget=``: the numpy dataset (9.6 MB batches) under
``num_workers="auto"`` with budgets of 2, 3 and 6 batches and with none,
the consumer taking 100 ms a batch (so that batches ahead pile up).
For each, the peak memory its batches held, sampled every 20 ms: the
shared memory mapped by the loader's processes (the worker processes'
batch slots, counted once across the processes that map them) plus the
main process's own memory beyond its level once the loader was made
(batches on threads, and the one the consumer holds). A worker
process's interpreter and its items before they are collated are not
batches and are not counted. The figure the
budget promises: the peak is above it by at most one batch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from drop_in import PurePython, touch

from dataloader._cli.measure import Indices, print_table, write_json

RESULTS = Path(__file__).parent / "results"
BATCH_SIZE = 64
EXPLICIT = [f"{kind}-{workers}" for kind in ("thread", "process") for workers in (1, 2, 3, 4)]
LOADERS = ("direct", *EXPLICIT, "auto", "torch")
SIZES = {"in_memory": 200_000, "pure_python": 2_000, "numpy_work": 4_000, "io": 768}


class Waiting(Indices):
    """10 ms of waiting per item, the CPU idle: a read from a network store."""

    def __getitem__(self, index: int) -> int:
        time.sleep(0.01)
        return index


def make_dataset(name: str, root: Path):
    if name == "pillow":
        from images import PillowImageFolder

        return PillowImageFolder(root, "train")
    if name == "native":
        from dataloader import ImageFolder

        return ImageFolder(root)
    if name == "pure_python":
        return PurePython(SIZES[name])
    if name == "numpy_work":
        from compare_torch import NumpyWork

        return NumpyWork(SIZES[name])
    if name == "io":
        return Waiting(SIZES[name])
    return Indices(SIZES[name])


def make_loader(name: str, dataset, workload: str):
    if name == "torch":
        import torch.utils.data

        return torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                                           num_workers=2)
    import dataloader as ours  # its own loader: the torch drop-in keeps torch's processes

    extra = {}
    if workload == "native":
        from images import SIZE

        from dataloader import ImageCollator
        from dataloader.transforms import (
            Compose,
            Decode,
            RandomHFlip,
            RandomResizedCrop,
            ToChw,
            ToFloat,
        )

        extra = {"transform": Compose([Decode("RGB"), RandomResizedCrop(SIZE), RandomHFlip(),
                                       ToFloat(), ToChw()]),
                 "collate_fn": ImageCollator()}
    if name == "direct":
        return ours.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True, **extra)
    if name == "auto":
        return ours.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                               num_workers="auto", **extra)
    kind, _, workers = name.partition("-")
    return ours.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                           num_workers=int(workers), worker_type=kind, **extra)


def run_child(workload: str, name: str, root: Path, epochs: int) -> dict:
    # torch's side of the native chain is the same work on Pillow, as torch users write it.
    dataset = make_dataset("pillow" if (workload, name) == ("native", "torch") else workload,
                           root)
    started = time.perf_counter()
    loader = make_loader(name, dataset, workload)
    it = iter(loader)
    touch(next(it))
    first_batch = time.perf_counter() - started
    for batch in it:  # the first epoch: auto measures, processes start
        touch(batch)
    items = 0
    started = time.perf_counter()
    for _ in range(epochs):
        for batch in loader:
            touch(batch)
            items += len(batch[0] if isinstance(batch, (list, tuple)) else batch)
    seconds = time.perf_counter() - started
    chosen = getattr(loader, "worker_type", "process")
    stats = getattr(loader, "stats", None)  # the workers auto used, when it chose
    count = stats()["workers"]["count"] if stats is not None else loader.num_workers
    if hasattr(loader, "close"):
        loader.close()
    return {"items_per_second": items / seconds, "first_batch_ms": first_batch * 1e3,
            "chosen": f"{chosen}-{count}"}


BUDGET_BATCHES = (2, 3, 6, None)
#: The consumer's step in the memory_budget runs, slower than loading a
#: batch, so that loaders fill the batches ahead that they may hold.
STEP_SECONDS = 0.1


def run_budget_child(batches: str) -> dict:
    """One ``memory_budget`` loader over two epochs: the peak memory of its batches."""
    import threading

    from compare_torch import NumpyWork
    from drop_in import _family, rollup_kib

    import dataloader as ours

    dataset = NumpyWork(SIZES["numpy_work"])
    batch_bytes = BATCH_SIZE * dataset[0].nbytes
    budget = None if batches == "none" else int(batches) * batch_bytes
    loader = ours.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                             num_workers="auto", memory_budget=budget)
    before = rollup_kib(os.getpid())
    peak = [0]
    stop = threading.Event()

    def held_kib() -> int:
        """This process's memory beyond ``before``, and the shared memory that any
        process of the loader maps (the worker processes' slots: the machine's
        ``Shmem`` would count other programs' too)."""
        own = rollup_kib(os.getpid())
        private = own.get("Pss", 0) - own.get("Pss_Shmem", 0)
        held = private - (before.get("Pss", 0) - before.get("Pss_Shmem", 0))
        shared = sum(rollup_kib(pid).get("Pss_Shmem", 0) for pid in _family(os.getpid()))
        return held + shared - before.get("Pss_Shmem", 0)

    def sample() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], held_kib() * 1024)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    for _ in range(2):
        for batch in loader:
            touch(batch)
            del batch
            time.sleep(STEP_SECONDS)  # a training step: the batches ahead pile up
    stop.set()
    sampler.join()
    count = loader.stats()["workers"]["count"]
    kind = loader.worker_type
    loader.close()
    return {"budget_bytes": budget, "batch_bytes": batch_bytes, "peak_bytes": peak[0],
            "chosen": f"{kind}-{count}"}


def budget_rows() -> list[list[str]]:
    rows = []
    for batches in BUDGET_BATCHES:
        name = "none" if batches is None else str(batches)
        command = [sys.executable, __file__, "--budget-child", name]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"memory_budget {name} failed:\n{done.stderr[-3000:]}")
        found = json.loads(done.stdout.strip().splitlines()[-1])
        batch, budget, peak = found["batch_bytes"], found["budget_bytes"], found["peak_bytes"]
        rows.append([
            "none" if budget is None else f"{budget / 2**20:.1f}", f"{batch / 2**20:.1f}",
            found["chosen"],
            f"{peak / 2**20:.1f}",
            "-" if budget is None else f"{(peak - budget) / batch:+.2f}",
        ])
    return rows


def run_fresh(workload: str, name: str, root: Path, epochs: int) -> dict:
    command = [sys.executable, __file__, "--child", workload, name, str(root), str(epochs)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{workload} / {name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=4, metavar=("WORKLOAD", "LOADER", "ROOT", "EPOCHS"))
    parser.add_argument("--workloads",
                        default="in_memory,pure_python,numpy_work,pillow,io,native")
    parser.add_argument("--images", type=int, default=640)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--budget-child", metavar="BATCHES")
    parser.add_argument("--no-budget", action="store_true",
                        help="skip the memory_budget measurement")
    options = parser.parse_args()
    if options.budget_child:
        print(json.dumps(run_budget_child(options.budget_child)))
        return
    if options.child:
        workload, name, root, epochs = options.child
        print(json.dumps(run_child(workload, name, Path(root), int(epochs))))
        return
    from dataloader._images.samples import sample_image_folder

    root = sample_image_folder(options.images, photographs="installed")
    load = os.getloadavg()[0]
    rows, results = [], {}
    for workload in options.workloads.split(","):
        figures = {name: run_fresh(workload, name, root, options.epochs) for name in LOADERS}
        results[workload] = figures
        best = max(EXPLICIT, key=lambda name: figures[name]["items_per_second"])
        auto = figures["auto"]
        print(workload, {name: round(found["items_per_second"]) for name, found in
                         figures.items()}, file=sys.stderr, flush=True)
        rows.append([
            workload, auto["chosen"], best,
            f"{auto['items_per_second']:,.0f}",
            f"{auto['items_per_second'] / figures[best]['items_per_second']:.2f}",
            f"{auto['items_per_second'] / figures['torch']['items_per_second']:.2f}",
            f"{auto['first_batch_ms']:.1f}",
            f"{auto['first_batch_ms'] / figures['direct']['first_batch_ms']:.2f}",
        ])
    print(f"batch size {BATCH_SIZE}, load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs")
    print_table(["dataset", "auto chose", "best explicit", "auto items/s", "auto / best",
                 "auto / torch(2)", "auto first batch ms", "vs direct"], rows)
    budget = [] if options.no_budget else budget_rows()
    if budget:
        print(f"\nmemory_budget, numpy dataset, load average {os.getloadavg()[0]:.1f}")
        print_table(["budget MiB", "batch MiB", "auto chose", "peak batch memory MiB",
                     "peak - budget, in batches"], budget)
    write_json(RESULTS, "auto", {"load_average": load, "results": results, "budget": budget})


if __name__ == "__main__":
    main()
