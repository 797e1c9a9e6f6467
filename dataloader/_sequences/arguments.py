"""The checks of the sequence stage's arguments, each naming the argument and its value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._loading.arguments import is_int

__all__ = ["check_choice", "check_lengths", "check_optional_positive", "check_positive"]


def check_positive(name: str, value: Any) -> int:
    """``value`` as an int, once it is a positive integer (``TypeError``/``ValueError``)."""
    if not is_int(value) and not isinstance(value, np.integer):
        raise TypeError(f"{name} should be a positive integer, but got {name}={value!r}")
    if value < 1:
        raise ValueError(f"{name} should be a positive integer, but got {name}={value!r}")
    return int(value)


def check_optional_positive(name: str, value: Any) -> int | None:
    """``None``, or ``value`` checked by :func:`check_positive`."""
    return None if value is None else check_positive(name, value)


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value``, once it is one of ``choices`` (``ValueError`` naming them)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} should be one of {', '.join(map(repr, choices))}, "
                         f"but got {name}={value!r}")
    return value


def check_lengths(lengths: Any) -> np.ndarray:
    """``lengths`` as a read-only 1-D int64 array of non-negative values."""
    array = np.asarray(lengths)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise TypeError(f"lengths should be a 1-D sequence of integers, got an array of "
                        f"shape {array.shape} and dtype {array.dtype}")
    array = array.astype(np.int64)
    if array.size and array.min() < 0:
        position = int(np.argmin(array))
        raise ValueError(f"lengths should be non-negative, but lengths[{position}]="
                         f"{array[position]}")
    array.flags.writeable = False
    return array
