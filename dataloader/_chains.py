"""Compiling transforms to native chains, and what a chain's output looks like.

A :class:`~dataloader.transforms.Transform` describes itself as native ops
(``_steps()``: ``(name, ints, floats)`` each, made by ``pipeline.step``
from the parameter names of ``_core/src/dl_tables.h``); this module turns
that into a ``dataloader._core.pipeline.Chain`` and asks it static facts.
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

    ``None`` when the size or channels depend on the input image. The native
    plan pass answers, by the same shape rule it applies to each item.
    """
    return compile_chain(transform).output_shape()
