"""Property tests of every public kernel in ``dataloader.kernels``.

Arbitrary shapes, dtypes, strides and argument values must give either the
result of a slow numpy reference or a ``ValueError``/``TypeError``: never a
crash, another exception, or a write outside ``out=`` (each ``out`` buffer
sits between guard bytes that must stay intact).

Example counts come from the hypothesis profile (``tests/conftest.py``):
modest by default (``make test``), larger under ``HYPOTHESIS_PROFILE=soak``
(``make soak``).
"""

import io

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image as PILImage

from dataloader import kernels

DTYPES = [np.uint8, np.float32, np.float64, np.int16, np.bool_]
GUARD_BYTES = 64
GUARD = 0xA5
REJECTED = (ValueError, TypeError)


@st.composite
def arrays(draw, dtypes=DTYPES, ndims=(0, 4), max_side=7, channels=None):
    """An array of any shape, dtype and strides (sliced, reversed or transposed views)."""
    dtype = draw(st.sampled_from(dtypes))
    ndim = draw(st.integers(*ndims))
    shape = [draw(st.integers(0, max_side)) for _ in range(ndim)]
    if channels is not None and ndim == 3:
        shape[2] = draw(channels)
    steps = [draw(st.sampled_from([1, 1, 2, -1])) for _ in range(ndim)]
    base_shape = tuple(side * abs(step) for side, step in zip(shape, steps, strict=True))
    elements = (st.floats(-1e3, 1e3, width=32) if np.dtype(dtype).kind == "f" else None)
    base = draw(hnp.arrays(dtype, base_shape, elements=elements))
    view = base[tuple(slice(None, None, step) for step in steps)]
    view = view[tuple(slice(0, side) for side in shape)]
    if ndim >= 2 and draw(st.booleans()):
        # Swap the first two axes: a non-contiguous view of another shape.
        view = np.swapaxes(view, 0, 1)
    return np.asarray(view)  # indexing a 0-d array gives a scalar


def image_arrays(dtypes=(np.uint8, np.float32)):
    """Mostly valid images (2-D or HWC with 1..4 channels), sometimes anything."""
    valid = arrays(dtypes=dtypes, ndims=(2, 3), channels=st.integers(1, 4))
    return st.one_of(valid, valid, valid, arrays())


class Guarded:
    """An ``out=`` array between guard bytes (or a wrong one: shape, dtype, layout)."""

    def __init__(self, shape, dtype):
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self.buffer = np.full(nbytes + 2 * GUARD_BYTES, GUARD, np.uint8)
        self.nbytes = nbytes
        self.array = self.buffer[GUARD_BYTES:GUARD_BYTES + nbytes].view(dtype).reshape(shape)

    def check(self):
        assert (self.buffer[:GUARD_BYTES] == GUARD).all(), "write before out="
        assert (self.buffer[GUARD_BYTES + self.nbytes:] == GUARD).all(), "write after out="


def call(kernel, reference, out_spec, draw):
    """Run ``kernel(out=...)`` against ``reference()``: equal, or rejected with the reference.

    ``reference()`` gives the expected array, or ``None`` when the arguments
    are invalid (then the kernel must raise ValueError or TypeError).
    ``out_spec`` chooses ``out=``: None, a guarded array of the expected
    shape, or one of a wrong shape or dtype.
    """
    try:
        expected = reference()
    except REJECTED:
        expected = None
    choice = draw(st.sampled_from(["none", "guarded", "guarded", "wrong-shape", "wrong-dtype"]))
    guarded = None
    out = None
    if expected is not None and choice != "none":
        shape, dtype = expected.shape, expected.dtype
        if choice == "wrong-shape":
            shape = shape[:-1] + (shape[-1] + 1,) if shape else (2,)
        elif choice == "wrong-dtype":
            dtype = np.float64 if dtype != np.float64 else np.uint8
        guarded = Guarded(shape, dtype)
        out = guarded.array
    try:
        result = kernel(out) if out_spec else kernel(None)
    except REJECTED:
        result = None
    finally:
        if guarded is not None:
            guarded.check()
    if expected is None:
        assert result is None, "invalid arguments were accepted"
        return
    if choice in ("wrong-shape", "wrong-dtype") and out is not None:
        assert result is None, f"out= of the {choice} was accepted"
        return
    assert result is not None, "valid arguments were rejected"
    if out is not None:
        assert result is out
    assert result.shape == expected.shape and result.dtype == expected.dtype, (
        result.shape, result.dtype, expected.shape, expected.dtype)
    np.testing.assert_allclose(result, expected, rtol=2e-6, atol=2e-6)


def as_image(img, dtypes=(np.uint8,)):
    """The validation every image kernel applies, for the references; raises like them."""
    if img.dtype not in dtypes:
        raise ValueError("dtype")
    hwc = img[:, :, None] if img.ndim == 2 else img
    if hwc.ndim != 3 or not 1 <= hwc.shape[2] <= 4 or 0 in hwc.shape[:2]:
        raise ValueError("shape")
    return hwc


def follow_image_rule(shape, layout):
    """The image rule, for references: height and width >= 1, 1 to 4 channels."""
    if len(layout) == 4:
        shape = shape[1:]
    if len(shape) == 2:
        shape = shape + (1,) if layout.endswith("C") else (1,) + shape
    h, w, c = shape if layout.endswith("C") else (shape[1], shape[2], shape[0])
    if h < 1 or w < 1 or not 1 <= c <= 4:
        raise ValueError("shape")


def like_input(img, result):
    """A 2-D image gives a 2-D result."""
    return result[:, :, 0] if img.ndim == 2 and result.shape[2] == 1 else result


# --- geometry -------------------------------------------------------------

@given(img=image_arrays(), box=st.tuples(*[st.integers(-2, 9)] * 4), data=st.data())
def test_crop(img, box, data):
    top, left, height, width = box

    def reference():
        hwc = as_image(img, (np.uint8, np.float32))
        if not (top >= 0 and left >= 0 and height > 0 and width > 0
                and top + height <= hwc.shape[0] and left + width <= hwc.shape[1]):
            raise ValueError("window")
        return like_input(img, hwc[top:top + height, left:left + width])

    call(lambda out: kernels.crop(img, top, left, height, width, out=out),
         reference, True, data.draw)


@given(img=image_arrays(), horizontal=st.booleans(), data=st.data())
def test_flips(img, horizontal, data):
    kernel = kernels.hflip if horizontal else kernels.vflip

    def reference():
        hwc = as_image(img, (np.uint8, np.float32))
        return like_input(img, hwc[:, ::-1] if horizontal else hwc[::-1])

    call(lambda out: kernel(img, out=out), reference, True, data.draw)


@given(img=image_arrays(), k=st.integers(-9, 9), data=st.data())
def test_rotate90(img, k, data):
    def reference():
        hwc = as_image(img, (np.uint8, np.float32))
        return like_input(img, np.rot90(hwc, k))

    call(lambda out: kernels.rotate90(img, k, out=out), reference, True, data.draw)


PAD_MODES = ["constant", "edge", "reflect", "symmetric"]


@given(img=image_arrays(), padding=st.one_of(
           st.integers(-1, 6), st.lists(st.integers(-1, 6), min_size=1, max_size=5)),
       mode=st.sampled_from(PAD_MODES + ["wrap"]), fill=st.integers(0, 300), data=st.data())
def test_pad(img, padding, mode, fill, data):
    def reference():
        hwc = as_image(img, (np.uint8, np.float32))
        values = [padding] if isinstance(padding, int) else list(padding)
        if len(values) not in (1, 2, 4) or min(values) < 0 or mode not in PAD_MODES:
            raise ValueError("padding")
        left, top, right, bottom = (values * 4)[:4] if len(values) < 4 else values
        if len(values) == 2:
            left, top, right, bottom = values * 2
        if img.dtype == np.uint8 and fill > 255:
            raise ValueError("fill")
        widths = ((top, bottom), (left, right), (0, 0))
        if mode == "constant":
            return like_input(img, np.pad(hwc, widths, constant_values=fill))
        if mode == "reflect" and (max(top, bottom) >= hwc.shape[0]
                                  or max(left, right) >= hwc.shape[1]):
            return None  # numpy reflects again; either a result or a rejection is fine
        return like_input(img, np.pad(hwc, widths, mode=mode))

    expected = None
    try:
        expected = reference()
    except REJECTED:
        pass
    if expected is None:
        try:
            kernels.pad(img, padding, fill=fill, padding_mode=mode)
        except REJECTED:
            pass
        return
    call(lambda out: kernels.pad(img, padding, fill=fill, padding_mode=mode, out=out),
         lambda: expected, True, data.draw)


ANCHORS = ["top-left", "top", "top-right", "left", "center", "right",
           "bottom-left", "bottom", "bottom-right"]


@given(img=image_arrays(), size=st.tuples(st.integers(-1, 12), st.integers(-1, 12)),
       anchor=st.sampled_from(ANCHORS + ["middle"]), fill=st.integers(0, 255), data=st.data())
def test_pad_to(img, size, anchor, fill, data):
    height, width = size

    def reference():
        hwc = as_image(img, (np.uint8, np.float32))
        h, w, c = hwc.shape
        if anchor not in ANCHORS or not (h <= height and w <= width):
            raise ValueError("size")
        fy = {"top": 0.0, "bottom": 1.0}.get(anchor.split("-")[0], 0.5)
        fx = {"left": 0.0, "right": 1.0}.get(anchor.split("-")[-1], 0.5)
        if anchor in ("top", "bottom"):
            fx = 0.5
        if anchor in ("left", "right"):
            fy = 0.5
        top, left = int((height - h) * fy), int((width - w) * fx)
        result = np.full((height, width, c), fill, hwc.dtype)
        result[top:top + h, left:left + w] = hwc
        return like_input(img, result)

    call(lambda out: kernels.pad_to(img, height, width, anchor=anchor, fill=fill, out=out),
         reference, True, data.draw)


# --- resampling -----------------------------------------------------------

FILTERS = ["nearest", "bilinear", "bicubic", "lanczos"]


@given(img=image_arrays((np.uint8,)), size=st.one_of(
           st.tuples(st.integers(-1, 13), st.integers(-1, 13)), st.integers(-1, 13)),
       interpolation=st.sampled_from(FILTERS + ["area"]), antialias=st.booleans(),
       data=st.data())
def test_resize_shape_and_constant_images(img, size, interpolation, antialias, data):
    """Any arguments: the right shape or a rejection; constant images stay constant."""
    guarded = Guarded((16, 16, 4), np.uint8) if data.draw(st.booleans()) else None
    try:
        result = kernels.resize(img, size, interpolation=interpolation, antialias=antialias)
    except REJECTED:
        return
    assert interpolation in FILTERS
    hwc = as_image(img)
    if isinstance(size, tuple):
        assert result.shape[:2] == size
    assert result.ndim == img.ndim and result.dtype == np.uint8
    if hwc.size and (hwc == hwc.flat[0]).all() and result.size:
        assert np.abs(result.astype(int) - int(hwc.flat[0])).max() <= 1
    if guarded is not None and result.ndim == 3 and result.shape[2] == 4:
        h, w = result.shape[:2]
        if h <= 16 and w <= 16:
            out = Guarded((h, w, 4), np.uint8)
            kernels.resize(img, (h, w), interpolation=interpolation, antialias=antialias,
                           out=out.array)
            out.check()
            np.testing.assert_array_equal(out.array, result)


@given(img=arrays(dtypes=[np.uint8], ndims=(3, 3), channels=st.sampled_from([1, 3])),
       size=st.tuples(st.integers(1, 13), st.integers(1, 13)),
       interpolation=st.sampled_from(["nearest", "bilinear"]))
def test_resize_matches_pillow(img, size, interpolation):
    assume(img.shape[0] > 0 and img.shape[1] > 0)
    mode_array = img[:, :, 0] if img.shape[2] == 1 else img
    pil = PILImage.fromarray(np.ascontiguousarray(mode_array))
    resample = {"nearest": PILImage.NEAREST, "bilinear": PILImage.BILINEAR}[interpolation]
    expected = np.asarray(pil.resize(size[::-1], resample)).reshape(size + (img.shape[2],))
    result = kernels.resize(img, size, interpolation=interpolation)
    assert np.abs(result.astype(int) - expected.astype(int)).max() <= 1


# --- values and layouts ---------------------------------------------------

@given(img=arrays(), data=st.data())
def test_to_float(img, data):
    def reference():
        if img.dtype != np.uint8:
            raise ValueError("dtype")
        return img.astype(np.float32) / np.float32(255)

    call(lambda out: kernels.to_float(img, out=out), reference, True, data.draw)


LAYOUTS = {"HWC": 2, "CHW": 0, "NHWC": 3, "NCHW": 1}


@given(img=arrays(dtypes=[np.uint8, np.float32, np.float64]),
       layout=st.sampled_from(list(LAYOUTS) + ["HW"]),
       values=st.lists(st.tuples(st.floats(-2, 2, width=32), st.floats(-3, 3, width=32)),
                       min_size=0, max_size=5),
       data=st.data())
def test_normalize(img, layout, values, data):
    mean = [m for m, _ in values]
    std = [s for _, s in values]

    def reference():
        if img.dtype not in (np.uint8, np.float32) or layout not in LAYOUTS:
            raise ValueError("dtype or layout")
        if img.ndim == 2 and layout == "HWC":
            channels, shape = 1, (1, 1)
        elif img.ndim == len(layout):
            axis = LAYOUTS[layout]
            channels = img.shape[axis]
            shape = [1] * img.ndim
            shape[axis] = channels
        else:
            raise ValueError("ndim")
        follow_image_rule(img.shape, layout)
        if len(values) != channels or 0 in std:
            raise ValueError("mean/std")
        x = img.astype(np.float32)
        if img.dtype == np.uint8:
            x = x / np.float32(255)
        m = np.asarray(mean, np.float32).reshape(shape)
        s = np.asarray(std, np.float32).reshape(shape)
        return ((x - m) / s).astype(np.float32)

    call(lambda out: kernels.normalize(img, mean, std, layout=layout, out=out),
         reference, True, data.draw)


@given(img=arrays(), to_chw=st.booleans(), data=st.data())
def test_transpose(img, to_chw, data):
    def reference():
        if img.dtype not in (np.uint8, np.float32):
            raise ValueError("dtype")
        if img.ndim == 2:
            three = img[:, :, None] if to_chw else img[None]
        elif img.ndim == 3:
            three = img
        else:
            raise ValueError("ndim")
        follow_image_rule(three.shape, "HWC" if to_chw else "CHW")
        return np.transpose(three, (2, 0, 1) if to_chw else (1, 2, 0))

    kernel = kernels.to_chw if to_chw else kernels.to_hwc
    call(lambda out: kernel(img, out=out), reference, True, data.draw)


def gray(rgb):
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    return ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).astype(np.uint8)


@given(img=image_arrays((np.uint8,)), mode=st.sampled_from(["L", "LA", "RGB", "RGBA", "P"]),
       data=st.data())
def test_convert(img, mode, data):
    def reference():
        hwc = as_image(img)
        if mode == "P":
            raise ValueError("mode")
        c = hwc.shape[2]
        alpha = hwc[..., -1] if c in (2, 4) else np.full(hwc.shape[:2], 255, np.uint8)
        luma = hwc[..., 0] if c <= 2 else gray(hwc)
        colour = np.repeat(hwc[..., :1], 3, axis=2) if c <= 2 else hwc[..., :3]
        planes = {"L": [luma], "LA": [luma, alpha],
                  "RGB": [colour[..., i] for i in range(3)],
                  "RGBA": [colour[..., i] for i in range(3)] + [alpha]}[mode]
        return np.stack(planes, axis=-1)

    call(lambda out: kernels.convert(img, mode, out=out), reference, True, data.draw)


@given(images=st.lists(arrays(ndims=(0, 3)), min_size=0, max_size=4), same=st.booleans(),
       data=st.data())
def test_stack(images, same, data):
    if same and images:
        images = [images[0].copy() for _ in images]

    def reference():
        if not images or images[0].dtype not in (np.uint8, np.float32):
            raise ValueError("images")
        if any(i.shape != images[0].shape or i.dtype != images[0].dtype for i in images):
            raise ValueError("shapes")
        return np.stack(images)

    # Empty images (a zero in the shape) stack like any others.
    call(lambda out: kernels.stack(images, out=out), reference, True, data.draw)


# --- decoding -------------------------------------------------------------

@given(data=st.binary(max_size=300))
def test_decode_and_image_info_of_arbitrary_bytes(data):
    for run in (kernels.image_info, kernels.decode):
        try:
            run(data)
        except REJECTED:
            pass


@given(img=arrays(dtypes=[np.uint8], ndims=(3, 3), channels=st.sampled_from([1, 3, 4])),
       cut=st.integers(0, 200), flip=st.integers(0, 10_000), data=st.data())
def test_decode_lossless_images_and_their_mutations(img, cut, flip, data):
    assume(img.shape[0] > 0 and img.shape[1] > 0)
    fmt = data.draw(st.sampled_from(["PNG", "WEBP"]))
    array = np.ascontiguousarray(img[:, :, 0] if img.shape[2] == 1 else img)
    buffer = io.BytesIO()
    PILImage.fromarray(array).save(buffer, fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    encoded = buffer.getvalue()
    decoded = kernels.decode(encoded)
    info = kernels.image_info(encoded)
    assert (info.height, info.width) == img.shape[:2]
    if fmt == "PNG":
        np.testing.assert_array_equal(decoded, img)
    mutated = bytearray(encoded[:len(encoded) - cut] if cut < len(encoded) else encoded)
    mutated[flip % len(mutated)] ^= 0x10
    out = data.draw(st.booleans())
    try:
        if out:
            shape = kernels.decode(bytes(mutated)).shape
            guarded = Guarded(shape, np.uint8)
            try:
                kernels.decode(bytes(mutated), out=guarded.array)
            finally:
                guarded.check()
        else:
            kernels.decode(bytes(mutated), mode=data.draw(st.sampled_from([None, "L", "RGBA"])))
    except REJECTED:
        pass


@pytest.mark.parametrize("bad", [None, 3, "text", [1, 2], object()])
def test_kernels_reject_objects_that_are_not_arrays(bad):
    for kernel in (kernels.hflip, kernels.to_float, kernels.to_chw, kernels.decode,
                   kernels.image_info):
        with pytest.raises(REJECTED):
            kernel(bad)


def test_zero_dimensional_arrays_keep_their_shape():
    # Found by test_to_float: np.ascontiguousarray made 0-d inputs 1-d.
    assert kernels.to_float(np.array(51, np.uint8)).shape == ()
    assert kernels.stack([np.array(1, np.uint8)] * 2).shape == (2,)
