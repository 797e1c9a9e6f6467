"""Automatic augmentation policies: torchvision's RandAugment, TrivialAugmentWide, AutoAugment.

Each is one native op (``_core/src/dl_policy.c``): the plan pass draws a
seed from the item's generator, and the run pass draws the sub-ops and
their magnitudes from it and runs the colour kernels and the affine warp
from C, through the chain's per-thread scratch buffers, without the GIL.
The op spaces, magnitude tables, signs and sub-policies are torchvision's
(``docs/transforms.md``, "Augmentation policies"). Re-exported by
``dataloader.transforms``.
"""

from __future__ import annotations

from typing import Any

from dataloader._core.pipeline import AUTO_AUGMENT_POLICIES, step
from dataloader._images.arguments import FILTERS, check_int, check_interpolation
from dataloader._images.augment import WARP_FILTERS, _fill
from dataloader._images.chains import Transform, frozen, set_checked

__all__ = ["AutoAugment", "RandAugment", "TrivialAugmentWide"]


def _bins(value: Any) -> int:
    return check_int("num_magnitude_bins", value, 2)


@frozen
class RandAugment(Transform):
    """``num_ops`` ops drawn at random, each of one magnitude, as torchvision's ``RandAugment``.

    Parameters
    ----------
    num_ops : int, default 2
        Ops applied in a row, each drawn uniformly from Identity, ShearX,
        ShearY, TranslateX, TranslateY, Rotate, Brightness, Color, Contrast,
        Sharpness, Posterize, Solarize, AutoContrast and Equalize.
    magnitude : int, default 9
        The bin of every op's magnitude table, 0 to ``num_magnitude_bins - 1``.
    num_magnitude_bins : int, default 31
        At least 2.
    interpolation : {"nearest", "bilinear"}, default "nearest"
        Of the shears, translations and rotations.
    fill : number or sequence, optional
        The samples outside a warped image (integers 0..255); 0 by default.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import RandAugment
    >>> image = np.random.default_rng(0).integers(0, 256, (32, 48, 3), np.uint8)
    >>> RandAugment()(image, seed=1).shape
    (32, 48, 3)
    >>> bool((RandAugment(num_ops=0)(image) == image).all())
    True
    """

    num_ops: int = 2
    magnitude: int = 9
    num_magnitude_bins: int = 31
    interpolation: Any = "nearest"
    fill: Any = None

    def __post_init__(self) -> None:
        set_checked(self, "num_ops", check_int("num_ops", self.num_ops, 0, 2**31 - 1))
        set_checked(self, "num_magnitude_bins", _bins(self.num_magnitude_bins))
        set_checked(self, "magnitude",
                    check_int("magnitude", self.magnitude, 0, self.num_magnitude_bins - 1))
        set_checked(self, "interpolation", check_interpolation(self.interpolation, WARP_FILTERS))
        set_checked(self, "fill", None if self.fill is None else _fill(self.fill))

    def _steps(self):
        return [step("rand_augment", num_ops=self.num_ops, magnitude=self.magnitude,
                     bins=self.num_magnitude_bins, filter=FILTERS.index(self.interpolation),
                     only=-1, fill=_fill(self.fill))]


@frozen
class TrivialAugmentWide(Transform):
    """One op of a random magnitude per image, as torchvision's ``TrivialAugmentWide``.

    Parameters
    ----------
    num_magnitude_bins : int, default 31
        At least 2; the magnitude's bin is drawn uniformly.
    interpolation : {"nearest", "bilinear"}, default "nearest"
    fill : number or sequence, optional

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import TrivialAugmentWide
    >>> image = np.random.default_rng(0).integers(0, 256, (32, 48), np.uint8)
    >>> TrivialAugmentWide()(image, seed=2).shape
    (32, 48, 1)
    """

    num_magnitude_bins: int = 31
    interpolation: Any = "nearest"
    fill: Any = None

    def __post_init__(self) -> None:
        set_checked(self, "num_magnitude_bins", _bins(self.num_magnitude_bins))
        set_checked(self, "interpolation", check_interpolation(self.interpolation, WARP_FILTERS))
        set_checked(self, "fill", None if self.fill is None else _fill(self.fill))

    def _steps(self):
        return [step("trivial_augment_wide", bins=self.num_magnitude_bins,
                     filter=FILTERS.index(self.interpolation), fill=_fill(self.fill))]


@frozen
class AutoAugment(Transform):
    """One of a policy's 25 learned sub-policies per image, as torchvision's ``AutoAugment``.

    Parameters
    ----------
    policy : {"imagenet", "cifar10", "svhn"}, default "imagenet"
        Or torchvision's ``AutoAugmentPolicy`` (its ``value`` is the name).
    interpolation : {"nearest", "bilinear"}, default "nearest"
    fill : number or sequence, optional

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import AutoAugment
    >>> image = np.random.default_rng(0).integers(0, 256, (32, 48, 3), np.uint8)
    >>> AutoAugment("cifar10")(image, seed=3).shape
    (32, 48, 3)
    """

    policy: Any = "imagenet"
    interpolation: Any = "nearest"
    fill: Any = None

    def __post_init__(self) -> None:
        policy = getattr(self.policy, "value", self.policy)
        if policy not in AUTO_AUGMENT_POLICIES:
            raise ValueError(f"The provided policy {self.policy} is not recognized.")
        set_checked(self, "policy", policy)
        set_checked(self, "interpolation", check_interpolation(self.interpolation, WARP_FILTERS))
        set_checked(self, "fill", None if self.fill is None else _fill(self.fill))

    def _steps(self):
        return [step("auto_augment", policy=AUTO_AUGMENT_POLICIES.index(self.policy),
                     filter=FILTERS.index(self.interpolation), fill=_fill(self.fill))]
