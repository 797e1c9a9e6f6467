from typing import Any, Callable

from dataloader._core.pool import Pool

class Stream:
    """One streaming epoch on a pool: one producer task per stream."""

    def __init__(
        self,
        pool: Pool,
        cursors: list[Any],
        window: int,
        timeout: float,
        worker_setup: Callable[[int], None],
        stats: Any,
        in_order: bool = False,
        delivered: list[int] | None = None,
    ) -> None: ...
    @property
    def delivered(self) -> int: ...
    def start(self) -> None: ...
    def cancel(self) -> None: ...
    def next(self) -> Any: ...
