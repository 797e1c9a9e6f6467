from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataloader._core.image import Image, ImageBatch

OPS: tuple[str, ...]
AUGMENT_OPS: tuple[str, ...]
AUTO_AUGMENT_POLICIES: tuple[str, ...]

def item_seed(seed: int, epoch: int, index: int) -> int: ...
def step(key: str, **params: Any) -> tuple[str, tuple[int, ...], tuple[float, ...]]: ...

class Chain:
    """A compiled chain of ops."""

    steps: tuple[tuple[str, tuple[int, ...], tuple[float, ...]], ...]
    def __init__(
        self,
        steps: Sequence[tuple[str, Sequence[int], Sequence[float]]],
        fallback: Callable[[Any], np.ndarray] | None = None,
        first_name: str | None = None,
    ) -> None: ...
    def apply(self, data: Any, seed: int) -> Image: ...
    def apply_into(self, data: Any, seed: int, batch: ImageBatch, index: int) -> None: ...
    def apply_frames_into(
        self, frames: np.ndarray, seed: int, out: np.ndarray, chw: bool
    ) -> None: ...
    def output_shape(self) -> tuple[int, int, int, str, str] | None: ...
    def lead_window(
        self, height: int, width: int, channels: int, seed: int
    ) -> tuple[int, int, int, int, int, int, int, int] | None: ...
