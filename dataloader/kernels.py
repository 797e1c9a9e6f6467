"""Image kernels: decoding, geometry and value transforms on numpy arrays.

Every function here validates its arguments (dtype, shape, contiguity,
writability; errors name the argument and what was expected), allocates the
result or checks the caller's ``out=``, and hands the pixel work to a native
kernel that runs without the GIL.  Images are uint8 ``(H, W, C)`` arrays with
1 to 4 channels unless a function says otherwise; a 2-D ``(H, W)`` array is
read as one channel and gives a 2-D result.  Every image follows one rule
(height and width of 1 to 16384 pixels, 1 to 4 channels), checked before
any copy; anything else is a ``ValueError`` naming the shape.

Decoding reads JPEG (libjpeg-turbo), PNG (libpng) and WebP (libwebp)
natively, and GIF, BMP and TIFF through Pillow when it is installed
(``pip install dataloader[images]``); other formats are refused, so that
untrusted bytes never reach Pillow's other readers (EPS and PDF run
Ghostscript).  Size limits are checked from the
header before any pixel memory is allocated.

Examples
--------
>>> import numpy as np
>>> from dataloader import kernels
>>> image = np.zeros((4, 6, 3), np.uint8)
>>> kernels.resize(image, (2, 3)).shape
(2, 3, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias, TypeVar, overload

import numpy as np
import numpy.typing as npt

from dataloader._core import ops as _ops
from dataloader._core import resize as _resize
from dataloader._core.image import Image, ImageBatch
from dataloader._images.arguments import (
    ANCHORS,
    CONVERT_MODES,
    FILTERS,
    MAX_SIDE,
    PAD_MODES,
    as_array,
    check_bool,
    check_choice,
    check_image_shape,
    check_int,
    check_mean_std,
    check_padding,
    check_real,
    check_samples,
    check_size,
    contiguous_array,
    fill_values,
    image_array,
    output,
)
from dataloader._images.blur import box_blur, gaussian_box_blur
from dataloader._images.decode import ImageInfo, decode, image_info
from dataloader._media.audio import decode_audio
from dataloader._media.info import StreamInfo, media_info
from dataloader._media.video import Clip, Timestamps, decode_video

__all__ = [
    "Clip",
    "Image",
    "ImageBatch",
    "ImageInfo",
    "StreamInfo",
    "Timestamps",
    "affine",
    "box_blur",
    "convert",
    "crop",
    "decode",
    "decode_audio",
    "decode_video",
    "gaussian_box_blur",
    "hflip",
    "image_info",
    "media_info",
    "normalize",
    "pad",
    "pad_to",
    "resize",
    "rotate90",
    "stack",
    "to_chw",
    "to_float",
    "to_hwc",
    "vflip",
]

# An image argument: an ndarray, or anything numpy can view as one (the
# buffer protocol, ``__array_interface__``, ``__array__``), such as Image,
# ImageBatch or a CPU tensor. Choices (filters, modes, anchors) are typed as
# ``str``: their tables in ``dataloader._images.arguments`` are the one list.
ImageLike: TypeAlias = npt.ArrayLike
Fill: TypeAlias = float | Sequence[float]
_Out = TypeVar("_Out", bound=np.ndarray | ImageBatch)


# --- geometry -------------------------------------------------------------

def resize(img: ImageLike, size: int | Sequence[int], *, interpolation: str = "bilinear",
           antialias: bool = True, exact: bool = True,
           out: np.ndarray | None = None) -> np.ndarray:
    """Resize with Pillow's resampling (separable, antialiased when shrinking).

    Parameters
    ----------
    img : ndarray
        uint8 ``(H, W, C)`` or ``(H, W)``.
    size : int or (int, int)
        Output (height, width); an int sets the shorter side and keeps the
        aspect ratio, as torchvision's ``Resize``.
    interpolation : {"nearest", "bilinear", "bicubic", "lanczos"}
    antialias : bool, default True
        When False, the filter is not widened when shrinking.
    exact : bool, default True
        When False, a bilinear resize's horizontal pass rounds its weights
        to 16 bits as Pillow-SIMD does, which is faster on CPUs with AVX2
        (one multiply-add per pair of taps instead of two); results are
        then within 1 of the exact ones.  The other filters are always
        exact.
    out : ndarray, optional
        uint8 C-contiguous destination of the output shape.

    Returns
    -------
    ndarray

    Notes
    -----
    The arithmetic is Pillow's (``Image.resize`` on L and RGB images):
    weights in 22-bit fixed point, horizontal pass first over only the rows
    the vertical pass reads, rounding to uint8 between the passes; the
    vertical pass runs first when the height loses more than twice as many
    pixels as the width, as Pillow 13 chooses.  Results equal Pillow 13's
    bit for bit (earlier Pillows always run the horizontal pass first, so
    at those sizes bicubic and lanczos differ from theirs by a few levels at
    sharp edges).  Channels are resampled independently (Pillow premultiplies
    RGBA by alpha).  On x86-64 CPUs with AVX2 both passes run as
    vectorised code chosen at run time, with the same results as the
    portable code other CPUs run, in either mode.  The default is exact so
    that the kernel keeps Pillow's results; chains that start with
    ``Decode(exact=False)`` resize in the fast mode.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import resize
    >>> image = np.array([[0, 100], [200, 255]], np.uint8)
    >>> resize(image, (1, 1), interpolation="bilinear").tolist()
    [[139]]
    >>> resize(image, (2, 4), interpolation="nearest").tolist()
    [[0, 0, 100, 100], [200, 200, 255, 255]]
    >>> resize(image, (1, 1), exact=False).tolist()
    [[139]]
    """
    src, flat = image_array(img)
    check_choice("interpolation", interpolation, FILTERS)
    antialias = check_bool("antialias", antialias)
    exact = check_bool("exact", exact)
    h, w = src.shape[:2]
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        size = check_int("size", size, 1)
        short, long = (h, w) if h <= w else (w, h)
        other = size * long // short
        shape = (size, other) if h <= w else (other, size)
        check_image_shape(shape, "HWC", f"resize(size={size}) of an image of {h}x{w}: the result")
        height, width = shape
    else:
        height, width = check_size("size", size, allow_int=False)
    result, target = output(out, (height, width, src.shape[2]), np.uint8, flat)
    _resize.resize_into(src, target, FILTERS.index(interpolation), antialias, not exact)
    return result


def crop(img: ImageLike, top: int, left: int, height: int, width: int, *,
         out: np.ndarray | None = None) -> np.ndarray:
    """Copy the ``height`` x ``width`` window at (``top``, ``left``).

    Parameters
    ----------
    img : ndarray
        uint8 or float32, ``(H, W, C)`` or ``(H, W)``.
    top, left, height, width : int
        The window, which must lie inside the image (torchvision's ``crop``
        would pad instead).
    out : ndarray, optional
        C-contiguous destination of shape ``(height, width[, C])``.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import crop
    >>> crop(np.arange(12, dtype=np.uint8).reshape(3, 4), 1, 1, 2, 2).tolist()
    [[5, 6], [9, 10]]
    """
    src, flat = image_array(img, dtypes=(np.uint8, np.float32))
    h, w = src.shape[:2]
    top, left = check_int("top", top), check_int("left", left)
    height, width = check_int("height", height, 1), check_int("width", width, 1)
    if not (top + height <= h and left + width <= w):
        raise ValueError(f"crop window (top={top}, left={left}, height={height}, "
                         f"width={width}) must lie inside the image of {h}x{w}")
    result, target = output(out, (height, width, src.shape[2]), src.dtype, flat)
    _ops.crop_into(src, target, top, left)
    return result


def pad(img: ImageLike, padding: int | Sequence[int], *, fill: Fill = 0,
        padding_mode: str = "constant", out: np.ndarray | None = None) -> np.ndarray:
    """Pad the borders, with torchvision ``Pad``'s padding order and modes.

    Parameters
    ----------
    img : ndarray
        uint8 or float32, ``(H, W, C)`` or ``(H, W)``.
    padding : int or sequence
        All sides, (left/right, top/bottom) or (left, top, right, bottom).
    fill : number or sequence, default 0
        Per-channel value for ``"constant"``.
    padding_mode : {"constant", "edge", "reflect", "symmetric"}
        ``"reflect"`` mirrors without repeating the edge sample,
        ``"symmetric"`` repeats it (numpy.pad's modes of the same names).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import pad
    >>> pad(np.array([[1, 2, 3]], np.uint8), (2, 0), padding_mode="reflect").tolist()
    [[3, 2, 1, 2, 3, 2, 1]]
    """
    src, flat = image_array(img, dtypes=(np.uint8, np.float32))
    check_choice("padding_mode", padding_mode, PAD_MODES)
    left, top, right, bottom = check_padding(padding)
    h, w, c = src.shape
    shape = (h + top + bottom, w + left + right, c)
    check_image_shape(shape, "HWC", "the padded image")
    values = fill_values(fill, c, src.dtype)
    result, target = output(out, shape, src.dtype, flat)
    _ops.pad_into(src, target, top, left, PAD_MODES.index(padding_mode), values)
    return result


def pad_to(img: ImageLike, height: int, width: int, *, anchor: str = "top-left", fill: Fill = 0,
           out: np.ndarray | None = None) -> np.ndarray:
    """Pad to exactly ``height`` x ``width``, placing the image at ``anchor``.

    Parameters
    ----------
    anchor : str, default "top-left"
        One of "top-left", "top", "top-right", "left", "center", "right",
        "bottom-left", "bottom", "bottom-right"; centred placements round the
        top/left margin down.
    fill : number or sequence, default 0
        Per-channel border value.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import pad_to
    >>> pad_to(np.full((1, 1), 9, np.uint8), 2, 3, anchor="center").tolist()
    [[0, 9, 0], [0, 0, 0]]
    """
    src, flat = image_array(img, dtypes=(np.uint8, np.float32))
    check_choice("anchor", anchor, ANCHORS)
    height, width = check_int("height", height, 1), check_int("width", width, 1)
    h, w, c = src.shape
    if not (h <= height and w <= width):
        raise ValueError(f"target size {height}x{width} must be at least the image's "
                         f"{h}x{w} (and at most {MAX_SIDE} per side)")
    fy, fx = ANCHORS[anchor]
    top, left = int((height - h) * fy), int((width - w) * fx)
    values = fill_values(fill, c, src.dtype)
    result, target = output(out, (height, width, c), src.dtype, flat)
    _ops.pad_into(src, target, top, left, 0, values)
    return result


def _flip(img: ImageLike, out: np.ndarray | None, horizontal: bool) -> np.ndarray:
    src, flat = image_array(img, dtypes=(np.uint8, np.float32))
    result, target = output(out, src.shape, src.dtype, flat)
    _ops.flip_into(src, target, horizontal)
    return result


def hflip(img: ImageLike, *, out: np.ndarray | None = None) -> np.ndarray:
    """Mirror left-right.

    Parameters
    ----------
    img : ndarray
        uint8 or float32, ``(H, W, C)`` or ``(H, W)``.
    out : ndarray, optional
        C-contiguous destination of ``img``'s shape.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import hflip
    >>> hflip(np.array([[1, 2, 3]], np.uint8)).tolist()
    [[3, 2, 1]]
    """
    return _flip(img, out, True)


def vflip(img: ImageLike, *, out: np.ndarray | None = None) -> np.ndarray:
    """Mirror top-bottom.

    Parameters
    ----------
    img : ndarray
        uint8 or float32, ``(H, W, C)`` or ``(H, W)``.
    out : ndarray, optional
        C-contiguous destination of ``img``'s shape.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import vflip
    >>> vflip(np.array([[1], [2]], np.uint8)).tolist()
    [[2], [1]]
    """
    return _flip(img, out, False)


def affine(img: ImageLike, matrix: Sequence[float], size: Sequence[int] | None = None, *,
           interpolation: str = "nearest", fill: Fill = 0,
           out: np.ndarray | None = None) -> np.ndarray:
    """Warp by an inverse affine ``matrix``, as Pillow's ``Image.transform(AFFINE)``.

    Parameters
    ----------
    img : ndarray
        uint8, 1, 3 or 4 channels.
    matrix : sequence of 6 numbers
        Pillow's ``data``: output pixel (x, y) reads the input at
        ``(a x' + b y' + c, d x' + e y' + f)`` with ``x' = x + 0.5``,
        ``y' = y + 0.5`` (torchvision's ``_get_inverse_affine_matrix``
        gives such a matrix).
    size : (height, width), optional
        The output's size; the input's by default.
    interpolation : {"nearest", "bilinear"}
    fill : number or sequence
        The samples of outputs that read outside the input (0..255).
    out : ndarray, optional

    Notes
    -----
    Pillow's arithmetic: nearest picks the same pixels as Pillow; bilinear
    truncates as Pillow does and differs from it by at most 1, RGBA being
    resampled premultiplied by alpha as Pillow does. The same kernel runs
    in ``RandomRotation`` and ``RandomAffine`` (``src/dl_geometry.h``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import affine
    >>> image = np.arange(4, dtype=np.uint8).reshape(2, 2)
    >>> affine(image, (1, 0, 1, 0, 1, 0), fill=9).tolist()  # shift left by one pixel
    [[1, 9], [3, 9]]
    """
    src, flat = image_array(img)
    check_choice("interpolation", interpolation, FILTERS[:2])
    if isinstance(matrix, (str, bytes)) or not isinstance(matrix, Sequence) or len(matrix) != 6:
        raise TypeError(f"matrix must be a sequence of 6 numbers, got {matrix!r}")
    coefficients = [check_real("matrix", value) for value in matrix]
    height, width = src.shape[:2] if size is None else check_size("size", tuple(size))
    if src.shape[2] == 2:
        raise ValueError("affine takes images of 1, 3 or 4 channels, got 2")
    values = [int(v) for v in fill_values(fill, src.shape[2], np.uint8)]
    result, target = output(out, (height, width, src.shape[2]), np.uint8, flat)
    _ops.affine_into(src, target, coefficients, FILTERS.index(interpolation), values)
    return result


def rotate90(img: ImageLike, k: int = 1, *, out: np.ndarray | None = None) -> np.ndarray:
    """Rotate by ``k`` quarter turns counter-clockwise, as ``numpy.rot90``.

    Parameters
    ----------
    img : ndarray
        uint8 or float32, ``(H, W, C)`` or ``(H, W)``.
    k : int, default 1
        Any integer; taken modulo 4 (negative turns clockwise).
    out : ndarray, optional
        C-contiguous destination of the rotated shape.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import rotate90
    >>> rotate90(np.array([[1, 2], [3, 4]], np.uint8)).tolist()
    [[2, 4], [1, 3]]
    """
    src, flat = image_array(img, dtypes=(np.uint8, np.float32))
    k = check_int("k", k, -(2**63), 2**63 - 1) % 4
    h, w, c = src.shape
    shape = (w, h, c) if k % 2 else (h, w, c)
    result, target = output(out, shape, src.dtype, flat)
    if k == 0:
        _ops.crop_into(src, target, 0, 0)
    else:
        _ops.rotate90_into(src, target, k)
    return result


# --- values and layouts ---------------------------------------------------

def to_float(img: ImageLike, *, out: np.ndarray | None = None) -> np.ndarray:
    """Scale uint8 samples to float32 in [0, 1] (``x / 255``), any shape.

    The division is in float32, as torchvision's ``ToTensor``.

    Parameters
    ----------
    img : ndarray
        uint8 samples of any shape.
    out : ndarray, optional
        float32 C-contiguous destination of ``img``'s shape.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import to_float
    >>> to_float(np.array([0, 51, 255], np.uint8)).tolist()
    [0.0, 0.20000000298023224, 1.0]
    """
    src = as_array(img, "img")
    if src.dtype != np.uint8:
        raise ValueError(f"img must have dtype uint8, got {src.dtype}")
    check_samples(src, "img")
    src = contiguous_array(src, "img")
    result, target = output(out, src.shape + (1,), np.float32, flat=True) if src.ndim == 2 \
        else output(out, src.shape, np.float32)
    if src.size:
        _ops.to_float_into(src.reshape(-1), target.reshape(-1))
    return result


_CHANNEL_AXIS = {"HWC": 2, "CHW": 0, "NHWC": 3, "NCHW": 1}


def normalize(img: ImageLike, mean: Sequence[float], std: Sequence[float], *, layout: str = "HWC",
              out: np.ndarray | None = None) -> np.ndarray:
    """Compute ``(x - mean[c]) / std[c]`` in float32, as torchvision's ``Normalize``.

    Parameters
    ----------
    img : ndarray
        float32 samples, or uint8 samples which are first divided by 255
        (``ToTensor`` then ``Normalize`` in one pass).
    mean, std : sequence of float
        One value per channel; ``std`` must not contain zeros.
    layout : {"HWC", "CHW", "NHWC", "NCHW"}, default "HWC"
        Where the channel axis is; a 2-D image has one channel.
    out : ndarray, optional
        float32 C-contiguous destination of ``img``'s shape.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import normalize
    >>> normalize(np.array([[[0.5, 1.0]]], np.float32), [0.5, 0.5], [0.5, 0.25]).tolist()
    [[[0.0, 2.0]]]
    """
    src = as_array(img, "img")
    if src.dtype not in (np.uint8, np.float32):
        raise ValueError(f"img must have dtype uint8 or float32, got {src.dtype}")
    check_choice("layout", layout, _CHANNEL_AXIS)
    if src.ndim == 2 and layout == "CHW":
        raise ValueError(f"img must have 3 dimensions for layout 'CHW', got shape {src.shape}")
    check_image_shape(src.shape, layout, "img")
    src = contiguous_array(src, "img")
    channels = 1 if src.ndim == 2 else src.shape[_CHANNEL_AXIS[layout]]
    means, stds = check_mean_std(mean, std)
    if len(means) != channels:
        raise ValueError(f"mean and std must have one value per channel ({channels}), "
                         f"got {len(means)}")
    mean_values, std_values = np.asarray(means, np.float32), np.asarray(stds, np.float32)
    if np.any(std_values == 0):
        raise ValueError(f"std must not round to zero in float32, got {std!r}")
    result, target = output(out, src.shape, np.float32)
    if not src.size:
        return result
    # Interleaved channels (plane 0), or planes of H*W samples per channel.
    plane = 0 if layout.endswith("C") else src.shape[-1] * src.shape[-2]
    _ops.normalize_into(src.reshape(-1), target.reshape(-1), channels, plane, mean_values,
                        std_values)
    return result


def _transpose(img: ImageLike, out: np.ndarray | None, to_chw: bool) -> np.ndarray:
    src, _ = image_array(img, dtypes=(np.uint8, np.float32), layout="HWC" if to_chw else "CHW")
    a, b, c = src.shape
    shape = (c, a, b) if to_chw else (b, c, a)
    result, target = output(out, shape, src.dtype)
    if src.size:
        (_ops.hwc_to_chw_into if to_chw else _ops.chw_to_hwc_into)(src, target)
    return result


def to_chw(img: ImageLike, *, out: np.ndarray | None = None) -> np.ndarray:
    """Reorder an ``(H, W, C)`` image to ``(C, H, W)`` (uint8 or float32).

    Parameters
    ----------
    img : ndarray
        ``(H, W, C)``, or ``(H, W)`` as one channel.
    out : ndarray, optional
        C-contiguous destination of shape ``(C, H, W)``.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import to_chw
    >>> to_chw(np.arange(6, dtype=np.uint8).reshape(1, 2, 3)).tolist()
    [[[0, 3]], [[1, 4]], [[2, 5]]]
    """
    return _transpose(img, out, True)


def to_hwc(img: ImageLike, *, out: np.ndarray | None = None) -> np.ndarray:
    """Reorder a ``(C, H, W)`` image to ``(H, W, C)`` (uint8 or float32).

    Parameters
    ----------
    img : ndarray
        ``(C, H, W)``, or ``(H, W)`` as one channel.
    out : ndarray, optional
        C-contiguous destination of shape ``(H, W, C)``.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import to_hwc
    >>> to_hwc(np.arange(6, dtype=np.uint8).reshape(3, 1, 2)).tolist()
    [[[0, 2, 4], [1, 3, 5]]]
    """
    return _transpose(img, out, False)


def convert(img: ImageLike, mode: str, *, out: np.ndarray | None = None) -> np.ndarray:
    """Convert between gray, gray+alpha, RGB and RGBA as Pillow's ``convert``.

    Gray from color is ``(R*19595 + G*38470 + B*7471 + 0x8000) >> 16``;
    an added alpha channel is 255, a removed one is dropped.

    Parameters
    ----------
    img : ndarray
        uint8 ``(H, W, C)`` with C in 1..4 (1 = L, 2 = LA, 3 = RGB, 4 = RGBA).
    mode : {"L", "LA", "RGB", "RGBA"}

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import convert
    >>> convert(np.array([[[255, 0, 0]]], np.uint8), "L").tolist()
    [[[76]]]
    """
    src, _ = image_array(img)
    check_choice("mode", mode, CONVERT_MODES)
    result, target = output(out, src.shape[:2] + (CONVERT_MODES[mode],), np.uint8)
    _ops.convert_into(src, target)
    return result


@overload
def stack(images: Sequence[ImageLike], out: None = None) -> np.ndarray: ...
@overload
def stack(images: Sequence[ImageLike], out: ImageBatch) -> ImageBatch: ...
@overload
def stack(images: Sequence[ImageLike], out: np.ndarray) -> np.ndarray: ...
def stack(images: Sequence[ImageLike], out: np.ndarray | ImageBatch | None = None
          ) -> np.ndarray | ImageBatch:
    """Stack images of one shape and dtype into an ``(N, ...)`` batch.

    Parameters
    ----------
    images : sequence of ndarray
        uint8 or float32 arrays of one shape.
    out : ndarray or ImageBatch, optional
        C-contiguous destination of shape ``(N,) + shape``; filled and returned.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import stack
    >>> stack([np.zeros((2, 2, 3), np.uint8), np.ones((2, 2, 3), np.uint8)]).shape
    (2, 2, 2, 3)
    """
    arrays = [contiguous_array(check_samples(as_array(item, f"images[{i}]"), f"images[{i}]"),
                               f"images[{i}]")
              for i, item in enumerate(images)]
    if not arrays:
        raise ValueError("images must not be empty")
    first = arrays[0]
    if first.dtype not in (np.uint8, np.float32):
        raise ValueError(f"images must have dtype uint8 or float32, got {first.dtype}")
    for i, array in enumerate(arrays):
        if array.shape != first.shape or array.dtype != first.dtype:
            raise ValueError(f"images[{i}] is {array.dtype} of shape {array.shape}, expected "
                             f"{first.dtype} of shape {first.shape} like images[0]")
    result, target = output(out, (len(arrays),) + first.shape, first.dtype)
    rows = target.reshape(len(arrays), 1, -1, 1)
    for i, array in enumerate(arrays):
        if array.size:
            _ops.crop_into(array.reshape(1, -1, 1), rows[i], 0, 0)
    return result
