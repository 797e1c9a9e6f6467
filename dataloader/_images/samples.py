"""A small generated image folder for ``dataloader bench`` and ``dataloader show``.

The images are crops of scikit-image's photographs when scikit-image is
installed (natural images decode and resample as real datasets do), else
smooth gradients with noise. They are JPEGs of roughly ImageNet's sizes
(the longer side 400 to 500 pixels), in four class folders, written once
into the temporary directory and reused: the folder's name carries every
parameter, and a folder appears only complete (written aside, then renamed).
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import numpy as np

__all__ = ["sample_image_folder"]

# Format of the folder: bump it when the generated images change.
_VERSION = 1
_CLASSES = ("a", "b", "c", "d")
# Bundled with scikit-image (no download), colour photographs.
_PHOTOS = ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "hubble_deep_field.jpg",
           "motorcycle_left.png")


def sample_image_folder(n_images: int = 256, root: str | os.PathLike | None = None) -> Path:
    """An image folder of ``n_images`` generated JPEGs, created on first use.

    Parameters
    ----------
    n_images : int, default 256
        Spread evenly over four class folders.
    root : path, optional
        Where the folder is kept; by default the temporary directory.

    Returns
    -------
    Path
        The folder, laid out for :class:`~dataloader.ImageFolder`.

    Raises
    ------
    RuntimeError
        When Pillow, which encodes the JPEGs, is not installed.

    Examples
    --------
    >>> import tempfile
    >>> from dataloader import ImageFolder
    >>> from dataloader._images.samples import sample_image_folder
    >>> folder = ImageFolder(sample_image_folder(8, root=tempfile.mkdtemp()))
    >>> len(folder), folder.classes
    (8, ['a', 'b', 'c', 'd'])
    """
    if n_images < 1:
        raise ValueError(f"n_images must be at least 1, got {n_images}")
    try:
        from PIL import Image as PILImage
    except ImportError:
        raise RuntimeError("generating the sample images needs Pillow: "
                           "pip install 'dataloader[bench]', or pass an image folder") from None
    photos = _photos(PILImage)
    source = "photos" if photos else "synthetic"
    base = Path(root) if root is not None else Path(tempfile.gettempdir())
    folder = base / f"dataloader-sample-images-v{_VERSION}-{source}-{n_images}"
    if folder.is_dir():
        return folder
    base.mkdir(parents=True, exist_ok=True)
    staging = base / f".{folder.name}.{uuid.uuid4().hex}"
    try:
        rng = np.random.default_rng(0)
        for index in range(n_images):
            directory = staging / _CLASSES[index % len(_CLASSES)]
            directory.mkdir(parents=True, exist_ok=True)
            pixels = _photo_crop(photos[index % len(photos)], rng) if photos else _synthetic(rng)
            buffer = io.BytesIO()
            PILImage.fromarray(pixels).save(buffer, "JPEG", quality=90)
            (directory / f"{index:05d}.jpg").write_bytes(buffer.getvalue())
        try:
            staging.rename(folder)
        except OSError:  # another process finished first: use its folder
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _photos(pil_image) -> list[np.ndarray]:
    """scikit-image's bundled colour photographs as RGB arrays; empty without it."""
    try:
        from skimage import data
    except ImportError:
        return []
    photos = []
    for name in _PHOTOS:
        path = Path(data.data_dir) / name
        if path.is_file():
            with pil_image.open(path) as image:
                photos.append(np.asarray(image.convert("RGB")))
    return photos


def _photo_crop(photo: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random window of 60% to 100% of each side, mirrored half the time, scaled to 400-500 px."""
    from PIL import Image as PILImage

    height, width = photo.shape[:2]
    crop_h = int(height * rng.uniform(0.6, 1.0))
    crop_w = int(width * rng.uniform(0.6, 1.0))
    top = int(rng.integers(0, height - crop_h + 1))
    left = int(rng.integers(0, width - crop_w + 1))
    window = photo[top:top + crop_h, left:left + crop_w]
    if rng.random() < 0.5:
        window = window[:, ::-1]
    longer = int(rng.integers(400, 501))
    scale = longer / max(crop_h, crop_w)
    size = (max(1, round(crop_w * scale)), max(1, round(crop_h * scale)))
    image = PILImage.fromarray(np.ascontiguousarray(window)).resize(size, PILImage.BILINEAR)
    return np.asarray(image)


def _synthetic(rng: np.random.Generator) -> np.ndarray:
    """Smooth gradients and a wave pattern with noise, 375x500 or 500x375."""
    height, width = (375, 500) if rng.random() < 0.7 else (500, 375)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = rng.uniform(0, 6.28)
    planes = [
        255 * x / (width - 1),
        255 * y / (height - 1),
        127.5 + 127.5 * np.sin((x + 2 * y) / rng.uniform(5, 30) + phase),
    ]
    base = np.stack(planes, axis=-1) + rng.normal(0, 8, (height, width, 3))
    return np.clip(np.rint(base), 0, 255).astype(np.uint8)
