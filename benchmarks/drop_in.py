"""The drop-in case: the same dataset objects under torch's loader and ours.

A training script changes one import (to ``dataloader.torch``, whose batches
are torch's tensors) and keeps its dataset. Four datasets,
each loaded by torch's ``DataLoader`` (2 worker processes) and by ours with
2 workers of each type -- threads, processes, and ``worker_type="auto"``
(the default) -- every loader in a fresh interpreter:

* ``pillow``      -- a torchvision-style Pillow pipeline on photographs
  (open, RandomResizedCrop, flip, to tensor, normalise; ``images.py``'s
  ``PillowImageFolder``) over an ImageNet-like folder of real photographs,
  as ``images.py`` makes it (``sample_image_folder(photographs="installed")``);
* ``pure_python`` -- a tokenizer-like loop over a text: nothing releases
  the GIL;
* ``numpy_work``  -- crop, flip and normalise a 128x128 image in numpy;
* ``in_memory``   -- the item is its index.

For each (the median of ``--rounds`` runs, the loaders' order alternating
between rounds): items/s over 3 epochs after a warm-up (persistent workers for
both, torch's best; each batch read page by page, as a training step
would), the first batch of a fresh loader (construction, ``iter`` and the
first ``next``), the CPU time of all the processes per item (less
sensitive than items/s to other work on the machine), and the largest
memory of the main process and its workers, sampled every 20 ms: their
summed PSS outside shared memory, plus the machine's shared memory beyond
what it held before the loader started (batches in flight between
processes are in shared memory that no process may map at the time, so
PSS alone would miss them; run it on an otherwise quiet machine).
Ratios are against torch in the same run. Last, the pure-Python dataset on
1 and 2 worker processes: how processes scale. Run ``python benchmarks/drop_in.py``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch.utils.data as torch_data
from images import cpu_seconds, rollup_kib, shared_memory_kib

import dataloader.torch as dataloader_torch
from dataloader._cli.measure import Indices, print_table, write_json

RESULTS = Path(__file__).parent / "results"
BATCH_SIZE = 64
NUM_WORKERS = 2
EPOCHS = 3
LOADERS = ("torch", "thread", "process", "auto")

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards "
         "box nimbly and quartz glyphs vex the jumping judge").split()


class PurePython(Indices):
    """A tokenizer-like loop: split, look up, pad; Python all the way."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.vocabulary = {word: rank for rank, word in enumerate(sorted(set(WORDS)))}

    def __getitem__(self, index: int) -> np.ndarray:
        text = " ".join(WORDS[(index + k) % len(WORDS)] for k in range(2000))
        ids = [self.vocabulary.get(token, 0) for token in text.split()]
        pairs = [a * 31 + b for a, b in itertools.pairwise(ids)]
        return np.array((pairs + [0] * 256)[:256], dtype=np.int64)


def make_dataset(name: str, root: Path):
    if name == "pillow":
        from images import PillowImageFolder

        return PillowImageFolder(root, "train")
    if name == "pure_python":
        return PurePython(2_000)
    if name == "numpy_work":
        from compare_torch import NumpyWork

        return NumpyWork(4_000)
    return Indices(50_000)


def make_loader(loader: str, dataset):
    """The loader named ``loader``; its module is imported already (``loader_module``)."""
    if loader == "torch":
        return torch_data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                                     num_workers=NUM_WORKERS, persistent_workers=True)
    worker_type, _, workers = loader.partition("-")
    return dataloader_torch.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                                       num_workers=int(workers or NUM_WORKERS),
                                       persistent_workers=True, worker_type=worker_type)


def _family(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    found = [pid]
    try:
        for child in children.read_text().split():
            found += _family(int(child))
    except OSError:
        pass
    return found


class PeakMemory:
    """The largest memory of this process and its descendants, sampled on a thread:
    their PSS outside shared memory, plus the shared memory the machine holds
    beyond ``baseline_kib``."""

    def __init__(self, baseline_kib: int) -> None:
        self.peak_kib = 0
        self._baseline_kib = baseline_kib
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            total = shared_memory_kib() - self._baseline_kib
            for pid in _family(os.getpid()):
                fields = rollup_kib(pid)
                total += fields.get("Pss", 0) - fields.get("Pss_Shmem", 0)
            self.peak_kib = max(self.peak_kib, total)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_kib / 1024


def family_cpu_seconds() -> float:
    """The CPU time (user and system) of this process and its descendants so far."""
    total = 0.0
    for pid in _family(os.getpid()):
        try:
            total += cpu_seconds(pid)
        except OSError:
            continue  # ended meanwhile
    return total


def touch(batch) -> None:
    """Read one value per 4 KiB page, as a training step reads its whole batch: the
    pages then count in the consumer's PSS whichever loader delivered them."""
    for leaf in batch if isinstance(batch, (list, tuple)) else [batch]:
        array = np.asarray(leaf).reshape(-1)
        float(array[::max(4096 // array.itemsize, 1)].sum())


def run_child(workload: str, loader_name: str, root: Path) -> dict:
    baseline_kib = shared_memory_kib()
    dataset = make_dataset(workload, root)
    # A training script has imported torch before it builds its loader: the
    # first batch is construction, iter() and next(), not torch's import.
    started = time.perf_counter()
    loader = make_loader(loader_name, dataset)
    it = iter(loader)
    next(it)
    first_batch = time.perf_counter() - started
    del it
    memory = PeakMemory(baseline_kib)
    items = sum(len(batch[0] if isinstance(batch, (list, tuple)) else batch)
                for batch in loader)  # warm-up
    started, cpu_started = time.perf_counter(), family_cpu_seconds()
    for _ in range(EPOCHS):
        for batch in loader:
            touch(batch)
    seconds = time.perf_counter() - started
    cpu_ms = (family_cpu_seconds() - cpu_started) * 1e3 / (items * EPOCHS)
    memory_mib = memory.stop()
    chosen = getattr(loader, "worker_type", "process")
    close = getattr(loader, "close", None)
    if close is not None:
        close()
    return {"items_per_second": items * EPOCHS / seconds, "cpu_ms_per_item": cpu_ms,
            "first_batch_ms": first_batch * 1e3, "peak_memory_mib": memory_mib,
            "worker_type": chosen}


def _median(runs: list[dict]) -> dict:
    """Each figure's median over the runs (the worker type is the same in all)."""
    return {key: (float(np.median([run[key] for run in runs]))
                  if isinstance(runs[0][key], float) else runs[0][key])
            for key in runs[0]}


def run_fresh(workload: str, loader: str, root: Path) -> dict:
    command = [sys.executable, __file__, "--child", workload, loader, str(root)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{workload} / {loader} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("WORKLOAD", "LOADER", "ROOT"))
    parser.add_argument("--workloads", default="pillow,pure_python,numpy_work,in_memory")
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    if options.child:
        workload, loader, root = options.child
        print(json.dumps(run_child(workload, loader, Path(root))))
        return
    from dataloader._images.samples import sample_image_folder

    root = sample_image_folder(options.images, photographs="installed")
    load = os.getloadavg()[0]
    rows, results = [], {}
    for workload in options.workloads.split(","):
        # Rounds alternate the loaders' order; each figure is the median.
        runs: dict[str, list[dict]] = {loader: [] for loader in LOADERS}
        for round_ in range(options.rounds):
            order = LOADERS if round_ % 2 == 0 else LOADERS[::-1]
            for loader in order:
                runs[loader].append(run_fresh(workload, loader, root))
        figures = {loader: _median(found) for loader, found in runs.items()}
        results[workload] = figures
        torch = figures["torch"]
        for loader in LOADERS:
            ours = figures[loader]
            rows.append([
                workload, loader if loader != "auto" else f"auto ({ours['worker_type']})",
                f"{ours['items_per_second']:,.0f}",
                f"{ours['items_per_second'] / torch['items_per_second']:.2f}",
                f"{ours['cpu_ms_per_item']:.3f}",
                f"{torch['cpu_ms_per_item'] / ours['cpu_ms_per_item']:.2f}",
                f"{ours['first_batch_ms']:.1f}",
                f"{ours['first_batch_ms'] / torch['first_batch_ms']:.2f}",
                f"{ours['peak_memory_mib']:.0f}",
                f"{ours['peak_memory_mib'] / torch['peak_memory_mib']:.2f}",
            ])
    # Scaling: the pure-Python dataset on 1 and on 2 worker processes.
    one = run_fresh("pure_python", "process-1", root)["items_per_second"]
    two = results.get("pure_python", {}).get("process") or run_fresh("pure_python", "process", root)
    print(f"batch size {BATCH_SIZE}, {NUM_WORKERS} workers, load average {load:.1f} "
          f"at the start, {os.cpu_count()} CPUs")
    print_table(["dataset", "loader", "items/s", "vs torch", "CPU ms/item", "torch / ours",
                 "first batch ms", "vs torch", "peak memory MiB", "vs torch"], rows)
    scaling = two["items_per_second"] / one
    print(f"pure_python on worker processes: 2 workers / 1 worker = {scaling:.2f}")
    write_json(RESULTS, "drop_in", {"load_average": load, "results": results,
                                    "process_scaling": scaling})


if __name__ == "__main__":
    main()
