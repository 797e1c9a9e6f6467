"""Compiling transforms to native chains, and what a chain's output looks like.

:class:`Transform` is the base of every native transform (the public ones
are in ``dataloader.transforms`` and the modules it re-exports); each
describes itself as native ops
(``_steps()``: ``(name, ints, floats)`` each, made by ``pipeline.step``
from the parameter names of ``_core/src/dl_tables.h``), and :class:`Compose`
chains them into one; this module turns that into a
``dataloader._core.pipeline.Chain`` and asks it static facts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any, TypeVar, dataclass_transform

import numpy as np

from dataloader._core.pipeline import Chain
from dataloader._core.pipeline import item_seed as native_item_seed
from dataloader._images.arguments import check_seed

__all__ = ["Compose", "ItemTransform", "Transform", "compile_chain", "frozen", "output_shape",
           "set_checked"]

_SEED_MASK = 2**63 - 1


@functools.lru_cache(maxsize=256)
def compile_chain(transform: Transform) -> Chain:
    """The native ``Chain`` of ``transform`` (cached: transforms are immutable)."""
    first = transform._first()
    # A chain that starts by decoding falls back to Pillow for GIF, BMP and TIFF.
    fallback = getattr(first, "_fallback", None)
    return Chain(transform._steps(), fallback, type(first).__name__ if first else None)


def output_shape(transform: Transform) -> tuple[int, int, int, str, str] | None:
    """``(height, width, channels, dtype, layout)`` when every output has the same shape.

    ``None`` when the size or channels depend on the input image. The native
    plan pass answers, by the same shape rule it applies to each item.
    """
    return compile_chain(transform).output_shape()


class ItemTransform:
    """A native chain bound to one epoch: ``transform(index, item)`` as the loader calls it.

    The item is encoded bytes, an ``Image`` or an array, or a tuple or list
    whose first element is (``(image, label)``): then the chain applies to
    that element and the rest is kept.
    """

    __slots__ = ("chain", "seed", "epoch", "transform")

    def __init__(self, transform: Transform, seed: int, epoch: int) -> None:
        self.transform = transform
        self.chain = compile_chain(transform)
        self.seed = seed
        self.epoch = epoch

    def item_seed(self, index: int) -> int:
        return native_item_seed(self.seed, self.epoch, index) & _SEED_MASK

    def __call__(self, index: int, item: Any) -> Any:
        if isinstance(item, (tuple, list)):
            if not item:
                raise ValueError(f"item {index} is an empty {type(item).__name__}: a native "
                                 "transform takes data, or a tuple (data, label, ...)")
            return (self.chain.apply(item[0], self.item_seed(index)), *item[1:])
        return self.chain.apply(item, self.item_seed(index))


class Transform:
    """Base class of the native transforms: immutable, picklable, callable.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import HFlip
    >>> HFlip()(np.arange(3, dtype=np.uint8).reshape(1, 3)).ravel().tolist()
    [2, 1, 0]
    """

    def _steps(self) -> list[tuple[str, tuple, tuple]]:
        """The native ops of this transform: ``step(name, **parameters)`` each."""
        raise NotImplementedError

    def bind_epoch(self, seed: int, epoch: int) -> ItemTransform:
        """This transform as the loader runs it in one epoch: ``transform(index, item)``.

        Every item draws its random parameters from ``(seed, epoch, index)``,
        so an epoch's results do not depend on which thread runs which item.

        Examples
        --------
        >>> import numpy as np
        >>> from dataloader.transforms import RandomHFlip
        >>> epoch_transform = RandomHFlip().bind_epoch(seed=0, epoch=3)
        >>> image = np.arange(6, dtype=np.uint8).reshape(2, 3, 1)
        >>> a, b = epoch_transform(5, image), epoch_transform(5, image)
        >>> bool((np.asarray(a) == np.asarray(b)).all())
        True
        """
        return ItemTransform(self, seed, epoch)

    def _first(self) -> Transform | None:
        """The first op of the chain this transform stands for."""
        return self

    def __call__(self, data: Any, *, seed: int | None = None) -> Any:
        """Apply the transform to ``data`` now; ``seed`` (0 to 2**64 - 1) fixes its random draws."""
        if seed is None:
            seed = int(np.random.default_rng().integers(2**63))
        seed = check_seed(seed)
        image = compile_chain(self).apply(data, seed)
        return np.asarray(image) if isinstance(data, np.ndarray) and data.ndim > 1 else image

    def __repr__(self) -> str:
        # Only the arguments that differ from their defaults, as they would be typed.
        shown = []
        for field in dataclasses.fields(self):  # type: ignore[arg-type]  # every subclass is one
            value = getattr(self, field.name)
            if field.default is dataclasses.MISSING or value != field.default:
                shown.append(f"{field.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


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


_T = TypeVar("_T")


def set_checked(transform: Transform, name: str, value: Any) -> None:
    """Store a checked argument on a frozen transform."""
    object.__setattr__(transform, name, value)


@dataclass_transform(frozen_default=True)
def frozen(cls: type[_T]) -> type[_T]:
    """A transform class: a frozen dataclass whose repr shows the arguments."""
    return dataclasses.dataclass(frozen=True, repr=False, eq=True)(cls)
