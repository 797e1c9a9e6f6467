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
DECODE_CENTER_CROP = "decode JPEG 500x375 + CenterCrop(224)"
DECODE_RESIZED_CROP = "decode JPEG 500x375 + RandomResizedCrop(224)"
DECODE_RESIZE_CENTER_CROP = "decode JPEG 500x375 + Resize(256) + CenterCrop(224)"


def crop_windows(height: int, width: int, count: int,
                 seed: int = 0) -> list[tuple[int, int, int, int]]:
    """``count`` windows ``(top, left, height, width)``, drawn as RandomResizedCrop draws them.

    Scale in (0.08, 1) of the area, aspect ratio log-uniform in (3/4, 4/3),
    with the same seed in every process, so that every library resizes the
    same crops.
    """
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        area = height * width * rng.uniform(0.08, 1.0)
        ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        w, h = round(np.sqrt(area * ratio)), round(np.sqrt(area / ratio))
        if 0 < w <= width and 0 < h <= height:
            top, left = rng.integers(0, height - h + 1), rng.integers(0, width - w + 1)
            out.append((int(top), int(left), h, w))
    return out


def crops(pixels: np.ndarray, windows: list[tuple[int, int, int, int]]) -> list[np.ndarray]:
    """The ``windows`` of ``pixels``, each a contiguous array."""
    return [np.ascontiguousarray(pixels[top:top + h, left:left + w])
            for top, left, h, w in windows]


def pillow_candidates(jpeg: bytes, png: bytes, pixels: np.ndarray,
                      windows: list[tuple[int, int, int, int]],
                      ) -> dict[str, tuple[Callable[[Any], Any], list]]:
    """{operation: (function, items)}: Pillow's way of doing each operation of the benchmark."""

    def decode(data):
        with PILImage.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"))

    def decode_resize(data):
        with PILImage.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB").resize(SIZE[::-1], PILImage.Resampling.BILINEAR))

    def resize(image):
        return image.resize(SIZE[::-1], PILImage.Resampling.BILINEAR)

    def decode_center_crop(data):
        # torchvision's CenterCrop: the offset rounded half to even.
        with PILImage.open(io.BytesIO(data)) as image:
            top, left = round((image.height - SIZE[0]) / 2), round((image.width - SIZE[1]) / 2)
            return np.asarray(image.convert("RGB").crop((left, top, left + SIZE[1],
                                                         top + SIZE[0])))

    def decode_resize_center_crop(data):
        # torchvision's Resize(256) (the shorter side), then CenterCrop(224).
        with PILImage.open(io.BytesIO(data)) as image:
            scale = 256 / min(image.width, image.height)
            size = (int(image.width * scale), 256) if image.width >= image.height else \
                (256, int(image.height * scale))
            resized = image.convert("RGB").resize(size, PILImage.Resampling.BILINEAR)
            top, left = round((size[1] - SIZE[0]) / 2), round((size[0] - SIZE[1]) / 2)
            return np.asarray(resized.crop((left, top, left + SIZE[1], top + SIZE[0])))

    def decode_resized_crop(item):
        data, (top, left, h, w) = item
        with PILImage.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB").resize(
                SIZE[::-1], PILImage.Resampling.BILINEAR, box=(left, top, left + w, top + h)))

    return {
        DECODE_JPEG: (decode, [jpeg]),
        DECODE_PNG: (decode, [png]),
        RESIZE: (resize, [PILImage.fromarray(pixels)]),
        RESIZE_CROPS: (resize, [PILImage.fromarray(crop) for crop in crops(pixels, windows)]),
        DECODE_RESIZE: (decode_resize, [jpeg]),
        DECODE_CENTER_CROP: (decode_center_crop, [jpeg]),
        DECODE_RESIZED_CROP: (decode_resized_crop, [(jpeg, window) for window in windows]),
        DECODE_RESIZE_CENTER_CROP: (decode_resize_center_crop, [jpeg]),
    }
