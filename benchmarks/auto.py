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

Each loader runs ``--epochs`` epochs (6 by default) over the same
dataset, as a training run does, every loader measured the same way.
Every loader of a dataset runs once per round, the rounds alternating
who goes first, and each figure is the median of ``--rounds`` (3): a
shared machine's load moves between loaders minutes apart, and a
loader's figures would otherwise be one draw of it. Two
figures per loader: the first epoch (from making the loader to its last
batch: where auto measures and changes its mind, and where worker
processes start) and the steady state (the median items/s of the epochs
after the first; auto may still change its mind between them, and the
median is what most of a run sees). The ratios are auto's over the best
explicit configuration's (the best of each figure, chosen separately)
and over torch's, and auto's first batch over the direct path's
(``num_workers=0``). The kind and count auto ran each epoch on are listed
(``process-2 x5``: five epochs on two worker processes; rounds that
chose otherwise are listed after a ``|``).
Run ``python benchmarks/auto.py`` (``--workloads`` to pick, ``--epochs``).

Last, ``memory_budget=``: the numpy dataset (9.2 MiB batches) under
``num_workers="auto"`` with budgets of 2, 3 and 6 batches and with none,
the consumer taking 100 ms a batch (so that batches ahead pile up; auto
then keeps to one worker, on a thread), and with budgets of 3 and 6
batches and a step of 8 ms (auto then chooses worker processes). For
each, the peak memory of the loader's processes over two epochs, sampled
every 20 ms as ``drop_in.py`` samples it: the proportional memory of the
training process and of every worker process outside shared memory, and
the shared memory they map (the worker processes' batch slots, counted
once across the processes that map them), beyond the training process's
own before its first epoch. Proportional memory counts a page the
workers share with the training process once in all, however forking
splits it between them; what a worker process adds (its interpreter's
copies of the parent's pages, its items before they are collated) is
counted too, as part of what the loader costs. The figure the budget
promises: the peak is above it by at most one batch.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
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


def worker_label(loader) -> str:
    """What ``loader`` ran its last epoch on: ``"process-2"``, ``"inline"`` (torch: its
    ``num_workers`` processes)."""
    stats = getattr(loader, "stats", None)
    if stats is None:
        return f"process-{loader.num_workers}"
    workers = stats()["workers"]
    return f"{workers['type']}-{workers['count']}" if workers["count"] else "inline"


def run_child(workload: str, name: str, root: Path, epochs: int) -> dict:
    # torch's side of the native chain is the same work on Pillow, as torch users write it.
    dataset = make_dataset("pillow" if (workload, name) == ("native", "torch") else workload,
                           root)
    started = time.perf_counter()
    loader = make_loader(name, dataset, workload)
    first_batch, seconds, chosen = None, [], []
    for _ in range(epochs):
        items = 0
        began = time.perf_counter()
        for batch in loader:
            if first_batch is None:
                first_batch = time.perf_counter() - started
                began = started  # the first epoch counts from making the loader
            touch(batch)
            items += len(batch[0] if isinstance(batch, (list, tuple)) else batch)
        seconds.append(time.perf_counter() - began)
        chosen.append(worker_label(loader))
    if hasattr(loader, "close"):
        loader.close()
    return {"items_per_second": statistics.median(items / epoch for epoch in seconds[1:]),
            "first_epoch_items_per_second": items / seconds[0],
            "first_batch_ms": first_batch * 1e3, "epoch_seconds": seconds,
            "chosen": runs(chosen)}


def median_run(found: list[dict]) -> dict:
    """A loader's runs as one: each figure's median, the epochs and choices of every run
    (``"thread-2 x6 | thread-2 x6"``)."""
    medians = {figure: statistics.median(run[figure] for run in found)
               for figure in ("items_per_second", "first_epoch_items_per_second",
                              "first_batch_ms")}
    return {**medians, "epoch_seconds": [run["epoch_seconds"] for run in found],
            "chosen": " | ".join(dict.fromkeys(run["chosen"] for run in found))}


def runs(labels: list[str]) -> str:
    """``["thread-1", "process-2", "process-2"]`` as ``"thread-1, process-2 x2"``."""
    counted = [(label, len(list(group))) for label, group in itertools.groupby(labels)]
    return ", ".join(label if count == 1 else f"{label} x{count}" for label, count in counted)


#: (batches the budget holds, or None for no budget; the consumer's step in
#: seconds). A step of 100 ms is slower than loading a batch, so the batches
#: ahead pile up; at 8 ms one thread no longer keeps up and auto starts
#: worker processes.
BUDGETS = ((2, 0.1), (3, 0.1), (6, 0.1), (None, 0.1), (3, 0.008), (6, 0.008))


def family_kib(pid: int) -> int:
    """The proportional memory (PSS) of process ``pid`` and its descendants, in KiB: a
    page several of them map (shared memory, or one a fork left shared) counts once in all."""
    from drop_in import _family, rollup_kib

    return sum(rollup_kib(member).get("Pss", 0) for member in _family(pid))


def run_budget_child(batches: str, step: str) -> dict:
    """One ``memory_budget`` loader over two epochs: the peak memory of its processes."""
    import threading

    from compare_torch import NumpyWork

    import dataloader as ours

    dataset = NumpyWork(SIZES["numpy_work"])
    batch_bytes = BATCH_SIZE * dataset[0].nbytes
    budget = None if batches == "none" else int(batches) * batch_bytes
    loader = ours.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                             num_workers="auto", memory_budget=budget)
    before = family_kib(os.getpid())
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], (family_kib(os.getpid()) - before) * 1024)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    chosen = []
    for _ in range(2):
        for batch in loader:
            touch(batch)
            del batch
            time.sleep(float(step))  # a training step
        chosen.append(worker_label(loader))
    stop.set()
    sampler.join()
    loader.close()
    return {"budget_bytes": budget, "batch_bytes": batch_bytes, "peak_bytes": peak[0],
            "chosen": runs(chosen)}


def budget_rows() -> list[list[str]]:
    rows = []
    for batches, step in BUDGETS:
        name = "none" if batches is None else str(batches)
        command = [sys.executable, __file__, "--budget-child", name, str(step)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"memory_budget {name} failed:\n{done.stderr[-3000:]}")
        found = json.loads(done.stdout.strip().splitlines()[-1])
        batch, budget, peak = found["batch_bytes"], found["budget_bytes"], found["peak_bytes"]
        rows.append([
            "none" if budget is None else f"{budget / 2**20:.1f}", f"{batch / 2**20:.1f}",
            f"{step * 1e3:.0f}", found["chosen"], f"{peak / 2**20:.1f}",
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
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of every loader, taken in turn; a figure is the median")
    parser.add_argument("--budget-child", nargs=2, metavar=("BATCHES", "STEP"))
    parser.add_argument("--no-budget", action="store_true",
                        help="skip the memory_budget measurement")
    options = parser.parse_args()
    if options.budget_child:
        print(json.dumps(run_budget_child(*options.budget_child)))
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
        rounds: dict[str, list[dict]] = {name: [] for name in LOADERS}
        for number in range(options.rounds):
            for name in LOADERS if number % 2 == 0 else LOADERS[::-1]:  # alternate who goes first
                rounds[name].append(run_fresh(workload, name, root, options.epochs))
        figures = {name: median_run(found) for name, found in rounds.items()}
        results[workload] = figures
        print(workload, {name: found["chosen"] for name, found in figures.items()},
              file=sys.stderr, flush=True)
        rows.append(workload_row(workload, figures))
    print(f"batch size {BATCH_SIZE}, {options.epochs} epochs, medians of {options.rounds} "
          f"rounds, load average {load:.1f} at the "
          f"start, {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs")
    print_table(["dataset", "auto ran on", "best explicit", "auto items/s", "auto / best",
                 "auto / torch(2)", "1st epoch: auto / best", "auto / torch(2)",
                 "auto first batch ms", "vs direct"], rows)
    budget = [] if options.no_budget else budget_rows()
    if budget:
        print(f"\nmemory_budget, numpy dataset, load average {os.getloadavg()[0]:.1f}")
        print_table(["budget MiB", "batch MiB", "step ms", "auto ran on", "peak memory MiB",
                     "peak - budget, in batches"], budget)
    write_json(RESULTS, "auto", {"load_average": load, "results": results, "budget": budget})


def workload_row(workload: str, figures: dict[str, dict]) -> list[str]:
    """A table row: auto's steady state and first epoch against the best explicit
    configuration's (each figure's best) and torch's, and its first batch."""
    def ratios(figure: str) -> list[str]:
        best = max(figures[name][figure] for name in EXPLICIT)
        auto = figures["auto"][figure]
        return [f"{auto / best:.2f}", f"{auto / figures['torch'][figure]:.2f}"]

    steady = "items_per_second"
    auto = figures["auto"]
    return [
        workload, auto["chosen"], max(EXPLICIT, key=lambda name: figures[name][steady]),
        f"{auto[steady]:,.0f}", *ratios(steady), *ratios("first_epoch_items_per_second"),
        f"{auto['first_batch_ms']:.1f}",
        f"{auto['first_batch_ms'] / figures['direct']['first_batch_ms']:.2f}",
    ]


if __name__ == "__main__":
    main()
