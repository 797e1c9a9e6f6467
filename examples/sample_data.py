"""Small image folders for the examples, generated so that they run anywhere.

``image_folder(root, ...)`` writes JPEGs laid out as torchvision's
``ImageFolder`` expects (one subfolder per class): the library's synthetic
images (gradients, a wave and noise) with a colour cast of their class, so
that a small model can learn to tell the classes apart. Replace it with the
path of a real dataset.
"""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image as PILImage

from dataloader._images.samples import synthetic_image

CLASSES = ("red", "green", "blue")


def image_folder(root: str | Path, per_class: int = 16, size: tuple[int, int] = (96, 128)) -> Path:
    """Write ``per_class`` JPEGs of ``size`` (height, width) per class under ``root``."""
    root = Path(root)
    height, width = size
    for label, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            # Half brightness, then the class's colour cast on its channel;
            # the seed differs per image, so no two images match.
            pixels = synthetic_image(height, width, seed=label * per_class + index) // 2
            pixels[:, :, label] += 110
            buffer = io.BytesIO()
            PILImage.fromarray(pixels).save(buffer, "JPEG")
            (root / name / f"{index:03d}.jpg").write_bytes(buffer.getvalue())
    return root


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Write a small image folder (one subfolder "
                                     "per class) for the examples and the quickstart.")
    parser.add_argument("root", nargs="?", default="train", help="where to write it (train/)")
    parser.add_argument("--per-class", type=int, default=16, help="images per class")
    arguments = parser.parse_args()
    folder = image_folder(arguments.root, arguments.per_class)
    print(f"wrote {len(CLASSES) * arguments.per_class} JPEGs under {folder}/")
