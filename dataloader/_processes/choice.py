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
   receiving its request and sending the batch back; and a dataset whose
   class declares ``thread_safe = True``: its ``__getitem__`` may run on
   several threads at once;
6. a map-style dataset doing Python work -- measured (``"auto"``, the
   kind of ``dataloader._auto``): batch 0 loads on the calling thread,
   the rest on one worker thread or on worker processes, whichever the
   measurements say is faster (never on two threads at once); but
   processes, as torch's, where they are expected: under
   ``dataloader.torch`` (each worker seeded as torch seeds it), with a
   ``worker_init_fn`` or with a ``timeout``;
7. anything else -- processes: an iterable-style dataset whose
   ``__iter__`` is Python code (each process then iterates its own
   stream, as under torch).

With ``num_workers="auto"`` or a ``memory_budget``, a map-style epoch of
kind 4 or 5 is measured too (to size its workers and its window).

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
from dataloader._loading.stats import COLLATE, FETCH, TRANSFORM

__all__ = ["WORKER_TYPES", "check_worker_type", "resolve_worker_type", "safe_on_threads"]

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
    if _native_work(dataset, transform, collate_fn) or safe_on_threads(dataset):
        return "thread"
    return "process"


def safe_on_threads(dataset: Any) -> bool:
    """Whether ``dataset``'s items may load on several threads at once: a source read
    natively or held in memory (alone or under the library's wrappers), or a dataset
    whose class declares ``thread_safe = True``.

    >>> class Squares:
    ...     thread_safe = True  # __getitem__ reads shared state only
    ...     def __len__(self): return 4
    ...     def __getitem__(self, index): return index * index
    >>> safe_on_threads(Squares()), safe_on_threads([1, 2])
    (True, True)
    """
    return getattr(type(dataset), "thread_safe", False) is True or _native_or_in_memory(dataset)


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
        """The worker type for ``loader``'s current arguments, before measuring."""
        key = (loader.transform, loader.collate_fn, loader.num_workers, loader.item_concurrency)
        if key != self._key:
            self._key = key
            self._resolved = resolve_worker_type(
                self.requested, self.dataset, num_workers=loader.num_workers,
                item_concurrency=loader.item_concurrency, transform=loader.transform,
                collate_fn=loader.collate_fn)
        return self._resolved

    def measured(self, loader: Any) -> bool:
        """Whether ``loader``'s map-style epochs are measured (rules 6, and 4-5 with
        ``num_workers="auto"`` or a ``memory_budget``; see the module docstring)."""
        if (self.requested != "auto" or loader.num_workers == 0 or loader._iterable
                or is_async_dataset(self.dataset) or loader.item_concurrency > 1):
            return False
        if self.of(loader) == "process":
            # What expects worker processes, as torch's: its drop-in (torch's seeding
            # of each worker), a worker_init_fn, a timeout to wait on them.
            return (type(loader)._measures_python_work and loader.worker_init_fn is None
                    and not loader.timeout)
        return loader._auto_workers or loader.memory_budget is not None

    def safe_on_threads(self, loader: Any) -> bool:
        """Whether the measured epochs may load on several threads at once."""
        return self.of(loader) == "thread"

    def native_stages(self, loader: Any) -> frozenset[int]:
        """The stages (``stats`` columns) that run native code, without the interpreter."""
        if free_threaded():
            return frozenset({FETCH, TRANSFORM, COLLATE})
        transform = loader.transform or getattr(self.dataset, "transform", None)
        stages = set()
        if getattr(type(self.dataset), "native_loading", False):
            stages.add(FETCH)
        if isinstance(transform, EpochBound):
            stages.add(TRANSFORM)
        if isinstance(loader.collate_fn, BatchAssembling):
            stages.add(COLLATE)
        return frozenset(stages)


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
