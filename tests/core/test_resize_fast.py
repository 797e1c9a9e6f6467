"""The fast resize mode: Pillow-SIMD's 16-bit horizontal weights.

``resize_into(..., fast=True)`` (``kernels.resize(exact=False)``, and chains
that start with ``Decode(exact=False)``) rounds bilinear's horizontal
weights to 16 bits; its results stay within 1 of Pillow's and of the exact
mode, and its vectorised (AVX2) and portable passes still give the same
bytes.  Bicubic and lanczos stay exact in either mode.
"""

import io

import numpy as np
import pytest
from conftest import natural_image, pillow_pixels
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage

from dataloader import kernels, transforms
from dataloader._core import resize

FILTERS = {"bilinear": PILImage.Resampling.BILINEAR}
# (input, output): a whole photograph and a crop to 224, up- and down-scaling
# on each side, 1-pixel sides, widths below a vector's 32 bytes, and a
# shrink by more than 8 (more than 16 taps).
PAIRS = [
    ((375, 500), (224, 224)), ((171, 129), (224, 224)), ((97, 131), (31, 45)),
    ((33, 47), (65, 93)), ((64, 3), (17, 11)), ((5, 37), (9, 7)), ((1, 17), (1, 9)),
    ((19, 1), (5, 3)), ((1, 1), (3, 4)), ((120, 203), (13, 11)), ((40, 401), (41, 37)),
]


def resized(src, size, interpolation, fast, antialias=True):
    out = np.empty(size + (src.shape[2],), np.uint8)
    resize.resize_into(src, out, list(resize.FILTERS).index(interpolation), antialias, fast)
    return out


def pillow(src, size, interpolation):
    """Pillow's result one channel at a time (Pillow premultiplies RGBA by alpha)."""
    planes = [np.asarray(PILImage.fromarray(src[:, :, c]).resize(size[::-1],
                                                                   FILTERS[interpolation]))
              for c in range(src.shape[2])]
    return np.stack(planes, axis=-1)


def largest_difference(a, b):
    return int(np.abs(a.astype(int) - b.astype(int)).max())


def on_both_paths(src, size, interpolation, antialias=True):
    """(vectorised, portable) fast-mode results; the portable one alone without AVX2."""
    available = resize.vectorised()
    results = []
    for vectorised in ([True, False] if available else [False]):
        resize.vectorised(vectorised)
        try:
            results.append(resized(src, size, interpolation, True, antialias))
        finally:
            resize.vectorised(True)
    return results


def test_fast_mode_rounds_differently_somewhere():
    """The mode is not a no-op: on a photograph-like image some samples move by 1."""
    src = natural_image(375, 500, 3, seed=0)
    exact = resized(src, (224, 224), "bilinear", False)
    fast = resized(src, (224, 224), "bilinear", True)
    assert not np.array_equal(exact, fast)
    assert largest_difference(exact, fast) == 1


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("antialias", [True, False])
def test_fast_mode_within_one_of_pillow_and_paths_agree(channels, antialias):
    for n, (shape, size) in enumerate(PAIRS):
        src = natural_image(*shape, channels, seed=n)
        results = on_both_paths(src, size, "bilinear", antialias)
        for ours in results[1:]:
            np.testing.assert_array_equal(results[0], ours, err_msg=f"{shape} -> {size}")
        exact = resized(src, size, "bilinear", False, antialias)
        assert largest_difference(results[0], exact) <= 1, (shape, size)
        if antialias:
            assert largest_difference(results[0], pillow(src, size, "bilinear")) <= 1, (
                shape, size)


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_fast_mode_at_sharp_edges(channels):
    """Hard edges: every sample still within 1, and both paths the same bytes."""
    for n, (shape, size) in enumerate(PAIRS):
        src = natural_image(*shape, channels, seed=n)
        src[::7, ::5] = 255
        src[3::11, 2::3] = 0
        results = on_both_paths(src, size, "bilinear")
        for ours in results[1:]:
            np.testing.assert_array_equal(results[0], ours, err_msg=f"{shape} -> {size}")
        exact = resized(src, size, "bilinear", False)
        assert largest_difference(results[0], exact) <= 1, (shape, size)


@pytest.mark.parametrize("interpolation", ["nearest", "bicubic", "lanczos"])
def test_other_filters_stay_exact_in_fast_mode(interpolation):
    for n, (shape, size) in enumerate(PAIRS):
        src = natural_image(*shape, 3, seed=n)
        for ours in on_both_paths(src, size, interpolation):
            np.testing.assert_array_equal(ours, resized(src, size, interpolation, False))


def test_fast_mode_on_photographs(photos):
    for name, data in photos.items():
        image = pillow_pixels(data, "RGB")
        h, w = image.shape[:2]
        for size in [(224, 224), (h // 3 + 1, w // 2 + 3), (h * 2 // 3, w + 17)]:
            fast = kernels.resize(image, size, exact=False)
            assert largest_difference(fast, pillow(image, size, "bilinear")) <= 1, (name, size)
            assert largest_difference(fast, kernels.resize(image, size)) <= 1, (name, size)


def test_exact_stays_the_default_of_the_kernel():
    src = natural_image(97, 131, 3, seed=1)
    np.testing.assert_array_equal(kernels.resize(src, (31, 45)),
                                  resized(src, (31, 45), "bilinear", False))
    with pytest.raises(TypeError, match="exact"):
        kernels.resize(src, (31, 45), exact="no")


def jpeg(image):
    buffer = io.BytesIO()
    PILImage.fromarray(image).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


@pytest.mark.parametrize("exact", [True, False])
def test_decode_exact_chooses_the_mode_of_a_chain(exact):
    """Decode(exact=True) chains resize as Pillow; the default ones in the fast mode."""
    image = natural_image(375, 500, 3, seed=2)
    data = jpeg(image)
    decoded = pillow_pixels(data)
    # The target is more than a third of the image: no DCT scale changes what the
    # resize reads.
    chain = transforms.Compose([transforms.Decode(exact=exact), transforms.Resize((224, 224))])
    ours = chain(data)
    expected = resized(decoded, (224, 224), "bilinear", not exact)
    assert not np.array_equal(expected, resized(decoded, (224, 224), "bilinear", exact))
    np.testing.assert_array_equal(ours, expected)


@settings(max_examples=60, deadline=None)
@given(h=st.integers(1, 70), w=st.integers(1, 70), out_h=st.integers(1, 70),
       out_w=st.integers(1, 70), channels=st.sampled_from([1, 2, 3, 4]),
       antialias=st.booleans(), seed=st.integers(0, 2**16))
def test_fast_mode_property(h, w, out_h, out_w, channels, antialias, seed):
    """Any shape: within 1 of the exact mode, and the same bytes on both paths."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
    results = on_both_paths(src, (out_h, out_w), "bilinear", antialias)
    for ours in results[1:]:
        np.testing.assert_array_equal(results[0], ours)
    exact = resized(src, (out_h, out_w), "bilinear", False, antialias)
    assert largest_difference(results[0], exact) <= 1
