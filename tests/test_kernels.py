"""The public image kernels (dataloader.kernels): arguments, limits, errors, threads."""

import doctest
import struct
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import encode, natural_image, pillow_pixels
from PIL import Image as PILImage

from dataloader import kernels


def png_chunk(kind, payload):
    body = kind + payload
    return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body))


def png_header_only(width, height):
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IEND", b"")


# --- documentation --------------------------------------------------------

@pytest.mark.parametrize("name", kernels.__all__)
def test_docstring_examples_run(name):
    obj = getattr(kernels, name)
    tests = doctest.DocTestFinder().find(obj, name, globs={})
    examples = [t for t in tests if t.examples]
    assert examples, f"{name} has no Examples section"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in examples:
        runner.run(test)
    assert runner.failures == 0


def test_all_is_sorted_and_public():
    assert kernels.__all__ == sorted(kernels.__all__)
    assert not any(name.startswith("_") for name in kernels.__all__)


# --- image_info and decode ------------------------------------------------

@pytest.mark.parametrize("fmt,channels", [("JPEG", 3), ("PNG", 3), ("WEBP", 3), ("BMP", 3),
                                          ("GIF", 3), ("TIFF", 3)])
def test_image_info(fmt, channels):
    data = encode(natural_image(13, 21, 3), fmt)
    assert kernels.image_info(data) == kernels.ImageInfo(13, 21, channels, fmt)


@pytest.mark.parametrize("fmt", ["BMP", "GIF", "TIFF"])
@pytest.mark.parametrize("mode", [None, "L", "RGBA"])
def test_other_formats_decode_through_pillow(fmt, mode):
    data = encode(natural_image(11, 17, 3), fmt)
    expected = pillow_pixels(data, mode or "RGB")
    np.testing.assert_array_equal(kernels.decode(data, mode=mode), expected)


def test_other_formats_without_pillow_name_the_extra(monkeypatch):
    data = encode(natural_image(5, 5, 3), "BMP")
    png = encode(natural_image(5, 5, 3), "PNG")
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ValueError, match=r"BMP.*pip install dataloader\[images\]"):
        kernels.decode(data)
    # No Pillow would read an unrecognised format: refused, without the hint.
    with pytest.raises(ValueError, match=r"unrecognised format is not a format this library"):
        kernels.decode(b"not an image at all")
    # Native formats do not need Pillow.
    assert kernels.decode(png).shape == (5, 5, 3)


@pytest.mark.parametrize("mode,channels", [(None, 4), ("RGB", 3), ("L", 1), ("RGBA", 4)])
def test_decode_modes(mode, channels):
    data = encode(PILImage.fromarray(natural_image(9, 10, 4), "RGBA"), "PNG")
    pixels = kernels.decode(data, mode=mode)
    assert pixels.shape == (9, 10, channels) and pixels.dtype == np.uint8
    np.testing.assert_array_equal(pixels, pillow_pixels(data, mode or "RGBA"))


@pytest.mark.parametrize("pil_mode", ["RGB", "L", "CMYK"])
@pytest.mark.parametrize("mode", [None, "L", "RGB", "RGBA"])
def test_jpeg_decode_with_and_without_out_gives_pillows_pixels(pil_mode, mode):
    # Without out= and min_size=, decode is one native call (header, limits, a new
    # array, decode); with out= it goes through the checks of out. Same pixels.
    channels = {"L": 1, "RGB": 3, "CMYK": 4}[pil_mode]
    image = PILImage.fromarray(natural_image(37, 53, channels, seed=3).squeeze(), pil_mode)
    data = encode(image, "JPEG", quality=90)
    expected = pillow_pixels(data, mode or ("L" if pil_mode == "L" else "RGB"))
    new = kernels.decode(data, mode=mode)
    assert new.shape == expected.shape and new.flags.c_contiguous and new.flags.writeable
    np.testing.assert_array_equal(new, expected)
    out = np.full(expected.shape, 7, np.uint8)
    assert kernels.decode(bytearray(data), mode=mode, out=out) is out
    np.testing.assert_array_equal(out, expected)


def test_jpeg_decode_errors_after_the_header_leave_the_decoder_usable():
    good = encode(natural_image(30, 40, 3), "JPEG")
    for bad, error in [(good[:len(good) // 2], "cannot decode image"),
                       (good, "exceeds the limit")]:
        with pytest.raises(ValueError, match=error):
            kernels.decode(bad, max_width=39 if bad is good else 40)
        np.testing.assert_array_equal(kernels.decode(good), pillow_pixels(good))


def test_decode_accepts_bytes_like_objects():
    data = encode(natural_image(6, 7, 3), "PNG")
    expected = kernels.decode(data)
    for wrapped in (bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        np.testing.assert_array_equal(kernels.decode(wrapped), expected)
    with pytest.raises(TypeError, match="bytes-like"):
        kernels.decode(12345)


def test_decode_into_a_batch_slot_and_a_canvas():
    images = [natural_image(8, 12, 3, seed=i) for i in range(3)]
    batch = kernels.ImageBatch(3, 8, 12, 3, layout="NHWC")
    slots = np.asarray(batch)
    for i, image in enumerate(images):
        slot = slots[i]
        assert kernels.decode(encode(image, "PNG"), out=slot) is slot
    np.testing.assert_array_equal(slots, np.stack(images))
    canvas = np.zeros((20, 30, 3), np.uint8)
    kernels.decode(encode(images[0], "PNG"), out=canvas[2:10, 5:17])
    np.testing.assert_array_equal(canvas[2:10, 5:17], images[0])
    assert canvas.sum() == images[0].astype(int).sum()


def test_decode_out_is_checked():
    data = encode(natural_image(8, 12, 3), "PNG")
    with pytest.raises(ValueError, match=r"out must have shape \(8, 12, 3\)"):
        kernels.decode(data, out=np.empty((8, 12, 4), np.uint8))
    with pytest.raises(ValueError, match="dtype uint8"):
        kernels.decode(data, out=np.empty((8, 12, 3), np.float32))
    with pytest.raises(ValueError, match="packed"):
        kernels.decode(data, out=np.empty((8, 24, 3), np.uint8)[:, ::2])
    readonly = np.empty((8, 12, 3), np.uint8)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        kernels.decode(data, out=readonly)


# 200 x 300 at n/8: 25x38, 50x75, 75x113, 100x150, 125x188, 150x225, 175x263, 200x300.
@pytest.mark.parametrize("min_size,expected", [
    ((100, 100), (100, 150)), ((101, 100), (125, 188)), ((50, 75), (50, 75)),
    ((26, 38), (50, 75)), ((25, 38), (25, 38)), ((1, 1), (25, 38)), ((176, 1), (200, 300)),
    ((51, 76), (75, 113)), ((151, 1), (175, 263)),
])
def test_jpeg_min_size_picks_the_smallest_sufficient_scale(min_size, expected):
    data = encode(natural_image(200, 300, 3), "JPEG")
    pixels = kernels.decode(data, min_size=min_size)
    assert pixels.shape == expected + (3,)
    assert pixels.shape[0] >= min_size[0] and pixels.shape[1] >= min_size[1]


def test_min_size_is_ignored_for_other_formats():
    data = encode(natural_image(40, 60, 3), "PNG")
    assert kernels.decode(data, min_size=(5, 5)).shape == (40, 60, 3)
    with pytest.raises(ValueError, match="min_size"):
        kernels.decode(data, min_size=(0, 5))


def test_limits_are_checked_from_the_header():
    with pytest.raises(ValueError, match="100000x100000"):
        kernels.decode(png_header_only(100000, 100000))
    assert kernels.image_info(png_header_only(100000, 100000)).width == 100000
    data = encode(natural_image(40, 60, 3), "JPEG")
    with pytest.raises(ValueError, match=r"60x40 .* exceeds the limit of 50x16384"):
        kernels.decode(data, max_width=50)
    with pytest.raises(ValueError, match="7200 bytes, over the limit of 7000"):
        kernels.decode(data, max_bytes=7000)
    assert kernels.decode(data, max_width=60, max_height=40, max_bytes=7200).shape == (40, 60, 3)
    # DCT scaling brings a large JPEG under the limit: the decoded size counts.
    assert kernels.decode(data, max_width=30, min_size=(20, 30)).shape == (20, 30, 3)
    with pytest.raises(ValueError, match="exceeds"):
        kernels.decode(encode(natural_image(10, 10, 3), "GIF"), max_height=9)


def jpeg_with_size(height, width):
    data = bytearray(encode(natural_image(8, 8, 3), "JPEG"))
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def test_jpeg_header_over_the_limit():
    with pytest.raises(ValueError, match="60000x50000"):
        kernels.decode(jpeg_with_size(50000, 60000))


@pytest.mark.parametrize("data,message", [
    (b"", "empty"),
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "WebP"),
    (bytes(np.random.default_rng(1).integers(0, 256, 300, dtype=np.uint8)), "cannot"),
])
def test_corrupt_inputs_raise_value_error(data, message):
    with pytest.raises(ValueError, match=message):
        kernels.decode(data)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "GIF"])
def test_truncated_files_raise_value_error(fmt):
    data = encode(natural_image(48, 48, 3), fmt)
    for cut in (len(data) // 3, len(data) - 24):
        with pytest.raises(ValueError, match="cannot decode image"):
            kernels.decode(data[:cut])


def test_two_threads_decode_at_once_with_correct_pixels():
    files = []
    for i in range(24):
        fmt = ("JPEG", "PNG", "WEBP")[i % 3]
        files.append(encode(natural_image(64 + i, 80 - i, 3, seed=i), fmt))
    expected = [pillow_pixels(data) for data in files]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(3):
            decoded = list(pool.map(kernels.decode, files))
            for ours, theirs in zip(decoded, expected, strict=True):
                np.testing.assert_array_equal(ours, theirs)


# --- geometry -------------------------------------------------------------

def test_resize_arguments_and_shapes():
    image = natural_image(30, 40, 3)
    assert kernels.resize(image, 15).shape == (15, 20, 3)          # shorter side
    assert kernels.resize(image[:, :, 0], (7, 9)).shape == (7, 9)  # 2-D stays 2-D
    strided = kernels.resize(image[::2, ::2], (5, 5))
    np.testing.assert_array_equal(strided, kernels.resize(image[::2, ::2].copy(), (5, 5)))
    out = np.empty((10, 10, 3), np.uint8)
    assert kernels.resize(image, (10, 10), out=out) is out
    with pytest.raises(ValueError, match="interpolation must be one of"):
        kernels.resize(image, (5, 5), interpolation="area")
    with pytest.raises(ValueError, match=r"out must have shape \(10, 10, 3\)"):
        kernels.resize(image, (10, 10), out=np.empty((10, 10, 1), np.uint8))
    with pytest.raises(ValueError, match="dtype uint8"):
        kernels.resize(image.astype(np.float32), (5, 5))
    with pytest.raises(ValueError, match=r"size\[0\] must be an int in 1..16384, got 0"):
        kernels.resize(image, (0, 5))
    with pytest.raises(ValueError, match=r"shape \(2, 2, 5\) \(HWC\): an image has"):
        kernels.resize(np.zeros((2, 2, 5), np.uint8), (1, 1))


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear", "bicubic", "lanczos"])
def test_resize_matches_pillow_through_the_public_api(interpolation):
    image = natural_image(97, 131, 3)
    for size in [(31, 45), (13, 400), (224, 224)]:
        pil = PILImage.fromarray(image).resize(size[::-1], getattr(PILImage.Resampling,
                                                                   interpolation.upper()))
        ours = kernels.resize(image, size, interpolation=interpolation)
        np.testing.assert_array_equal(ours, np.asarray(pil))


def test_crop():
    image = natural_image(10, 12, 3)
    np.testing.assert_array_equal(kernels.crop(image, 2, 3, 4, 5), image[2:6, 3:8])
    np.testing.assert_array_equal(kernels.crop(image[:, :, 0], 0, 0, 10, 12), image[:, :, 0])
    with pytest.raises(ValueError, match="must lie inside the image of 10x12"):
        kernels.crop(image, 8, 0, 3, 3)


def test_pad_uses_torchvision_padding_order():
    image = natural_image(3, 4, 3)
    padded = kernels.pad(image, (1, 2, 3, 4), fill=(10, 20, 30))   # left, top, right, bottom
    assert padded.shape == (3 + 2 + 4, 4 + 1 + 3, 3)
    np.testing.assert_array_equal(padded[2:5, 1:5], image)
    assert (padded[0, 0] == [10, 20, 30]).all() and (padded[-1, -1] == [10, 20, 30]).all()
    two = kernels.pad(image, (1, 2), padding_mode="edge")          # left/right, top/bottom
    np.testing.assert_array_equal(two, np.pad(image, ((2, 2), (1, 1), (0, 0)), mode="edge"))
    for mode in ("reflect", "symmetric"):
        np.testing.assert_array_equal(kernels.pad(image, 2, padding_mode=mode),
                                      np.pad(image, ((2, 2), (2, 2), (0, 0)), mode=mode))
    floats = image.astype(np.float32) / 255
    np.testing.assert_array_equal(kernels.pad(floats, 1, fill=0.5)[0, 0], [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="padding_mode"):
        kernels.pad(image, 1, padding_mode="wrap")
    with pytest.raises(ValueError, match=r"fill must be integers in 0\.\.255"):
        kernels.pad(image, 1, fill=300)
    with pytest.raises(ValueError, match="one value per channel"):
        kernels.pad(image, 1, fill=(1, 2))


@pytest.mark.parametrize("anchor,top,left", [("top-left", 0, 0), ("center", 3, 1),
                                             ("bottom-right", 6, 3), ("top", 0, 1),
                                             ("right", 3, 3)])
def test_pad_to_anchors(anchor, top, left):
    image = natural_image(4, 5, 2)
    out = kernels.pad_to(image, 10, 8, anchor=anchor, fill=(7, 9))
    np.testing.assert_array_equal(out[top:top + 4, left:left + 5], image)
    mask = np.ones((10, 8), bool)
    mask[top:top + 4, left:left + 5] = False
    assert (out[mask] == [7, 9]).all()
    with pytest.raises(ValueError, match="at least the image's 4x5"):
        kernels.pad_to(image, 3, 8)


def test_flips_and_rotations():
    image = natural_image(5, 7, 3)
    np.testing.assert_array_equal(kernels.hflip(image), image[:, ::-1])
    np.testing.assert_array_equal(kernels.vflip(image[:, :, 0]), image[::-1, :, 0])
    for k in (-1, 0, 1, 2, 3, 5):
        np.testing.assert_array_equal(kernels.rotate90(image, k), np.rot90(image, k))


# --- values ---------------------------------------------------------------

def test_to_float_and_normalize_match_torchvision():
    torch = pytest.importorskip("torch")
    image = natural_image(6, 7, 3)
    as_float = kernels.to_float(image)
    np.testing.assert_array_equal(as_float, torch.from_numpy(image).float().div(255).numpy())
    assert kernels.to_float(image[:, :, 0]).shape == (6, 7)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    chw = kernels.to_chw(as_float)
    tensor = torch.from_numpy(chw.copy())
    expected = tensor.sub_(torch.tensor(mean).view(-1, 1, 1)).div_(
        torch.tensor(std).view(-1, 1, 1)).numpy()
    np.testing.assert_array_equal(kernels.normalize(chw, mean, std, layout="CHW"), expected)
    np.testing.assert_array_equal(kernels.normalize(image, mean, std),
                                  expected.transpose(1, 2, 0))
    batch = np.stack([chw, chw[:, ::-1].copy()])
    normalized = kernels.normalize(batch, mean, std, layout="NCHW")
    np.testing.assert_array_equal(normalized[0], expected)
    nhwc = kernels.normalize(np.ascontiguousarray(batch.transpose(0, 2, 3, 1)), mean, std,
                             layout="NHWC")
    np.testing.assert_array_equal(nhwc.transpose(0, 3, 1, 2), normalized)
    with pytest.raises(ValueError, match="one value per channel"):
        kernels.normalize(image, [0.5], [0.5])
    with pytest.raises(ValueError, match="std must not contain zeros"):
        kernels.normalize(image, mean, [1, 0, 1])
    with pytest.raises(ValueError, match=r"4 dimensions \(NCHW\), got shape \(6, 7, 3\)"):
        kernels.normalize(image, mean, std, layout="NCHW")


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_flips_and_rotations_of_every_pixel_size(channels, dtype):
    # 70x45 spans several of the quarter turn's 32x32 blocks, with partial ones
    # at the right and bottom edges.
    image = natural_image(70, 45, channels, seed=channels).astype(dtype)
    np.testing.assert_array_equal(kernels.hflip(image), image[:, ::-1])
    np.testing.assert_array_equal(kernels.vflip(image), image[::-1])
    for k in (1, 2, 3):
        np.testing.assert_array_equal(kernels.rotate90(image, k), np.rot90(image, k))


def test_quarter_turns_of_rgb_at_thin_and_odd_sizes():
    """3-byte pixels move as overlapping 4-byte words: every size keeps its edges
    (first and last columns, one-pixel runs), and nothing past the output is written."""
    rng = np.random.default_rng(3)
    for shape in [(1, 1), (1, 2), (2, 1), (1, 33), (33, 1), (31, 33), (65, 66), (70, 129)]:
        image = rng.integers(0, 256, shape + (3,), np.uint8)
        for k in (1, 3):
            canvas = np.full((image.size + 8,), 7, np.uint8)
            out = canvas[4:-4].reshape(np.rot90(image, k).shape)
            assert kernels.rotate90(image, k, out=out) is out
            np.testing.assert_array_equal(out, np.rot90(image, k), err_msg=f"{shape}, k={k}")
            assert (canvas[:4] == 7).all() and (canvas[-4:] == 7).all()


PILLOW_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


@pytest.mark.parametrize("source", [1, 2, 3, 4])
def test_convert_matches_pillow_between_every_mode(source):
    image = natural_image(19, 37, source, seed=source)
    pil = PILImage.fromarray(image[:, :, 0] if source == 1 else image, PILLOW_MODES[source])
    for mode in PILLOW_MODES.values():
        expected = np.asarray(pil.convert(mode))
        np.testing.assert_array_equal(kernels.convert(image, mode).reshape(expected.shape),
                                      expected, err_msg=f"{PILLOW_MODES[source]} -> {mode}")


@pytest.mark.parametrize("source", [3, 4])
def test_convert_to_gray_is_pillows_at_every_width(source):
    """L and LA from RGB(A) run 16 pixels at a time with a tail: widths on both sides
    of the vector's, every sample value, alpha kept."""
    rng = np.random.default_rng(source)
    for width in [*range(1, 40), 2561]:
        image = rng.integers(0, 256, (3, width, source), np.uint8)
        pil = PILImage.fromarray(image, PILLOW_MODES[source])
        for mode in ("L", "LA"):
            expected = np.asarray(pil.convert(mode)).reshape(3, width, -1)
            np.testing.assert_array_equal(kernels.convert(image, mode), expected,
                                          err_msg=f"{PILLOW_MODES[source]} -> {mode}, {width}")


def test_layout_and_convert():
    image = natural_image(4, 6, 3)
    chw = kernels.to_chw(image)
    np.testing.assert_array_equal(chw, image.transpose(2, 0, 1))
    np.testing.assert_array_equal(kernels.to_hwc(chw), image)
    np.testing.assert_array_equal(kernels.convert(image, "L"),
                                  pillow_pixels(encode(image, "PNG"), "L"))
    assert kernels.convert(image, "RGBA")[..., 3].min() == 255
    with pytest.raises(ValueError, match="mode must be one of"):
        kernels.convert(image, "CMYK")


def test_stack_into_an_image_batch():
    torch = pytest.importorskip("torch")
    images = [natural_image(4, 5, 3, seed=i) for i in range(3)]
    np.testing.assert_array_equal(kernels.stack(images), np.stack(images))
    batch = kernels.ImageBatch(3, 4, 5, 3, layout="NHWC")
    assert kernels.stack(images, out=batch) is batch
    np.testing.assert_array_equal(torch.from_dlpack(batch).numpy(), np.stack(images))
    with pytest.raises(ValueError, match=r"images\[1\] is uint8 of shape \(4, 4, 3\)"):
        kernels.stack([images[0], images[1][:, :4]])
    with pytest.raises(ValueError, match="must not be empty"):
        kernels.stack([])



def test_strided_and_odd_sized_inputs_match_numpy_references():
    base = natural_image(23, 37, 4, seed=8)
    view = base[1::2, ::3, :3]                    # odd sizes, non-contiguous
    assert not view.flags.c_contiguous
    np.testing.assert_array_equal(kernels.hflip(view), view[:, ::-1])
    np.testing.assert_array_equal(kernels.vflip(view), view[::-1])
    np.testing.assert_array_equal(kernels.rotate90(view, 3), np.rot90(view, 3))
    np.testing.assert_array_equal(kernels.crop(view, 1, 2, 5, 7), view[1:6, 2:9])
    np.testing.assert_array_equal(kernels.pad(view, (3, 1), padding_mode="symmetric"),
                                  np.pad(view, ((1, 1), (3, 3), (0, 0)), mode="symmetric"))
    np.testing.assert_array_equal(kernels.to_chw(view), view.transpose(2, 0, 1))
    np.testing.assert_array_equal(kernels.to_float(view), view.astype(np.float32) / 255)
    np.testing.assert_array_equal(kernels.convert(view, "RGBA")[..., :3], view)
    np.testing.assert_array_equal(kernels.stack([view, view]), np.stack([view, view]))


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "GIF"])
def test_mutated_files_decode_or_raise_value_error(fmt):
    """Random byte changes and cuts: a clean ValueError or pixels, never a crash."""
    rng = np.random.default_rng(len(fmt))
    data = encode(natural_image(24, 32, 3), fmt)
    failures = 0
    for _ in range(150):
        mutated = bytearray(data)
        for position in rng.integers(0, len(mutated), int(rng.integers(1, 6))):
            mutated[position] = int(rng.integers(0, 256))
        if rng.random() < 0.3:
            mutated = mutated[: int(rng.integers(1, len(mutated)))]
        try:
            pixels = kernels.decode(bytes(mutated), mode="RGB")
        except ValueError:
            failures += 1
        else:
            assert pixels.dtype == np.uint8 and pixels.shape[2] == 3
    assert failures > 0
