"""Argument checks of the image transforms and kernels, each declared once.

Every transform constructor and every kernel validates its arguments here,
so that one mistake gets one message whichever entry point it reached. The
exception types are the ones torch and torchvision raise: ``TypeError`` for
a wrong kind of object (a float where an int is needed, a string for a
number), ``ValueError`` for a right kind with a wrong value (negative, zero,
NaN or infinite, past the decode limits, a probability outside [0, 1], a
range given backwards, a fill the image's dtype cannot hold). The image rule
itself (height and width of 1 to ``MAX_SIDE`` pixels, 1 to 4 channels) and
the fill rule are C predicates of ``_core/src/dl_ops.h``, shared with the
native chains, reached through :func:`check_image_shape` and
:func:`check_fill_samples`.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._core.codecs import MODES as CONVERT_MODES
from dataloader._core.ops import PAD_MODES
from dataloader._core.resize import FILTERS
from dataloader._core.rules import (
    MAX_BYTES,
    MAX_SIDE,
    as_array,
    check_fill_samples,
    check_image_shape,
    check_nbytes,
)

__all__ = [
    "ANCHORS", "CHANNELS", "CONVERT_MODES", "FILTERS", "MAX_BYTES", "MAX_SIDE", "PAD_MODES",
    "as_array", "bytes_view", "check_bool", "check_choice", "check_fill", "check_fill_samples",
    "check_image_shape", "check_int", "check_mean_std", "check_padding", "check_probability",
    "check_range", "check_real", "check_samples", "check_seed", "check_size",
    "contiguous_array", "fill_values", "image_array", "output",
]

# Where pad_to places an image: (fraction of the free rows above, of the free columns left).
ANCHORS = {
    "top-left": (0.0, 0.0), "top": (0.0, 0.5), "top-right": (0.0, 1.0),
    "left": (0.5, 0.0), "center": (0.5, 0.5), "right": (0.5, 1.0),
    "bottom-left": (1.0, 0.0), "bottom": (1.0, 0.5), "bottom-right": (1.0, 1.0),
}
# CONVERT_MODES: the channels of each pixel mode (the C table of
# _core/src/dl_tables.h); a decode or a conversion produces any of them, a
# Decode transform's ``mode`` all but gray with alpha (as torchvision's
# ImageReadMode).
CHANNELS = {mode: channels for mode, channels in CONVERT_MODES.items() if mode != "LA"}
_FLOAT32_MAX = float(np.finfo(np.float32).max)


# --- scalars ---------------------------------------------------------------

def check_int(name: str, value: Any, minimum: int = 0, maximum: int = MAX_SIDE) -> int:
    """``value`` as an int in [minimum, maximum]; numpy integers count, bools do not."""
    if type(value) is int and minimum <= value <= maximum:
        return value    # the common case, without the slower abstract-class checks
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = operator.index(value)
    if not minimum <= value <= maximum:
        raise ValueError(f"{name} must be an int in {minimum}..{maximum}, got {value}")
    return value


def check_real(name: str, value: Any) -> float:
    """``value`` as a finite float; NaN and infinity are ``ValueError``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def check_bool(name: str, value: Any) -> bool:
    if value is True or value is False:
        return value    # the common case, before the isinstance checks
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def check_choice(name: str, value: Any, choices) -> Any:
    """``value`` when it is one of ``choices`` (hashable or not), else ``ValueError``."""
    if type(value) is str and value in choices:
        return value    # the common case: a name, found without the generator below
    # Compared only with choices of its own type: an array never meets ==.
    if not any(value is choice or (isinstance(value, type(choice)) and value == choice)
               for choice in choices):
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_interpolation(value: Any, choices: Sequence[str]) -> str:
    """A filter name of ``choices``, or torchvision's ``InterpolationMode`` (whose
    ``value`` is the name)."""
    return check_choice("interpolation", getattr(value, "value", value), choices)


def check_probability(name: str, value: Any) -> float:
    """torchvision's rule for ``p``: a number in [0, 1]."""
    value = check_real(name, value)
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value}")
    return value


def check_range(name: str, value: Any, maximum: float = math.inf) -> tuple[float, float]:
    """A ``(low, high)`` pair with ``0 < low <= high <= maximum``, both finite."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise TypeError(f"{name} must be a (low, high) pair of numbers, got {value!r}")
    low, high = check_real(f"{name}[0]", value[0]), check_real(f"{name}[1]", value[1])
    if not 0 < low <= high <= maximum:
        bound = "" if maximum == math.inf else f" <= {maximum:g}"
        raise ValueError(f"{name} must be (low, high) with 0 < low <= high{bound}, "
                         f"got {(low, high)!r}")
    return low, high


def check_seed(value: Any) -> int:
    """A seed of the native generators: an int in [0, 2**64)."""
    return check_int("seed", value, 0, 2**64 - 1)


# --- sizes ---------------------------------------------------------------------

def check_size(name: str, value: Any, allow_int: bool = True) -> tuple[int, int]:
    """``(height, width)`` from an int (square) or a pair, each 1..MAX_SIDE."""
    if allow_int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    if type(value) is tuple and len(value) == 2:
        height, width = value
        if type(height) is int and type(width) is int and 1 <= height <= MAX_SIDE and \
                1 <= width <= MAX_SIDE:
            return value    # the common case, without formatting the names below
        return (check_int(f"{name}[0]", height, 1), check_int(f"{name}[1]", width, 1))
    kinds = "an int or a (height, width) pair" if allow_int else "a (height, width) pair"
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be {kinds} of ints, got {value!r}")
    if len(value) != 2:  # torchvision: a ValueError for a sequence of another length
        raise ValueError(f"{name} must be {kinds} of ints, got {len(value)} values: {value!r}")
    return (check_int(f"{name}[0]", value[0], 1), check_int(f"{name}[1]", value[1], 1))


def check_padding(value: Any) -> tuple[int, int, int, int]:
    """torchvision's padding forms: all sides, (left/right, top/bottom) or (l, t, r, b).

    Returns ``(left, top, right, bottom)``, each 0..MAX_SIDE.
    """
    values: list[Any]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        values = [value]
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        values = list(value)
    else:
        raise TypeError(f"padding must be an int or a sequence of ints, got {value!r}")
    if len(values) not in (1, 2, 4):
        raise ValueError(f"padding must be an int or 1, 2 or 4 ints, got {value!r}")
    sides = [check_int("padding", v) for v in values]
    if len(sides) == 1:
        sides *= 4
    elif len(sides) == 2:
        sides *= 2
    left, top, right, bottom = sides
    return left, top, right, bottom


# --- values ---------------------------------------------------------------------

def _numbers(name: str, value: Any) -> tuple[float, ...]:
    """1 to 4 finite numbers within float32's range, from a number or a sequence."""
    values: tuple[Any, ...]
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        values = (value,)
    elif isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (str, bytes)):
        values = tuple(np.asarray(value, dtype=object).reshape(-1)) \
            if isinstance(value, np.ndarray) else tuple(value)
    else:
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {value!r}")
    if not 1 <= len(values) <= 4:
        raise ValueError(f"{name} must have 1 to 4 values (one per channel), got {value!r}")
    checked = tuple(check_real(name, v) for v in values)
    if any(abs(v) > _FLOAT32_MAX for v in checked):
        raise ValueError(f"{name} must be within float32's range, got {value!r}")
    return checked


def check_fill(name: str, value: Any) -> tuple[float, ...]:
    """A fill as given to a transform: 1 to 4 finite numbers, padded to 4 when one.

    Whether the image's dtype can hold them is known only per image:
    :func:`check_fill_samples` (and the native chains, with the same C rule).
    """
    values = _numbers(name, value)
    return values * 4 if len(values) == 1 else values + (0.0,) * (4 - len(values))


def fill_values(fill: Any, channels: int, dtype) -> list[float]:
    """A kernel's fill: one value per channel, each a sample of ``dtype`` exactly."""
    values = _numbers("fill", fill)
    if len(values) == 1:
        values *= channels
    if len(values) != channels:
        raise ValueError(f"fill must be a number or one value per channel ({channels}), "
                         f"got {fill!r}")
    check_fill_samples(values, dtype)
    return list(values)


def check_mean_std(mean: Any, std: Any) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """torchvision's Normalize arguments: equal lengths, finite, no zero in ``std``."""
    means, stds = _numbers("mean", mean), _numbers("std", std)
    if len(means) != len(stds):
        raise ValueError(f"mean and std must have the same length, got {len(means)} and "
                         f"{len(stds)}")
    if any(v == 0 for v in stds):
        raise ValueError(f"std must not contain zeros, got {std!r}")
    return means, stds


# --- arrays ---------------------------------------------------------------------

def bytes_view(data) -> np.ndarray:
    """Encoded bytes as a flat uint8 array; empty data is a ``ValueError``."""
    if isinstance(data, np.ndarray) and (data.dtype != np.uint8 or data.ndim != 1):
        raise TypeError(f"data must be bytes-like (a 1-D uint8 array), got a {data.dtype} "
                        f"array of shape {data.shape}")
    try:
        buf = np.frombuffer(data, dtype=np.uint8)
    except (TypeError, ValueError, BufferError) as err:
        raise TypeError(f"data must be bytes-like, got {type(data).__name__}") from err
    if buf.size == 0:
        raise ValueError("cannot decode image: data is empty (0 bytes)")
    return buf


def check_samples(array: np.ndarray, name: str) -> np.ndarray:
    """``array`` when its bytes are within ``MAX_BYTES`` (an image's bound), which
    bounds what the kernels taking any shape (``to_float``, ``stack``) allocate."""
    check_nbytes(array.shape, array.dtype, array.nbytes, name)
    return array


def contiguous_array(obj, name: str) -> np.ndarray:
    """``obj`` as a C-contiguous array of its own shape (``np.ascontiguousarray``
    would turn a 0-d array into a 1-d one)."""
    array = as_array(obj, name)
    return np.ascontiguousarray(array).reshape(array.shape)


def image_array(obj, name: str = "img", dtypes=(np.uint8,), layout: str = "HWC"
                ) -> tuple[np.ndarray, bool]:
    """A C-contiguous image of ``layout`` (3-D) and whether the input was 2-D.

    The dtype and the image rule are checked before any copy, so that a
    view of an enormous shape is refused without allocating for it.
    """
    array = as_array(obj, name)
    if array.dtype not in dtypes:
        expected = " or ".join(np.dtype(d).name for d in dtypes)
        raise ValueError(f"{name} must have dtype {expected}, got {array.dtype}")
    check_image_shape(array.shape, layout, name)
    flat = array.ndim == 2
    if flat:
        array = array[:, :, None] if layout == "HWC" else array[None]
    return np.ascontiguousarray(array), flat


def output(out, shape: tuple, dtype, flat: bool = False, name: str = "out", rows: bool = False):
    """Return (what to hand back, array of ``shape`` to write into).

    Every kernel's ``out=`` is checked here: the dtype, the shape (with
    ``flat``, a 2-D ``out`` of the first two dimensions is accepted for one
    channel, and allocated so when ``out`` is None), writability, and
    C-contiguity, or with ``rows`` only packed pixels within each row (rows
    may be further apart: a decode into a slot of a larger canvas).
    """
    expected = shape[:2] if flat and shape[2] == 1 else shape
    if out is None:
        result = np.empty(expected, dtype)
        return result, result if expected == shape else result.reshape(shape)
    array = as_array(out, name)
    if array.dtype != dtype:
        raise ValueError(f"{name} must have dtype {np.dtype(dtype).name}, got {array.dtype}")
    if array.shape != tuple(expected) and array.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(expected)}, got {array.shape}")
    if array.shape != tuple(shape):
        array = array[:, :, None]
    if rows:
        packed = (array.strides[2] == array.itemsize and array.strides[0] >= 0
                  and array.strides[1] == shape[2] * array.itemsize)
    else:
        packed = array.flags.c_contiguous
    if not rows and not packed:
        raise ValueError(f"{name} must be C-contiguous")
    if not array.flags.writeable:
        raise ValueError(f"{name} must be writable")
    if not packed:
        raise ValueError(f"{name} must have the pixels of each row packed (strides (any, C, 1))")
    return out, array
