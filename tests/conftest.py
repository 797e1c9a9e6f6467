"""Shared fixtures: the execution modes every epoch-semantics test runs in,
and natural-looking test images with their encodings."""

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from dataloader import DataLoader

# (num_workers, item_concurrency): the direct path first; every other mode
# must give the same batches in the same order.
MODES = [
    pytest.param((0, 1), id="direct"),
    pytest.param((0, 4), id="lanes"),
    pytest.param((2, 1), id="workers"),
    pytest.param((2, 4), id="workers+lanes"),
]


@pytest.fixture(params=MODES)
def mode(request):
    return request.param


@pytest.fixture
def make_loader(mode):
    """Build a DataLoader in the current execution mode."""
    num_workers, item_concurrency = mode

    def make(dataset, **kwargs):
        kwargs.setdefault("num_workers", num_workers)
        kwargs.setdefault("item_concurrency", item_concurrency)
        return DataLoader(dataset, **kwargs)

    return make


DATA = Path(__file__).parent / "data"


def natural_image(height, width, channels=3, seed=0):
    """Smooth gradients plus noise: resampling and codecs behave as on photos."""
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


def encode(array_or_image, fmt, **options):
    """Encode with Pillow; a 2-D or 1-channel array becomes mode L."""
    if isinstance(array_or_image, np.ndarray):
        array = array_or_image
        if array.ndim == 3 and array.shape[2] == 1:
            array = array[:, :, 0]
        image = PILImage.fromarray(array)
    else:
        image = array_or_image
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def pillow_pixels(data, mode=None):
    """What Pillow decodes, as an (H, W, C) uint8 array."""
    with PILImage.open(io.BytesIO(data)) as image:
        if mode is not None:
            image = image.convert(mode)
        array = np.asarray(image)
    return array[:, :, None] if array.ndim == 2 else array


@pytest.fixture(scope="session")
def photos():
    """Real photographs shipped with scikit-image: {name: encoded bytes}."""
    data = pytest.importorskip(
        "skimage.data", reason="scikit-image ships the photographs (no wheel on every build)")

    root = Path(data.data_dir)
    names = ["rocket.jpg", "retina.jpg", "hubble_deep_field.jpg", "astronaut.png",
             "coffee.png", "chelsea.png"]
    return {name: (root / name).read_bytes() for name in names}
