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

The transforms live in ``dataloader._images`` by family, as
torchvision.transforms.v2 groups them: ``conversion`` (decoding, channels,
sample type, layout), ``geometry`` (crops, padding, resizing, flips),
``augment`` (random warps, erasing), ``colour`` (colour and filters),
``policies`` (AutoAugment and its kin), ``mixing`` (batch transforms), and
``chains`` (``Transform`` and ``Compose``). This module is their public face.

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

from typing import Any

from dataloader._images.augment import RandomAffine, RandomErasing, RandomRotation, RandomVFlip
from dataloader._images.chains import Compose, Transform
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
from dataloader._images.conversion import (
    Decode,
    Normalize,
    ToChw,
    ToFloat,
    ToGray,
    ToHwc,
    ToRgb,
    ToRgba,
    ToTensor,
)
from dataloader._images.geometry import (
    CenterCrop,
    Crop,
    HFlip,
    Pad,
    PadTo,
    RandomCrop,
    RandomHFlip,
    RandomResizedCrop,
    Resize,
    Rotate90,
    VFlip,
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

# torchvision's names of the same transforms, for recipes ported by name.
RandomHorizontalFlip = RandomHFlip
RandomVerticalFlip = RandomVFlip


def __getattr__(name: str) -> Any:
    hint = "" if name.startswith("__") else transform_hint(name, __all__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}"
                         + (f"; {hint}" if hint else ""))
