"""Colour augmentations: what they cost in the train chain, and each kernel against Pillow.

Two measurements, each side by side in one run:

* ``chain`` -- the plain train chain (decode, RandomResizedCrop(224),
  RandomHFlip, ToFloat, Normalize, ToChw) into ``ImageCollator`` batches of
  64, 2 worker threads, over the generated ImageNet-like sample folder
  (``dataloader._images.samples``), against the same chain with
  ``ColorJitter(0, 0, 0, 0)`` after the flip (the no-op, which the chain
  does not contain: the ratio should be 1, and the script checks that both
  compile to the same native program) and with a real
  ``ColorJitter(0.4, 0.4, 0.4, 0.1)`` (what the jitter costs). Epochs of the
  variants alternate, ``rounds`` times (the plain and no-op chains taking
  turns to go first); the headline is each variant's best epoch (the least
  disturbed on a shared machine), with the median beside it and the median
  CPU time per image (every thread of the process), which hardly depends on
  what else the machine runs. Ratios are the plain chain's time over the
  variant's.
* ``kernels`` -- each op on a 224x224 RGB photograph (the astronaut, resized)
  with fixed parameters, ours (the transform called on the array, one
  thread; the first row is that call with no op, a copy, what every row
  includes besides the kernel) against Pillow's function on a PIL image
  (what torchvision's PIL backend calls), best of ``repeats`` runs each; the
  ratio is Pillow's time over ours.

Prints both tables with the load average before and after, and writes
``benchmarks/results/augment.json``.

Run: ``.venv/bin/python benchmarks/augment.py [--quick] [--rounds N] [--images N]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from _common import load_average, per_image_seconds
from PIL import Image as PILImage
from PIL import ImageEnhance, ImageOps

from dataloader import DataLoader, ImageCollator, ImageFolder
from dataloader._cli.measure import print_table, write_json
from dataloader._images.chains import compile_chain
from dataloader._images.samples import sample_image_folder
from dataloader.transforms import (
    ColorJitter,
    Compose,
    Decode,
    GaussianBlur,
    Grayscale,
    Normalize,
    RandomAdjustSharpness,
    RandomAutocontrast,
    RandomEqualize,
    RandomHFlip,
    RandomInvert,
    RandomPosterize,
    RandomResizedCrop,
    RandomSolarize,
    Resize,
    ToChw,
    ToFloat,
)

RESULTS = Path(__file__).parent / "results"
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
BATCH_SIZE = 64
NUM_WORKERS = 2


def train_chain(jitter: ColorJitter | None) -> Compose:
    middle = [jitter] if jitter is not None else []
    return Compose([Decode("RGB"), RandomResizedCrop(224), RandomHFlip(), *middle, ToFloat(),
                    Normalize(MEAN, STD), ToChw()])


VARIANTS = {
    "plain": train_chain(None),
    "ColorJitter(0, 0, 0, 0)": train_chain(ColorJitter(0, 0, 0, 0)),
    "ColorJitter(0.4, 0.4, 0.4, 0.1)": train_chain(ColorJitter(0.4, 0.4, 0.4, 0.1)),
}


def epoch_seconds(root: Path, chain: Compose) -> tuple[float, float]:
    """Wall and CPU seconds (every thread of the process) of one epoch after a warm-up one."""
    loader = DataLoader(ImageFolder(root), batch_size=BATCH_SIZE, num_workers=NUM_WORKERS,
                        transform=chain, collate_fn=ImageCollator(), shuffle=True, seed=0)
    try:
        for _ in loader:   # warm-up epoch: pool, buffers, page cache
            pass
        start, cpu = time.perf_counter(), time.process_time()
        for _ in loader:
            pass
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        loader.close()


def bench_chain(n_images: int, rounds: int) -> list[dict]:
    root = sample_image_folder(n_images)
    wall: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for round_ in range(rounds):
        # The plain chain and the no-op one in turn first (ABBA), the real jitter last.
        pair = ["plain", "ColorJitter(0, 0, 0, 0)"]
        for name in (pair if round_ % 2 == 0 else pair[::-1]) + list(VARIANTS)[2:]:
            seconds, cpu_seconds = epoch_seconds(root, VARIANTS[name])
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    best, median = min(wall["plain"]), statistics.median(wall["plain"])
    cpu_plain = statistics.median(cpu["plain"])
    return [{"chain": name, "images_per_s": n_images / min(seconds),
             "median_images_per_s": n_images / statistics.median(seconds),
             "ratio_vs_plain": best / min(seconds),
             "median_ratio_vs_plain": median / statistics.median(seconds),
             "cpu_ms_per_image": 1e3 * statistics.median(cpu[name]) / n_images,
             "cpu_ratio_vs_plain": cpu_plain / statistics.median(cpu[name])}
            for name, seconds in wall.items()]


def photograph() -> np.ndarray:
    from skimage import data

    return np.asarray(Resize((224, 224))(np.ascontiguousarray(data.astronaut())))


# (name, ours, Pillow's on a PIL image)
KERNELS = [
    ("no op: the call itself (input to output copy)", ColorJitter(), lambda i: i.copy()),
    ("brightness 1.3", ColorJitter(brightness=(1.3, 1.3)),
     lambda i: ImageEnhance.Brightness(i).enhance(1.3)),
    ("contrast 1.3", ColorJitter(contrast=(1.3, 1.3)),
     lambda i: ImageEnhance.Contrast(i).enhance(1.3)),
    ("saturation 1.3", ColorJitter(saturation=(1.3, 1.3)),
     lambda i: ImageEnhance.Color(i).enhance(1.3)),
    ("hue 0.1 (torchvision's, HSV)", ColorJitter(hue=(0.1, 0.1)), None),
    ("grayscale", Grayscale(), lambda i: i.convert("L")),
    ("sharpness 2", RandomAdjustSharpness(2.0, p=1.0),
     lambda i: ImageEnhance.Sharpness(i).enhance(2.0)),
    ("posterize 4", RandomPosterize(4, p=1.0), lambda i: ImageOps.posterize(i, 4)),
    ("solarize 128", RandomSolarize(128, p=1.0), lambda i: ImageOps.solarize(i, 128)),
    ("autocontrast", RandomAutocontrast(p=1.0), ImageOps.autocontrast),
    ("equalize", RandomEqualize(p=1.0), ImageOps.equalize),
    ("invert", RandomInvert(p=1.0), ImageOps.invert),
    ("gaussian blur 23, sigma 2 (torchvision's)", GaussianBlur(23, 2.0), None),
]


def pillow_hue(image: PILImage.Image) -> PILImage.Image:
    """torchvision's adjust_hue on a PIL image, factor 0.1."""
    h, s, v = image.convert("HSV").split()
    shifted = np.array(h, dtype=np.uint8) + np.uint8(25)
    return PILImage.merge("HSV", (PILImage.fromarray(shifted, "L"), s, v)).convert(image.mode)


def torch_blur(image: PILImage.Image):
    """torchvision's gaussian_blur on a PIL image: to a tensor, conv2d, back (needs torch)."""
    import torch

    x = np.linspace(-11, 11, 23, dtype=np.float32)
    k = np.exp(-0.5 * (x / 2.0) ** 2)
    k = torch.from_numpy(k / k.sum())
    kernel = torch.outer(k, k).expand(3, 1, 23, 23)

    def blur(pil: PILImage.Image) -> PILImage.Image:
        t = torch.from_numpy(np.asarray(pil)).permute(2, 0, 1)[None].float()
        t = torch.nn.functional.pad(t, [11, 11, 11, 11], mode="reflect")
        t = torch.nn.functional.conv2d(t, kernel, groups=3).round().to(torch.uint8)
        return PILImage.fromarray(t[0].permute(1, 2, 0).numpy())

    return blur


def bench_kernels(repeats: int) -> list[dict]:
    rgb = photograph()
    image = PILImage.fromarray(rgb)
    rows = []
    for name, ours, reference in KERNELS:
        if reference is None:
            try:
                reference = pillow_hue if name.startswith("hue") else torch_blur(image)
            except ImportError:
                continue
        ours_s, _ = per_image_seconds(lambda _, f=ours: f(rgb), list(range(50)), repeats)
        pillow_s, _ = per_image_seconds(lambda _, f=reference: f(image), list(range(50)),
                                        repeats)
        rows.append({"op": name, "ours_us": ours_s * 1e6, "reference_us": pillow_s * 1e6,
                     "speedup": pillow_s / ours_s})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer images, rounds and repeats")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--images", type=int, default=1024)
    args = parser.parse_args()
    rounds, images, repeats = (2, 256, 2) if args.quick else (args.rounds, args.images, 5)
    load_before = load_average()
    chain = bench_chain(images, rounds)
    kernels = bench_kernels(repeats)
    load_after = load_average()
    same = (compile_chain(VARIANTS["plain"]).steps
            == compile_chain(VARIANTS["ColorJitter(0, 0, 0, 0)"]).steps)
    print(f"train chain, {images} images, batches of {BATCH_SIZE}, {NUM_WORKERS} worker "
          f"threads, best and median of {rounds} epochs; the no-op's native program is the "
          f"plain chain's: {same}")
    print_table(["chain", "images/s", "ratio", "median images/s", "median ratio",
                 "CPU ms/image", "CPU ratio"],
                [[r["chain"], r["images_per_s"], f"{r['ratio_vs_plain']:.3f}",
                  r["median_images_per_s"], f"{r['median_ratio_vs_plain']:.3f}",
                  f"{r['cpu_ms_per_image']:.3f}", f"{r['cpu_ratio_vs_plain']:.3f}"]
                 for r in chain])
    print("\nkernels on a 224x224 RGB photograph, one thread (reference: Pillow, or as named)")
    print_table(["op", "ours (us)", "reference (us)", "speed-up"],
                [[r["op"], r["ours_us"], r["reference_us"], f"{r['speedup']:.2f}x"]
                 for r in kernels])
    print(f"\nload average before {load_before}, after {load_after}")
    path = write_json(RESULTS, "augment", {"chain": chain, "same_program": same,
                                           "kernels": kernels,
                                           "load_before": load_before, "load_after": load_after})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
