"""torch's warning for a stream that yields more than its ``__len__`` said.

``len(loader)`` over an iterable-style dataset is computed from
``len(dataset)``, which nothing checks until the stream has run. As in
torch (its NOTE "IterableDataset and __len__"), once ``len(loader)`` has
been asked, every epoch started after it warns at each batch delivered
past ``len(dataset)``: most often a dataset whose ``__iter__`` does not
split its items between workers, so that each worker yields all of them.

torch compares the batches delivered with the dataset's length in items,
and so does this: a batch holds at least one item, so the warning is
never wrong, though with ``batch_size > 1`` it comes late. Epochs started
before ``len(loader)`` was first asked never warn, as in torch.
"""

from __future__ import annotations

from typing import Any

from dataloader._errors import warn_at_caller
from dataloader._loading.streaming import loader_length

__all__ = ["stream_length", "warn_past_reported_length"]


def stream_length(loader: Any) -> int:
    """``len(loader)`` of an iterable-style dataset; remembers ``len(loader.dataset)``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from dataloader._loading.reported_length import stream_length
    >>> loader = SimpleNamespace(dataset=range(10), batch_size=4, drop_last=False,
    ...                          equal_batches=False)
    >>> stream_length(loader), loader._reported_length
    (3, 10)
    """
    length = loader_length(loader)
    loader._reported_length = len(loader.dataset)
    return length


def warn_past_reported_length(epoch: Any, loader: Any) -> None:
    """Make a streaming epoch warn at each batch past what ``len(loader)`` reported.

    ``epoch`` is a ``StreamIterator``; its source of batches is wrapped by one
    that counts them. Nothing changes before ``len(loader)`` is first asked.
    """
    reported = getattr(loader, "_reported_length", None)
    if reported is not None:
        epoch.source = _CountingSource(epoch.source, reported, loader)


class _CountingSource:
    """A streaming epoch's source of batches, counting the batches it delivers."""

    __slots__ = ("_source", "_reported", "_loader", "_delivered")

    def __init__(self, source: Any, reported: int, loader: Any) -> None:
        self._source = source
        self._reported = reported
        self._loader = loader
        self._delivered = 0

    def next(self) -> tuple:
        entry = self._source.next()
        if not entry[1]:  # an error is raised, not delivered
            self._delivered += 1
            if self._delivered > self._reported:
                warn_at_caller(past_length_message(self._loader, self._reported,
                                                   self._delivered))
        return entry


def past_length_message(loader: Any, reported: int, delivered: int) -> str:
    """torch's words for ``delivered`` batches of a stream whose length was ``reported``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from dataloader._loading.reported_length import past_length_message
    >>> loader = SimpleNamespace(dataset=range(3), batch_size=1, num_workers=0)
    >>> print(past_length_message(loader, 3, 4))
    Length of IterableDataset range was reported to be 3 (when accessing len(dataloader)), \
but 4 samples have been fetched.
    """
    name = type(loader.dataset).__name__
    if loader.batch_size in (None, 1):
        fetched = f"{delivered} samples have been fetched."
    else:
        fetched = (f"{delivered} batches, so at least {delivered} samples, have been "
                   "fetched.")
    message = (f"Length of IterableDataset {name} was reported to be {reported} (when "
               f"accessing len(dataloader)), but {fetched}")
    if loader.num_workers > 0:
        message += (
            " For multiprocessing data-loading, this could be caused by not properly "
            f"configuring the IterableDataset replica at each worker: each of the "
            f"{loader.num_workers} workers (threads or processes) iterates the dataset, so "
            "its __iter__ should yield a different share of the items on each, chosen with "
            "get_worker_info() (or stream through dataloader.shard); see "
            "docs/distributed.md, \"Streaming datasets\"."
        )
    return message
