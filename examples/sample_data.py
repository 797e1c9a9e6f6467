"""Small image folders for the examples, generated so that they run anywhere.

``image_folder(root, ...)`` writes JPEGs laid out as torchvision's
``ImageFolder`` expects (one subfolder per class). Each class has its own
colour cast over a noisy gradient, so a small model can learn to tell the
classes apart. Replace it with the path of a real dataset.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image as PILImage

CLASSES = ("red", "green", "blue")


def image_folder(root: str | Path, per_class: int = 16, size: tuple[int, int] = (96, 128)) -> Path:
    """Write ``per_class`` JPEGs of ``size`` (height, width) per class under ``root``."""
    root = Path(root)
    rng = np.random.default_rng(0)
    height, width = size
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    for label, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            pixels = np.stack([x / width, y / height, (x + y) / (width + height)], axis=-1) * 96
            pixels[:, :, label] += 110                     # the class's colour cast
            pixels += rng.normal(0, 20, pixels.shape)       # noise, so no two images match
            buffer = io.BytesIO()
            PILImage.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buffer, "JPEG")
            (root / name / f"{index:03d}.jpg").write_bytes(buffer.getvalue())
    return root
