"""A Python augmentation between native ones.

The loader's ``transform`` may be any callable ``transform(index, item)``.
Here it runs a native chain (decode, crop, flip: no GIL), a numpy "cutout"
that blanks a random square, then a second native chain (normalise, CHW).
Every random draw comes from ``item_seed(loader.seed, loader.epoch,
index)``, so the same seed gives the same batches whatever the number of
workers, as the native transforms alone would.
"""

import tempfile

import numpy as np
from sample_data import image_folder

from dataloader import DataLoader, ImageFolder, item_seed
from dataloader.transforms import (
    Compose,
    Decode,
    Normalize,
    RandomHFlip,
    RandomResizedCrop,
    ToChw,
    ToFloat,
)

HEAD = Compose([Decode("RGB"), RandomResizedCrop(64), RandomHFlip()])
TAIL = Compose([ToFloat(), Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]), ToChw()])


def cutout(pixels: np.ndarray, rng: np.random.Generator, side: int = 16) -> np.ndarray:
    """Blank a random ``side`` x ``side`` square (in numpy: it holds the GIL briefly)."""
    top = rng.integers(0, pixels.shape[0] - side + 1)
    left = rng.integers(0, pixels.shape[1] - side + 1)
    pixels[top:top + side, left:left + side] = 0
    return pixels


class Augment:
    """``transform(index, item)`` for ``(bytes, label)`` items."""

    def __init__(self) -> None:
        self.loader = None  # set once the loader exists: the seed and epoch come from it

    def __call__(self, index: int, item: tuple) -> tuple:
        data, label = item
        seed = item_seed(self.loader.seed, self.loader.epoch, index)
        pixels = np.array(HEAD(data, seed=seed))           # uint8 HWC, a writable copy
        pixels = cutout(pixels, np.random.default_rng(seed))
        return TAIL(pixels), label                          # float32 CHW numpy array


def batches(root, num_workers: int) -> list:
    augment = Augment()
    loader = DataLoader(ImageFolder(root), batch_size=8, shuffle=True, seed=0,
                        num_workers=num_workers, transform=augment)
    augment.loader = loader
    with loader:
        return [images for images, _ in loader]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = image_folder(tmp, per_class=8)
        on_threads = batches(root, num_workers=2)
        on_caller = batches(root, num_workers=0)
        print(f"{len(on_threads)} batches of {on_threads[0].shape} {on_threads[0].dtype}")
        same = all(np.array_equal(a, b) for a, b in zip(on_threads, on_caller, strict=True))
        print(f"same batches with 2 workers and with none: {same}")


if __name__ == "__main__":
    main()
