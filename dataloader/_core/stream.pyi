from typing import Any

from dataloader._core.consumer import Consumer
from dataloader._core.load import Recipe
from dataloader._core.pool import Pool

class Stream(Consumer):
    """One streaming epoch on a pool: one producer task per stream."""

    def __init__(
        self, pool: Pool, cursors: list[Any], recipe: Recipe, window: int, plan: Any
    ) -> None: ...
    def start(self) -> None: ...
    def cancel(self) -> None: ...
