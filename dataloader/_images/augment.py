"""Random geometry and erasing: torchvision's augmentations, as native ops.

``RandomRotation`` and ``RandomAffine`` draw their parameters from the
item's generator and warp with Pillow's arithmetic (``_core/src/dl_geometry.c``,
the kernel of :func:`dataloader.kernels.affine`); ``RandomVFlip`` is the
chain's random flip, vertical; ``RandomErasing`` erases a window of the
float32 image, in place, after the chain's float tail has written it
(``docs/transforms.md``, "Float output"). Re-exported by
``dataloader.transforms``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from dataloader._core.pipeline import step
from dataloader._images.arguments import (
    FILTERS,
    check_bool,
    check_fill,
    check_interpolation,
    check_probability,
    check_real,
)
from dataloader._images.chains import Transform, frozen, set_checked

__all__ = ["RandomAffine", "RandomErasing", "RandomRotation", "RandomVFlip"]

# The warps' filters: Pillow's NEAREST and BILINEAR.
WARP_FILTERS = FILTERS[:2]


def _sequence(name: str, value: Any, sizes: tuple[int, ...]) -> tuple[float, ...]:
    """torchvision's _check_sequence_input: a sequence of one of ``sizes`` lengths, of numbers."""
    lengths = " or ".join(map(str, sizes))
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} should be a sequence of length {lengths}, got {value!r}")
    if len(value) not in sizes:
        raise ValueError(f"{name} should be a sequence of length {lengths}, got {value!r}")
    return tuple(check_real(f"{name}[{i}]", v) for i, v in enumerate(value))


def _angles(name: str, value: Any, sizes: tuple[int, ...] = (2,)) -> tuple[float, ...]:
    """torchvision's _setup_angle: a number d for (-d, d), or (low, high) pairs, low <= high."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = check_real(name, value)
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be positive, got {value}")
        return (-value, value)
    angles = _sequence(name, value, sizes)
    for low, high in zip(angles[::2], angles[1::2], strict=True):
        if low > high:
            raise ValueError(f"{name} must be (min, max) pairs, got {value!r}")
    return angles


def _fill(value: Any) -> tuple[float, ...]:
    """torchvision's fill: None is 0; a number or a sequence (one value per channel)."""
    if value is None:
        value = 0
    if isinstance(value, (bool, str, bytes)) or not isinstance(value, (numbers.Real, Sequence)):
        raise TypeError(f"Fill should be either a sequence or a number, got {value!r}")
    return check_fill("fill", value)


def _center(value: Any) -> tuple[float, float] | None:
    return None if value is None else _sequence("center", value, (2,))  # type: ignore[return-value]


@frozen
class RandomRotation(Transform):
    """Rotate by an angle drawn from ``degrees``, as torchvision's ``RandomRotation``.

    Parameters
    ----------
    degrees : number or (min, max)
        Counter-clockwise degrees; a number ``d`` draws from (-d, d).
    interpolation : {"nearest", "bilinear"}, default "nearest"
    expand : bool, default False
        Grow the output to hold the whole rotated image (Pillow's size).
    center : (x, y), optional
        The centre of rotation in pixels; the image's centre by default.
    fill : number or sequence, default 0
        The samples outside the rotated image (integers 0..255).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomRotation
    >>> image = np.arange(4, dtype=np.uint8).reshape(2, 2)
    >>> RandomRotation((90, 90))(image)[:, :, 0].tolist()
    [[1, 3], [0, 2]]
    >>> RandomRotation(30, expand=True)(np.zeros((10, 20, 3), np.uint8), seed=0).shape[2]
    3
    """

    degrees: Any
    interpolation: str = "nearest"
    expand: bool = False
    center: Any = None
    fill: Any = 0

    def __post_init__(self) -> None:
        set_checked(self, "degrees", _angles("degrees", self.degrees))
        set_checked(self, "interpolation",
                    check_interpolation(self.interpolation, WARP_FILTERS))
        set_checked(self, "expand", check_bool("expand", self.expand))
        set_checked(self, "center", _center(self.center))
        set_checked(self, "fill", _fill(self.fill))

    def _steps(self):
        return [step("random_rotation", filter=FILTERS.index(self.interpolation),
                     expand=self.expand, has_center=self.center is not None,
                     degrees=self.degrees, center=self.center or (), fill=self.fill)]


@frozen
class RandomAffine(Transform):
    """Rotate, translate, scale and shear at random, as torchvision's ``RandomAffine``.

    Parameters
    ----------
    degrees : number or (min, max)
        Degrees as torchvision's ``F.affine`` takes them; a number ``d``
        draws from (-d, d).
    translate : (a, b), optional
        Largest shifts as fractions of the width (a) and the height (b),
        each in [0, 1]; the shift in pixels is rounded.
    scale : (min, max), optional
        Positive.
    shear : number, (min, max) or (xmin, xmax, ymin, ymax), optional
        Degrees; a number or a pair shears along x only.
    interpolation : {"nearest", "bilinear"}, default "nearest"
    fill : number or sequence, default 0
    center : (x, y), optional

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomAffine
    >>> image = np.arange(6, dtype=np.uint8).reshape(2, 3)
    >>> RandomAffine(0)(image)[:, :, 0].tolist()
    [[0, 1, 2], [3, 4, 5]]
    >>> RandomAffine(10, translate=(0.1, 0.1), scale=(0.9, 1.1), shear=5)(
    ...     np.zeros((8, 8, 3), np.uint8), seed=1).shape
    (8, 8, 3)
    """

    degrees: Any
    translate: Any = None
    scale: Any = None
    shear: Any = None
    interpolation: str = "nearest"
    fill: Any = 0
    center: Any = None

    def __post_init__(self) -> None:
        set_checked(self, "degrees", _angles("degrees", self.degrees))
        if self.translate is not None:
            translate = _sequence("translate", self.translate, (2,))
            if not all(0.0 <= t <= 1.0 for t in translate):
                raise ValueError(f"translation values should be between 0 and 1, got "
                                 f"{self.translate!r}")
            set_checked(self, "translate", translate)
        if self.scale is not None:
            scale = _sequence("scale", self.scale, (2,))
            if not all(s > 0 for s in scale):
                raise ValueError(f"scale values should be positive, got {self.scale!r}")
            if scale[0] > scale[1]:
                raise ValueError(f"scale must be (min, max), got {self.scale!r}")
            set_checked(self, "scale", scale)
        if self.shear is not None:
            set_checked(self, "shear", _angles("shear", self.shear, (2, 4)))
        set_checked(self, "interpolation",
                    check_interpolation(self.interpolation, WARP_FILTERS))
        set_checked(self, "fill", _fill(self.fill))
        set_checked(self, "center", _center(self.center))

    def _steps(self):
        return [step("random_affine", filter=FILTERS.index(self.interpolation),
                     has_center=self.center is not None, degrees=self.degrees,
                     translate=self.translate or (), scale=self.scale or (1.0, 1.0),
                     shear=self.shear or (), center=self.center or (), fill=self.fill)]


@frozen
class RandomVFlip(Transform):
    """Mirror top-bottom with probability ``p``, as torchvision's ``RandomVerticalFlip``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomVFlip
    >>> RandomVFlip(p=1.0)(np.array([[1], [2]], np.uint8))[:, :, 0].tolist()
    [[2], [1]]
    """

    p: float = 0.5

    def __post_init__(self) -> None:
        set_checked(self, "p", check_probability("p", self.p))

    def _steps(self):
        return [step("random_flip", horizontal=False, p=self.p)]


def _erasing_range(name: str, value: Any, low: float, high: float) -> tuple[float, float]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name.capitalize()} should be a sequence, got {value!r}")
    pair = _sequence(name, value, (2,))
    if pair[0] > pair[1]:
        raise ValueError(f"{name.capitalize()} should be of kind (min, max), got {value!r}")
    if pair[0] < low or pair[1] > high or (name == "ratio" and pair[0] <= 0):
        bounds = "between 0 and 1" if name == "scale" else "positive"
        raise ValueError(f"{name.capitalize()} should be {bounds}, got {value!r}")
    return pair  # type: ignore[return-value]


@frozen
class RandomErasing(Transform):
    """Erase a random window of a float32 image, as torchvision's ``RandomErasing``.

    It follows ``ToFloat`` or ``Normalize`` (torchvision erases tensors);
    after a fused float tail it erases the output where the tail wrote it.

    Parameters
    ----------
    p : float, default 0.5
    scale : (min, max), default (0.02, 0.33)
        The window's share of the image area, within [0, 1].
    ratio : (min, max), default (0.3, 3.3)
        The window's aspect ratio (height / width, as torchvision draws it).
    value : number, sequence or "random", default 0
        One value, one per channel, or standard normal noise.
    inplace : bool, default False
        Accepted for torchvision's signature: a chain never writes into its input.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import Compose, RandomErasing, ToFloat
    >>> chain = Compose([ToFloat(), RandomErasing(p=1.0, scale=(0.25, 0.25), ratio=(1, 1))])
    >>> out = chain(np.full((8, 8, 1), 255, np.uint8), seed=0)
    >>> int((out == 0).sum())
    16
    """

    p: float = 0.5
    scale: Any = (0.02, 0.33)
    ratio: Any = (0.3, 3.3)
    value: Any = 0
    inplace: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value,
                                                          (numbers.Real, str, tuple, list)):
            raise TypeError(f"Argument value should be either a number or str or a sequence, "
                            f"got {self.value!r}")
        if isinstance(self.value, str) and self.value != "random":
            raise ValueError(f"If value is str, it should be 'random', got {self.value!r}")
        if not isinstance(self.value, str):
            value = check_fill("value", self.value)
            count = 1 if isinstance(self.value, numbers.Real) else len(self.value)
            set_checked(self, "value", value[:count] if count > 1 else value[0])
        set_checked(self, "scale", _erasing_range("scale", self.scale, 0.0, 1.0))
        set_checked(self, "ratio", _erasing_range("ratio", self.ratio, 0.0, float("inf")))
        set_checked(self, "p", check_probability("p", self.p))
        set_checked(self, "inplace", check_bool("inplace", self.inplace))

    def _steps(self):
        noise = self.value == "random"
        values = () if noise else (
            self.value if isinstance(self.value, tuple) else (self.value,))
        return [step("random_erasing", random=noise, values=len(values), p=self.p,
                     scale=self.scale, ratio=self.ratio, value=values)]
