"""JPEG windows: a chain that crops right after Decode decodes only the window.

In exact mode the result is the same bytes as the whole image decoded (by
Pillow) and then cut with numpy, whatever the chroma subsampling, the
window's place (edges, iMCU boundaries, one pixel) or the scan order.
"""

import io

import numpy as np
import pytest
from conftest import encode, natural_image, pillow_pixels
from PIL import Image as PILImage

from dataloader.transforms import (
    CenterCrop,
    Compose,
    Crop,
    Decode,
    RandomCrop,
    RandomResizedCrop,
    Resize,
)


def source(photos):
    """A real photograph as an RGB array (scikit-image's astronaut)."""
    with PILImage.open(io.BytesIO(photos["astronaut.png"])) as image:
        return np.asarray(image.convert("RGB"))


@pytest.fixture(scope="module")
def jpegs(photos):
    """{kind: JPEG bytes}: every chroma layout, gray, progressive, odd sizes."""
    pixels = source(photos)
    gray = np.asarray(PILImage.fromarray(pixels).convert("L"))
    return {
        "4:2:0": encode(pixels[:203, :301], "JPEG", quality=90),
        "4:2:2": encode(pixels[5:182, 7:266], "JPEG", quality=90, subsampling=1),
        "4:4:4": encode(pixels[:157, :199], "JPEG", quality=95, subsampling=0),
        "gray": encode(gray[:141, :173], "JPEG", quality=90),
        "progressive": encode(pixels[:211, :233], "JPEG", quality=85, progressive=True),
        "progressive-4:4:4": encode(pixels[3:120, 9:170], "JPEG", quality=85, progressive=True,
                                    subsampling=0),
        "synthetic": encode(natural_image(97, 131, 3, seed=4), "JPEG", quality=80),
        "rocket.jpg": photos["rocket.jpg"],
        "retina.jpg": photos["retina.jpg"],
    }


def windows(height, width, seed):
    """Windows that exercise the edges: every corner and side, one pixel, the
    whole image, iMCU boundaries (multiples of 8 and 16) and their
    neighbours, and random ones."""
    chosen = [(0, 0, height, width), (0, 0, 1, 1), (height - 1, width - 1, 1, 1),
              (0, 0, min(17, height), min(33, width)), (height - 9, width - 15, 9, 15),
              (0, width // 2, height, width - width // 2), (height // 2, 0, 1, width)]
    for boundary in (8, 15, 16, 17, 31, 32, 33):
        if boundary < min(height, width):
            chosen.append((boundary, boundary, min(20, height - boundary),
                           min(21, width - boundary)))
            chosen.append((boundary - 1, boundary + 1, 1, 2))
    rng = np.random.default_rng(seed)
    for _ in range(40):
        top, left = int(rng.integers(0, height)), int(rng.integers(0, width))
        chosen.append((top, left, int(rng.integers(1, height - top + 1)),
                       int(rng.integers(1, width - left + 1))))
    return chosen


def pixels_of(image):
    array = np.asarray(image)
    return array[:, :, None] if array.ndim == 2 else array


@pytest.mark.parametrize("kind", ["4:2:0", "4:2:2", "4:4:4", "gray", "progressive",
                                  "progressive-4:4:4", "synthetic", "rocket.jpg", "retina.jpg"])
def test_a_window_is_the_whole_image_cut(jpegs, kind):
    data = jpegs[kind]
    whole = pillow_pixels(data)
    height, width = whole.shape[:2]
    for top, left, h, w in windows(height, width, seed=len(kind)):
        got = pixels_of(Compose([Decode(exact=True), Crop(top, left, h, w)])(data))
        np.testing.assert_array_equal(got, whole[top:top + h, left:left + w],
                                      err_msg=f"{kind} window {(top, left, h, w)}")


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA"])
def test_a_window_in_another_mode_is_pillow_convert_cut(jpegs, mode):
    for kind in ("4:2:0", "gray"):
        data = jpegs[kind]
        whole = pillow_pixels(data, mode)
        got = pixels_of(Compose([Decode(mode, exact=True), Crop(15, 17, 40, 51)])(data))
        np.testing.assert_array_equal(got, whole[15:55, 17:68])


def test_a_window_of_a_cmyk_jpeg_is_pillow_convert_cut():
    data = encode(PILImage.fromarray(natural_image(45, 61, 4, seed=2), "CMYK"), "JPEG")
    for mode in ("RGB", "L"):
        got = pixels_of(Compose([Decode(mode, exact=True), Crop(9, 17, 20, 33)])(data))
        np.testing.assert_array_equal(got, pillow_pixels(data, mode)[9:29, 17:50])


@pytest.mark.parametrize("size", [64, (40, 90), (300, 350)])
def test_center_crop_windows_pad_as_torchvision(jpegs, size):
    data = jpegs["4:2:0"]
    expected = CenterCrop(size)(pillow_pixels(data))
    got = Compose([Decode(exact=True), CenterCrop(size)])(data)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_random_crops_draw_and_pad_as_on_the_decoded_image(jpegs):
    data = jpegs["progressive"]
    whole = pillow_pixels(data)
    for steps in ([RandomCrop(64)], [RandomCrop(150, padding=40)], [RandomResizedCrop(48)],
                  [RandomResizedCrop((40, 70), scale=(0.01, 0.2))]):
        for seed in range(8):
            got = Compose([Decode(exact=True), *steps])(data, seed=seed)
            expected = Compose(steps)(whole, seed=seed)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(expected),
                                          err_msg=f"{steps} seed {seed}")


def test_only_the_window_rows_are_read(jpegs):
    # The data after the window's last iMCU row is never looked at: a file cut
    # short there still gives its first rows, while the whole image is an error.
    data = jpegs["4:2:0"]
    cut = data[:len(data) * 3 // 4]
    with pytest.raises(ValueError, match="JPEG"):
        Decode(exact=True)(cut)
    got = Compose([Decode(exact=True), Crop(0, 40, 16, 100)])(cut)
    np.testing.assert_array_equal(np.asarray(got), pillow_pixels(data)[:16, 40:140])


def test_corrupt_data_inside_the_window_is_an_error():
    data = bytearray(encode(natural_image(64, 64, 3), "JPEG", quality=90))
    start = data.index(b"\xff\xda") + 20
    data[start:start + 40] = bytes(range(40))   # garbage in the first rows of the scan,
    data[start + 40:start + 42] = b"\xff\xd9"   # then the data ends
    for window in ((0, 0, 16, 64), (4, 30, 3, 5)):
        with pytest.raises(ValueError, match="Decode: cannot decode image: JPEG: Corrupt"):
            Compose([Decode(exact=True), Crop(*window)])(bytes(data))


def test_scaled_windows_stay_close_to_the_exact_chain(jpegs):
    # Outside exact mode a RandomResizedCrop also decodes its window at a DCT
    # scale n/8; the result stays near the exact chain's.
    for kind in ("4:2:0", "rocket.jpg", "retina.jpg"):
        for seed in range(6):
            steps = [RandomResizedCrop(32)]
            fused = np.asarray(Compose([Decode(), *steps])(jpegs[kind], seed=seed))
            exact = np.asarray(Compose([Decode(exact=True), *steps])(jpegs[kind], seed=seed))
            assert np.abs(fused.astype(int) - exact).mean() <= 3, (kind, seed)


def test_every_eighth_is_a_scale(photos):
    # rocket.jpg is 427 pixels high: shrinking it to 80, 100 or 120 pixels
    # (three times that, the fusion margin, is more than half the image) is
    # done from a decode at 5/8, 6/8 or 7/8, where halving would not be
    # allowed; each stays close to the exact chain.
    data = photos["rocket.jpg"]
    assert pillow_pixels(data).shape[0] == 427
    for target in (80, 100, 120):
        fused = np.asarray(Compose([Decode(), Resize(target)])(data))
        exact = np.asarray(Compose([Decode(exact=True), Resize(target)])(data))
        assert fused.shape == exact.shape
        assert not np.array_equal(fused, exact)
        assert np.abs(fused.astype(int) - exact).mean() <= 1.5
    # A shrink by less than the margin decodes the whole image: only the fast
    # resize's rounding differs (within 1, docs/transforms.md).
    fused = np.asarray(Compose([Decode(), Resize(143)])(data)).astype(int)
    exact = np.asarray(Compose([Decode(exact=True), Resize(143)])(data))
    assert np.abs(fused - exact).max() <= 1


@pytest.mark.parametrize("vectorised", [True, False], ids=["vectorised", "portable"])
def test_a_center_crop_after_resize_resamples_only_what_it_keeps(jpegs, vectorised):
    # Decode, Resize, CenterCrop: only the crop's outputs are resampled, from
    # the window of inputs they read; the same bytes as the whole resize cut.
    from dataloader._core import resize

    if vectorised and not resize.vectorised():
        pytest.skip("this CPU has no vectorised resize passes")
    resize.vectorised(vectorised)
    try:
        for kind in ("4:2:0", "progressive", "gray", "rocket.jpg"):
            whole = pillow_pixels(jpegs[kind])
            for size, crop in [(256, 224), (100, 64), (64, 64), ((150, 120), (100, 77)),
                               (500, 450), (37, 5), (64, 100)]:
                for interpolation in ("nearest", "bilinear", "bicubic", "lanczos"):
                    for antialias in (True, False):
                        steps = [Resize(size, interpolation=interpolation,
                                        antialias=antialias), CenterCrop(crop)]
                        got = Compose([Decode(exact=True), *steps])(jpegs[kind])
                        np.testing.assert_array_equal(
                            np.asarray(got), np.asarray(Compose(steps)(whole)),
                            err_msg=f"{kind} {steps}")
    finally:
        resize.vectorised(True)


def test_a_center_crop_after_resizing_one_side_only(jpegs):
    # One side keeps its size: only the other pass runs, on the window.
    data = jpegs["4:2:0"]
    whole = pillow_pixels(data)
    height, width = whole.shape[:2]
    for size, crop in [((height, 150), (100, 77)), ((120, width), (64, 200)),
                       ((height, width), (50, 60))]:
        for interpolation in ("nearest", "bilinear", "lanczos"):
            steps = [Resize(size, interpolation=interpolation), CenterCrop(crop)]
            got = Compose([Decode(exact=True), *steps])(data)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(Compose(steps)(whole)),
                                          err_msg=f"{steps}")


def test_a_scaled_center_crop_after_resize_stays_close(photos):
    # Outside exact mode the window is also decoded at a DCT scale n/8.
    data = photos["retina.jpg"]
    for size, crop in [(256, 224), (128, 112), (64, 56)]:
        steps = [Resize(size), CenterCrop(crop)]
        fused = np.asarray(Compose([Decode(), *steps])(data))
        exact = np.asarray(Compose([Decode(exact=True), *steps])(data))
        assert not np.array_equal(fused, exact)
        assert np.abs(fused.astype(int) - exact).mean() <= 1.5
