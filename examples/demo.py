"""Two loaders: rows of an in-memory matrix, then JPEG files through the native image pipeline.

The second part generates 500 ImageNet-like JPEGs once (under the system's
temporary folder; ``dataloader._images.samples``) and loads them as a training
run would: decode, random resized crop to 224x224, random flip, normalise,
float32 NCHW batches of 64, on 2 worker threads.
"""

import time

import numpy as np

from dataloader import DataLoader, Dataset
from dataloader._images.samples import sample_image_folder

try:
    from tqdm import tqdm
except ImportError:   # tqdm comes with the bench extra; a plain line otherwise
    tqdm = None

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class Features(Dataset):
    """Rows of a feature matrix with their labels, generated in memory."""

    def __init__(self, n_items: int, n_features: int) -> None:
        rng = np.random.default_rng(0)
        self.features = rng.standard_normal((n_items, n_features), dtype=np.float32)
        self.labels = rng.integers(0, 10, size=n_items)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict:
        return {"x": self.features[index], "y": int(self.labels[index])}


class Progress:
    """A tqdm bar counting images, or a line rewritten in place without tqdm."""

    def __init__(self, total: int, description: str) -> None:
        self.total, self.description, self.count = total, description, 0
        self.start = time.perf_counter()
        self.bar = tqdm(total=total, desc=description, unit="img", leave=False) if tqdm else None

    def update(self, n: int) -> None:
        self.count += n
        if self.bar is not None:
            self.bar.update(n)
        else:
            print(f"\r{self.description}: {self.count}/{self.total} images, "
                  f"{self.rate():,.0f} images/s", end="", flush=True)

    def rate(self) -> float:
        return self.count / (time.perf_counter() - self.start)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            print()


def in_memory() -> None:
    dataset = Features(n_items=50_000, n_features=128)
    loader = DataLoader(dataset, batch_size=256, shuffle=True, seed=0)
    for epoch in range(2):
        start = time.perf_counter()
        n_batches = 0
        for batch in loader:  # noqa: B007 -- the last batch's shape is printed
            n_batches += 1
        elapsed = time.perf_counter() - start
        print(
            f"in-memory epoch {epoch}: {n_batches} batches of {batch['x'].shape[1:]} float32 "
            f"+ labels, {n_batches / elapsed:,.0f} batches/s"
        )


def images(n_images: int = 500, epochs: int = 3) -> None:
    from dataloader import ImageCollator, ImageFolder
    from dataloader.transforms import (
        Compose,
        Decode,
        Normalize,
        RandomHFlip,
        RandomResizedCrop,
        ToChw,
        ToFloat,
    )

    start = time.perf_counter()
    root = sample_image_folder(n_images)
    print(f"{n_images} JPEGs in {root} ({time.perf_counter() - start:.1f} s)")
    train = Compose([Decode("RGB"), RandomResizedCrop(224), RandomHFlip(), ToFloat(),
                     Normalize(MEAN, STD), ToChw()])
    loader = DataLoader(ImageFolder(root), batch_size=64, shuffle=True, num_workers=2,
                        transform=train, collate_fn=ImageCollator(), seed=0)
    for epoch in range(epochs):
        progress = Progress(n_images, f"images epoch {epoch}")
        for batch, _labels in loader:
            pixels = np.asarray(batch)   # zero-copy view of the batch
            progress.update(len(pixels))
        progress.close()
        print(f"images epoch {epoch}: {progress.rate():,.0f} images/s, "
              f"batches of {pixels.shape[1:]} {pixels.dtype} + labels")


def main() -> None:
    in_memory()
    images()


if __name__ == "__main__":
    main()
