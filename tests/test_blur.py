"""Pillow's box blurs (``kernels.box_blur``, ``kernels.gaussian_box_blur``) against Pillow.

Both claim Pillow's algorithm, so the results must be Pillow's bytes: every
channel count (Pillow's L, LA, RGB and RGBA), odd and thin sizes, radii
with and without a fractional part, radii past the image's size, one
direction at a time, several passes.
"""

import numpy as np
import pytest
from conftest import natural_image
from PIL import Image as PILImage
from PIL import ImageFilter

from dataloader import kernels

MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
# Sizes (height, width): odd, thin, one pixel, and wider than a block of rows.
SIZES = [(37, 53), (1, 29), (31, 1), (1, 1), (70, 9), (5, 300)]
RADII = [0.4, 1, 2.5, (3, 0), (0, 1.7), 40]


def image_of(channels, size, seed=0):
    """A natural image with sharp edges and noise (the worst for rounding)."""
    height, width = size
    pixels = natural_image(height, width, channels, seed)
    noise = np.random.default_rng(seed).integers(0, 256, (height, width, channels), np.uint8)
    pixels[:, ::3] = noise[:, ::3]
    return pixels


def pillow(array, blur):
    channels = array.shape[2]
    image = PILImage.fromarray(array[..., 0] if channels == 1 else array, MODES[channels])
    result = np.asarray(image.filter(blur))
    return result.reshape(array.shape)


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("size", SIZES)
def test_box_blur_is_pillows(channels, size):
    src = image_of(channels, size, seed=channels)
    for radius in RADII:
        expected = pillow(src, ImageFilter.BoxBlur(radius))
        np.testing.assert_array_equal(kernels.box_blur(src, radius), expected,
                                      err_msg=f"radius {radius}")


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("size", SIZES)
def test_gaussian_box_blur_is_pillows_gaussian_blur(channels, size):
    src = image_of(channels, size, seed=10 + channels)
    for radius in [0.3, 1, 2, 5.5, (4, 0), (0, 2.2), 25]:
        expected = pillow(src, ImageFilter.GaussianBlur(radius))
        np.testing.assert_array_equal(kernels.gaussian_box_blur(src, radius), expected,
                                      err_msg=f"radius {radius}")


def test_pillow_perf_radii_on_a_photograph():
    """The benchmark's radii, 1 and 10, on a photograph of several blocks of rows."""
    src = natural_image(101, 157, 3)
    for radius in (1, 10):
        expected = pillow(src, ImageFilter.GaussianBlur(radius))
        np.testing.assert_array_equal(kernels.gaussian_box_blur(src, radius), expected)


@pytest.mark.parametrize("passes", [1, 2, 3, 4])
def test_passes_are_pillows(passes):
    src = image_of(3, (23, 41), seed=passes)
    image = PILImage.fromarray(src)
    for radius in [(1.5, 2.5), (0, 3), (2, 0)]:
        expected = np.asarray(image._new(image.im.box_blur(radius, passes)))
        np.testing.assert_array_equal(kernels.box_blur(src, radius, passes=passes), expected)
        expected = np.asarray(image._new(image.im.gaussian_blur(radius, passes)))
        np.testing.assert_array_equal(kernels.gaussian_box_blur(src, radius, passes=passes),
                                      expected)


def test_zero_radius_copies():
    src = image_of(3, (9, 11))
    for blur in (kernels.box_blur, kernels.gaussian_box_blur):
        result = blur(src, 0)
        np.testing.assert_array_equal(result, src)
        assert not np.shares_memory(result, src)


def test_layouts_and_out():
    """A 2-D image gives a 2-D result; a non-contiguous one is read as its values;
    ``out`` is filled and returned, over several calls reusing it."""
    src = image_of(1, (19, 27))[..., 0]
    expected = pillow(src[..., None], ImageFilter.GaussianBlur(2))[..., 0]
    assert kernels.gaussian_box_blur(src, 2).shape == src.shape
    np.testing.assert_array_equal(kernels.gaussian_box_blur(src, 2), expected)
    wide = np.zeros((19, 54), np.uint8)
    wide[:, ::2] = src
    np.testing.assert_array_equal(kernels.gaussian_box_blur(wide[:, ::2], 2), expected)
    out = np.empty((19, 27), np.uint8)
    for radius in (2, 3, 2):
        assert kernels.gaussian_box_blur(src, radius, out=out) is out
        np.testing.assert_array_equal(out, pillow(src[..., None],
                                                  ImageFilter.GaussianBlur(radius))[..., 0])


def test_bad_arguments_name_what_was_wrong():
    src = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(ValueError, match="radius must be in 0"):
        kernels.box_blur(src, -1)
    with pytest.raises(ValueError, match="radius must be in 0"):
        kernels.gaussian_box_blur(src, (1, 2e6))
    with pytest.raises(ValueError, match="radius must be finite"):
        kernels.box_blur(src, float("nan"))
    with pytest.raises(TypeError, match="radius must be a number"):
        kernels.box_blur(src, "2")
    with pytest.raises(ValueError, match="pair"):
        kernels.box_blur(src, (1, 2, 3))
    with pytest.raises(ValueError, match="passes"):
        kernels.box_blur(src, 1, passes=0)
    with pytest.raises(TypeError, match="passes"):
        kernels.gaussian_box_blur(src, 1, passes=1.5)
    with pytest.raises(ValueError, match="dtype uint8"):
        kernels.box_blur(src.astype(np.float32), 1)
    with pytest.raises(ValueError, match="out must have shape"):
        kernels.box_blur(src, 1, out=np.empty((4, 5, 4), np.uint8))
    with pytest.raises(ValueError, match="overlap"):
        kernels.box_blur(src, 1, out=src)
