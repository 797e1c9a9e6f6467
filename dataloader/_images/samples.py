"""Generated sample images: one array generator and one image-folder generator.

Everything that needs test or demo images uses these: ``dataloader bench``
without a folder, ``make demo``, the benchmarks, the examples, the tests and
the fuzzers' seed corpus.

:func:`synthetic_image` draws smooth gradients, a wave pattern and noise:
resampling and codecs behave on it as on photographs, and it needs nothing
but numpy.

:func:`sample_image_folder` writes an ImageNet-like folder: random crops of
photographs, rescaled to 400-500 x 300-375 pixels
(width x height, the size of a typical ImageNet JPEG) and saved as quality-90
JPEGs in torchvision's ``ImageFolder`` layout, ``root/class_k/img_nnnnn.jpg``.
The set depends only on its parameters: every random choice comes from one
``numpy.random.default_rng(seed)``, drawn in image order before any pixel
work, so the threads that do the pixel work cannot change the result. A
folder is reused when its marker file, written last, records the same
parameters; otherwise it is generated into a sibling folder and renamed into
place, so a concurrent reader never sees a half-written set.

The photographs come from one of three sources, the first available of the
order asked for (``photographs=``):

* ``"installed"``: camera photographs of two Debian packages (``make
  bench`` installs them): the Ubuntu 16.04 community wallpapers of
  ``lomiri-wallpapers-16.04`` (CC-BY-4.0, CC-BY-SA-4.0, CC0) and the nature
  set of ``mate-backgrounds`` (GPL-2+), 1280 to 5312 pixels a side, so each
  crop is a downscaled camera picture as in ImageNet;
* ``"bundled"``: scikit-image's photographs (they load offline), 300 to
  1411 pixels, smaller and smoother;
* synthetic images, which need nothing but numpy.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["image_paths", "sample_image_folder", "synthetic_image"]

# Bump when the generation changes: cached sets of another version are remade.
GENERATOR_VERSION = 3
MARKER = ".complete.json"
WIDTHS = (400, 500)
HEIGHTS = (300, 375)
QUALITY = 90
# scikit-image's colour photographs bundled with the package (no download
# needed); stereo_motorcycle gives (left, right, disparity): the left view.
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field",
          "immunohistochemistry", "retina", "stereo_motorcycle")
# The Debian packages' photographs (the packages' copyright files name each
# author and licence); umang_by_Abhishek_Mudgal.jpg, a colour gradient, is
# left out. A missing file is skipped.
INSTALLED_PHOTOS = tuple(
    [f"/usr/share/backgrounds/{name}.jpg" for name in (
        "Bridge_by_Sander_Klootwijk", "Dragonfly_by_Bolly", "Picture_0B_by_freespace",
        "Picture_1A_by_freespace", "Wine_by_Jakkub_Mede", "aitzgorri_by_Aitzol_Berasategi",
        "analogpattern_by_Peter_Nerlich", "free_by_Peter_Nerlich",
        "friends_by_Aitzol_Berasategi", "greentock_by_Peter_Nerlich",
        "life_by_Aitzol_Berasategi", "picosdeeuropa_by_Aitzol_Berasategi",
        "seeding_by_Clements_Engelhardt", "sunset_by_Aitzol_Berasategi")]
    + [f"/usr/share/backgrounds/mate/nature/{name}.jpg" for name in (
        "Aqua", "Blinds", "Dune", "FreshFlower", "Garden", "GreenMeadow", "LadyBird",
        "RainDrops", "Storm", "TwoWings", "Wood", "YellowFlower")])
# Installed photographs are decoded at the smallest DCT scale that keeps
# this many pixels on their shorter side: crops of ImageNet's size are then
# still about 1x to 8x downscaled, in a quarter of the memory or less.
INSTALLED_SHORT_SIDE = 1200
SOURCES = ("installed", "bundled", "synthetic")


def synthetic_image(height: int, width: int, channels: int = 3, seed: int = 0) -> np.ndarray:
    """A uint8 ``(height, width, channels)`` image of gradients, a wave and noise.

    Parameters
    ----------
    height, width : int
        At least 1.
    channels : int, default 3
        1 to 4.
    seed : int, default 0
        The noise's seed; the same arguments give the same pixels.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> from dataloader._images.samples import synthetic_image
    >>> image = synthetic_image(4, 6)
    >>> image.shape, image.dtype.name
    ((4, 6, 3), 'uint8')
    >>> bool((synthetic_image(4, 6) == image).all())
    True
    """
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    planes = [
        255 * x / max(width - 1, 1),
        255 * y / max(height - 1, 1),
        127.5 + 127.5 * np.sin((x + 2 * y) / 7.0),
        255 * ((x * y) % 97) / 96,
    ]
    base = np.stack(planes[:channels], axis=-1)
    noisy = base + rng.normal(0, 10, base.shape)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)


@dataclass(frozen=True)
class _Plan:
    """One image's random choices: source photo, crop box and output size."""

    path: Path
    photo: int
    box: tuple[int, int, int, int]   # left, upper, right, lower in the photo
    size: tuple[int, int]            # width, height of the output
    flip: bool


def _default_root(n_images: int, n_classes: int, seed: int, source: str) -> Path:
    suffix = "" if source == "bundled" else f"-{source}"
    return _private_folder() / f"sample-images-{n_images}-{n_classes}c-{seed}{suffix}"


def _private_folder() -> Path:
    """This user's folder in the temporary directory, ``dataloader-<uid>``, readable by
    no one else; a new folder of random name when that one is not (another user made
    it, or it is a link): the temporary directory is shared, and a folder another user
    prepared would feed the loader images of their choosing."""
    uid = os.getuid()
    folder = Path(tempfile.gettempdir()) / f"dataloader-{uid}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    status = os.lstat(folder)
    if stat.S_ISDIR(status.st_mode) and status.st_uid == uid and not status.st_mode & 0o077:
        return folder
    return Path(tempfile.mkdtemp(prefix="dataloader-"))


def sample_image_folder(n_images: int = 2000, root: str | os.PathLike[str] | None = None, *,
                        n_classes: int = 10, seed: int = 0,
                        photographs: str = "bundled") -> Path:
    """Make (or reuse) an ImageFolder of ``n_images`` JPEGs in ``n_classes`` classes.

    Parameters
    ----------
    n_images : int, default 2000
        Number of images, spread over the classes in turn (image i is in
        class ``i % n_classes``).
    root : path, optional
        The folder; by default
        ``$TMPDIR/dataloader-<uid>/sample-images-<n_images>-<n_classes>c-<seed>``,
        in a folder of this user's that no other user can read or write
        (a new private folder when that one belongs to someone else).
    n_classes : int, default 10
        Number of class subfolders ``class_0`` ... ``class_{n_classes - 1}``.
    seed : int, default 0
        The set is a function of (n_images, n_classes, seed) and of the
        source of its photographs.
    photographs : {"bundled", "installed"}, default "bundled"
        Where the set is cut from: ``"installed"``, the Debian packages'
        photographs, else the ones below; ``"bundled"``, scikit-image's,
        else synthetic images.

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
    >>> root = sample_image_folder(8, tempfile.mkdtemp() + "/set", n_classes=4)
    >>> folder = ImageFolder(root)
    >>> len(folder), folder.classes
    (8, ['class_0', 'class_1', 'class_2', 'class_3'])
    """
    if n_images < 1 or n_classes < 1:
        raise ValueError(f"n_images and n_classes must be positive, got {n_images}, {n_classes}")
    if photographs not in SOURCES[:2]:
        raise ValueError(f"photographs must be 'installed' or 'bundled', got {photographs!r}")
    try:
        from PIL import Image as PILImage
    except ImportError:
        raise RuntimeError("generating the sample images needs Pillow: "
                           "pip install 'dataloader[bench]', or pass an image folder") from None
    source, photos = "synthetic", []
    for source in SOURCES[SOURCES.index(photographs):]:
        photos = _SOURCES[source](PILImage)
        if photos or source == "synthetic":
            break
    folder = Path(root) if root is not None else _default_root(n_images, n_classes, seed, source)
    params = {"version": GENERATOR_VERSION, "n_images": n_images, "n_classes": n_classes,
              "seed": seed, "quality": QUALITY, "photos": source}
    if _complete(folder, params):
        return folder
    staging = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    plans = _plans(staging, photos, n_images, n_classes, seed)
    for k in range(n_classes):
        (staging / f"class_{k}").mkdir(parents=True)
    try:
        with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
            # Pillow releases the GIL while resizing and encoding.
            list(pool.map(lambda plan: _write(plan, photos, PILImage, seed), plans))
        (staging / MARKER).write_text(json.dumps(params))
        if _complete(folder, params):   # another process finished first
            return folder
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def image_paths(root: str | os.PathLike[str]) -> list[Path]:
    """The JPEGs of a generated folder, sorted (class folders, then file names).

    Examples
    --------
    >>> import tempfile
    >>> from dataloader._images.samples import image_paths, sample_image_folder
    >>> [path.name for path in image_paths(sample_image_folder(2, tempfile.mkdtemp() + "/s"))]
    ['img_00000.jpg', 'img_00001.jpg']
    """
    return sorted(Path(root).glob("class_*/*.jpg"))


def _complete(root: Path, params: dict[str, Any]) -> bool:
    try:
        return bool(json.loads((root / MARKER).read_text()) == params)
    except (OSError, ValueError):
        return False


def _photos(pil_image: Any) -> list[Any]:
    """scikit-image's bundled colour photographs as RGB Pillow images; empty without it."""
    try:
        from skimage import data
    except ImportError:
        return []
    photos = []
    for name in PHOTOS:
        try:
            pixels = getattr(data, name)()
        except Exception:  # noqa: BLE001 -- a photograph that would need a download: skipped
            continue
        if isinstance(pixels, tuple):
            pixels = pixels[0]
        photos.append(pil_image.fromarray(np.asarray(pixels)).convert("RGB"))
    return photos


def _installed_photos(pil_image: Any) -> list[Any]:
    """The Debian packages' photographs as RGB Pillow images; empty when none is installed."""
    photos = []
    for path in INSTALLED_PHOTOS:
        try:
            with pil_image.open(path) as file:
                side = INSTALLED_SHORT_SIDE
                file.draft("RGB", (side, side))
                photos.append(file.convert("RGB"))
        except OSError:
            continue
    return photos


_SOURCES = {"installed": _installed_photos, "bundled": lambda pil_image: _photos(pil_image),
            "synthetic": lambda pil_image: []}


def _plans(root: Path, photos: list[Any], n_images: int, n_classes: int,
           seed: int) -> list[_Plan]:
    rng = np.random.default_rng(seed)
    plans = []
    for i in range(n_images):
        width = int(rng.integers(WIDTHS[0], WIDTHS[1] + 1))
        height = int(rng.integers(HEIGHTS[0], HEIGHTS[1] + 1))
        path = root / f"class_{i % n_classes}" / f"img_{i:05d}.jpg"
        if not photos:
            plans.append(_Plan(path, -1, (0, 0, width, height), (width, height), False))
            continue
        photo = int(rng.integers(len(photos)))
        pw, ph = photos[photo].size
        # A box of the output's aspect ratio inside the photo, at a random
        # place, from the largest that fits down to 0.4 of it, but magnified
        # at most 1.25x (a blurred close-up is not typical of a photo).
        fit = min(pw / width, ph / height)
        scale = float(rng.uniform(min(fit, max(0.8, 0.4 * fit)), fit))
        bw, bh = max(1, round(width * scale)), max(1, round(height * scale))
        left = int(rng.integers(pw - bw + 1))
        upper = int(rng.integers(ph - bh + 1))
        plans.append(_Plan(path, photo, (left, upper, left + bw, upper + bh), (width, height),
                           bool(rng.integers(2))))
    return plans


def _write(plan: _Plan, photos: list[Any], pil_image: Any, seed: int) -> None:
    if plan.photo < 0:
        index = int(plan.path.stem.removeprefix("img_"))
        width, height = plan.size
        image = pil_image.fromarray(synthetic_image(height, width, seed=seed * 1_000_003 + index))
    else:
        image = photos[plan.photo].resize(plan.size, pil_image.Resampling.BILINEAR, box=plan.box)
    if plan.flip:
        image = image.transpose(pil_image.Transpose.FLIP_LEFT_RIGHT)
    image.save(plan.path, "JPEG", quality=QUALITY)
