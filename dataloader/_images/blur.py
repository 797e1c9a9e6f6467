"""Pillow's box blurs as kernels: ``box_blur`` and ``gaussian_box_blur``.

Pillow's ``ImageFilter.GaussianBlur`` does not convolve with a Gaussian: it
runs box blurs of a radius derived from the standard deviation, whose cost
does not grow with the radius. These kernels give its bytes (and
``ImageFilter.BoxBlur``'s) for users who compare with Pillow or want that
speed; ``transforms.GaussianBlur`` keeps torchvision's exact Gaussian. The
arithmetic is in ``_core/src/dl_blur.c``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dataloader._core import ops as _ops
from dataloader._images.arguments import check_int, check_real, image_array, output

__all__ = ["box_blur", "gaussian_box_blur"]


def _radii(radius: float | Sequence[float]) -> tuple[float, float]:
    """(horizontal, vertical) radii from one number or a pair, each 0 .. MAX_BOX_RADIUS."""
    if isinstance(radius, Sequence) and not isinstance(radius, (str, bytes)):
        if len(radius) != 2:
            raise ValueError(f"radius must be a number or a pair (x, y), got {radius!r}")
        pair = (check_real("radius", radius[0]), check_real("radius", radius[1]))
    else:
        value = check_real("radius", radius)
        pair = (value, value)
    if not all(0 <= value <= _ops.MAX_BOX_RADIUS for value in pair):
        raise ValueError(f"radius must be in 0 .. {_ops.MAX_BOX_RADIUS}, got {radius!r}")
    return pair


def _blur(img: npt.ArrayLike, radius: float | Sequence[float], passes: int, gaussian: bool,
          out: np.ndarray | None) -> np.ndarray:
    src, flat = image_array(img)
    xradius, yradius = _radii(radius)
    passes = check_int("passes", passes, 1, 100)
    result, target = output(out, src.shape, np.uint8, flat)
    if np.shares_memory(src, target):
        raise ValueError("out must not overlap img")
    _ops.box_blur_into(src, target, xradius, yradius, passes, gaussian)
    return result


def box_blur(img: npt.ArrayLike, radius: float | Sequence[float], *, passes: int = 1,
             out: np.ndarray | None = None) -> np.ndarray:
    """Blur with ``passes`` box blurs, as Pillow's ``ImageFilter.BoxBlur``.

    Each output sample is the mean of the ``2 r + 1`` samples around it,
    ``r`` the whole part of ``radius``, plus the next sample on each side
    weighted by its fractional part; samples past an edge repeat the edge.
    Rows are blurred first, then columns, rounding to uint8 after each box,
    with Pillow's 24-bit fixed-point weights: the results are Pillow's bytes
    for every channel count (its ``L``, ``LA``, ``RGB`` and ``RGBA`` modes;
    alpha is blurred as the other channels, as Pillow does).

    Parameters
    ----------
    img : ndarray
        uint8 ``(H, W, C)`` or ``(H, W)``.
    radius : float or (float, float)
        The box's radius, or ``(horizontal, vertical)`` radii, from 0 (no
        blur in that direction) to 1000000.
    passes : int, default 1
        Boxes in each direction (1 to 100); three approximate a Gaussian.
    out : ndarray, optional
        uint8 C-contiguous destination of ``img``'s shape, not overlapping it.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import box_blur
    >>> box_blur(np.array([[0, 0, 90, 0, 0]], np.uint8), (1, 0)).tolist()
    [[0, 30, 30, 30, 0]]
    >>> box_blur(np.array([[0, 0, 90, 0, 0]], np.uint8), (0.5, 0)).tolist()
    [[0, 23, 45, 23, 0]]
    """
    return _blur(img, radius, passes, False, out)


def gaussian_box_blur(img: npt.ArrayLike, radius: float | Sequence[float], *, passes: int = 3,
                      out: np.ndarray | None = None) -> np.ndarray:
    """Approximate a Gaussian blur with box blurs, as Pillow's ``ImageFilter.GaussianBlur``.

    ``passes`` box blurs (:func:`box_blur`) in each direction, of the
    fractional radius whose boxes have the variance of a Gaussian of
    standard deviation ``radius`` (Pillow's formula, in its float
    arithmetic): the results are Pillow's bytes. The cost does not grow
    with the radius. ``transforms.GaussianBlur`` computes torchvision's
    exact Gaussian instead; the two differ by a few levels.

    Parameters
    ----------
    img : ndarray
        uint8 ``(H, W, C)`` or ``(H, W)``.
    radius : float or (float, float)
        The standard deviation, or ``(horizontal, vertical)`` ones, from 0
        (no blur in that direction) to 1000000.
    passes : int, default 3
        Pillow's ``ImagingGaussianBlur`` passes (1 to 100).
    out : ndarray, optional
        uint8 C-contiguous destination of ``img``'s shape, not overlapping it.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import gaussian_box_blur
    >>> image = np.zeros((1, 7), np.uint8)
    >>> image[0, 3] = 255
    >>> gaussian_box_blur(image, 1.0).tolist()
    [[1, 14, 60, 103, 60, 14, 1]]
    """
    return _blur(img, radius, passes, True, out)
