"""Which worker is running this code: ``get_worker_info()``.

On worker threads the information is thread-local: the consumer thread
(and any thread the loader does not own) sees ``None``. In a worker process
(``worker_type="process"``) every thread sees that process's worker. torch's own
``torch.utils.data.get_worker_info()`` answers the same on the loader's
threads (see ``answer_torch_worker_info``), so an unchanged torch dataset
that splits its stream by worker does so here too.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from dataloader._core.buffers import POOL_CAPACITY_MAX, BufferPool, pooled_array
from dataloader._loading.collate import batch_allocator

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
        The worker's seed: the epoch's base seed plus ``id``. A worker
        process seeds ``random`` and torch with it (``torch.initial_seed()``
        returns it), and numpy's global generator from it, before
        ``worker_init_fn`` runs, as torch's workers do.
    dataset : object
        The loader's dataset: the same object on worker threads, the
        process's copy in a worker process.
    batch_size : int or None
        The loader's ``batch_size`` when the worker iterates a stream
        (``None`` otherwise). With ``in_order`` the loader delivers batch
        ``k`` of worker ``w`` as its batch ``k * num_workers + w``, so a
        stream can split one order among workers by batch.
    rng : object or None
        torch 2.13's field, kept for code that reads it: always ``None``.
    worker_method : str
        ``"multiprocessing"`` in a worker process, ``"thread"`` on a worker
        thread (torch's names).

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
    batch_size: int | None = None
    rng: Any = None
    worker_method: str = "thread"


def get_worker_info() -> WorkerInfo | None:
    """Return the calling worker's :class:`WorkerInfo`, or ``None`` outside workers.

    Examples
    --------
    >>> from dataloader import DataLoader, get_worker_info
    >>> get_worker_info() is None  # the main thread is not a worker
    True
    >>> loader = DataLoader(["a", "b"], batch_size=None, num_workers=2,
    ...                     transform=lambda index, item: get_worker_info().num_workers)
    >>> list(loader)
    [2, 2]
    """
    stream_info = getattr(_local, "stream_info", None)
    if stream_info is not None:
        return stream_info
    setup_ref = getattr(_local, "setup", None)
    setup = setup_ref() if setup_ref is not None else None
    if setup is None:
        return _process_info
    return setup.infos.get(_local.id)


# A worker process's info, seen by every thread in it (``set_process_worker``).
_process_info: WorkerInfo | None = None


def set_process_worker(info: WorkerInfo) -> None:
    """Make ``get_worker_info()`` return ``info`` on every thread of this worker process."""
    global _process_info
    _process_info = info


def answer_torch_worker_info() -> None:
    """Make torch's ``get_worker_info()`` return this module's answer on loader threads.

    torch keeps its worker's info in one process-wide global, set in its
    worker processes; on threads it would say ``None`` to every worker, and
    a torch ``IterableDataset`` that splits its items by worker would give
    each worker the whole stream. Its ``get_worker_info`` functions are
    replaced (once, and only when torch is already imported) by one that
    asks :func:`get_worker_info` first and torch's own otherwise. Code that
    bound ``get_worker_info`` by name before the first epoch keeps torch's.
    """
    # torch's modules, untyped here: ``Any`` lets their functions be replaced.
    torch_data: Any = sys.modules.get("torch.utils.data")
    if torch_data is None or torch_data.get_worker_info is _torch_get_worker_info:
        return
    original = torch_data.get_worker_info
    _torch_originals.append(original)
    torch_data.get_worker_info = _torch_get_worker_info
    worker_module: Any = sys.modules.get("torch.utils.data._utils.worker")
    if worker_module is not None and worker_module.get_worker_info is original:
        worker_module.get_worker_info = _torch_get_worker_info


# torch's get_worker_info, kept by answer_torch_worker_info.
_torch_originals: list[Any] = []


def _torch_get_worker_info() -> Any:
    info = get_worker_info()
    if info is not None:
        return info
    return _torch_originals[0]() if _torch_originals else None


def set_stream_worker(info: WorkerInfo | None) -> None:
    """Make ``get_worker_info()`` on this thread return ``info`` (``None`` undoes it).

    A worker iterating a stream is that stream's worker, whichever pool
    thread it is: ``id`` is the stream's number, ``num_workers`` the
    number of streams (see ``dataloader._loading.streaming``).
    """
    _local.stream_info = info


def use_one_torch_thread() -> None:
    """Run torch's operators on this thread without a team of intra-op threads.

    torch's own worker processes and pin-memory thread do the same. Loading
    threads work on small tensors side by side, one per core; teams of
    intra-op threads on top of them would ask for more cores than there are
    and spin waiting for each other (ten times slower on two cores). The
    setting is the calling thread's own once it has used torch; threads that
    have not used torch yet take it as their default, as they do after
    torch's pin-memory thread starts.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


class WorkerSetup:
    """Prepares each pool thread of one loader before its first item.

    Called by every task with the thread's index; the first call on a thread
    records its :class:`WorkerInfo`, gives it one torch thread
    (:func:`use_one_torch_thread`), makes ``default_collate`` take its
    batches from the loader's ``BufferPool`` (sized for the batches in
    flight) and runs ``worker_init_fn(worker_id)``; later calls return at
    once. A failing ``worker_init_fn`` is raised as
    the error of the batch that triggered it and retried by the next one.
    """

    # A thread-local keeps only a weak reference to its setup: a strong one
    # (to the dataset, through the setup) would keep the loader alive for as
    # long as its own pool threads, and the loader owns the pool.
    __slots__ = ("infos", "init_fn", "allocate", "__weakref__")

    def __init__(self, num_workers: int, base_seed: int, dataset: Any, init_fn: Any,
                 prefetch_factor: int = 2) -> None:
        answer_torch_worker_info()
        torch = sys.modules.get("torch")
        if torch is not None:
            # Settles the consumer thread's own intra-op thread count before
            # the workers change the default that unsettled threads take.
            torch.get_num_threads()
        self.infos = {
            worker_id: WorkerInfo(worker_id, num_workers, base_seed + worker_id, dataset)
            for worker_id in range(num_workers)
        }
        self.init_fn = init_fn
        # The batches in flight, the one the consumer holds and one more.
        capacity = min(num_workers * prefetch_factor + 2, POOL_CAPACITY_MAX)
        self.allocate = functools.partial(pooled_array, BufferPool(capacity))

    def __call__(self, thread_index: int) -> None:
        setup_ref = getattr(_local, "setup", None)
        if setup_ref is not None and setup_ref() is self:
            return
        _local.id = thread_index
        _local.setup = weakref.ref(self)
        use_one_torch_thread()
        batch_allocator(self.allocate, this_thread=True)
        if self.init_fn is not None:
            try:
                self.init_fn(thread_index)
            except BaseException:
                _local.setup = None
                raise
