"""Geometry and value kernels (dataloader._core.ops, .resize) against references."""

import numpy as np
import PIL
import pytest
from conftest import natural_image
from PIL import Image as PILImage

from dataloader._core import ops, resize

PIL_FILTERS = {
    "nearest": PILImage.Resampling.NEAREST,
    "bilinear": PILImage.Resampling.BILINEAR,
    "bicubic": PILImage.Resampling.BICUBIC,
    "lanczos": PILImage.Resampling.LANCZOS,
}
SIZES = [(224, 224), (31, 45), (97, 50), (301, 131), (1, 7), (200, 1), (97, 131), (13, 400)]


def pillow_resize(src, size, interpolation):
    """Pillow's result, one channel at a time (Pillow premultiplies alpha)."""
    h, w = size
    planes = [np.asarray(PILImage.fromarray(src[:, :, c]).resize((w, h),
                                                                   PIL_FILTERS[interpolation]))
              for c in range(src.shape[2])]
    return np.stack(planes, axis=-1)


def our_resize(src, size, interpolation, antialias=True):
    out = np.empty(size + (src.shape[2],), np.uint8)
    resize.resize_into(src, out, resize.FILTERS.index(interpolation), antialias)
    return out


@pytest.mark.parametrize("interpolation", list(PIL_FILTERS))
@pytest.mark.parametrize("size", SIZES)
def test_resize_rgb_matches_pillow(interpolation, size):
    src = natural_image(97, 131, 3)
    ours = our_resize(src, size, interpolation)
    theirs = np.asarray(PILImage.fromarray(src).resize(size[::-1], PIL_FILTERS[interpolation]))
    # The algorithm is Pillow's to the bit; the tolerance required is 1.
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("interpolation", list(PIL_FILTERS))
@pytest.mark.parametrize("shape", [(1, 17), (19, 1), (1, 1), (5, 3)])
@pytest.mark.parametrize("channels", [1, 2, 4])
def test_resize_thin_images_and_every_channel_count(interpolation, shape, channels):
    src = natural_image(*shape, channels, seed=5)
    for size in [(1, 9), (23, 1), (7, 11), (2, 2)]:
        ours = our_resize(src, size, interpolation)
        np.testing.assert_array_equal(ours, pillow_resize(src, size, interpolation),
                                      err_msg=str(size))


def test_resize_real_photograph_gives_pillows_bytes(photos):
    with PILImage.open(__import__("io").BytesIO(photos["astronaut.png"])) as image:
        src = np.asarray(image.convert("RGB"))
    for interpolation in PIL_FILTERS:
        for size in [(224, 224), (333, 517), (1024, 700)]:
            ours = our_resize(src, size, interpolation)
            theirs = np.asarray(PILImage.fromarray(src).resize(size[::-1],
                                                                PIL_FILTERS[interpolation]))
            np.testing.assert_array_equal(ours, theirs, err_msg=str(size))


def narrow_bilinear_rows(src, out_w):
    """Reference for antialias=False: the triangle filter keeps its unit support."""
    in_w = src.shape[1]
    scale = in_w / out_w
    out = np.empty((src.shape[0], out_w), np.float64)
    for x in range(out_w):
        center = (x + 0.5) * scale
        taps = np.arange(max(int(center - 0.5), 0), min(int(center + 1.5), in_w))
        weights = np.maximum(0.0, 1.0 - np.abs(taps - center + 0.5))
        out[:, x] = src[:, taps].astype(np.float64) @ (weights / weights.sum())
    return out


def test_resize_without_antialias_keeps_the_filter_narrow():
    src = natural_image(1, 64, 1, seed=4)
    src[0, ::3] = 255   # fine detail that antialiasing would average away
    sharp = our_resize(src, (1, 16), "bilinear", antialias=False)[:, :, 0]
    smooth = our_resize(src, (1, 16), "bilinear", antialias=True)[:, :, 0]
    expected = narrow_bilinear_rows(src[:, :, 0], 16)
    assert np.abs(sharp - expected).max() <= 1
    assert np.abs(smooth.astype(int) - sharp).max() > 20


def test_resize_same_size_is_a_copy():
    src = natural_image(17, 23, 3)
    for interpolation in PIL_FILTERS:
        np.testing.assert_array_equal(our_resize(src, (17, 23), interpolation), src)


# --- crop, pad, flip, rotate ----------------------------------------------

@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_crop_flip_rotate_match_numpy(dtype):
    src = natural_image(13, 17, 3).astype(dtype)
    out = np.empty((5, 7, 3), dtype)
    ops.crop_into(src, out, 4, 9)
    np.testing.assert_array_equal(out, src[4:9, 9:16])
    for horizontal, expected in [(True, src[:, ::-1]), (False, src[::-1])]:
        out = np.empty_like(src)
        ops.flip_into(src, out, horizontal)
        np.testing.assert_array_equal(out, expected)
    for k in (1, 2, 3):
        expected = np.rot90(src, k)
        out = np.empty(expected.shape, dtype)
        ops.rotate90_into(src, out, k)
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("channels, dtype", [(3, np.uint8), (4, np.uint8), (1, np.float32)])
def test_quarter_turns_of_every_remainder_match_numpy(channels, dtype):
    # 3- and 4-byte pixels turn in squares of 8x8 in vector registers: sides
    # of every remainder modulo 8 leave partial squares at the right and
    # bottom edges, and nothing before or after the destination is written.
    for height, width in [(8, 8), (16, 24), (9, 15), (23, 17), (37, 70), (64, 33), (7, 41),
                          (50, 6), (12, 100)]:
        src = natural_image(height, width, channels, seed=height).astype(dtype)
        for k in (1, 3):
            expected = np.rot90(src, k)
            canvas = np.full(src.size + 8, 7, dtype)
            out = canvas[4:-4].reshape(expected.shape)
            ops.rotate90_into(src, out, k)
            np.testing.assert_array_equal(out, expected, err_msg=f"{height}x{width}, k={k}")
            assert (canvas[:4] == 7).all() and (canvas[-4:] == 7).all()


def numpy_pad(src, top, left, bottom, right, mode, fill):
    widths = ((top, bottom), (left, right), (0, 0))
    if mode == "constant":
        planes = [np.pad(src[:, :, c], widths[:2], constant_values=fill[c])
                  for c in range(src.shape[2])]
        return np.stack(planes, axis=-1)
    return np.pad(src, widths, mode=mode)


@pytest.mark.parametrize("mode", ops.PAD_MODES)
@pytest.mark.parametrize("shape", [(5, 7), (1, 4), (4, 1), (2, 2), (9, 3)])
@pytest.mark.parametrize("widths", [(1, 2, 3, 0), (0, 0, 0, 0), (3, 3, 3, 3), (11, 0, 7, 13)])
def test_pad_matches_numpy_pad(mode, shape, widths):
    # numpy.pad's edge/reflect/symmetric are torchvision Pad's modes of the same
    # names; paddings wider than the image keep mirroring (numpy's behaviour).
    src = natural_image(*shape, 3, seed=2)
    top, left, bottom, right = widths
    if mode == "reflect" and 1 in shape:
        src = src[:, :, :]   # numpy repeats the single sample, as we do
    fill = [3.0, 200.0, 77.0]
    expected = numpy_pad(src, top, left, bottom, right, mode, fill)
    out = np.empty(expected.shape, np.uint8)
    ops.pad_into(src, out, top, left, ops.PAD_MODES.index(mode), fill)
    np.testing.assert_array_equal(out, expected)


# --- values and layouts ---------------------------------------------------

def test_to_float_is_torch_division_by_255():
    torch = pytest.importorskip("torch")
    src = np.arange(256, dtype=np.uint8)
    out = np.empty(256, np.float32)
    ops.to_float_into(src, out)
    expected = torch.from_numpy(src).float().div(255).numpy()
    np.testing.assert_array_equal(out, expected)


def torchvision_normalize(chw, mean, std):
    """torchvision.transforms.functional.normalize on a float tensor."""
    torch = pytest.importorskip("torch")
    tensor = torch.from_numpy(chw.copy())
    mean_t = torch.as_tensor(mean, dtype=tensor.dtype).view(-1, 1, 1)
    std_t = torch.as_tensor(std, dtype=tensor.dtype).view(-1, 1, 1)
    return tensor.sub_(mean_t).div_(std_t).numpy()


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_normalize_is_identical_to_torchvision(channels):
    rng = np.random.default_rng(9)
    chw = rng.random((channels, 17, 23), dtype=np.float32)
    mean = np.array([0.485, 0.456, 0.406, 0.5][:channels], np.float32)
    std = np.array([0.229, 0.224, 0.225, 0.3][:channels], np.float32)
    expected = torchvision_normalize(chw, mean, std)
    out = np.empty_like(chw)
    ops.normalize_into(chw.reshape(-1), out.reshape(-1), channels, 17 * 23, mean, std)
    np.testing.assert_array_equal(out, expected)
    hwc = np.ascontiguousarray(chw.transpose(1, 2, 0))
    out_hwc = np.empty_like(hwc)
    ops.normalize_into(hwc.reshape(-1), out_hwc.reshape(-1), channels, 0, mean, std)
    np.testing.assert_array_equal(out_hwc.transpose(2, 0, 1), expected)


def test_normalize_of_uint8_is_to_tensor_then_normalize():
    torch = pytest.importorskip("torch")
    src = natural_image(11, 13, 3)
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    chw_float = torch.from_numpy(src).permute(2, 0, 1).float().div(255).numpy()
    expected = torchvision_normalize(chw_float, mean, std).transpose(1, 2, 0)
    out = np.empty(src.shape, np.float32)
    ops.normalize_into(src.reshape(-1), out.reshape(-1), 3, 0, mean, std)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_layout_transposes_round_trip(dtype):
    src = natural_image(7, 9, 3).astype(dtype)
    chw = np.empty((3, 7, 9), dtype)
    ops.hwc_to_chw_into(src, chw)
    np.testing.assert_array_equal(chw, src.transpose(2, 0, 1))
    back = np.empty_like(src)
    ops.chw_to_hwc_into(chw, back)
    np.testing.assert_array_equal(back, src)


PIL_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


@pytest.mark.parametrize("source", [1, 2, 3, 4])
@pytest.mark.parametrize("target", [1, 2, 3, 4])
def test_convert_matches_pillow(source, target):
    src = natural_image(9, 14, source, seed=source)
    image = PILImage.fromarray(src[:, :, 0] if source == 1 else src, PIL_MODES[source])
    expected = np.asarray(image.convert(PIL_MODES[target])).reshape(9, 14, target)
    out = np.empty((9, 14, target), np.uint8)
    ops.convert_into(src, out)
    np.testing.assert_array_equal(out, expected)


def checkerboard(height, width, cell=1):
    """Hard edges, where the two orders of the passes round furthest apart."""
    board = ((np.indices((height, width)) // cell).sum(0) % 2 * 255).astype(np.uint8)
    return np.repeat(board[:, :, None], 3, axis=2)


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic", "lanczos"])
def test_every_filter_gives_pillows_bytes_at_random_sizes(photos, interpolation):
    """Any size pair, growing or shrinking either side, in either pass order."""
    import io

    rng = np.random.default_rng(12)
    with PILImage.open(io.BytesIO(photos["coffee.png"])) as image:
        photo = np.asarray(image.convert("RGB"))[:160, :200].copy()
    for src in (natural_image(83, 121, 3, seed=3), photo, checkerboard(141, 97, cell=3)):
        for _ in range(25):
            size = (int(rng.integers(1, 2 * src.shape[0])), int(rng.integers(1, 2 * src.shape[1])))
            np.testing.assert_array_equal(our_resize(src, size, interpolation),
                                          pillow_resize(src, size, interpolation),
                                          err_msg=str(size))


def horizontal_then_vertical(src, size, interpolation):
    """Pillow with the horizontal pass forced first: one axis at a time."""
    wide = pillow_resize(src, (src.shape[0], size[1]), interpolation)
    return pillow_resize(wide, size, interpolation)


@pytest.mark.skipif(int(PIL.__version__.split(".")[0]) < 13,
                    reason="Pillow before 13 runs the horizontal pass first at every size")
@pytest.mark.parametrize("interpolation", ["bicubic", "lanczos"])
def test_pass_order_is_pillows_on_both_sides_of_its_rule(interpolation):
    """The vertical pass goes first once the height loses more than twice the width's pixels."""
    src = checkerboard(241, 140)
    for width_lost in (5, 20, 60):
        for height_lost in (2 * width_lost, 2 * width_lost + 1):
            size = (241 - height_lost, 140 - width_lost)
            pillow = pillow_resize(src, size, interpolation)
            np.testing.assert_array_equal(our_resize(src, size, interpolation), pillow,
                                          err_msg=str(size))
            # The order shows in the bytes: horizontal first gives Pillow's
            # result exactly when Pillow chose it.
            horizontal_first = np.array_equal(horizontal_then_vertical(src, size, interpolation),
                                              pillow)
            assert horizontal_first == (height_lost == 2 * width_lost), size
