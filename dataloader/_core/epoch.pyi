from collections.abc import Callable, Iterator
from typing import Any

from dataloader._core.pool import Pool
from dataloader._errors import EpochClosedError as EpochClosedError

class Epoch:
    """One threaded epoch: a window of batches loaded on a pool."""

    def __init__(
        self,
        pool: Pool,
        recipe: Any,
        batches: Iterator[Any],
        check_indices: Callable[[Any], Any] | None,
        window: int,
        item_concurrency: int,
        in_order: bool,
        timeout: float,
        worker_setup: Callable[[int], None],
        stats: Any,
        item_lanes: bool = False,
    ) -> None: ...
    @property
    def delivered(self) -> int: ...
    def start(self) -> None: ...
    def cancel(self) -> None: ...
    def next(self) -> Any: ...
