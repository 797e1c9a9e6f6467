"""Batch augmentations: MixUp, CutMix and a random choice between them.

torchvision.transforms.v2's semantics: labels become one-hot (or stay soft)
targets of ``num_classes``; ``lam ~ Beta(alpha, alpha)``; each image is
mixed with the one before it in the batch (the batch rolled by one), and
so are the targets. CutMix pastes a box of the rolled batch whose
half-sides are ``0.5 sqrt(1 - lam)`` of the image's, centred at a uniform
pixel and clipped to the image, and weighs the targets by the box's area.

They run on collated batches (``ImageBatch``, numpy arrays or torch
tensors, NCHW; an NHWC ``ImageBatch`` is read in its layout), outside the
loader: ``mix.over(loader)`` yields the loader's batches mixed, each batch
drawn from ``(loader.seed, loader.epoch, its position in the epoch)``, so
results do not depend on the workers. Re-exported by
``dataloader.transforms``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from dataloader._core.pipeline import item_seed
from dataloader._images.arguments import check_int, check_real, check_seed

__all__ = ["BatchTransform", "CutMix", "MixUp", "RandomChoice"]

# Batch seeds live apart from item seeds: (seed ^ this, epoch, position).
_BATCH_DOMAIN = 0x6261746368
_SEED_MASK = 2**63 - 1


def batch_seed(seed: int, epoch: int, position: int) -> int:
    """The seed of batch ``position`` of ``epoch``'s batch transforms."""
    return item_seed(seed ^ _BATCH_DOMAIN, epoch, position) & _SEED_MASK


class BatchTransform:
    """Base of the batch transforms: ``transform(images, labels, seed=...)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import MixUp
    >>> images, targets = MixUp(alpha=1.0, num_classes=3)(
    ...     np.ones((2, 3, 4, 4), np.float32), np.array([0, 2]), seed=0)
    >>> targets.sum(axis=1).round(6).tolist()
    [1.0, 1.0]
    """

    def _apply(self, images: Any, labels: Any, rng: np.random.Generator) -> tuple[Any, Any]:
        raise NotImplementedError

    def __call__(self, images: Any, labels: Any, *, seed: int | None = None) -> tuple[Any, Any]:
        """Mix ``images`` in place and return ``(images, targets)``; ``seed`` fixes the draws."""
        if seed is None:
            seed = int(np.random.default_rng().integers(2**63))
        return self._apply(images, labels, np.random.default_rng(check_seed(seed)))

    def over(self, loader: Any) -> Iterator[Any]:
        """The batches of one epoch of ``loader`` (``(images, labels, ...)`` each), mixed.

        Batch ``i`` of the epoch draws from ``(loader.seed, loader.epoch, i)``
        (a resumed epoch counts the batches delivered before it).

        Examples
        --------
        >>> import numpy as np
        >>> from dataloader import DataLoader
        >>> from dataloader.transforms import CutMix
        >>> data = [(np.ones((3, 4, 4), np.float32) * i, i) for i in range(4)]
        >>> loader = DataLoader(data, batch_size=2, shuffle=True, seed=0)
        >>> [tuple(targets.shape) for _, targets in CutMix(num_classes=4).over(loader)]
        [(2, 4), (2, 4)]
        """
        iterator = iter(loader)
        seed, epoch = loader.seed, loader.epoch
        try:
            position = len(loader) - len(iterator)
        except TypeError:
            position = 0
        for batch in iterator:
            images, labels, *rest = batch
            yield (*self(images, labels, seed=batch_seed(seed, epoch, position)), *rest)
            position += 1


def _images(images: Any, batch_size: int) -> tuple[Any, bool]:
    """The batch as a numpy view or a torch tensor, and whether its channels come last."""
    channels_last = getattr(images, "layout", "NCHW") == "NHWC"
    if not _is_torch(images):
        images = np.asarray(images)
    if images.ndim != 4:
        raise ValueError(f"Expected a batched input with 4 dims, but got {images.ndim} "
                         "dimensions instead")
    if images.shape[0] != batch_size:
        raise ValueError("The batch size of the image does not match the batch size of the "
                         f"labels: {images.shape[0]} != {batch_size}")
    return images, channels_last


def _is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch")


class _Mixing(BatchTransform):
    """What MixUp and CutMix share: alpha, the targets, the checks."""

    def __init__(self, *, alpha: float = 1.0, num_classes: int | None = None) -> None:
        self.alpha = check_real("alpha", alpha)
        if self.alpha <= 0:
            raise ValueError(f"alpha must be positive, got {alpha!r}")
        self.num_classes = None if num_classes is None else check_int(
            "num_classes", num_classes, 1, 2**31 - 1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(alpha={self.alpha!r}, num_classes={self.num_classes!r})"

    def _targets(self, labels: Any, lam: float) -> tuple[Any, int]:
        """One-hot (or given soft) targets mixed with their roll by one; the batch size."""
        torch_labels = _is_torch(labels)
        values = np.asarray(labels.cpu() if torch_labels else labels)
        if values.ndim == 1:
            if self.num_classes is None:
                raise ValueError("num_classes is needed for labels of shape (batch_size,)")
            if values.dtype.kind not in "iu":
                raise ValueError(f"labels should be class indices, got dtype {values.dtype}")
            if values.size and not (0 <= values.min() and values.max() < self.num_classes):
                raise ValueError(f"labels must be in [0, {self.num_classes}), got {values!r}")
            targets = np.zeros((values.shape[0], self.num_classes), np.float32)
            targets[np.arange(values.shape[0]), values] = 1.0
        elif values.ndim == 2:
            targets = values.astype(np.float32)
        else:
            raise ValueError("labels should be index based with shape (batch_size,) or soft "
                             f"with shape (batch_size, num_classes), got shape {values.shape}")
        mixed = np.roll(targets, 1, axis=0) * np.float32(1.0 - lam) + targets * np.float32(lam)
        if torch_labels:
            import torch

            return torch.from_numpy(mixed).to(labels.device), values.shape[0]
        return mixed, values.shape[0]


class MixUp(_Mixing):
    """Blend each image with the previous one, as torchvision.transforms.v2's ``MixUp``.

    ``images * lam + rolled * (1 - lam)`` with ``lam ~ Beta(alpha, alpha)``
    drawn once per batch; float images (they are mixed in place).

    Parameters
    ----------
    alpha : float, default 1.0
    num_classes : int, optional
        Needed when labels are class indices.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import MixUp
    >>> images = np.stack([np.zeros((1, 2, 2)), np.ones((1, 2, 2))]).astype(np.float32)
    >>> images, targets = MixUp(alpha=0.5, num_classes=2)(images, np.array([0, 1]), seed=3)
    >>> bool(np.allclose(images[:, 0, 0, 0], targets[:, 1]))
    True
    """

    def _apply(self, images: Any, labels: Any, rng: np.random.Generator) -> tuple[Any, Any]:
        lam = float(rng.beta(self.alpha, self.alpha))
        targets, batch_size = self._targets(labels, lam)
        pixels, _ = _images(images, batch_size)
        if not (pixels.is_floating_point() if _is_torch(pixels) else pixels.dtype.kind == "f"):
            raise TypeError(f"MixUp blends float images, got {pixels.dtype}")
        if _is_torch(pixels):
            rolled = pixels.roll(1, 0).mul_(1.0 - lam)
            pixels.mul_(lam).add_(rolled)
            return images, targets
        # In place, from the last image down: image i still sees image i - 1 unmixed.
        last, spare = pixels[-1].copy(), np.empty_like(pixels[0])
        for i in range(batch_size - 1, -1, -1):
            np.multiply(pixels[i - 1] if i else last, pixels.dtype.type(1.0 - lam), out=spare)
            pixels[i] *= pixels.dtype.type(lam)
            pixels[i] += spare
        return images, targets


class CutMix(_Mixing):
    """Paste a box of the previous image into each, as torchvision.transforms.v2's ``CutMix``.

    The box's half-sides are ``int(0.5 sqrt(1 - lam) W)`` and ``... H``,
    centred at a uniform pixel and clipped to the image; targets are
    weighted by ``1 - box area / image area``.

    Parameters
    ----------
    alpha : float, default 1.0
    num_classes : int, optional

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import CutMix
    >>> images = np.stack([np.zeros((1, 8, 8)), np.ones((1, 8, 8))]).astype(np.float32)
    >>> images, targets = CutMix(num_classes=2)(images, np.array([0, 1]), seed=5)
    >>> float(images[0].mean()) == float(targets[0, 1])
    True
    """

    def box(self, height: int, width: int, rng: np.random.Generator) -> tuple[int, ...]:
        """``(x1, y1, x2, y2)`` and the weight of the pasted-into image, drawn from ``rng``."""
        lam = float(rng.beta(self.alpha, self.alpha))
        r_x, r_y = int(rng.integers(width)), int(rng.integers(height))
        r = 0.5 * math.sqrt(1.0 - lam)
        r_w_half, r_h_half = int(r * width), int(r * height)
        return (max(r_x - r_w_half, 0), max(r_y - r_h_half, 0), min(r_x + r_w_half, width),
                min(r_y + r_h_half, height))

    def _apply(self, images: Any, labels: Any, rng: np.random.Generator) -> tuple[Any, Any]:
        batch_size = labels.shape[0] if hasattr(labels, "shape") else len(labels)
        pixels, channels_last = _images(images, batch_size)
        height, width = pixels.shape[1:3] if channels_last else pixels.shape[2:4]
        x1, y1, x2, y2 = self.box(height, width, rng)
        lam = 1.0 - (x2 - x1) * (y2 - y1) / (width * height)
        targets, _ = self._targets(labels, lam)
        window = (slice(None), slice(y1, y2), slice(x1, x2)) if channels_last else (
            slice(None), slice(None), slice(y1, y2), slice(x1, x2))
        region = pixels[window]
        pixels[window] = region.roll(1, 0) if _is_torch(pixels) else np.roll(region, 1, axis=0)
        return images, targets


class RandomChoice(BatchTransform):
    """One of ``transforms`` per batch, as torchvision.transforms.v2's ``RandomChoice``.

    Parameters
    ----------
    transforms : sequence of MixUp, CutMix (batch transforms)
    p : sequence of float, optional
        Their weights (normalised); equal by default.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import CutMix, MixUp, RandomChoice
    >>> mix = RandomChoice([MixUp(alpha=0.2, num_classes=10), CutMix(num_classes=10)])
    >>> _, targets = mix(np.zeros((4, 3, 8, 8), np.float32), np.arange(4), seed=0)
    >>> targets.shape
    (4, 10)
    """

    def __init__(self, transforms: Sequence[BatchTransform], p: Sequence[float] | None = None):
        if isinstance(transforms, (str, bytes)) or not isinstance(transforms, Sequence):
            raise TypeError("Argument transforms should be a sequence of callables, got "
                            f"{type(transforms).__name__}")
        if not transforms or not all(isinstance(t, BatchTransform) for t in transforms):
            raise TypeError("RandomChoice takes batch transforms (MixUp, CutMix), got "
                            f"{list(transforms)!r}")
        if p is None:
            p = [1.0] * len(transforms)
        elif len(p) != len(transforms):
            raise ValueError(f"Length of p doesn't match the number of transforms: {len(p)} != "
                             f"{len(transforms)}")
        weights = [check_real("p", v) for v in p]
        if any(v < 0 for v in weights) or not sum(weights) > 0:
            raise ValueError(f"p must be non-negative with a positive sum, got {p!r}")
        self.transforms = tuple(transforms)
        self.p = tuple(v / sum(weights) for v in weights)

    def __repr__(self) -> str:
        return f"RandomChoice({list(self.transforms)!r}, p={list(self.p)!r})"

    def _apply(self, images: Any, labels: Any, rng: np.random.Generator) -> tuple[Any, Any]:
        chosen = self.transforms[int(rng.choice(len(self.transforms), p=self.p))]
        return chosen._apply(images, labels, rng)

