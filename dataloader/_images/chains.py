"""Compiling transforms to native chains, and what a chain's output looks like.

A :class:`~dataloader.transforms.Transform` describes itself as native ops
(``_steps()``: ``(name, ints, floats)`` each, meanings in
``_core/src/dl_pipeline.h``); this module turns that into a
``dataloader._core.pipeline.Chain`` and reads static facts off it.
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

    ``None`` when the size or channels depend on the input image.
    """
    size = channels = None
    dtype, layout = "uint8", "HWC"
    for step_name, ints, _ in transform._steps():
        if step_name == "decode":
            channels = ints[0] or None
        elif step_name == "convert":
            channels = ints[0]
        elif step_name in ("crop",):
            size = (ints[2], ints[3])
        elif step_name in ("center_crop", "random_crop", "random_resized_crop", "pad_to"):
            size = (ints[0], ints[1])
        elif step_name == "resize":
            size = (ints[0], ints[1]) if ints[1] else None
        elif step_name == "pad":
            if size is not None:
                size = (size[0] + ints[1] + ints[3], size[1] + ints[0] + ints[2])
        elif step_name == "rotate90" and ints[0] % 2 and size is not None:
            size = (size[1], size[0])
        elif step_name in ("to_float", "normalize"):
            dtype = "float32"
        elif step_name == "to_chw":
            layout = "CHW"
        elif step_name == "to_hwc":
            layout = "HWC"
    if size is None or channels is None:
        return None
    return (*size, channels, dtype, layout)


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
