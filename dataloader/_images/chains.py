"""Compiling transforms to native chains, and what a chain's output looks like.

A :class:`~dataloader.transforms.Transform` describes itself as native ops
(``_steps()``: ``(name, ints, floats)`` each, made by ``pipeline.step``
from the parameter names of ``_core/src/dl_tables.h``); this module turns
that into a ``dataloader._core.pipeline.Chain`` and asks it static facts.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from dataloader._core.pipeline import Chain
from dataloader._core.pipeline import item_seed as native_item_seed

if TYPE_CHECKING:
    from dataloader.transforms import Transform

__all__ = ["ItemTransform", "compile_chain", "output_shape"]

_SEED_MASK = 2**63 - 1


@functools.lru_cache(maxsize=256)
def compile_chain(transform: Transform) -> Chain:
    """The native ``Chain`` of ``transform`` (cached: transforms are immutable)."""
    first = transform._first()
    # A chain that starts by decoding falls back to Pillow for other formats.
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
