"""The optional hooks a dataset (or its iterator) may offer the loader, declared once.

Each is looked up by name, as torch looks up ``__getitems__``, so a
dataset offers one by defining the method; nothing needs to be inherited:

* ``__getitems__(indices)`` (:class:`BatchFetching`): a batch's items in
  one call, torch's hook for batched reads; :func:`batch_fetch` finds it
  (a dataset may set it to ``None`` to say it has none), and for a Hugging
  Face ``datasets.Dataset`` offers a batched read of its Arrow table
  instead (``dataloader._datasets.hugging_face``);
* ``set_epoch(epoch)`` (:class:`EpochAware`): told each epoch's number
  before its items are taken, so that a stream can shuffle by epoch;
  :func:`announce_epoch` calls it;
* ``stream_length(worker, workers, rank)`` and ``world_size``
  (:class:`CountedStreams`): a stream split among ranks that knows how many
  items each worker's stream of each rank yields this epoch, so that
  ``equal_batches`` stops every rank at the same batch;
  :func:`stream_counter` finds it;
* ``state_dict()`` and ``load_state_dict(state)`` on a stream's iterator
  (:class:`ResumableIterator`): where the stream is, for a loader's
  ``state_dict`` to resume from; :func:`state_saver` finds it.

A dataset with its own native transform offers ``transform`` and
``raw_item(index)`` (``dataloader._loading.plugins.TransformingDataset``);
that hook belongs with the transforms it plugs in.

Examples
--------
>>> from dataloader._datasets.hooks import announce_epoch, batch_fetch
>>> class Letters:
...     def __getitems__(self, indices):
...         return ["abc"[i] for i in indices]
...     def set_epoch(self, epoch):
...         print("epoch", epoch)
>>> batch_fetch(Letters())([2, 0])
['c', 'a']
>>> announce_epoch(Letters(), 3)
epoch 3
>>> batch_fetch([1, 2]) is None, announce_epoch([1, 2], 3)
(True, None)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from dataloader._datasets.hugging_face import arrow_batches

__all__ = [
    "BatchFetching", "CountedStreams", "EpochAware", "ResumableIterator", "announce_epoch",
    "batch_fetch", "state_saver", "stream_counter",
]


class BatchFetching(Protocol):
    """A dataset that fetches a batch's items in one call."""

    def __getitems__(self, indices: list[Any]) -> Sequence[Any]: ...


class EpochAware(Protocol):
    """A dataset told each epoch's number before its items are taken."""

    def set_epoch(self, epoch: int) -> None: ...


class CountedStreams(Protocol):
    """A stream split among ``world_size`` ranks that counts each worker's items."""

    world_size: int

    def stream_length(self, worker: int, workers: int, rank: int | None = None) -> int | None: ...


class ResumableIterator(Protocol):
    """A stream's iterator that can say where it is, and start from there."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> None: ...


def batch_fetch(dataset: Any) -> Callable[[list[Any]], Sequence[Any]] | None:
    """``dataset.__getitems__``, or ``None`` when it offers none (or sets it to ``None``).

    A Hugging Face dataset's rows are read from its Arrow table instead.
    """
    from_table = arrow_batches(dataset)
    if from_table is not None:
        return from_table
    getitems = getattr(dataset, "__getitems__", None)
    return getitems if callable(getitems) else None


def announce_epoch(dataset: Any, epoch: int) -> None:
    """Call ``dataset.set_epoch(epoch)`` when it has one."""
    set_epoch = getattr(dataset, "set_epoch", None)
    if callable(set_epoch):
        set_epoch(epoch)


def stream_counter(dataset: Any) -> CountedStreams | None:
    """``dataset`` when it counts its streams' items (:class:`CountedStreams`), else ``None``."""
    counted = callable(getattr(dataset, "stream_length", None))
    return dataset if counted and isinstance(getattr(dataset, "world_size", None), int) else None


def state_saver(iterator: Any) -> Callable[[], Any] | None:
    """``iterator.state_dict``, or ``None`` when the iterator cannot say where it is."""
    save = getattr(iterator, "state_dict", None)
    return save if callable(save) else None
