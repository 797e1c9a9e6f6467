"""Colour and filter transforms: torchvision's photometric ops, native.

Each class has torchvision's name, arguments and argument checks, and runs
the kernels of ``_core/src/dl_colour.c`` on the uint8 image (before any
``ToFloat``), with the same values as torchvision's Pillow backend (see
``docs/transforms.md``). Random ones draw from the item's generator, as
the other native transforms do. ``dataloader.transforms`` re-exports them.

Examples
--------
>>> import numpy as np
>>> from dataloader.transforms import ColorJitter, Compose, GaussianBlur
>>> chain = Compose([ColorJitter(0.4, 0.4, 0.4, 0.1), GaussianBlur(3)])
>>> chain(np.full((8, 8, 3), 100, np.uint8), seed=0).shape
(8, 8, 3)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any, ClassVar

from dataloader._core.pipeline import step
from dataloader._images.arguments import MAX_SIDE, check_int, check_probability, check_real
from dataloader._images.chains import Transform
from dataloader._images.chains import frozen as _frozen
from dataloader._images.chains import set_checked as _set

__all__ = [
    "ColorJitter", "GaussianBlur", "Grayscale", "RandomAdjustSharpness", "RandomAutocontrast",
    "RandomEqualize", "RandomGrayscale", "RandomInvert", "RandomPosterize", "RandomSolarize",
]

# ColorJitter's adjustments, in the order of their bits in the native op's
# `active` and of their draws: (name, centre, bound, clipped at 0).
_JITTERS = (
    ("brightness", 1.0, (0.0, math.inf), True),
    ("contrast", 1.0, (0.0, math.inf), True),
    ("saturation", 1.0, (0.0, math.inf), True),
    ("hue", 0.0, (-0.5, 0.5), False),
)


def _jitter_range(name: str, value: Any, centre: float, bound: tuple[float, float],
                  clip: bool) -> tuple[float, float] | None:
    """torchvision's ``ColorJitter._check_input``: the factor range, ``None`` for no change."""
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        value = check_real(name, value)
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be non negative.")
        low, high = centre - value, centre + value
        if clip:
            low = max(low, 0.0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        low, high = check_real(f"{name}[0]", value[0]), check_real(f"{name}[1]", value[1])
    else:
        raise TypeError(f"{name} should be a single number or a list/tuple with length 2.")
    if not bound[0] <= low <= high <= bound[1]:
        raise ValueError(f"{name} values should be between {bound}, but got {[low, high]}.")
    return None if low == high == centre else (low, high)


def _as_given(value: Any) -> Any:
    """A number or a pair as stored and shown: a float, or a tuple of floats."""
    if isinstance(value, (tuple, list)):
        return tuple(float(v) for v in value)
    return float(value)


@_frozen
class ColorJitter(Transform):
    """Randomly change brightness, contrast, saturation and hue, as torchvision's.

    Each argument is a number ``v`` (factors drawn from ``[max(0, 1 - v), 1 +
    v]``, hue from ``[-v, v]``) or a ``(min, max)`` pair; hue stays within
    [-0.5, 0.5]. Per item, the four adjustments run in a random order, each
    with its own factor, as Pillow's ``ImageEnhance.Brightness``,
    ``Contrast`` and ``Color`` and torchvision's ``adjust_hue``. Alpha is
    kept. ``ColorJitter()`` (all zero) is no op at all: the chain does not
    contain it.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ColorJitter
    >>> image = np.full((2, 2, 3), 100, np.uint8)
    >>> ColorJitter(brightness=(0.5, 0.5))(image)[0, 0].tolist()
    [50, 50, 50]
    >>> ColorJitter()(image) is not image and (ColorJitter()(image) == image).all()
    np.True_
    """

    brightness: Any = 0
    contrast: Any = 0
    saturation: Any = 0
    hue: Any = 0

    def __post_init__(self) -> None:
        for name, centre, bound, clip in _JITTERS:
            value = getattr(self, name)
            _jitter_range(name, value, centre, bound, clip)
            _set(self, name, _as_given(value))

    def ranges(self) -> list[tuple[float, float] | None]:
        """The factor range of brightness, contrast, saturation and hue (``None``: unchanged).

        Examples
        --------
        >>> from dataloader.transforms import ColorJitter
        >>> ColorJitter(brightness=0.4, hue=0.1).ranges()
        [(0.6, 1.4), None, None, (-0.1, 0.1)]
        """
        return [_jitter_range(name, getattr(self, name), centre, bound, clip)
                for name, centre, bound, clip in _JITTERS]

    def _steps(self):
        ranges = self.ranges()
        active = sum(1 << bit for bit, span in enumerate(ranges) if span is not None)
        if not active:
            return []   # the no-op leaves the chain (and its fusions) as they were
        spans = {name: span or (0.0, 0.0)
                 for (name, *_), span in zip(_JITTERS, ranges, strict=True)}
        return [step("color_jitter", active=active, **spans)]


@_frozen
class Grayscale(Transform):
    """ITU-R 601-2 luma (as Pillow's ``convert("L")``) in 1 or 3 channels, as torchvision's.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import Grayscale
    >>> Grayscale()(np.array([[[255, 0, 0]]], np.uint8)).ravel().tolist()
    [76]
    >>> Grayscale(num_output_channels=3)(np.array([[[255, 0, 0]]], np.uint8)).ravel().tolist()
    [76, 76, 76]
    """

    num_output_channels: int = 1

    def __post_init__(self) -> None:
        channels = check_int("num_output_channels", self.num_output_channels, 0, 2**31)
        if channels not in (1, 3):
            raise ValueError(f"num_output_channels should be either 1 or 3, got {channels}")
        _set(self, "num_output_channels", channels)

    def _steps(self):
        return [step("grayscale", channels=self.num_output_channels, p=1.0)]


@_frozen
class RandomGrayscale(Transform):
    """Grayscale with probability ``p``, keeping the channel count, as torchvision's.

    An RGB image stays 3 channels (gray in each); alpha is kept.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomGrayscale
    >>> RandomGrayscale(p=1.0)(np.array([[[255, 0, 0]]], np.uint8)).ravel().tolist()
    [76, 76, 76]
    """

    p: float = 0.1

    def __post_init__(self) -> None:
        _set(self, "p", check_probability("p", self.p))

    def _steps(self):
        return [step("grayscale", channels=0, p=self.p)]


def _kernel_size(value: Any) -> tuple[int, int]:
    """torchvision's GaussianBlur kernel_size: an int or 1-2 ints, odd and positive."""
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        sizes = (value, value)
    elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) in (1, 2):
        sizes = (value[0], value[-1])
    else:
        raise ValueError("Kernel size should be a tuple/list of two integers")
    checked = tuple(check_int("kernel_size", size, -(2**31), 2**31) for size in sizes)
    for size in checked:
        if size <= 0 or size % 2 == 0:
            raise ValueError("Kernel size value should be an odd and positive number.")
        if size > 2 * MAX_SIDE + 1:
            raise ValueError(f"kernel_size must be at most {2 * MAX_SIDE + 1}, got {size}")
    return checked[0], checked[1]


def _sigma(value: Any) -> tuple[float, float]:
    """torchvision's GaussianBlur sigma: a positive number, or (min, max) with 0 < min <= max."""
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        sigma = check_real("sigma", value)
        if sigma <= 0:
            raise ValueError("If sigma is a single number, it must be positive.")
        return sigma, sigma
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        low, high = check_real("sigma[0]", value[0]), check_real("sigma[1]", value[1])
        if not 0.0 < low <= high:
            raise ValueError("sigma values should be positive and of the form (min, max).")
        return low, high
    raise ValueError("sigma should be a single number or a list/tuple with length 2.")


@_frozen
class GaussianBlur(Transform):
    """Blur with a Gaussian kernel of a random ``sigma``, as torchvision's.

    ``kernel_size`` is ``(width, height)`` (or one int), odd; ``sigma`` a
    number or the ``(min, max)`` it is drawn from per item. The values are
    torchvision's on a PIL image, which runs its own float32 kernel with
    reflected borders (not Pillow's box-approximated ``GaussianBlur``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import GaussianBlur
    >>> image = np.zeros((1, 5, 1), np.uint8)
    >>> image[0, 2] = 255
    >>> GaussianBlur((3, 1), sigma=1.0)(image).ravel().tolist()
    [0, 70, 115, 70, 0]
    """

    kernel_size: Any
    sigma: Any = (0.1, 2.0)

    def __post_init__(self) -> None:
        _set(self, "kernel_size", _kernel_size(self.kernel_size))
        _set(self, "sigma", _sigma(self.sigma))

    def _steps(self):
        width, height = self.kernel_size
        return [step("gaussian_blur", kernel_width=width, kernel_height=height, sigma=self.sigma)]


@_frozen
class RandomPosterize(Transform):
    """Keep the ``bits`` high bits of each sample with probability ``p`` (``ImageOps.posterize``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomPosterize
    >>> RandomPosterize(bits=2, p=1.0)(np.array([[100, 200]], np.uint8)).ravel().tolist()
    [64, 192]
    """

    bits: int
    p: float = 0.5

    def __post_init__(self) -> None:
        _set(self, "bits", check_int("bits", self.bits, 1, 8))  # Pillow's range
        _set(self, "p", check_probability("p", self.p))

    def _steps(self):
        return [step("posterize", bits=self.bits, p=self.p)]


@_frozen
class RandomSolarize(Transform):
    """Invert the samples at or above ``threshold`` with probability ``p`` (``ImageOps.solarize``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomSolarize
    >>> RandomSolarize(threshold=128, p=1.0)(np.array([[100, 200]], np.uint8)).ravel().tolist()
    [100, 55]
    """

    threshold: float
    p: float = 0.5

    def __post_init__(self) -> None:
        _set(self, "threshold", check_real("threshold", self.threshold))
        _set(self, "p", check_probability("p", self.p))

    def _steps(self):
        return [step("solarize", threshold=self.threshold, p=self.p)]


@_frozen
class RandomAdjustSharpness(Transform):
    """``ImageEnhance.Sharpness(image).enhance(sharpness_factor)`` with probability ``p``.

    0 blurs (Pillow's ``SMOOTH`` filter), 1 keeps the image, 2 sharpens.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomAdjustSharpness
    >>> image = np.zeros((3, 3, 1), np.uint8)
    >>> image[1, 1] = 130
    >>> RandomAdjustSharpness(0.0, p=1.0)(image)[1, 1].tolist()
    [50]
    """

    sharpness_factor: float
    p: float = 0.5

    def __post_init__(self) -> None:
        factor = check_real("sharpness_factor", self.sharpness_factor)
        if factor < 0:
            raise ValueError("sharpness_factor is not non-negative.")
        _set(self, "sharpness_factor", factor)
        _set(self, "p", check_probability("p", self.p))

    def _steps(self):
        return [step("sharpness", factor=self.sharpness_factor, p=self.p)]


@_frozen
class _WholeImageOp(Transform):
    """A per-image op with no argument but ``p``: the native step ``_op``, applied
    with probability ``p``."""

    _op: ClassVar[str]
    p: float = 0.5

    def __post_init__(self) -> None:
        _set(self, "p", check_probability("p", self.p))

    def _steps(self):
        return [step(self._op, p=self.p)]


@_frozen
class RandomAutocontrast(_WholeImageOp):
    """Stretch each channel to 0..255 with probability ``p`` (``ImageOps.autocontrast``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomAutocontrast
    >>> RandomAutocontrast(p=1.0)(np.array([[50, 100, 150]], np.uint8)).ravel().tolist()
    [0, 127, 255]
    """

    _op = "autocontrast"


@_frozen
class RandomEqualize(_WholeImageOp):
    """Equalise each channel's histogram with probability ``p`` (``ImageOps.equalize``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomEqualize
    >>> image = np.repeat(np.array([[0, 60, 120, 250]], np.uint8), 100, axis=1)
    >>> np.unique(RandomEqualize(p=1.0)(image)).tolist()
    [0, 100, 200, 255]
    """

    _op = "equalize"


@_frozen
class RandomInvert(_WholeImageOp):
    """Invert the samples with probability ``p`` (``ImageOps.invert``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomInvert
    >>> RandomInvert(p=1.0)(np.array([[50, 100, 150]], np.uint8)).ravel().tolist()
    [205, 155, 105]
    """

    _op = "invert"
