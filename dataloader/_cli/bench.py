"""``dataloader bench``: the native image pipeline over a folder, timed, optionally against torch.

Ours: ``ImageFolder`` + a native chain (decode, random resized crop, random
flip, normalise, CHW) + ``ImageCollator``, on a pool of worker threads. The
reference: torch's ``DataLoader`` with ``num_workers`` processes running
the same steps with Pillow and torch, as a torchvision training script
does (torchvision itself is not needed).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import random
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dataloader._cli.bench_dataset import bench_dataset
from dataloader._cli.common import (
    image_dataset,
    named_error,
    non_negative_int,
    positive_int,
    require,
    wrap,
)
from dataloader._images.collator import ImageCollator
from dataloader._loader import DataLoader
from dataloader._loading.stats import STAGES
from dataloader.transforms import (
    Compose,
    Decode,
    Normalize,
    RandomHFlip,
    RandomResizedCrop,
    ToChw,
    ToFloat,
)

__all__ = ["BenchResult", "add_bench_command", "format_table", "native_chain", "run_native",
           "run_torch", "short_run_warning"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def add_bench_command(commands: Any) -> None:
    """Register ``bench`` on the command line's subcommand parsers.

    Examples
    --------
    >>> import argparse
    >>> from dataloader._cli.bench import add_bench_command
    >>> parser = argparse.ArgumentParser(prog="dataloader")
    >>> add_bench_command(parser.add_subparsers(dest="command"))
    >>> parser.parse_args(["bench", "--epochs", "2"]).epochs
    2
    """
    bench = commands.add_parser(
        "bench", help="time the image pipeline over a folder (or generated images)",
        description=wrap("Load an image folder through ImageFolder + Compose([Decode('RGB'), "
                    "RandomResizedCrop(SIZE), RandomHFlip(), ToFloat(), Normalize(ImageNet), "
                    "ToChw()]) + ImageCollator on worker threads, and report images/s, MB/s of "
                    "compressed files read, and the time of each stage. Without PATH, a small "
                    "set of generated JPEGs (kept in the temporary directory) is used."),
        epilog="examples:\n  dataloader bench\n  dataloader bench train/ --batch-size 128 "
               "--workers 8 --epochs 2\n  dataloader bench train/ --against torch\n"
               "  dataloader bench --dataset mydata:TrainSet --epochs 3 --against torch",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("path", nargs="?", type=Path, metavar="PATH",
                       help="an image folder: one subfolder per class (as torchvision's "
                            "ImageFolder), or images directly inside")
    bench.add_argument("--batch-size", type=positive_int, default=64, metavar="N",
                       help="images per batch (default: 64)")
    bench.add_argument("--workers", type=non_negative_int, metavar="N",
                       help=f"worker threads, and torch's worker processes "
                            f"(default: the usable cores, {_cpu_count()} here; with "
                            f"--dataset, chosen by the loader)")
    bench.add_argument("--size", type=positive_int, default=224, metavar="PIXELS",
                       help="side of the square crops (default: 224)")
    bench.add_argument("--epochs", type=positive_int, default=1, metavar="N",
                       help="passes over the folder (default: 1)")
    bench.add_argument("--against", choices=["torch"],
                       help="also run torch's DataLoader with worker processes doing the same "
                            "work with Pillow and torch, and compare")
    bench.add_argument("--dataset", metavar="MODULE:CALLABLE",
                       help="time your own dataset instead: CALLABLE() returns it; the loader "
                            "chooses its workers (worker_type and num_workers 'auto') and says "
                            "what it chose and why")
    bench.add_argument("--sample-images", type=positive_int, default=256, metavar="N",
                       help="without PATH: how many images to generate (default: 256)")
    bench.set_defaults(run=_bench)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _bench(args: argparse.Namespace) -> int:
    if args.dataset is not None:
        print(bench_dataset(args.dataset, batch_size=args.batch_size, workers=args.workers,
                            epochs=args.epochs, against_torch=args.against == "torch"))
        return 0
    if args.workers is None:
        args.workers = _cpu_count()
    if args.against == "torch":
        require("torch", "--against torch needs torch: pip install torch")
        require("PIL", "--against torch needs Pillow: pip install pillow")
    if args.path is None:
        from dataloader._images.samples import sample_image_folder

        root = sample_image_folder(args.sample_images, n_classes=4)
        print(f"generated images: {root}", file=sys.stderr)
    else:
        root = args.path
    folder = image_dataset(root)
    print(f"{len(folder)} images in {len(folder.classes)} classes, batch size {args.batch_size}, "
          f"{args.workers} workers, {args.size}x{args.size} crops, {args.epochs} epoch(s)")
    options = dict(batch_size=args.batch_size, workers=args.workers, size=args.size,
                   epochs=args.epochs)
    total = len(folder) * args.epochs
    progress = Progress(total, "dataloader")
    try:
        ours = run_native(folder, progress=progress, **options)
    except (ValueError, OSError) as err:
        raise named_error(err, folder, native_chain(args.size)) from None
    finally:
        progress.close()
    theirs = None
    if args.against == "torch":
        import torch.utils.data  # noqa: F401  (imported before the clock starts)

        progress = Progress(total, "torch")
        try:
            theirs = run_torch(folder, progress=progress, **options)
        finally:
            progress.close()
    print()
    print(report(ours, theirs))
    warning = short_run_warning([ours] if theirs is None else [ours, theirs])
    if warning:
        print("\n" + textwrap.fill(warning, 80), file=sys.stderr)
    return 0


@dataclasses.dataclass
class BenchResult:
    """What one loader did: images, compressed bytes, wall time, and its stage figures."""

    name: str
    images: int
    bytes_read: int
    seconds: float
    first_batch_seconds: float
    stages: dict[str, dict[str, float]] | None = None
    # Images in the first batch, to measure the rest apart from the start-up.
    first_batch_images: int = 0

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else math.inf

    @property
    def megabytes_per_second(self) -> float:
        return self.bytes_read / 1e6 / self.seconds if self.seconds > 0 else math.inf

    @property
    def start_share(self) -> float:
        """The share of the wall time spent before the first batch (starting workers)."""
        return self.first_batch_seconds / self.seconds if self.seconds > 0 else 0.0


# A run whose loader spent more than this share of its time before the first
# batch measures start-up rather than loading.
SHORT_RUN_START_SHARE = 0.25


def short_run_warning(results: Sequence[BenchResult]) -> str | None:
    """A warning when a result measures start-up more than loading, else ``None``.

    Examples
    --------
    >>> from dataloader._cli.bench import BenchResult, short_run_warning
    >>> quick = BenchResult("torch", images=48, bytes_read=0, seconds=1.0,
    ...                     first_batch_seconds=0.9)
    >>> print(short_run_warning([quick]))  # doctest: +ELLIPSIS
    warning: this run is too short to compare loading speeds: torch spent 90% of ...
    """
    starts = [result for result in results if result.start_share > SHORT_RUN_START_SHARE]
    if not starts:
        return None
    spent = ", ".join(f"{result.name} spent {result.start_share:.0%} of its "
                      f"{result.seconds:.2f} s" for result in starts)
    return (f"warning: this run is too short to compare loading speeds: {spent} before its "
            "first batch (starting its workers), which the speed-up counts as loading. Give "
            "it more images or --epochs, or read the 'after the first batch' rows.")


def native_chain(size: int) -> Compose:
    """The training chain that ``bench`` measures.

    Examples
    --------
    >>> from dataloader._cli.bench import native_chain
    >>> native_chain(224).transforms[1]
    RandomResizedCrop(size=(224, 224))
    """
    return Compose([Decode("RGB"), RandomResizedCrop(size), RandomHFlip(), ToFloat(),
                    Normalize(IMAGENET_MEAN, IMAGENET_STD), ToChw()])


def run_native(folder: Any, *, batch_size: int, workers: int, size: int, epochs: int,
               progress: Callable[[int], None]) -> BenchResult:
    """Load ``epochs`` epochs of ``folder`` through the native pipeline."""
    epoch_bytes = sum(os.path.getsize(path) for path, _ in folder.samples)
    loader: DataLoader[Any] = DataLoader(
        folder, batch_size=batch_size, shuffle=True, num_workers=workers,
        transform=native_chain(size), collate_fn=ImageCollator(), seed=0)
    with loader:
        images, seconds, first, first_images = _time_epochs(loader, epochs, progress)
        stages = {stage: loader.stats()[stage] for stage in STAGES}
    return BenchResult("dataloader", images, epoch_bytes * epochs, seconds, first, stages,
                       first_images)


def run_torch(folder: Any, *, batch_size: int, workers: int, size: int, epochs: int,
              progress: Callable[[int], None]) -> BenchResult:
    """The same work through ``torch.utils.data.DataLoader`` with worker processes."""
    import torch.utils.data

    epoch_bytes = sum(os.path.getsize(path) for path, _ in folder.samples)
    dataset = PillowImages(folder.samples, size)
    # torch's DataLoader takes any map-style dataset; its annotation asks for its
    # Dataset class (the ignore is unused where torch is not installed).
    loader: torch.utils.data.DataLoader[Any] = torch.utils.data.DataLoader(
        dataset,  # type: ignore[arg-type, unused-ignore]
        batch_size=batch_size, shuffle=True, num_workers=workers,
        persistent_workers=workers > 0 and epochs > 1)
    images, seconds, first, first_images = _time_epochs(loader, epochs, progress)
    del loader  # stops the worker processes
    return BenchResult("torch", images, epoch_bytes * epochs, seconds, first,
                       first_batch_images=first_images)


def _steady_images_per_second(result: BenchResult) -> float:
    """Images per second after the first batch: loading without the start-up."""
    seconds = result.seconds - result.first_batch_seconds
    after = result.images - result.first_batch_images
    return after / seconds if after > 0 and seconds > 0 else math.nan


def _time_epochs(loader: Iterable[Any], epochs: int,
                 progress: Callable[[int], None]) -> tuple[int, float, float, int]:
    """Images loaded, wall seconds (iterator creation included), seconds to the first
    batch, and the images in it."""
    images = first_images = 0
    first = math.nan
    start = time.perf_counter()
    for _ in range(epochs):
        for _images, labels in loader:
            if images == 0:
                first, first_images = time.perf_counter() - start, len(labels)
            images += len(labels)
            progress(len(labels))
    return images, time.perf_counter() - start, first, first_images


class PillowImages:
    """torch's side of the comparison: Pillow decode, crop, resize and flip, torch normalisation.

    ``RandomResizedCrop`` draws its window as torchvision does (ten tries of
    a random area and log-uniform aspect ratio, then a centre crop).
    """

    def __init__(self, samples: Sequence[tuple[str, int]], size: int) -> None:
        self.samples = list(samples)
        self.size = size

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        import torch
        from PIL import Image as PILImage

        path, label = self.samples[index]
        with PILImage.open(path) as file:
            image = file.convert("RGB")
        top, left, height, width = _crop_window(image.height, image.width)
        image = image.resize((self.size, self.size), PILImage.Resampling.BILINEAR,
                             box=(left, top, left + width, top + height))
        if random.random() < 0.5:
            image = image.transpose(PILImage.Transpose.FLIP_LEFT_RIGHT)
        tensor = torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1).float().div_(255)
        mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
        return tensor.sub_(mean).div_(std), label


def _crop_window(height: int, width: int, scale=(0.08, 1.0),
                 ratio=(3 / 4, 4 / 3)) -> tuple[int, int, int, int]:
    """torchvision's ``RandomResizedCrop.get_params`` with Python's ``random``."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * random.uniform(*scale)
        aspect = math.exp(random.uniform(*log_ratio))
        w = round(math.sqrt(target_area * aspect))
        h = round(math.sqrt(target_area / aspect))
        if 0 < w <= width and 0 < h <= height:
            return random.randint(0, height - h), random.randint(0, width - w), h, w
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, round(width / ratio[0])
    elif in_ratio > ratio[1]:
        h, w = height, round(height * ratio[1])
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


class Progress:
    """A live count of images on stderr: tqdm when installed, else a carriage-return line."""

    def __init__(self, total: int, description: str) -> None:
        self.total = total
        self.description = description
        self.done = 0
        self._start = time.perf_counter()
        self._shown = 0.0
        try:
            from tqdm import tqdm
        except ImportError:
            self._bar = None
        else:
            self._bar = tqdm(total=total, desc=description, unit="img", file=sys.stderr,
                             dynamic_ncols=True, leave=True)

    def __call__(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.perf_counter()
        if now - self._shown >= 0.1 or self.done >= self.total:
            self._shown = now
            rate = self.done / max(now - self._start, 1e-9)
            sys.stderr.write(f"\r{self.description}: {self.done}/{self.total} images "
                             f"({rate:,.0f} img/s)")
            sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            sys.stderr.write("\n")
            sys.stderr.flush()


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """Rows of text in aligned columns.

    ``align`` has one letter per column, ``l`` or ``r``; by default the
    first column is left-aligned and the others right-aligned.

    Examples
    --------
    >>> from dataloader._cli.bench import format_table
    >>> print(format_table(["name", "n"], [["a", "1"], ["bcd", "23"]]))
    name   n
    a      1
    bcd   23
    """
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    align = align or "l" + "r" * (len(headers) - 1)
    lines = []
    for row in [headers, *rows]:
        cells = [str(cell).ljust(width) if side == "l" else str(cell).rjust(width)
                 for cell, width, side in zip(row, widths, align, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def report(ours: BenchResult, torch: BenchResult | None) -> str:
    """The final tables: throughput side by side, then our time per stage."""
    def number(value: float, digits: int = 1) -> str:
        return f"{value:,.{digits}f}" if math.isfinite(value) else "-"

    # Each row: its label, its figure of a result, and whether more is better.
    figures: list[tuple[str, Callable[[BenchResult], float], int, bool]] = [
        ("wall time (s)", lambda result: result.seconds, 2, False),
        ("images/s", lambda result: result.images_per_second, 1, True),
        ("images/s after the first batch", _steady_images_per_second, 1, True),
        ("MB/s (compressed, read)", lambda result: result.megabytes_per_second, 1, True),
        ("first batch (ms)", lambda result: result.first_batch_seconds * 1e3, 1, False),
    ]
    headers = ["", "dataloader"]
    rows = [["images", str(ours.images)]]
    if torch is not None:
        headers += ["torch", "speed-up"]
        rows[0] += [str(torch.images), ""]
    for label, figure, digits, more_is_better in figures:
        row = [label, number(figure(ours), digits)]
        if torch is not None:
            better, worse = (ours, torch) if more_is_better else (torch, ours)
            ratio = figure(better) / figure(worse) if figure(worse) > 0 else math.nan
            row += [number(figure(torch), digits), f"{ratio:.2f}x" if math.isfinite(ratio)
                    else "-"]
        rows.append(row)
    text = format_table(headers, rows)
    if ours.stages:
        labels = {
            "fetch": "fetch: read files",
            "transform": "transform: decode .. CHW",
            # ImageCollator's items are transformed straight into their
            # batch slots: the stacking is part of `transform`.
            "collate": "collate (done in transform)",
            "wait": "wait: in next()",
        }
        stage_rows = []
        for stage, totals in ours.stages.items():
            per_image = totals["seconds"] / ours.images * 1e3 if ours.images else math.nan
            stage_rows.append([labels.get(stage, stage), str(totals["count"]),
                               number(totals["seconds"], 3), number(per_image, 3)])
        text += "\n\n" + format_table(["dataloader stage", "count", "seconds", "ms/image"],
                                     stage_rows)
        text += "\n(worker stages: seconds summed over the threads)"
    return text
