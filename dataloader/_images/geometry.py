"""Geometry transforms: crops, padding, resizing, flips and quarter turns, as native ops.

torchvision's geometry family without the warps: the deterministic ops
(``Crop``, ``CenterCrop``, ``Pad``, ``PadTo``, ``Resize``, ``HFlip``,
``VFlip``, ``Rotate90``) and the random ones that draw a window or a flip
from the item's generator (``RandomCrop``, ``RandomResizedCrop``,
``RandomHFlip``). The random warps and ``RandomVFlip`` are in
``augment``. A crop or resize right after ``Decode`` is fused with the
decode (``docs/transforms.md``, "Fusion"). Re-exported by
``dataloader.transforms``.
"""

from __future__ import annotations

from typing import Any

from dataloader._core.pipeline import step
from dataloader._images.arguments import (
    ANCHORS,
    FILTERS,
    PAD_MODES,
    check_bool,
    check_choice,
    check_fill,
    check_int,
    check_interpolation,
    check_padding,
    check_probability,
    check_range,
    check_size,
)
from dataloader._images.chains import Transform, frozen, set_checked

__all__ = ["CenterCrop", "Crop", "HFlip", "Pad", "PadTo", "RandomCrop", "RandomHFlip",
           "RandomResizedCrop", "Resize", "Rotate90", "VFlip"]


@frozen
class Crop(Transform):
    """Keep the window of ``height`` x ``width`` pixels at (``top``, ``left``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import Crop
    >>> Crop(1, 1, 2, 2)(np.arange(16, dtype=np.uint8).reshape(4, 4))[:, :, 0].tolist()
    [[5, 6], [9, 10]]
    """

    top: int
    left: int
    height: int
    width: int

    def __post_init__(self) -> None:
        set_checked(self, "top", check_int("top", self.top))
        set_checked(self, "left", check_int("left", self.left))
        set_checked(self, "height", check_int("height", self.height, 1))
        set_checked(self, "width", check_int("width", self.width, 1))

    def _steps(self):
        return [step("crop", top=self.top, left=self.left, height=self.height, width=self.width)]


@frozen
class CenterCrop(Transform):
    """Keep the centre ``size`` (int or (height, width)), padding with 0 when larger.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import CenterCrop
    >>> CenterCrop(2)(np.arange(16, dtype=np.uint8).reshape(4, 4))[:, :, 0].tolist()
    [[5, 6], [9, 10]]
    """

    size: Any

    def __post_init__(self) -> None:
        set_checked(self, "size", check_size("size", self.size))

    def _steps(self):
        return [step("center_crop", height=self.size[0], width=self.size[1])]


@frozen
class RandomCrop(Transform):
    """A window of ``size`` at a random position, after optional zero ``padding``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomCrop
    >>> RandomCrop(3, padding=1)(np.ones((4, 4), np.uint8), seed=0).shape
    (3, 3, 1)
    """

    size: Any
    padding: Any = None

    def __post_init__(self) -> None:
        set_checked(self, "size", check_size("size", self.size))
        if self.padding is not None:
            set_checked(self, "padding", check_padding(self.padding))

    def _steps(self):
        return [step("random_crop", height=self.size[0], width=self.size[1],
                     padding=self.padding or ())]


@frozen
class RandomResizedCrop(Transform):
    """A random window of random area and aspect ratio, resized to ``size``.

    torchvision's ``RandomResizedCrop``: ``scale`` bounds the window's share
    of the image area, ``ratio`` its width / height.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomResizedCrop
    >>> RandomResizedCrop(8)(np.zeros((32, 48, 3), np.uint8), seed=1).shape
    (8, 8, 3)
    """

    size: Any
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        set_checked(self, "size", check_size("size", self.size))
        set_checked(self, "scale", check_range("scale", self.scale, 1.0))
        set_checked(self, "ratio", check_range("ratio", self.ratio))
        set_checked(self, "interpolation", check_interpolation(self.interpolation, FILTERS))

    def _steps(self):
        return [step("random_resized_crop", height=self.size[0], width=self.size[1],
                     filter=FILTERS.index(self.interpolation), scale=self.scale, ratio=self.ratio)]


@frozen
class Pad(Transform):
    """Pad the borders as torchvision's ``Pad``; ``mode`` constant, edge, reflect or symmetric.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import Pad
    >>> Pad(1, fill=9)(np.zeros((1, 1), np.uint8))[:, :, 0].tolist()
    [[9, 9, 9], [9, 0, 9], [9, 9, 9]]
    """

    padding: Any
    fill: Any = 0
    mode: str = "constant"

    def __post_init__(self) -> None:
        set_checked(self, "padding", check_padding(self.padding))
        set_checked(self, "fill", check_fill("fill", self.fill))
        check_choice("mode", self.mode, PAD_MODES)

    def _steps(self):
        return [step("pad", padding=self.padding, mode=PAD_MODES.index(self.mode), fill=self.fill)]


@frozen
class PadTo(Transform):
    """Pad to exactly ``height`` x ``width``, placing the image at ``anchor``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import PadTo
    >>> PadTo(2, 3, fill=7, anchor="center")(np.zeros((1, 1), np.uint8))[:, :, 0].tolist()
    [[7, 0, 7], [7, 7, 7]]
    """

    height: int
    width: int
    fill: Any = 0
    anchor: str = "top-left"

    def __post_init__(self) -> None:
        set_checked(self, "height", check_int("height", self.height, 1))
        set_checked(self, "width", check_int("width", self.width, 1))
        set_checked(self, "fill", check_fill("fill", self.fill))
        check_choice("anchor", self.anchor, ANCHORS)

    def _steps(self):
        return [step("pad_to", height=self.height, width=self.width, fill=self.fill,
                     anchor=ANCHORS[self.anchor])]


@frozen
class Resize(Transform):
    """Resize with Pillow's filters; an int ``size`` sets the shorter side (torchvision's rule).

    The arguments are torchvision's, in its order.

    Parameters
    ----------
    size : int or (int, int)
    interpolation : {"nearest", "bilinear", "bicubic", "lanczos"}
        Or torchvision's ``InterpolationMode`` of one of them.
    max_size : int, optional
        With an int ``size``: the longer side's bound.
    antialias : bool, default True

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import Resize
    >>> Resize(4)(np.zeros((8, 12, 3), np.uint8)).shape
    (4, 6, 3)
    """

    size: Any
    interpolation: str = "bilinear"
    max_size: int | None = None
    antialias: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.size, (list, tuple)) and len(self.size) == 1:
            set_checked(self, "size", self.size[0])
        if isinstance(self.size, (list, tuple)):
            set_checked(self, "size", check_size("size", self.size))
            if self.max_size is not None:
                raise ValueError("max_size is only allowed with an int size")
        else:
            set_checked(self, "size", check_int("size", self.size, 1))
        if self.max_size is not None:
            set_checked(self, "max_size", check_int("max_size", self.max_size, 1))
            if self.max_size <= self.size:
                raise ValueError(
                    f"max_size ({self.max_size}) must be larger than size ({self.size})")
        set_checked(self, "interpolation", check_interpolation(self.interpolation, FILTERS))
        set_checked(self, "antialias", check_bool("antialias", self.antialias))

    def _steps(self):
        # An int size sets the shorter side: width 0 keeps the aspect ratio.
        height, width = (self.size, 0) if isinstance(self.size, int) else self.size
        return [step("resize", height=height, width=width, max_size=self.max_size or 0,
                     filter=FILTERS.index(self.interpolation), antialias=self.antialias)]


@frozen
class HFlip(Transform):
    """Mirror left-right.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import HFlip
    >>> HFlip()(np.array([[1, 2]], np.uint8))[:, :, 0].tolist()
    [[2, 1]]
    """

    def _steps(self):
        return [step("flip", horizontal=True)]


@frozen
class VFlip(Transform):
    """Mirror top-bottom.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import VFlip
    >>> VFlip()(np.array([[1], [2]], np.uint8))[:, :, 0].tolist()
    [[2], [1]]
    """

    def _steps(self):
        return [step("flip", horizontal=False)]


@frozen
class RandomHFlip(Transform):
    """Mirror left-right with probability ``p``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandomHFlip
    >>> RandomHFlip(p=1.0)(np.array([[1, 2]], np.uint8))[:, :, 0].tolist()
    [[2, 1]]
    """

    p: float = 0.5

    def __post_init__(self) -> None:
        set_checked(self, "p", check_probability("p", self.p))

    def _steps(self):
        return [step("random_flip", horizontal=True, p=self.p)]


@frozen
class Rotate90(Transform):
    """Rotate by ``k`` counter-clockwise quarter turns (as ``numpy.rot90``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import Rotate90
    >>> Rotate90()(np.array([[1, 2]], np.uint8))[:, :, 0].tolist()
    [[2], [1]]
    """

    k: int = 1

    def __post_init__(self) -> None:
        # Any number of quarter turns: only k modulo 4 matters.
        set_checked(self, "k", check_int("k", self.k, -(2**63), 2**63 - 1))

    def _steps(self):
        return [step("rotate90", k=self.k % 4)]
