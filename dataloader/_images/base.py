"""The base of every native transform: an immutable, picklable, callable description.

A transform is a frozen dataclass that describes itself as native ops
(``_steps()``) and runs them through its compiled chain
(``dataloader._images.chains``). ``dataloader.transforms`` and the modules
of further transforms (``colour``) define their classes on it.

Examples
--------
>>> import numpy as np
>>> from dataloader.transforms import Resize
>>> Resize((2, 3))(np.zeros((4, 4, 3), np.uint8)).shape
(2, 3, 3)
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, dataclass_transform

import numpy as np

from dataloader._images.arguments import check_seed
from dataloader._images.chains import ItemTransform, compile_chain

__all__ = ["Transform", "frozen", "set_checked"]


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


_T = TypeVar("_T")


def set_checked(transform: Transform, name: str, value: Any) -> None:
    """Store a checked argument on a frozen transform."""
    object.__setattr__(transform, name, value)


@dataclass_transform(frozen_default=True)
def frozen(cls: type[_T]) -> type[_T]:
    """A transform class: a frozen dataclass whose repr shows the arguments."""
    return dataclasses.dataclass(frozen=True, repr=False, eq=True)(cls)


