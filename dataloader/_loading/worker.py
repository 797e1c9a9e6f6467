"""Each worker thread's set-up: its ``WorkerInfo``, one torch thread, its batch memory.

A loader's pool threads call :class:`WorkerSetup` before their first item
(see ``dataloader._datasets.worker_info`` for what ``get_worker_info()``
answers there).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import weakref
from collections.abc import Iterator
from typing import Any

from dataloader._core.buffers import POOL_CAPACITY_MAX, BufferPool, pooled_array
from dataloader._datasets.worker_info import WorkerInfo, answer_torch_worker_info, thread_state
from dataloader._loading.collate import batch_allocator

__all__ = ["WorkerSetup", "one_torch_thread", "use_one_torch_thread"]


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


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block with one torch thread (:func:`use_one_torch_thread`), as on a
    worker, then give the calling thread its own count back.

    Examples
    --------
    >>> from dataloader._loading.worker import one_torch_thread
    >>> with one_torch_thread():
    ...     pass  # torch's operators here run on this thread alone
    """
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


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
        setup_ref = getattr(thread_state, "setup", None)
        if setup_ref is not None and setup_ref() is self:
            return
        thread_state.id = thread_index
        thread_state.setup = weakref.ref(self)
        use_one_torch_thread()
        batch_allocator(self.allocate, this_thread=True)
        if self.init_fn is not None:
            try:
                self.init_fn(thread_index)
            except BaseException:
                thread_state.setup = None
                raise
