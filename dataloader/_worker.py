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


class WorkerSetup:
    """Prepares each pool thread of one loader before its first item.

    Called by every task with the thread's index; the first call on a thread
    records its :class:`WorkerInfo` and runs ``worker_init_fn(worker_id)``,
    later calls return at once. A failing ``worker_init_fn`` is raised as
    the error of the batch that triggered it and retried by the next one.
    """

    __slots__ = ("num_workers", "base_seed", "dataset", "init_fn")

    def __init__(self, num_workers: int, base_seed: int, dataset: Any, init_fn: Any) -> None:
        self.num_workers = num_workers
        self.base_seed = base_seed
        self.dataset = dataset
        self.init_fn = init_fn

    def __call__(self, thread_index: int) -> None:
        if getattr(_local, "setup", None) is self:
            return
        _local.info = WorkerInfo(
            id=thread_index,
            num_workers=self.num_workers,
            seed=self.base_seed + thread_index,
            dataset=self.dataset,
        )
        if self.init_fn is not None:
            self.init_fn(thread_index)
        _local.setup = self
