"""A generated ImageNet-like image folder, shared by the benchmarks and the demo.

Every image is a random crop of one of scikit-image's bundled photographs
(they load offline), rescaled with Pillow to 400-500 x 300-375 pixels
(width x height, the size of a typical ImageNet JPEG) and saved as a
quality-90 JPEG.  The layout is torchvision's ``ImageFolder``:
``root/class_k/img_nnnnn.jpg``.

The set depends only on its parameters: every random choice comes from one
``numpy.random.default_rng(seed)``, drawn in image order before any pixel
work, so the threads that do the pixel work cannot change the result.  A
folder is reused when its marker file, written last, records the same
parameters; otherwise it is generated into a sibling folder and renamed into
place, so a concurrent reader never sees a half-written set.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image as PILImage

# Bump when the generation changes: cached sets of another version are remade.
GENERATOR_VERSION = 1
MARKER = ".complete.json"
WIDTHS = (400, 500)
HEIGHTS = (300, 375)
QUALITY = 90
# scikit-image's colour photographs bundled with the package (no download
# needed); stereo_motorcycle gives (left, right, disparity): the left view.
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field",
          "immunohistochemistry", "retina", "stereo_motorcycle")


@dataclass(frozen=True)
class _Plan:
    """One image's random choices: source photo, crop box and output size."""

    path: Path
    photo: int
    box: tuple[int, int, int, int]   # left, upper, right, lower in the photo
    size: tuple[int, int]            # width, height of the output
    flip: bool


def default_root(n_images: int, n_classes: int, seed: int) -> Path:
    """The cache folder for a parameter set, under the system's temporary folder."""
    suffix = "" if n_classes == 10 else f"-{n_classes}c"
    return Path(tempfile.gettempdir()) / f"dataloader-bench-images-{n_images}-{seed}{suffix}"


def generated_image_folder(root: str | os.PathLike | None = None, n_images: int = 2000,
                           n_classes: int = 10, seed: int = 0) -> Path:
    """Make (or reuse) an ImageFolder of ``n_images`` JPEGs in ``n_classes`` classes.

    Parameters
    ----------
    root : path, optional
        Where the folder goes; by default ``$TMPDIR/dataloader-bench-images-<n>-<seed>``.
    n_images : int
        Number of images, spread over the classes in turn (image i is in
        class ``i % n_classes``).
    n_classes : int
        Number of class subfolders ``class_0`` ... ``class_{n_classes - 1}``.
    seed : int
        The set is a function of (n_images, n_classes, seed).

    Returns
    -------
    Path
        The root folder.
    """
    if n_images < 1 or n_classes < 1:
        raise ValueError(f"n_images and n_classes must be positive, got {n_images}, {n_classes}")
    root = Path(root) if root is not None else default_root(n_images, n_classes, seed)
    params = {"version": GENERATOR_VERSION, "n_images": n_images, "n_classes": n_classes,
              "seed": seed, "quality": QUALITY}
    if _complete(root, params):
        return root
    staging = root.with_name(f"{root.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    photos = _photos()
    plans = _plans(staging, photos, n_images, n_classes, seed)
    for k in range(n_classes):
        (staging / f"class_{k}").mkdir(parents=True)
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        # Pillow releases the GIL while resizing and encoding.
        list(pool.map(lambda plan: _write(plan, photos), plans))
    (staging / MARKER).write_text(json.dumps(params))
    if _complete(root, params):   # another process finished first
        shutil.rmtree(staging)
        return root
    if root.exists():
        shutil.rmtree(root)
    staging.rename(root)
    return root


def _complete(root: Path, params: dict) -> bool:
    try:
        return json.loads((root / MARKER).read_text()) == params
    except (OSError, ValueError):
        return False


def _photos() -> list[PILImage.Image]:
    from skimage import data

    photos = []
    for name in PHOTOS:
        try:
            pixels = getattr(data, name)()
        except Exception:  # noqa: BLE001 -- any failure to load one photograph skips it
            continue
        if isinstance(pixels, tuple):
            pixels = pixels[0]
        photos.append(PILImage.fromarray(np.asarray(pixels)).convert("RGB"))
    if not photos:
        raise RuntimeError("none of scikit-image's bundled photographs could be loaded")
    return photos


def _plans(root: Path, photos, n_images: int, n_classes: int, seed: int) -> list[_Plan]:
    rng = np.random.default_rng(seed)
    plans = []
    for i in range(n_images):
        photo = int(rng.integers(len(photos)))
        pw, ph = photos[photo].size
        width = int(rng.integers(WIDTHS[0], WIDTHS[1] + 1))
        height = int(rng.integers(HEIGHTS[0], HEIGHTS[1] + 1))
        # A box of the output's aspect ratio inside the photo, at a random
        # place, from the largest that fits down to 0.4 of it, but magnified
        # at most 1.25x (a blurred close-up is not typical of a photo).
        fit = min(pw / width, ph / height)
        scale = float(rng.uniform(min(fit, max(0.8, 0.4 * fit)), fit))
        bw, bh = max(1, round(width * scale)), max(1, round(height * scale))
        left = int(rng.integers(pw - bw + 1))
        upper = int(rng.integers(ph - bh + 1))
        plans.append(_Plan(root / f"class_{i % n_classes}" / f"img_{i:05d}.jpg", photo,
                           (left, upper, left + bw, upper + bh), (width, height),
                           bool(rng.integers(2))))
    return plans


def _write(plan: _Plan, photos) -> None:
    image = photos[plan.photo].resize(plan.size, PILImage.Resampling.BILINEAR, box=plan.box)
    if plan.flip:
        image = image.transpose(PILImage.Transpose.FLIP_LEFT_RIGHT)
    image.save(plan.path, "JPEG", quality=QUALITY)


def image_paths(root: str | os.PathLike) -> list[Path]:
    """The JPEGs of a generated folder, sorted (class folders, then file names)."""
    return sorted(Path(root).glob("class_*/*.jpg"))
