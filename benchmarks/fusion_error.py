"""How far DCT-scaled decoding moves a chain's pixels from the exact chain.

Outside ``Decode(exact=True)``, a JPEG followed by a shrinking ``Resize`` or
``RandomResizedCrop`` is decoded at a DCT scale n/8 (the rule is
``plan_fusion`` in ``dataloader/_core/src/dl_plan.c``). This script runs
each chain both ways on the same items and seeds and reports, over the
items the fusion changed (those decoded at a scale below 8/8), the largest
absolute difference of a sample, the mean absolute difference, the 99th
percentile and the PSNR (from the mean squared difference over all their
samples).

Two image sets: the benchmarks' ImageNet-like folder
(``dataloader._images.samples.sample_image_folder(photographs="installed")``:
quality-90 JPEGs of 400-500 x 300-375 pixels cut from the camera photographs
of two Debian wallpaper packages, which ``make bench`` installs), and those
photographs whole (``samples.INSTALLED_PHOTOS``, decoded at the smallest
DCT scale that keeps 1200 pixels on the shorter side: 1024 to 3088 pixels
a side, quality 90), where 224-pixel targets shrink enough for scaling.
Without the packages, both sets come from scikit-image's photographs
(``samples.PHOTOS``, 300 to 1411 pixels a side).

Run ``python benchmarks/fusion_error.py`` (``--images N``, ``--seeds N``);
JSON into ``benchmarks/results/fusion_error.json``.
"""

from __future__ import annotations

import argparse
import io
import math
from pathlib import Path

import numpy as np
from _common import load_average
from PIL import Image as PILImage

from dataloader._cli.measure import print_table, write_json
from dataloader._images.samples import (
    _installed_photos,
    _photos,
    image_paths,
    sample_image_folder,
)
from dataloader.transforms import CenterCrop, Compose, Decode, RandomResizedCrop, Resize

RESULTS = Path(__file__).parent / "results"

CHAINS = {
    "Resize(256), CenterCrop(224)": [Resize(256), CenterCrop(224)],
    "Resize(128)": [Resize(128)],
    "Resize(64)": [Resize(64)],
    "Resize((32, 32))": [Resize((32, 32))],
    "RandomResizedCrop(224)": [RandomResizedCrop(224)],
    "RandomResizedCrop(112)": [RandomResizedCrop(112)],
    "RandomResizedCrop(64)": [RandomResizedCrop(64)],
}
RANDOM = ("RandomResizedCrop",)


def photographs() -> list[bytes]:
    """The installed photographs (else scikit-image's), whole, as quality-90 JPEGs."""
    out = []
    for image in _installed_photos(PILImage) or _photos(PILImage):
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=90)
        out.append(buffer.getvalue())
    return out


def measure(images: list[bytes], steps: list, seeds: int) -> dict:
    """The differences of the fused chain from the exact one over ``images``."""
    fused_chain = Compose([Decode("RGB"), *steps])
    exact_chain = Compose([Decode("RGB", exact=True), *steps])
    random = any(type(step).__name__.startswith(RANDOM) for step in steps)
    items = changed = samples = 0
    largest, absolute, squared = 0, 0.0, 0.0
    tails = []
    for data in images:
        for seed in range(seeds if random else 1):
            fused = np.asarray(fused_chain(data, seed=seed)).astype(np.int32)
            exact = np.asarray(exact_chain(data, seed=seed)).astype(np.int32)
            items += 1
            if np.array_equal(fused, exact):
                continue
            difference = np.abs(fused - exact)
            changed += 1
            samples += difference.size
            largest = max(largest, int(difference.max()))
            absolute += float(difference.sum())
            squared += float((difference.astype(np.float64) ** 2).sum())
            tails.append(float(np.percentile(difference, 99)))
    mse = squared / samples if samples else 0.0
    return {"items": items, "scaled_items": changed, "max_abs": largest,
            "mean_abs": absolute / samples if samples else 0.0,
            "p99_abs_worst_item": max(tails, default=0.0),
            "psnr_db": 10 * math.log10(255 ** 2 / mse) if mse else math.inf}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200,
                        help="images of the sample folder (default 200)")
    parser.add_argument("--seeds", type=int, default=8,
                        help="draws per image of the random chains (default 8)")
    args = parser.parse_args()
    load_before = load_average()
    folder = sample_image_folder(args.images, photographs="installed")
    sets = {"sample folder": [path.read_bytes() for path in image_paths(folder)],
            "photographs": photographs()}
    rows = []
    for set_name, images in sets.items():
        for chain, steps in CHAINS.items():
            rows.append({"images": set_name, "chain": chain, **measure(images, steps, args.seeds)})
    info = {"load_average": [load_before, load_average()], "seeds": args.seeds,
            "set_sizes": {name: len(images) for name, images in sets.items()}, "results": rows}
    print_table(["images", "chain", "scaled items", "max abs", "mean abs", "p99 (worst)",
                 "PSNR dB"],
                [[row["images"], row["chain"], f"{row['scaled_items']}/{row['items']}",
                  row["max_abs"], f"{row['mean_abs']:.3f}", f"{row['p99_abs_worst_item']:.1f}",
                  f"{row['psnr_db']:.2f}"] for row in rows])
    print(f"written {write_json(RESULTS, 'fusion_error', info)}")


if __name__ == "__main__":
    main()
