"""mkdocs hook: pictures made when the documentation is built.

* ``images/transforms/*.png``: each transform of ``dataloader.transforms``
  applied to scikit-image's ``astronaut`` photograph (random transforms:
  four draws side by side), shown in ``transforms.md``.
* ``images/kernels_chart.svg``: the single-thread speed-ups over Pillow of
  the results table in ``benchmarks.md``, as bars, shown on the home page.

Both are written before mkdocs collects the files, and only when their
bytes change, so ``mkdocs serve`` does not rebuild in a loop. They are not
committed (see ``.gitignore``).
"""

from __future__ import annotations

import html
import io
import re
from pathlib import Path

import numpy as np

# (file name, transform, draws): the transforms.md gallery, in its order.
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def gallery():
    from dataloader.transforms import (
        AutoAugment,
        CenterCrop,
        ColorJitter,
        Compose,
        Crop,
        GaussianBlur,
        Grayscale,
        HFlip,
        Normalize,
        Pad,
        PadTo,
        RandAugment,
        RandomAdjustSharpness,
        RandomAffine,
        RandomAutocontrast,
        RandomCrop,
        RandomEqualize,
        RandomErasing,
        RandomGrayscale,
        RandomHFlip,
        RandomInvert,
        RandomPosterize,
        RandomResizedCrop,
        RandomRotation,
        RandomSolarize,
        RandomVFlip,
        Resize,
        Rotate90,
        ToFloat,
        ToGray,
        TrivialAugmentWide,
        VFlip,
    )

    return [
        ("resize", Resize((128, 256)), 1),
        ("center_crop", CenterCrop(160), 1),
        ("crop", Crop(40, 60, 128, 128), 1),
        ("random_crop", RandomCrop(160, padding=24), 4),
        ("random_resized_crop", RandomResizedCrop(160), 4),
        ("hflip", HFlip(), 1),
        ("vflip", VFlip(), 1),
        ("random_hflip", RandomHFlip(), 4),
        ("rotate90", Rotate90(), 1),
        ("pad", Pad(32, mode="reflect"), 1),
        ("pad_to", PadTo(256, 320, fill=(255, 255, 255), anchor="center"), 1),
        ("to_gray", ToGray(), 1),
        ("normalize", Compose([ToFloat(), Normalize(MEAN, STD)]), 1),
        ("color_jitter", ColorJitter(0.4, 0.4, 0.4, 0.1), 4),
        ("grayscale", Grayscale(), 1),
        ("random_grayscale", RandomGrayscale(p=0.5), 4),
        ("gaussian_blur", GaussianBlur(9, sigma=(0.1, 3.0)), 4),
        ("random_adjust_sharpness", RandomAdjustSharpness(4.0, p=1.0), 1),
        ("random_posterize", RandomPosterize(2, p=1.0), 1),
        ("random_solarize", RandomSolarize(128, p=1.0), 1),
        ("random_autocontrast", RandomAutocontrast(p=1.0), 1),
        ("random_equalize", RandomEqualize(p=1.0), 1),
        ("random_invert", RandomInvert(p=1.0), 1),
        ("random_vflip", RandomVFlip(), 4),
        ("random_rotation", RandomRotation(30, interpolation="bilinear"), 4),
        ("random_affine", RandomAffine(20, translate=(0.1, 0.1), scale=(0.8, 1.2), shear=10,
                                       interpolation="bilinear", fill=(255, 255, 255)), 4),
        ("random_erasing", Compose([ToFloat(), RandomErasing(p=1.0)]), 4),
        ("rand_augment", RandAugment(2, 9), 4),
        ("trivial_augment_wide", TrivialAugmentWide(), 4),
        ("auto_augment", AutoAugment("imagenet"), 4),
    ]


def on_pre_build(config) -> None:
    docs = Path(config["docs_dir"])
    render_transforms(docs / "images" / "transforms")
    render_kernels_chart(docs / "benchmarks.md", docs / "images" / "kernels_chart.svg")


def _write(path: Path, data: bytes) -> None:
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _png(pixels: np.ndarray) -> bytes:
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def render_transforms(folder: Path) -> None:
    from skimage import data

    from dataloader._cli.show import image_grid, viewable
    from dataloader.transforms import Resize

    original = Resize(256)(np.ascontiguousarray(data.astronaut()))
    _write(folder / "original.png", _png(original))
    for name, transform, draws in gallery():
        outputs = [viewable(transform(original, seed=seed)) for seed in range(draws)]
        pixels = outputs[0] if draws == 1 else image_grid(outputs, gap=6)
        _write(folder / f"{name}.png", _png(pixels))
    render_batch_mixing(folder)


def render_batch_mixing(folder: Path) -> None:
    """MixUp and CutMix on a batch of two photographs (astronaut, coffee): the batch after."""
    from skimage import data

    from dataloader._cli.show import image_grid
    from dataloader.transforms import CenterCrop, Compose, CutMix, MixUp, Resize, ToFloat

    square = Compose([Resize(192), CenterCrop(192), ToFloat()])
    photos = [np.asarray(square(np.ascontiguousarray(photo)))
              for photo in (data.astronaut(), data.coffee())]
    _write(folder / "mix_batch.png", _png(image_grid(
        [(p * 255).astype(np.uint8) for p in photos], gap=6)))
    for name, mix in (("mixup", MixUp(alpha=1.0, num_classes=2)),
                      ("cutmix", CutMix(alpha=1.0, num_classes=2))):
        batch = np.stack(photos).transpose(0, 3, 1, 2).copy()
        mixed, _ = mix(batch, np.array([0, 1]), seed=3)
        images = [(image.transpose(1, 2, 0) * 255).astype(np.uint8) for image in mixed]
        _write(folder / f"{name}.png", _png(image_grid(images, gap=6)))


def benchmark_rows(page: Path) -> list[tuple[str, str, float]]:
    """(operation, library, speed-up over Pillow on one thread) from ``page``'s kernels table.

    The table is the one in the section ``## Image kernels``, whose sixth
    column is the one-thread speed-up over Pillow (``1.49x``).
    """
    section = re.search(r"^## Image kernels$(.*?)(?=^## |\Z)", page.read_text(), re.M | re.S)
    rows = []
    for line in section.group(1).splitlines() if section else ():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and re.fullmatch(r"[\d.]+x", cells[5]):
            rows.append((cells[0], cells[1], float(cells[5][:-1])))
    if not rows:
        raise ValueError(f"no results table with speed-ups over Pillow under '## Image kernels' "
                         f"in {page}")
    return rows


def render_kernels_chart(page: Path, out: Path) -> None:
    """Grouped horizontal bars, one group per operation, as a self-contained SVG."""
    rows = benchmark_rows(page)
    operations = list(dict.fromkeys(operation for operation, _, _ in rows))
    libraries = list(dict.fromkeys(library.split(" (")[0] for _, library, _ in rows))
    colours = ["#3f51b5", "#9e9e9e", "#ff9800", "#4caf50", "#e91e63", "#00bcd4"]
    bar, gap, label_width, plot_width = 16, 18, 330, 420
    longest = max(speedup for _, _, speedup in rows)
    y = 40
    parts = []
    for operation in operations:
        parts.append(f'<text x="0" y="{y + 12}" class="op">{html.escape(operation)}</text>')
        y += 20
        for op, library, speedup in rows:
            if op != operation:
                continue
            colour = colours[libraries.index(library.split(" (")[0]) % len(colours)]
            width = max(plot_width * speedup / longest, 1)
            parts.append(f'<text x="{label_width - 8}" y="{y + 12}" class="lib" '
                         f'text-anchor="end">{html.escape(library)}</text>')
            parts.append(f'<rect x="{label_width}" y="{y}" width="{width:.1f}" height="{bar}" '
                         f'fill="{colour}"/>')
            parts.append(f'<text x="{label_width + width + 6:.1f}" y="{y + 12}" '
                         f'class="value">{speedup:.2f}x</text>')
            y += bar + 4
        y += gap
    total_width = label_width + plot_width + 80
    # Pillow's level, for reference.
    one = label_width + plot_width / longest
    parts.append(f'<line x1="{one:.1f}" y1="30" x2="{one:.1f}" y2="{y - gap}" stroke="#333" '
                 'stroke-dasharray="4 3"/>')
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_width}" height="{y}" '
        f'viewBox="0 0 {total_width} {y}" font-family="sans-serif">\n'
        '<style>.op{font-size:14px;font-weight:bold}.lib{font-size:12px}'
        '.value{font-size:11px;fill:#444}.title{font-size:15px}</style>\n'
        f'<rect width="{total_width}" height="{y}" fill="white"/>\n'
        '<text x="0" y="18" class="title">Speed-up over Pillow, one thread, one image at a '
        'time (higher is better)</text>\n'
        + "\n".join(parts) + "\n</svg>\n"
    )
    _write(out, svg.encode())
