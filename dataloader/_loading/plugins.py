"""The two small protocols through which other stages plug into the loader.

The loader itself knows nothing of images. A transform or collate function
that can do better than being called item by item says so by having one of
these methods; the loader calls them once per epoch and otherwise treats
the objects as plain callables:

* :class:`EpochBound` -- ``transform.bind_epoch(seed, epoch)`` returns this
  epoch's ``item_transform(index, item)``: a native chain bound to the
  loader's seed and the epoch, so every item draws its randomness from
  ``(seed, epoch, index)``, whichever thread runs it.
* :class:`BatchAssembling` -- ``collate_fn.assembler(item_transform)``
  returns a function ``assemble(indices, items) -> batch`` that transforms
  each item straight into its slot of the batch (``None`` when it cannot).
  An assembler whose batches equal ``collate_fn`` of the items transformed
  one by one says so with an attribute ``same_as_collate = True``: the
  loader may then load an epoch's first batch item by item on every worker
  thread and collate it (``Recipe.split_first``). One that can also take
  a batch's items one at a time, on any threads, offers ``slots(count)``:
  an object whose ``put(position, index, item)`` transforms the fetched
  ``item`` straight into slot ``position`` and whose ``finish()`` returns
  the batch (``Recipe.slots``), so that the shared first batch is not
  copied together at the end either.
* :class:`TransformingDataset` -- a dataset whose items are its own
  ``transform`` applied to ``raw_item(index)`` (``ImageFolder(root,
  transform=chain)``, torchvision's way of writing a pipeline). When that
  transform is :class:`EpochBound` and the loader has none of its own, the
  loader fetches ``raw_item(index)`` and runs the dataset's transform itself
  (:func:`item_source`), bound to the epoch and, with a
  :class:`BatchAssembling` collator, written straight into the batch: the
  same batches, at the same speed, as passing the chain to the loader.

* :class:`ColumnFetching` and :class:`ColumnCollating` -- a dataset
  stored as columns offers ``fetch_columns(indices)``, a batch as columns
  (a ``ColumnBatch``, ``dataloader._datasets.column_batch``), and a collate
  function that can take it offers ``collate_columns(columns)``. When both
  are there and nothing works on single items (no transform, no skip
  policy, no lanes), the epoch fetches and collates a batch that way
  (:func:`column_path`): the same batches, without a Python object per row.

Leaf types are collated through the registry of
:mod:`dataloader._loading.collate` (``register_collate``), where the image
stage registers ``Image`` and ``ImageBatch``.

Examples
--------
>>> from dataloader._loading.plugins import bind_epoch
>>> bind_epoch(str.upper, seed=0, epoch=0)
(<method 'upper' of 'str' objects>, None)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "BatchAssembling", "ColumnCollating", "ColumnFetching", "EpochBound", "TransformingDataset",
    "bind_epoch", "column_path", "item_source",
]

ItemTransform = Callable[[int, Any], Any]
Assemble = Callable[[list[int], Sequence[Any]], Any]


@runtime_checkable
class EpochBound(Protocol):
    """A transform that is bound to each epoch before it runs."""

    def bind_epoch(self, seed: int, epoch: int) -> ItemTransform: ...


@runtime_checkable
class BatchAssembling(Protocol):
    """A collate function that can assemble a batch while transforming its items."""

    def assembler(self, item_transform: ItemTransform) -> Assemble | None: ...


@runtime_checkable
class TransformingDataset(Protocol):
    """A dataset whose item ``index`` is ``transform`` applied to ``raw_item(index)``."""

    transform: Any

    def raw_item(self, index: int) -> Any: ...


class ColumnFetching(Protocol):
    """A dataset that can fetch a batch's rows as columns (a ``ColumnBatch``)."""

    def fetch_columns(self, indices: list[int]) -> Any: ...


class ColumnCollating(Protocol):
    """A collate function that can collate a batch fetched as columns."""

    def collate_columns(self, columns: Any) -> Any: ...


def column_path(dataset: Any, collate: Any) -> tuple[Callable[[list[int]], Any],
                                                      Callable[[Any], Any]] | None:
    """``(dataset.fetch_columns, collate.collate_columns)`` when both are offered, else ``None``.

    Looked up on the types, not the objects: a wrapper that forwards
    attributes to the dataset it wraps (``Subset``) must not pass on a
    fetch that knows nothing of its own indices.

    Examples
    --------
    >>> from dataloader._loading.plugins import column_path
    >>> column_path([1, 2, 3], len) is None
    True
    """
    fetch = getattr(type(dataset), "fetch_columns", None)
    collate_columns = getattr(type(collate), "collate_columns", None)
    if not callable(fetch) or not callable(collate_columns):
        return None
    return dataset.fetch_columns, collate.collate_columns


def item_source(dataset: Any, transform: Any) -> tuple[Callable[[int], Any] | None, Any]:
    """Which fetch and which transform an epoch over ``dataset`` runs.

    ``(dataset.raw_item, dataset.transform)`` when the loader's ``transform``
    is ``None`` and ``dataset`` is a :class:`TransformingDataset` whose
    transform is :class:`EpochBound`: the loader runs the dataset's
    transform itself. Otherwise ``(None, transform)``: the dataset's
    ``__getitem__`` fetches, and the loader's transform (if any) follows.

    Examples
    --------
    >>> from dataloader._loading.plugins import item_source
    >>> item_source([1, 2, 3], None)
    (None, None)
    """
    # Looked up with getattr, not isinstance(dataset, TransformingDataset):
    # from Python 3.12 that isinstance does not see attributes a wrapper
    # forwards through __getattr__ (Subset does).
    offered = getattr(dataset, "transform", None)
    raw_item = getattr(dataset, "raw_item", None)
    if transform is None and isinstance(offered, EpochBound) and callable(raw_item):
        return raw_item, offered
    return None, transform


def bind_epoch(
    transform: Any, collate_fn: Any = None, *, seed: int, epoch: int, lanes: bool = False
) -> tuple[Any, Assemble | None]:
    """This epoch's transform and, when one applies, its batch assembler.

    ``transform`` is returned as it is unless it is :class:`EpochBound`.
    With ``lanes`` (items of a batch loaded concurrently) there is no
    assembler: each item is transformed on its own.
    """
    if not isinstance(transform, EpochBound):
        return transform, None
    item_transform = transform.bind_epoch(seed, epoch)
    if lanes or not isinstance(collate_fn, BatchAssembling):
        return item_transform, None
    return item_transform, collate_fn.assembler(item_transform)
