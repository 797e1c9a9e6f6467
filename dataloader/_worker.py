"""Which worker is running this code: ``get_worker_info()``.

Workers are threads, so the information is thread-local: the consumer thread
(and any thread the loader does not own) sees ``None``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerInfo", "get_worker_info"]

_local = threading.local()


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker thread knows about itself.

    Attributes
    ----------
    id : int
        The worker's number, from 0 to ``num_workers - 1``.
    num_workers : int
        How many workers the loader runs.
    seed : int
        The worker's seed: the loader's base seed plus ``id``.
    dataset : object
        The loader's dataset (the same object, not a copy: workers are threads).

    Examples
    --------
    >>> from dataloader import WorkerInfo
    >>> info = WorkerInfo(id=1, num_workers=4, seed=1001, dataset=[])
    >>> info.id, info.num_workers
    (1, 4)
    """

    id: int
    num_workers: int
    seed: int
    dataset: Any


def get_worker_info() -> WorkerInfo | None:
    """Return the calling worker's :class:`WorkerInfo`, or ``None`` outside workers.

    Examples
    --------
    >>> from dataloader import get_worker_info
    >>> get_worker_info() is None  # the main thread is not a worker
    True
    """
    return getattr(_local, "info", None)


def set_worker_info(info: WorkerInfo | None) -> None:
    """Record ``info`` as the calling thread's worker information."""
    _local.info = info
