"""The resize passes on every instruction set this CPU has, against each other and Pillow.

dl_resize runs portable loops, AVX2 passes (16-bit weights, split in
halves where they do not fit) and, where the CPU has AVX-512 VNNI, copies
that multiply bytes by base-256 digits of the weights.  All compute
Pillow's integer sums exactly, so all give the same bytes; and those bytes
are Pillow's wherever the passes run in Pillow's order (always when a side
grows or keeps its size).  The images are the hard cases for fixed point:
checkerboards, sharp edges and noise, whose bicubic and lanczos sums leave
0..255, and the sizes cover the weights' forms: whole 16-bit weights (a
shrink by more than 128), weights every one of which is a multiple of a
power of two (shrinks by 8), two and three digits, windows of one quad of
taps (upscales, which VNNI takes in pairs of taps) and of many (strong
shrinks), and vertical windows of two and three rows, which VNNI takes in
pairs of rows (RandomResizedCrop's shrinks to 224).
"""

import numpy as np
import pytest
from conftest import natural_image
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image as PILImage

from dataloader._core import resize

FILTERS = {
    "bilinear": PILImage.Resampling.BILINEAR,
    "bicubic": PILImage.Resampling.BICUBIC,
    "lanczos": PILImage.Resampling.LANCZOS,
}
# (input, output) (height, width): the benchmark's kinds of resize at a smaller
# scale, a shrink by 8 on each side (weights that are multiples of 2^15),
# a shrink by more than 128 (whole 16-bit weights), up- and mixed scaling,
# a RandomResizedCrop-like shrink to 224 (windows of three rows), and odd thin shapes.
PAIRS = [
    ((400, 640), (4, 4)), ((400, 640), (45, 80)), ((400, 640), (300, 480)),
    ((100, 160), (400, 640)), ((256, 320), (32, 40)), ((40, 1403), (9, 7)),
    ((1403, 40), (7, 9)), ((97, 131), (31, 45)), ((33, 47), (65, 93)),
    ((150, 60), (40, 200)), ((60, 150), (200, 40)), ((7, 9), (7, 31)), ((19, 5), (5, 3)),
    ((301, 283), (224, 224)),
]


def levels():
    """(vectorised, vnni) for each instruction set this CPU has: the portable loops
    always, then AVX2, then AVX-512 VNNI."""
    available = [(False, False)]
    if resize.vectorised():
        available.append((True, False))
        if resize.vnni():
            available.append((True, True))
    return available


def resized(src, size, interpolation, level=(True, True), antialias=True):
    out = np.empty(size + (src.shape[2],), np.uint8)
    resize.vectorised(level[0])
    resize.vnni(level[1])
    try:
        resize.resize_into(src, out, list(resize.FILTERS).index(interpolation), antialias)
    finally:
        resize.vectorised(True)
        resize.vnni(True)
    return out


def hard_image(shape, channels, kind, seed=0):
    """A checkerboard, sharp edges (a bright band and a dark one on grey), noise, or a
    photograph-like image."""
    h, w = shape
    if kind == "checkerboard":
        plane = (np.indices((h, w)).sum(0) % 2 * 255).astype(np.uint8)
        return np.repeat(plane[:, :, None], channels, axis=2)
    if kind == "edges":
        image = np.full((h, w, channels), 128, np.uint8)
        image[:, w // 3:w // 2] = 255
        image[h // 2:h // 2 + max(1, h // 5)] = 0
        return image
    if kind == "noise":
        return np.random.default_rng(seed).integers(0, 256, (h, w, channels), dtype=np.uint8)
    return natural_image(h, w, channels, seed=seed)


KINDS = ["checkerboard", "edges", "noise", "photo"]


def pillow(src, size, interpolation):
    """Pillow's result one channel at a time (Pillow premultiplies RGBA by alpha)."""
    planes = [np.asarray(PILImage.fromarray(np.ascontiguousarray(src[:, :, c])).resize(
        size[::-1], FILTERS[interpolation])) for c in range(src.shape[2])]
    return np.stack(planes, axis=-1)


def test_the_vnni_passes_can_be_turned_off_and_back_on():
    available = resize.vnni()
    assert not available or resize.vectorised()
    assert resize.vnni(False) is False
    assert resize.vnni() is False
    assert resize.vnni(True) is available
    assert resize.vnni() is available


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("interpolation", list(FILTERS))
@pytest.mark.parametrize("kind", KINDS)
def test_every_instruction_set_gives_the_same_bytes(channels, interpolation, kind):
    for n, (shape, size) in enumerate(PAIRS):
        src = hard_image(shape, channels, kind, seed=n)
        results = [resized(src, size, interpolation, level) for level in levels()]
        for level, result in zip(levels()[1:], results[1:], strict=True):
            np.testing.assert_array_equal(result, results[0],
                                          err_msg=f"{shape} -> {size} {level}")


@given(height=st.integers(1, 160), width=st.integers(1, 160),
       out_height=st.integers(1, 160), out_width=st.integers(1, 160),
       channels=st.sampled_from([1, 2, 3, 4]), interpolation=st.sampled_from(list(FILTERS)),
       kind=st.sampled_from(KINDS), antialias=st.booleans(), seed=st.integers(0, 2**16))
def test_instruction_sets_agree_on_any_shape(height, width, out_height, out_width, channels,
                                             interpolation, kind, antialias, seed):
    src = hard_image((height, width), channels, kind, seed)
    size = (out_height, out_width)
    results = [resized(src, size, interpolation, level, antialias) for level in levels()]
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])


@pytest.mark.parametrize("interpolation", list(FILTERS))
@pytest.mark.parametrize("kind", KINDS)
def test_pillows_bytes_where_the_passes_run_in_its_order(interpolation, kind):
    # A side that grows or keeps its size puts the passes in Pillow's order; so do
    # the benchmark's shrinks of a 640x400 image (to 4x4, 80x45 and 480x300).
    pairs = [pair for pair in PAIRS
             if pair[1][0] >= pair[0][0] or pair[1][1] >= pair[0][1] or pair[0] == (400, 640)]
    assert len(pairs) >= 8
    for n, (shape, size) in enumerate(pairs):
        src = hard_image(shape, 3, kind, seed=n)
        expected = pillow(src, size, interpolation)
        for level in levels():
            np.testing.assert_array_equal(resized(src, size, interpolation, level), expected,
                                          err_msg=f"{shape} -> {size} {level}")


@given(height=st.integers(1, 120), width=st.integers(1, 120),
       grow=st.integers(0, 120), other=st.integers(1, 240), tall=st.booleans(),
       interpolation=st.sampled_from(list(FILTERS)), kind=st.sampled_from(KINDS),
       seed=st.integers(0, 2**16))
def test_pillows_bytes_when_a_side_grows(height, width, grow, other, tall, interpolation,
                                         kind, seed):
    size = (height + grow, other) if tall else (other, width + grow)
    src = hard_image((height, width), 3, kind, seed)
    np.testing.assert_array_equal(resized(src, size, interpolation), pillow(src, size,
                                                                           interpolation))
