"""The RandAugment train chain: ours against torch + torchvision-style Pillow code.

The chain of a RandAugment recipe: decode, RandomResizedCrop(224),
RandomHFlip, RandAugment(2, 9), ToFloat, Normalize, ToChw, RandomErasing(0.25),
in batches of 64 from the generated ImageNet-like folder of
``benchmarks/images.py`` (its ``randaugment`` chain), 2 workers:

* ``dataloader`` -- the chain as ``transform=`` on 2 worker threads,
  ``ImageCollator`` batches (RandAugment one native op: ``dl_policy.c``);
* ``torch`` -- ``torch.utils.data.DataLoader`` with 2 persistent worker
  processes over ``images.PillowImageFolder``, whose Pillow pipeline runs
  ``_pillow_augment.rand_augment`` after the flip and its
  ``random_erasing`` on the normalised tensor.

Each loader runs in a fresh process (``images.run_fresh``: a warm-up
epoch, then ``repeats`` timed epochs); the two alternate for ``rounds``
rounds. The headline is the best epoch of each, the median beside it; the
ratio is ours over torch's (target: 3x); the CPU time per image (user +
system, all processes) is beside it, less sensitive to a shared machine.
Prints a table with the load average before and after; writes
``benchmarks/results/policies.json``.

Run: ``.venv/bin/python benchmarks/policies.py [--repeats N] [--rounds N] [--images N]``
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from _common import load_average
from images import BATCH_SIZE, NUM_WORKERS, run_fresh

from dataloader._cli.measure import print_table, write_json
from dataloader._images.samples import sample_image_folder

RESULTS = Path(__file__).parent / "results"
LIBRARIES = ("dataloader", "torch")
TARGET = 3.0


def compare(repeats: int, rounds: int, n_images: int) -> dict:
    root = sample_image_folder(n_images)
    load = [load_average()]
    runs: dict[str, list[dict]] = {library: [] for library in LIBRARIES}
    for round_ in range(rounds):
        for library in LIBRARIES:
            runs[library].append(run_fresh(library, "randaugment", root, repeats))
            load.append(load_average())
        print(f"  policies round {round_ + 1}/{rounds} done", flush=True)
    result: dict = {"chain": "RandomResizedCrop(224), RandomHFlip, RandAugment(2, 9), ToFloat, "
                             "Normalize, ToChw, RandomErasing(0.25)",
                    "batch_size": BATCH_SIZE, "workers": NUM_WORKERS, "images": n_images,
                    "repeats": repeats, "rounds": rounds, "load_average": load}
    rows = []
    for library in LIBRARIES:
        seconds = [s for run in runs[library] for s in run["epoch_seconds"]]
        images = runs[library][0]["images"]
        cpu = statistics.median(run["cpu_ms_per_image"] for run in runs[library])
        result[library] = {"best_images_per_s": images / min(seconds),
                           "median_images_per_s": images / statistics.median(seconds),
                           "cpu_ms_per_image": cpu}
    ratio = result["dataloader"]["best_images_per_s"] / result["torch"]["best_images_per_s"]
    median_ratio = (result["dataloader"]["median_images_per_s"]
                    / result["torch"]["median_images_per_s"])
    cpu_ratio = result["torch"]["cpu_ms_per_image"] / result["dataloader"]["cpu_ms_per_image"]
    result["speedup_vs_torch"] = ratio
    result["median_speedup_vs_torch"] = median_ratio
    result["cpu_ratio_vs_torch"] = cpu_ratio
    for library in LIBRARIES:
        row = result[library]
        rows.append([library, f"{row['best_images_per_s']:.0f}",
                     f"{row['median_images_per_s']:.0f}", f"{row['cpu_ms_per_image']:.2f}"])
    rows.append(["ratio (ours over torch)", f"{ratio:.2f}x", f"{median_ratio:.2f}x",
                 f"{cpu_ratio:.2f}x"])
    print_table(["RandAugment train chain", "best img/s", "median img/s", "CPU ms/img"], rows)
    print(f"target: >= {TARGET:.0f}x torch")
    print(f"load average before: {load[0]}, after: {load[-1]}")
    write_json(RESULTS, "policies", result)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed epochs per process")
    parser.add_argument("--rounds", type=int, default=2, help="fresh processes per library")
    parser.add_argument("--images", type=int, default=2000, help="images in the folder")
    args = parser.parse_args()
    compare(args.repeats, args.rounds, args.images)


if __name__ == "__main__":
    main()
