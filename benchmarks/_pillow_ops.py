"""The Pillow side of ``kernels.py``: inputs and operations, with no dataloader import.

``kernels.py`` runs these with the installed Pillow, and ``_pillow_simd.py``
runs the same ones in the Pillow-SIMD environment (Pillow-SIMD replaces
Pillow, so the two cannot share an interpreter).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image as PILImage

SIZE = (224, 224)
DECODE_JPEG = "decode JPEG 500x375"
DECODE_PNG = "decode PNG 1024x768"
RESIZE = "resize 500x375 -> 224x224 (bilinear, antialiased)"
RESIZE_CROPS = "resize RandomResizedCrop crops -> 224x224 (bilinear, antialiased)"
DECODE_RESIZE = "decode JPEG + resize to 224x224"


def crops(pixels: np.ndarray, count: int, seed: int = 0) -> list[np.ndarray]:
    """``count`` contiguous crops of ``pixels`` as torchvision's RandomResizedCrop draws them.

    Scale in (0.08, 1) of the area, aspect ratio log-uniform in (3/4, 4/3),
    with the same seed in every process, so that every library resizes the
    same crops.
    """
    rng = np.random.default_rng(seed)
    height, width = pixels.shape[:2]
    out = []
    while len(out) < count:
        area = height * width * rng.uniform(0.08, 1.0)
        ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        w, h = round(np.sqrt(area * ratio)), round(np.sqrt(area / ratio))
        if 0 < w <= width and 0 < h <= height:
            top, left = rng.integers(0, height - h + 1), rng.integers(0, width - w + 1)
            out.append(np.ascontiguousarray(pixels[top:top + h, left:left + w]))
    return out


def pillow_candidates(jpeg: bytes, png: bytes, pixels: np.ndarray,
                      crop_list: list[np.ndarray]) -> dict[str, tuple[Callable[[Any], Any], list]]:
    """{operation: (function, items)}: Pillow's way of doing each operation of the benchmark."""

    def decode(data):
        with PILImage.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"))

    def decode_resize(data):
        with PILImage.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB").resize(SIZE[::-1], PILImage.Resampling.BILINEAR))

    def resize(image):
        return image.resize(SIZE[::-1], PILImage.Resampling.BILINEAR)

    return {
        DECODE_JPEG: (decode, [jpeg]),
        DECODE_PNG: (decode, [png]),
        RESIZE: (resize, [PILImage.fromarray(pixels)]),
        RESIZE_CROPS: (resize, [PILImage.fromarray(crop) for crop in crop_list]),
        DECODE_RESIZE: (decode_resize, [jpeg]),
    }
