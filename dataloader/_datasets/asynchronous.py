"""Datasets with ``async def __getitem__``: ``AsyncDataset`` and how the loader tells them.

A dataset is loaded on the loader's event loop when it is an
``AsyncDataset`` or its ``__getitem__`` or ``__getitems__`` is a coroutine
function (``is_async_dataset``); ``check_async_dataset`` refuses an
``AsyncDataset`` with a synchronous item method. The event loop and one
epoch's bridge to it are in ``event_loop``. See ``docs/architecture.md``,
"Async datasets".
"""

from __future__ import annotations

import inspect
from typing import Any, Generic, TypeVar

T_co = TypeVar("T_co", covariant=True)

__all__ = ["AsyncDataset", "check_async_dataset", "has_coroutine_method", "is_async_dataset"]


class AsyncDataset(Generic[T_co]):
    """A map-style dataset whose items are loaded by coroutines.

    Subclasses define ``async def __getitem__(self, index)`` and
    ``__len__()``; they may also define ``async def __getitems__(self,
    indices)`` (one coroutine per batch, used when ``item_concurrency`` is 1)
    and ``async def aclose(self)``, awaited on the loader's event loop when
    the loader is closed or collected (close clients created on that loop
    there).

    The loader runs the coroutines on one event loop of its own, at most
    ``max(num_workers, 1) * item_concurrency`` at a time; ``transform`` and
    ``collate_fn`` run on the worker threads, never on the event loop.
    A dataset that is not a subclass but whose ``__getitem__`` or
    ``__getitems__`` is a coroutine function is loaded the same way.

    Examples
    --------
    >>> import asyncio
    >>> from dataloader import AsyncDataset, DataLoader
    >>> class Doubled(AsyncDataset):
    ...     def __len__(self):
    ...         return 6
    ...     async def __getitem__(self, index):
    ...         await asyncio.sleep(0.001)  # a request to a server, say
    ...         return 2 * index
    >>> with DataLoader(Doubled(), batch_size=3, num_workers=2, item_concurrency=3) as loader:
    ...     [batch.tolist() for batch in loader]
    [[0, 2, 4], [6, 8, 10]]
    """

    async def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must define async def __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    async def aclose(self) -> None:
        """Release what the dataset opened on the loader's event loop (nothing by default).

        Examples
        --------
        >>> import asyncio
        >>> from dataloader import AsyncDataset
        >>> asyncio.run(AsyncDataset().aclose())
        """


def has_coroutine_method(dataset: Any, name: str) -> bool:
    """Whether ``dataset``'s class defines method ``name`` as a coroutine function.

    Examples
    --------
    >>> from dataloader._datasets.asynchronous import has_coroutine_method
    >>> class Remote:
    ...     async def __getitem__(self, index):
    ...         return index
    >>> has_coroutine_method(Remote(), "__getitem__"), has_coroutine_method(Remote(), "__len__")
    (True, False)
    """
    return inspect.iscoroutinefunction(getattr(type(dataset), name, None))


def is_async_dataset(dataset: Any) -> bool:
    """Whether the loader runs ``dataset``'s items on its event loop."""
    return (
        isinstance(dataset, AsyncDataset)
        or has_coroutine_method(dataset, "__getitem__")
        or has_coroutine_method(dataset, "__getitems__")
    )


def check_async_dataset(dataset: Any) -> None:
    """Raise ``TypeError`` for an ``AsyncDataset`` with a synchronous item method."""
    if not isinstance(dataset, AsyncDataset):
        return
    for name in ("__getitem__", "__getitems__", "aclose"):
        method = getattr(type(dataset), name, None)
        if method is not None and not inspect.iscoroutinefunction(method):
            raise TypeError(
                f"{type(dataset).__name__}.{name} should be a coroutine function "
                f"(async def {name}) in a subclass of AsyncDataset"
            )
