"""The vectorised resize passes against the portable ones and against Pillow.

dl_resize runs hand-vectorised (AVX2) passes where the CPU has them and
portable loops elsewhere; both must give Pillow's bytes.
"""

import numpy as np
import pytest
from conftest import natural_image
from PIL import Image as PILImage

from dataloader._core import resize
from dataloader.transforms import RandomResizedCrop

FILTERS = {
    "nearest": PILImage.Resampling.NEAREST,
    "bilinear": PILImage.Resampling.BILINEAR,
    "bicubic": PILImage.Resampling.BICUBIC,
    "lanczos": PILImage.Resampling.LANCZOS,
}
# (input, output) sizes: down- and up-scaling on each side, odd widths, widths
# below and above a vector's 32 bytes, thin images, and shrinking by more than
# 8 (windows wider than 16 taps) and by more than 128 (weights that fit 16 bits, hundreds
# of taps per output).
PAIRS = [
    ((375, 500), (224, 224)), ((171, 129), (224, 224)), ((97, 131), (31, 45)),
    ((33, 47), (65, 93)), ((64, 3), (17, 11)), ((5, 37), (9, 7)), ((1, 17), (1, 9)),
    ((19, 1), (5, 3)), ((120, 203), (13, 11)), ((40, 401), (41, 37)), ((7, 9), (7, 31)),
    ((23, 1403), (9, 7)), ((401, 37), (3, 5)),
]


@pytest.fixture
def portable():
    """Runs the test body's resizes through the portable loops, then restores the default."""
    if not resize.vectorised():
        pytest.skip("this CPU has no vectorised resize passes (AVX2) to compare with")
    resize.vectorised(False)
    yield
    resize.vectorised(True)


def resized(src, size, interpolation, antialias=True):
    out = np.empty(size + (src.shape[2],), np.uint8)
    resize.resize_into(src, out, list(FILTERS).index(interpolation), antialias)
    return out


def both_paths(src, size, interpolation, antialias=True):
    """(vectorised result, portable result) of one resize."""
    assert resize.vectorised(True)
    fast = resized(src, size, interpolation, antialias)
    resize.vectorised(False)
    try:
        slow = resized(src, size, interpolation, antialias)
    finally:
        resize.vectorised(True)
    return fast, slow


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("interpolation", list(FILTERS))
@pytest.mark.parametrize("antialias", [True, False])
def test_vectorised_and_portable_passes_agree(portable, channels, interpolation, antialias):
    for n, (shape, size) in enumerate(PAIRS):
        src = natural_image(*shape, channels, seed=n)
        src[::7, ::5] = 255   # edges that push bicubic and lanczos sums past 0..255
        src[3::11, 2::3] = 0
        fast, slow = both_paths(src, size, interpolation, antialias)
        np.testing.assert_array_equal(fast, slow, err_msg=f"{shape} -> {size}")


def test_vectorised_and_portable_agree_on_random_sizes(portable):
    rng = np.random.default_rng(7)
    for _ in range(60):
        shape = (int(rng.integers(1, 90)), int(rng.integers(1, 90)))
        size = (int(rng.integers(1, 90)), int(rng.integers(1, 90)))
        channels = int(rng.choice([1, 3, 4]))
        interpolation = str(rng.choice(list(FILTERS)))
        src = rng.integers(0, 256, shape + (channels,), dtype=np.uint8)
        fast, slow = both_paths(src, size, interpolation, bool(rng.integers(2)))
        np.testing.assert_array_equal(fast, slow, err_msg=f"{shape} -> {size} {interpolation}")


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_crop_windows_agree_between_paths(portable, channels):
    """RandomResizedCrop resizes a window of a larger image in place: strided rows."""
    image = natural_image(150, 201, channels, seed=3)
    for interpolation in FILTERS:
        chain = RandomResizedCrop((64, 48), interpolation=interpolation)
        for seed in range(8):
            resize.vectorised(True)
            fast = chain(image, seed=seed)
            resize.vectorised(False)
            slow = chain(image, seed=seed)
            np.testing.assert_array_equal(fast, slow, err_msg=f"{interpolation} seed {seed}")


def pillow(src, size, interpolation):
    """Pillow's result one channel at a time (Pillow premultiplies RGBA by alpha)."""
    planes = [np.asarray(PILImage.fromarray(src[:, :, c]).resize(size[::-1],
                                                                   FILTERS[interpolation]))
              for c in range(src.shape[2])]
    return np.stack(planes, axis=-1)


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic", "lanczos"])
def test_both_paths_give_pillows_bytes(channels, interpolation):
    for n, (shape, size) in enumerate(PAIRS):
        src = natural_image(*shape, channels, seed=n)
        expected = pillow(src, size, interpolation).astype(int)
        for vectorised in (True, False):
            resize.vectorised(vectorised)
            try:
                ours = resized(src, size, interpolation)
            finally:
                resize.vectorised(True)
            np.testing.assert_array_equal(ours, expected, err_msg=f"{shape} {size} {vectorised}")


def test_forcing_the_portable_loops_is_reported_and_undone():
    available = resize.vectorised()
    assert resize.vectorised(False) is False
    assert resize.vectorised() is False
    assert resize.vectorised(True) is available
    assert resize.vectorised() is available
