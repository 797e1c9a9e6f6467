"""The operations of Pillow-SIMD's published benchmark (pillow-perf), declared once.

``kernels.py --pillow-perf`` runs each with ``dataloader.kernels`` and with
Pillow-SIMD (``_pillow_simd.py --pillow-perf``, in Pillow-SIMD's own
environment); this module has the Pillow side and imports no dataloader.
pillow-perf works on a 2560x1600 RGB image: resized to 16x16, 320x180 and
1920x1200 with each of its filters, blurred, converted and transposed. The
upscale here starts from a 640x400 image (pillow-perf's 7712x4352 output
would need 100 MB per call), and two cases of training pipelines run on
real photographs: RandomResizedCrop-like crops resized to 224x224 and the
whole-image JPEG decode.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image as PILImage
from PIL import ImageFilter

SOURCE_SIZE = (1600, 2560)   # (height, width), pillow-perf's
UPSCALE_SOURCE = (400, 640)
CROP_SIZE = (224, 224)
FILTERS = ("bilinear", "bicubic", "lanczos")
DOWNSCALES = ((16, 16), (180, 320), (1200, 1920))
BLUR_RADII = (1, 10)
CONVERSIONS = (("RGB", "L"), ("RGB", "RGBA"), ("RGBA", "RGB"), ("RGBA", "LA"))
# Pillow's transpose methods and the same operation as quarter turns
# counter-clockwise (numpy.rot90's k), or a flip.
TRANSPOSES = (("FLIP_LEFT_RIGHT", "hflip"), ("FLIP_TOP_BOTTOM", "vflip"),
              ("ROTATE_90", 1), ("ROTATE_180", 2), ("ROTATE_270", 3))
CROPS = "resize RandomResizedCrop crops of photographs -> 224x224 (bilinear)"
DECODE = "decode JPEG photographs to RGB"


@dataclass(frozen=True)
class Operation:
    """One benchmark operation: what it does, on which input (a key of ``inputs()``)."""

    name: str
    kind: str        # "resize", "blur", "convert", "transpose", "crops", "decode"
    source: str      # "image", "small", "rgba", "crops", "jpegs"
    argument: Any    # the kind's parameter: ((height, width), filter), radius, mode, method


def operations() -> list[Operation]:
    """Every operation of the benchmark, in the order it prints them."""
    ops = []
    for size in DOWNSCALES:
        for name in FILTERS:
            ops.append(Operation(f"resize 2560x1600 -> {size[1]}x{size[0]} {name}", "resize",
                                 "image", (size, name)))
    for name in FILTERS:
        ops.append(Operation(f"resize 640x400 -> 2560x1600 {name}", "resize", "small",
                             (SOURCE_SIZE, name)))
    for radius in BLUR_RADII:
        ops.append(Operation(f"gaussian blur radius {radius} (box passes)", "blur", "image",
                             radius))
    for before, after in CONVERSIONS:
        ops.append(Operation(f"convert {before} -> {after}", "convert",
                             "rgba" if before == "RGBA" else "image", after))
    for method, _ in TRANSPOSES:
        ops.append(Operation(f"transpose {method}", "transpose", "image", method))
    ops.append(Operation(CROPS, "crops", "crops", CROP_SIZE))
    ops.append(Operation(DECODE, "decode", "jpegs", "RGB"))
    return ops


def crop_window(height: int, width: int, seed: int) -> tuple[int, int, int, int]:
    """One window ``(top, left, height, width)`` as RandomResizedCrop draws it: scale in
    (0.08, 1) of the area, aspect ratio log-uniform in (3/4, 4/3)."""
    rng = np.random.default_rng(seed)
    while True:
        area = height * width * rng.uniform(0.08, 1.0)
        ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        w, h = round(np.sqrt(area * ratio)), round(np.sqrt(area / ratio))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w


def inputs(image: np.ndarray, photographs: list[Path], crop_count: int) -> dict[str, Any]:
    """The inputs as arrays and bytes: the source ``image`` (RGB, SOURCE_SIZE), its 640x400
    and RGBA versions, the JPEG files' bytes and crops of the first ``crop_count``
    photographs (decoded here by Pillow, so that every library resizes the same pixels)."""
    small = np.asarray(PILImage.fromarray(image).resize(UPSCALE_SOURCE[::-1],
                                                        PILImage.Resampling.LANCZOS))
    rgba = np.dstack([image, np.full(image.shape[:2], 255, np.uint8)])
    jpegs = [path.read_bytes() for path in photographs]
    crops = []
    for seed, data in enumerate(jpegs[:crop_count]):
        with PILImage.open(io.BytesIO(data)) as photo:
            pixels = np.asarray(photo.convert("RGB"))
        top, left, h, w = crop_window(*pixels.shape[:2], seed)
        crops.append(np.ascontiguousarray(pixels[top:top + h, left:left + w]))
    return {"image": image, "small": small, "rgba": rgba, "jpegs": jpegs, "crops": crops}


def pillow_items(source: str, data: Any) -> list[Any]:
    """The items Pillow's function of an operation takes: images, or JPEG bytes."""
    if source == "jpegs":
        return list(data)
    return [PILImage.fromarray(array) for array in (data if source == "crops" else [data])]


def pillow_function(op: Operation) -> Callable[[Any], Any]:
    """Pillow's way of doing ``op`` to one item."""
    if op.kind in ("resize", "crops"):
        size, name = op.argument if op.kind == "resize" else (op.argument, "bilinear")
        resample = PILImage.Resampling[name.upper()]
        return lambda image: image.resize(size[::-1], resample)
    if op.kind == "blur":
        blur = ImageFilter.GaussianBlur(op.argument)
        return lambda image: image.filter(blur)
    if op.kind == "convert":
        return lambda image: image.convert(op.argument)
    if op.kind == "transpose":
        method = PILImage.Transpose[op.argument]
        return lambda image: image.transpose(method)

    def decode(data):
        # Open and convert, as Pillow users decode: the image is loaded, not
        # copied into an array.
        with PILImage.open(io.BytesIO(data)) as image:
            return image.convert("RGB")

    return decode
