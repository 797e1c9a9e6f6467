"""Argument checks shared by the public kernels: arrays in, outputs out.

Each check raises ``ValueError`` (or ``TypeError`` for a wrong kind of
object) naming the argument and what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


# Where pad_to places an image: (fraction of the free rows above, of the free columns left).
ANCHORS = {
    "top-left": (0.0, 0.0), "top": (0.0, 0.5), "top-right": (0.0, 1.0),
    "left": (0.5, 0.0), "center": (0.5, 0.5), "right": (0.5, 1.0),
    "bottom-left": (1.0, 0.0), "bottom": (1.0, 0.5), "bottom-right": (1.0, 1.0),
}


def bytes_view(data) -> np.ndarray:
    try:
        buf = np.frombuffer(data, dtype=np.uint8)
    except (TypeError, ValueError) as err:
        raise TypeError(f"data must be bytes-like, got {type(data).__name__}") from err
    if buf.size == 0:
        raise ValueError("cannot decode image: data is empty (0 bytes)")
    return buf


def as_array(obj, name: str) -> np.ndarray:
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__dlpack__") and not hasattr(obj, "__array_interface__"):
        return np.from_dlpack(obj)
    try:
        return np.asarray(obj)
    except Exception as err:
        raise TypeError(f"{name} must be an array or support the buffer protocol, "
                        f"got {type(obj).__name__}") from err


def contiguous_array(obj, name: str) -> np.ndarray:
    """``obj`` as a C-contiguous array of its own shape (``np.ascontiguousarray``
    would turn a 0-d array into a 1-d one)."""
    array = as_array(obj, name)
    return np.ascontiguousarray(array).reshape(array.shape)


def image_array(obj, name: str = "img", dtypes=(np.uint8,)) -> tuple[np.ndarray, bool]:
    """Return a C-contiguous (H, W, C) array and whether the input was 2-D."""
    array = as_array(obj, name)
    if array.dtype not in dtypes:
        expected = " or ".join(np.dtype(d).name for d in dtypes)
        raise ValueError(f"{name} must have dtype {expected}, got {array.dtype}")
    flat = array.ndim == 2
    if flat:
        array = array[:, :, None]
    if array.ndim != 3 or not 1 <= array.shape[2] <= 4:
        raise ValueError(f"{name} must have shape (H, W) or (H, W, C) with C in 1..4, "
                         f"got {array.shape}")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"{name} must not be empty, got shape {array.shape}")
    return np.ascontiguousarray(array), flat


def output(out, shape: tuple, dtype, flat: bool = False, name: str = "out"):
    """Return (what to hand back, C-contiguous array of ``shape`` to write into)."""
    expected = shape[:2] if flat and shape[2] == 1 else shape
    if out is None:
        result = np.empty(expected, dtype)
        return result, result.reshape(shape)
    array = as_array(out, name)
    if array.dtype != dtype:
        raise ValueError(f"{name} must have dtype {np.dtype(dtype).name}, got {array.dtype}")
    if array.shape != tuple(expected) and array.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(expected)}, got {array.shape}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if not array.flags.writeable:
        raise ValueError(f"{name} must be writable")
    return out, array.reshape(shape)


def size_pair(value, name: str) -> tuple[int, int]:
    if (not isinstance(value, Sequence) or len(value) != 2
            or not all(isinstance(v, (int, np.integer)) and v > 0 for v in value)):
        raise ValueError(f"{name} must be a pair of positive integers (height, width), "
                         f"got {value!r}")
    return int(value[0]), int(value[1])


def fill_values(fill, channels: int, dtype) -> list[float]:
    values = [fill] * channels if np.isscalar(fill) else list(fill)
    if len(values) != channels:
        raise ValueError(f"fill must be a number or one value per channel ({channels}), "
                         f"got {fill!r}")
    if dtype == np.uint8 and not all(0 <= v <= 255 and float(v).is_integer() for v in values):
        raise ValueError(f"fill must be integers in 0..255 for uint8 images, got {fill!r}")
    return [float(v) for v in values]
