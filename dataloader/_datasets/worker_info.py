"""Which worker is running this code: ``get_worker_info()``.

On worker threads the information is thread-local: the consumer thread
(and any thread the loader does not own) sees ``None``. In a worker process
(``worker_type="process"``) every thread sees that process's worker. torch's own
``torch.utils.data.get_worker_info()`` answers the same on the loader's
threads (see ``answer_torch_worker_info``), so an unchanged torch dataset
that splits its stream by worker does so here too.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

__all__ = [
    "WorkerInfo", "answer_torch_worker_info", "get_worker_info", "set_process_worker",
    "set_stream_worker", "thread_state",
]

# Each worker thread's own: ``setup``, a weak reference to the loader's set-up
# (whose ``infos`` maps a worker id to its WorkerInfo), ``id``, and
# ``stream_info`` while the thread iterates a stream. Weak, so that a pool
# thread does not keep the loader's dataset alive (``dataloader._loading.worker``).
thread_state = threading.local()


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
    stream_info = getattr(thread_state, "stream_info", None)
    if stream_info is not None:
        return stream_info
    setup_ref = getattr(thread_state, "setup", None)
    setup = setup_ref() if setup_ref is not None else None
    if setup is None:
        return _process_info
    return setup.infos.get(thread_state.id)


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
    thread_state.stream_info = info


