"""Argument checks of the transform constructors: each names the argument it rejects."""

from __future__ import annotations

from typing import Any

from dataloader._core.resize import FILTERS

PAD_MODES = ("constant", "edge", "reflect", "symmetric")
CHANNELS = {"L": 1, "RGB": 3, "RGBA": 4}


def check_int(name: str, value: Any, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def check_size(name: str, value: Any) -> tuple[int, int]:
    """(height, width) from an int (square) or a pair."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be an int or a (height, width) pair, got {value!r}")
    return (check_int(f"{name}[0]", value[0], 1), check_int(f"{name}[1]", value[1], 1))


def check_fill(name: str, value: Any) -> tuple[float, ...]:
    values = (value,) if isinstance(value, (int, float)) else tuple(value)
    if not 1 <= len(values) <= 4 or not all(isinstance(v, (int, float)) for v in values):
        raise TypeError(f"{name} must be a number or 1 to 4 numbers, got {value!r}")
    return tuple(float(v) for v in values) * (4 if len(values) == 1 else 1)


def check_padding(value: Any) -> tuple[int, int, int, int]:
    """torchvision's padding forms: all sides, (left/right, top/bottom), or (l, t, r, b)."""
    values = (value,) if isinstance(value, int) else tuple(value)
    if len(values) not in (1, 2, 4):
        raise ValueError(f"padding must be an int or 1, 2 or 4 ints, got {value!r}")
    values = tuple(check_int("padding", v) for v in values)
    if len(values) == 1:
        return values * 4
    if len(values) == 2:
        return (values[0], values[1], values[0], values[1])
    return values


def filter_index(interpolation: Any) -> int:
    if interpolation not in FILTERS:
        raise ValueError(f"interpolation must be one of {list(FILTERS)}, got {interpolation!r}")
    return FILTERS.index(interpolation)
