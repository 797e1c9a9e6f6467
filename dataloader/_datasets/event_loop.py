"""The loader's event loop for async datasets, and one epoch's synchronous bridge to it.

An async dataset (``dataloader._datasets.asynchronous``) is loaded by the
ordinary threaded engine. Each pool thread that fetches an item hands the
item's coroutine to the loader's event loop and waits for it without the
interpreter, so at most one item per pool thread is in flight
(``max(num_workers, 1) * item_concurrency`` in all); ordering, errors,
``transform`` and ``collate_fn`` stay with the engine, on the pool threads.
See ``docs/architecture.md``, "Async datasets".

Ownership:

* ``EventLoop`` owns the loader's ``LoopThread`` (an asyncio loop and the
  thread running it). A loader creates it for an async dataset; its first
  epoch starts the loop, which is kept for the loader's life, so clients
  bound to the loop (an ``aiohttp`` session created inside ``__getitem__``)
  keep working across epochs. A ``weakref.finalize`` on the loader holds the
  ``EventLoop`` (never the loader) and closes it.
* ``EpochItems`` is one epoch's view of the dataset with synchronous
  ``__getitem__`` / ``__getitems__``; it records the coroutines it started,
  and ``cancel()`` (called when the epoch's iterator is dropped) cancels them
  and refuses new ones.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import os
import threading
import weakref
from collections.abc import Coroutine, Sequence
from typing import Any

from dataloader._datasets.asynchronous import has_coroutine_method
from dataloader._datasets.hooks import batch_fetch
from dataloader._errors import EpochClosedError

__all__ = ["EpochItems", "EventLoop", "LoopThread"]

logger = logging.getLogger("dataloader")

# How long closing a loader waits for the dataset's ``aclose()``.
ACLOSE_TIMEOUT_SECONDS = 10.0
# How long closing a loader waits for its loop thread to end once ``aclose``
# is done and every coroutine is cancelled.
STOP_TIMEOUT_SECONDS = 10.0


class EventLoop:
    """The event loop of one loader: started on demand, restarted after ``close()``.

    ``running()`` returns the running :class:`LoopThread`, starting one when
    there is none; ``close()`` awaits the dataset's ``aclose()`` (bounded),
    cancels what is still pending and joins the thread. The dataset is held
    weakly, because a finalizer holds this object: a dataset that refers to
    its loader must not be kept alive by it.
    """

    def __init__(self, dataset: Any) -> None:
        try:
            self._dataset_ref: Any = weakref.ref(dataset)
        except TypeError:  # no __weakref__ slot: held strongly
            self._dataset_ref = lambda dataset=dataset: dataset
        self._lock = threading.Lock()
        self._running: LoopThread | None = None
        self._pid = os.getpid()

    def running(self) -> LoopThread:
        """The running loop, started when there is none."""
        with self._lock:
            if self._pid != os.getpid():
                # A child of fork(): the loop's thread exists in the parent
                # only. Its loop is abandoned untouched; the child makes its own.
                self._running = None
                self._pid = os.getpid()
            if self._running is None:
                self._running = LoopThread()
            return self._running

    def close(self) -> None:
        """Await the dataset's ``aclose()``, cancel every pending coroutine, join the thread."""
        with self._lock:
            running, self._running = self._running, None
        if running is not None and self._pid == os.getpid():
            running.close(self._dataset_ref())


class LoopThread:
    """One asyncio loop running on a thread of its own (``dataloader-event-loop``).

    ``submit()`` runs a coroutine on it from any thread. ``close()`` first
    refuses new coroutines, so every coroutine accepted before is started
    (its start is queued on the loop ahead of the shutdown) and then
    cancelled by the shutdown: no thread waits forever for a future.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        # Submitted, not yet started on the loop: future -> coroutine.
        self._unstarted: dict[concurrent.futures.Future, Any] = {}
        self._closing = False
        ready = threading.Event()
        self.thread = threading.Thread(
            target=_run_loop, args=(self.loop, ready), name="dataloader-event-loop", daemon=True
        )
        self.thread.start()
        ready.wait()

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        """Run ``coroutine`` on the loop; cancelling the returned future cancels it.

        Unlike ``asyncio.run_coroutine_threadsafe``, the future receives the
        coroutine's exception object itself (with its notes and cause).
        """
        future: concurrent.futures.Future = concurrent.futures.Future()
        loop = self.loop

        def start() -> None:
            with self._lock:
                self._unstarted.pop(future, None)
            if future.cancelled():
                coroutine.close()
                return
            task = loop.create_task(coroutine)
            task.add_done_callback(lambda task: _copy_outcome(task, future))
            future.add_done_callback(lambda future: _cancel_task(loop, task, future))

        with self._lock:
            # Queued under the lock: a start accepted before close() began
            # runs before the shutdown, which close() queues later.
            if not self._closing:
                self._unstarted[future] = coroutine
                loop.call_soon_threadsafe(start)
                return future
        coroutine.close()
        raise EpochClosedError("the DataLoader was closed")

    def close(self, dataset: Any) -> None:
        with self._lock:
            self._closing = True
        loop, thread = self.loop, self.thread
        shutdown = _shutdown(dataset)
        if threading.current_thread() is thread:
            # Collected on the loop's own thread: it cannot wait for itself.
            loop.create_task(shutdown).add_done_callback(lambda _: loop.stop())
            return
        try:
            asyncio.run_coroutine_threadsafe(shutdown, loop).result(
                ACLOSE_TIMEOUT_SECONDS + 2 * STOP_TIMEOUT_SECONDS
            )
        except BaseException as exc:  # noqa: BLE001 -- never raised into the collector
            logger.warning("dataloader: shutting down the event loop failed: %r", exc)
        finally:
            loop.call_soon_threadsafe(loop.stop)
        thread.join(STOP_TIMEOUT_SECONDS)
        # Only a loop stuck past the timeouts leaves coroutines unstarted:
        # their waiters must not wait forever.
        with self._lock:
            unstarted, self._unstarted = self._unstarted, {}
        for future, coroutine in unstarted.items():
            future.cancel()
            coroutine.close()


def _run_loop(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    # The loop's executor (getaddrinfo(), to_thread()) is ours, so that its
    # threads are joined before this thread ends.
    executor = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="dataloader-executor")
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        loop.close()


def _copy_outcome(task: asyncio.Task, future: concurrent.futures.Future) -> None:
    try:
        if task.cancelled():
            future.cancel()
        elif task.exception() is not None:
            future.set_exception(task.exception())
        else:
            future.set_result(task.result())
    except concurrent.futures.InvalidStateError:
        pass  # cancelled by the waiting thread meanwhile


def _cancel_task(
    loop: asyncio.AbstractEventLoop, task: asyncio.Task, future: concurrent.futures.Future
) -> None:
    if future.cancelled():
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:
            pass  # the loop is closed: the task is gone with it


async def _shutdown(dataset: Any) -> None:
    """Cancel the items in flight, await ``aclose()`` (bounded), cancel what it left."""
    await _cancel_all()
    aclose = getattr(dataset, "aclose", None)
    if aclose is not None and inspect.iscoroutinefunction(aclose):
        try:
            await asyncio.wait_for(aclose(), ACLOSE_TIMEOUT_SECONDS)
        except Exception:
            logger.exception("dataloader: %s.aclose() failed", type(dataset).__name__)
    await _cancel_all()
    await asyncio.get_running_loop().shutdown_asyncgens()


async def _cancel_all() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=STOP_TIMEOUT_SECONDS)


class EpochItems:
    """One epoch's synchronous view of an async dataset, for the epoch's ``Recipe``.

    ``__getitem__`` (and ``__getitems__`` when the dataset has an async one)
    run the dataset's coroutine on the loader's loop and wait for it; a
    synchronous method of the dataset is passed through. ``item_lanes`` says
    whether the engine must load this epoch item by item even with
    ``item_concurrency=1``: it must when items are coroutines and no
    ``__getitems__`` takes whole batches, so that a dropped epoch stops
    before its next item (a batch task would start every item of its batch).
    """

    def __init__(self, dataset: Any, event_loop: EventLoop) -> None:
        self._dataset = dataset
        # Started here, by the consumer thread. The epoch keeps to this loop:
        # once the loader is closed, its items fail instead of starting a
        # new loop from a worker.
        self._loop_thread = event_loop.running()
        self._lock = threading.Lock()
        self._pending: set[concurrent.futures.Future] = set()
        self._cancelled = False
        async_getitem = has_coroutine_method(dataset, "__getitem__")
        if not async_getitem:
            self.__getitem__ = dataset.__getitem__  # type: ignore[method-assign]
        getitems = batch_fetch(dataset)
        if getitems is None:
            # An instance attribute shadowing the method: mypy cannot express it.
            self.__getitems__ = None  # type: ignore[method-assign, assignment]
        elif not has_coroutine_method(dataset, "__getitems__"):
            self.__getitems__ = getitems  # type: ignore[method-assign, assignment]  # as above
        self.item_lanes = async_getitem and not getitems

    def __getitem__(self, index: int) -> Any:
        return self._run(self._dataset.__getitem__(index))

    def __getitems__(self, indices: list[int]) -> Sequence[Any]:
        return self._run(self._dataset.__getitems__(indices))

    def __len__(self) -> int:
        return len(self._dataset)

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        with self._lock:
            if self._cancelled:
                coroutine.close()
                raise EpochClosedError("this epoch was cancelled")
            future = self._loop_thread.submit(coroutine)
            self._pending.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise EpochClosedError("the DataLoader was closed") from None
        except BaseException:
            future.cancel()  # Ctrl-C while waiting on the calling thread
            raise
        finally:
            with self._lock:
                self._pending.discard(future)

    def cancel(self) -> None:
        """Cancel the coroutines in flight and refuse new ones."""
        with self._lock:
            self._cancelled = True
            pending = list(self._pending)
        for future in pending:
            future.cancel()
