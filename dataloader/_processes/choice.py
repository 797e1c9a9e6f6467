"""Which kind of worker a loader runs: ``worker_type="auto"``'s rule.

Threads share the process: nothing is copied, starting is instant, and
native work (the library's transforms, collators and sources, which
release the interpreter) runs in parallel on them. On a build with the
global interpreter lock, Python code does not: a dataset whose
``__getitem__`` or ``__iter__`` is Python work runs one item at a time on
threads, and scales only across processes, as torch's loader runs it.
The rule, in order:

1. ``num_workers=0`` -- no workers: batches load on the calling thread;
2. a free-threaded build -- threads (Python code runs in parallel on them);
3. an async dataset -- threads (its coroutines wait on one event loop), and
   ``item_concurrency > 1``, which says the items wait on I/O, as threads
   do best;
4. native work -- threads: a native transform chain (the loader's, or the
   dataset's own ``transform``, which the loader runs itself when the
   dataset offers ``raw_item``: ``plugins.item_source``), a collate
   function that assembles batches natively (``ImageCollator``), or one of
   the library's sources (``native_loading``: ``FileDataset``,
   ``TarDataset``, ``ParquetDataset``, ``ArrowDataset``, their
   ``RowGroupStream`` and ``TokenDataset``), also under ``shard`` or
   ``ChainDataset``; and
   ``interleave``'s datasets, whose ``stats()`` count in the loader's own
   copy;
5. items already in memory -- threads: a list, tuple, range, numpy array
   or ``TensorDataset`` (or a stream of one, through ``shard``) does
   microseconds of work per item, less than a process would spend
   receiving its request and sending the batch back;
6. anything else -- processes: a map-style dataset doing Python work, or
   an iterable-style one whose ``__iter__`` is Python code (each process
   then iterates its own stream, as under torch).

Examples
--------
>>> from dataloader._processes.choice import free_threaded, resolve_worker_type
>>> class Tokens:
...     def __len__(self): return 4
...     def __getitem__(self, index): return [index] * 3
>>> chosen = resolve_worker_type("auto", Tokens(), num_workers=2)
>>> chosen == ("thread" if free_threaded() else "process")
True
>>> resolve_worker_type("auto", [1, 2, 3], num_workers=2)
'thread'
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from dataloader._datasets.asynchronous import is_async_dataset
from dataloader._datasets.dataset import ChainDataset, ShardedIterable
from dataloader._datasets.interleave import InterleavedDataset, InterleavedStream
from dataloader._datasets.wrappers import TensorDataset
from dataloader._loading.plugins import BatchAssembling, EpochBound

__all__ = ["WORKER_TYPES", "check_worker_type", "resolve_worker_type"]

WORKER_TYPES = ("auto", "thread", "process")


def check_worker_type(worker_type: Any) -> None:
    """Validate ``DataLoader``'s ``worker_type``."""
    if worker_type not in WORKER_TYPES:
        raise ValueError(
            f"worker_type should be one of {', '.join(map(repr, WORKER_TYPES))}, "
            f"but got worker_type={worker_type!r}"
        )


def resolve_worker_type(requested: str, dataset: Any, *, num_workers: int,
                        item_concurrency: int = 1, transform: Any = None,
                        collate_fn: Any = None) -> str:
    """``"thread"`` or ``"process"``: ``requested``, or what ``"auto"`` chooses (see above)."""
    if requested != "auto":
        return requested
    if num_workers == 0 or free_threaded():
        return "thread"
    if is_async_dataset(dataset) or item_concurrency > 1:
        return "thread"
    if _native_work(dataset, transform, collate_fn) or _native_or_in_memory(dataset):
        return "thread"
    return "process"


class WorkerTypeChoice:
    """A loader's ``worker_type``, resolved again only when an argument "auto" reads changes.

    The dataset is fixed for a loader's life; its transform, collate function,
    worker count and item concurrency may be set after it is made.

    >>> from types import SimpleNamespace
    >>> loader = SimpleNamespace(transform=None, collate_fn=None, num_workers=0,
    ...                          item_concurrency=1)
    >>> choice = WorkerTypeChoice("auto", [1, 2, 3])
    >>> choice.of(loader)
    'thread'
    """

    def __init__(self, requested: str, dataset: Any) -> None:
        self.requested = requested
        self.dataset = dataset
        self._key: tuple | None = None
        self._resolved = requested

    def of(self, loader: Any) -> str:
        """The worker type for ``loader``'s current arguments."""
        key = (loader.transform, loader.collate_fn, loader.num_workers, loader.item_concurrency)
        if key != self._key:
            self._key = key
            self._resolved = resolve_worker_type(
                self.requested, self.dataset, num_workers=loader.num_workers,
                item_concurrency=loader.item_concurrency, transform=loader.transform,
                collate_fn=loader.collate_fn)
        return self._resolved


def free_threaded() -> bool:
    """Whether Python code runs in parallel on threads here (no GIL, or the GIL off)."""
    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)
    return is_gil_enabled is not None and not is_gil_enabled()


def _native_work(dataset: Any, transform: Any, collate_fn: Any) -> bool:
    return (isinstance(transform, EpochBound) or isinstance(collate_fn, BatchAssembling)
            or isinstance(getattr(dataset, "transform", None), EpochBound))


def _native_or_in_memory(dataset: Any) -> bool:
    """A source read natively or held in memory, alone or under the library's wrappers."""
    if isinstance(dataset, (list, tuple, range, np.ndarray, TensorDataset)):
        return True
    # interleave's stats() are counted in the loader's own dataset object.
    if getattr(type(dataset), "native_loading", False) or isinstance(
            dataset, (InterleavedDataset, InterleavedStream)):
        return True
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is not None and isinstance(dataset, torch_data.TensorDataset):
        return True
    if isinstance(dataset, ShardedIterable):
        return _native_or_in_memory(dataset.source)
    if isinstance(dataset, ChainDataset):
        return all(_native_or_in_memory(part) for part in dataset.datasets)
    return False
