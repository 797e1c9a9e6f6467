"""Image transforms that run natively: decode, geometry and value ops.

Each constructor returns an immutable, picklable :class:`Transform`; chain
them with :class:`Compose`. A chain runs in one native call per item without
the GIL (``dataloader._core.pipeline``), and a ``DataLoader`` given one as
``transform=`` runs it on its workers, with random ops drawing from a
per-item generator derived from ``(seed, epoch, index)``.

Calling a transform applies it at once: ``Resize(256)(array)``. Encoded
bytes, an :class:`~dataloader.kernels.Image` or a uint8/float32 numpy array
(``(H, W)`` or ``(H, W, C)``) go in; an ``Image`` comes out (a numpy array
for a numpy array).

Examples
--------
>>> import numpy as np
>>> from dataloader.transforms import CenterCrop, Compose, Normalize, Resize, ToChw, ToFloat
>>> chain = Compose([Resize(8), CenterCrop(6), ToFloat(),
...                  Normalize([0.5] * 3, [0.25] * 3), ToChw()])
>>> chain(np.full((16, 20, 3), 128, np.uint8)).shape
(3, 6, 6)
>>> chain  # doctest: +NORMALIZE_WHITESPACE
Compose([Resize(size=8), CenterCrop(size=(6, 6)), ToFloat(),
         Normalize(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25)), ToChw()])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._core.pipeline import step
from dataloader._images.arguments import (
    ANCHORS,
    CHANNELS,
    FILTERS,
    MAX_BYTES,
    MAX_SIDE,
    PAD_MODES,
    check_bool,
    check_choice,
    check_fill,
    check_int,
    check_interpolation,
    check_mean_std,
    check_padding,
    check_probability,
    check_range,
    check_size,
)
from dataloader._images.augment import RandomAffine, RandomErasing, RandomRotation, RandomVFlip
from dataloader._images.chains import Transform, frozen, set_checked
from dataloader._images.colour import (
    ColorJitter,
    GaussianBlur,
    Grayscale,
    RandomAdjustSharpness,
    RandomAutocontrast,
    RandomEqualize,
    RandomGrayscale,
    RandomInvert,
    RandomPosterize,
    RandomSolarize,
)
from dataloader._images.mixing import BatchTransform, CutMix, MixUp, RandomChoice
from dataloader._images.names import transform_hint
from dataloader._images.policies import AutoAugment, RandAugment, TrivialAugmentWide

__all__ = [
    "AutoAugment", "BatchTransform", "CenterCrop", "ColorJitter", "Compose", "Crop", "CutMix",
    "Decode", "GaussianBlur", "Grayscale", "HFlip", "MixUp", "Normalize", "Pad", "PadTo",
    "RandAugment", "RandomAdjustSharpness", "RandomAffine", "RandomAutocontrast",
    "RandomChoice", "RandomCrop", "RandomEqualize", "RandomErasing", "RandomGrayscale",
    "RandomHFlip", "RandomHorizontalFlip", "RandomInvert", "RandomPosterize",
    "RandomResizedCrop", "RandomRotation", "RandomSolarize", "RandomVFlip", "RandomVerticalFlip",
    "Resize", "Rotate90", "ToChw", "ToFloat", "ToGray", "ToHwc", "ToRgb", "ToRgba", "ToTensor",
    "Transform", "TrivialAugmentWide", "VFlip",
]

@frozen
class Decode(Transform):
    """Decode JPEG, PNG or WebP bytes (GIF, BMP, TIFF through Pillow) into uint8 HWC.

    Parameters
    ----------
    mode : {None, "L", "RGB", "RGBA"}
        Convert while decoding; ``None`` keeps the image's own channels.
    max_width, max_height, max_bytes : int
        Limits checked from the header before any pixel memory is allocated;
        ``max_bytes`` counts the decoder's own memory with the output (see
        :func:`dataloader.kernels.decode`).
    exact : bool, default False
        Turn DCT scaling off: by default a JPEG that the next op shrinks is
        decoded at a DCT scale n/8 that stays 3 times its target, which is
        faster and changes pixels slightly (docs/transforms.md, "Fusion").
        Either way a crop after ``Decode`` decodes only its window, with the
        same pixels as the whole image cut.

    Examples
    --------
    >>> from dataloader.transforms import Compose, Decode, Resize
    >>> chain = Compose([Decode("L"), Resize((2, 4))])
    >>> import io
    >>> from PIL import Image as PILImage
    >>> png = io.BytesIO()
    >>> PILImage.new("RGB", (8, 4), (10, 20, 30)).save(png, "PNG")
    >>> chain(png.getvalue()).shape
    (2, 4, 1)
    """

    mode: str | None = None
    max_width: int = MAX_SIDE
    max_height: int = MAX_SIDE
    max_bytes: int = MAX_BYTES
    exact: bool = False

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, (None, *CHANNELS))
        set_checked(self, "max_width", check_int("max_width", self.max_width, 1))
        set_checked(self, "max_height", check_int("max_height", self.max_height, 1))
        set_checked(self, "max_bytes", check_int("max_bytes", self.max_bytes, 1, MAX_BYTES))
        set_checked(self, "exact", check_bool("exact", self.exact))

    def _steps(self):
        return [step("decode", channels=CHANNELS[self.mode] if self.mode else 0,
                     max_width=self.max_width, max_height=self.max_height,
                     exact=self.exact, max_bytes=self.max_bytes)]

    def _fallback(self, data: Any) -> np.ndarray:
        from dataloader.kernels import decode

        return decode(data, mode=self.mode, max_width=self.max_width,
                      max_height=self.max_height, max_bytes=self.max_bytes)


def _converter(name: str, mode: str, doc: str) -> type:
    channels = CHANNELS[mode]

    @frozen
    class Convert(Transform):
        def _steps(self):
            return [step("convert", channels=channels)]

    Convert.__name__ = Convert.__qualname__ = name
    Convert.__doc__ = doc
    return Convert


ToRgb = _converter("ToRgb", "RGB", """Convert to 3 channels, as Pillow's ``convert("RGB")``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToRgb
    >>> ToRgb()(np.zeros((2, 2), np.uint8)).shape
    (2, 2, 3)
    """)
ToRgba = _converter("ToRgba", "RGBA", """Convert to 4 channels (alpha 255 when added).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToRgba
    >>> ToRgba()(np.zeros((2, 2, 3), np.uint8))[0, 0].tolist()
    [0, 0, 0, 255]
    """)
ToGray = _converter("ToGray", "L", """Convert to 1 channel, as Pillow's ``convert("L")``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToGray
    >>> ToGray()(np.full((1, 1, 3), 200, np.uint8)).tolist()
    [[[200]]]
    """)


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


@frozen
class ToFloat(Transform):
    """uint8 samples to float32 in [0, 1] (divided by 255).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToFloat
    >>> ToFloat()(np.array([[0, 255]], np.uint8))[:, :, 0].tolist()
    [[0.0, 1.0]]
    """

    def _steps(self):
        return [step("to_float")]


@frozen
class Normalize(Transform):
    """``(x - mean[c]) / std[c]`` in float32, as torchvision's ``Normalize``.

    uint8 input is first divided by 255 (as :class:`ToFloat`).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import Normalize
    >>> Normalize([0.5], [0.5])(np.array([[0.0, 1.0]], np.float32))[:, :, 0].tolist()
    [[-1.0, 1.0]]
    """

    mean: Sequence[float]
    std: Sequence[float]

    def __post_init__(self) -> None:
        mean, std = check_mean_std(self.mean, self.std)
        set_checked(self, "mean", mean)
        set_checked(self, "std", std)

    def _steps(self):
        return [step("normalize", channels=len(self.mean), mean=self.mean, std=self.std)]


@frozen
class ToChw(Transform):
    """HWC to CHW (channels first).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToChw
    >>> ToChw()(np.zeros((4, 5, 3), np.uint8)).shape
    (3, 4, 5)
    """

    def _steps(self):
        return [step("to_chw")]


@frozen
class ToTensor(Transform):
    """torchvision's ``ToTensor``: uint8 HWC to float32 CHW in [0, 1].

    The same as ``ToFloat()`` then ``ToChw()``. The result is an ``Image``
    (an array for an array), not a tensor: a batch of them
    (``ImageCollator``) becomes a torch tensor with ``torch.from_dlpack``,
    without a copy.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToTensor
    >>> chw = ToTensor()(np.full((4, 5, 3), 255, np.uint8))
    >>> chw.shape, chw.dtype, float(chw.max())
    ((3, 4, 5), dtype('float32'), 1.0)
    """

    def _steps(self):
        return [step("to_float"), step("to_chw")]


@frozen
class ToHwc(Transform):
    """CHW back to HWC.

    Examples
    --------
    >>> from dataloader.kernels import Image
    >>> from dataloader.transforms import ToHwc
    >>> ToHwc()(Image(4, 5, 3, layout="CHW")).shape
    (4, 5, 3)
    """

    def _steps(self):
        return [step("to_hwc")]


class Compose(Transform):
    """Chain transforms; nested ``Compose`` objects are flattened.

    Parameters
    ----------
    transforms : sequence of Transform

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import Compose, HFlip, Resize
    >>> Compose([Resize((2, 2)), HFlip()])(np.zeros((4, 4, 3), np.uint8)).shape
    (2, 2, 3)
    """

    __slots__ = ("transforms",)
    transforms: tuple[Transform, ...]

    def __init__(self, transforms: Sequence[Transform]) -> None:
        if isinstance(transforms, Transform) or not isinstance(transforms, (list, tuple)):
            raise TypeError(f"Compose takes a list of transforms, got {type(transforms).__name__}")
        flat: list[Transform] = []
        for position, transform in enumerate(transforms):
            if isinstance(transform, Compose):
                flat.extend(transform.transforms)
            elif isinstance(transform, Transform):
                flat.append(transform)
            else:
                raise TypeError(f"transforms[{position}] must be a Transform, got "
                                f"{type(transform).__name__}; wrap Python code in the "
                                "DataLoader's transform= instead")
        object.__setattr__(self, "transforms", tuple(flat))

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __reduce__(self):
        return (Compose, (list(self.transforms),))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Compose) and self.transforms == other.transforms

    def __hash__(self) -> int:
        return hash(self.transforms)

    def __repr__(self) -> str:
        return f"Compose([{', '.join(map(repr, self.transforms))}])"

    def _steps(self):
        return [step for transform in self.transforms for step in transform._steps()]

    def _first(self) -> Transform | None:
        return self.transforms[0] if self.transforms else None


# torchvision's names of the same transforms, for recipes ported by name.
RandomHorizontalFlip = RandomHFlip
RandomVerticalFlip = RandomVFlip


def __getattr__(name: str) -> Any:
    hint = "" if name.startswith("__") else transform_hint(name, __all__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}"
                         + (f"; {hint}" if hint else ""))
