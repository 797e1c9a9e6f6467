from typing import Any

from dataloader._core.consumer import Consumer
from dataloader._core.pool import Pool
from dataloader._errors import EpochClosedError as EpochClosedError

class Epoch(Consumer):
    """One threaded epoch: a window of batches loaded on a pool."""

    def __init__(self, pool: Pool, plan: Any) -> None: ...
    def start(self) -> None: ...
    def cancel(self) -> None: ...
