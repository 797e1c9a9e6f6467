"""Compiling transforms to native chains, and what a chain's output looks like.

A :class:`~dataloader.transforms.Transform` describes itself as native ops
(``_steps()``: ``(name, ints, floats)`` each, meanings in
``_core/src/dl_pipeline.h``); this module turns that into a
``dataloader._core.pipeline.Chain`` and reads static facts off it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from dataloader._core.pipeline import Chain

if TYPE_CHECKING:
    from dataloader.transforms import Transform

__all__ = ["compile_chain", "output_shape"]


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
