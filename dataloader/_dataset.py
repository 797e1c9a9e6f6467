"""Dataset base classes with ``torch.utils.data``'s names and meanings.

Subclassing is optional: the loader treats any object with ``__getitem__``
and ``__len__`` as a map-style dataset (a list works), and any object with
``__iter__`` but no ``__getitem__`` as an iterable-style dataset.
"""

from __future__ import annotations

from typing import Any, Generic, Iterator, TypeVar

T_co = TypeVar("T_co", covariant=True)

__all__ = ["Dataset", "IterableDataset"]


class Dataset(Generic[T_co]):
    """A map-style dataset: items addressed by an integer index.

    Subclasses define ``__getitem__(index)`` and ``__len__()``; they may also
    define ``__getitems__(indices)``, which the loader then calls once per
    batch instead of calling ``__getitem__`` once per item.

    Examples
    --------
    >>> from dataloader import DataLoader, Dataset
    >>> class Squares(Dataset):
    ...     def __len__(self):
    ...         return 5
    ...     def __getitem__(self, index):
    ...         return index * index
    >>> [batch.tolist() for batch in DataLoader(Squares(), batch_size=2)]
    [[0, 1], [4, 9], [16]]
    """

    def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")


class IterableDataset(Generic[T_co]):
    """An iterable-style (streaming) dataset: items come from ``__iter__``.

    Examples
    --------
    >>> from dataloader import IterableDataset
    >>> class Counter(IterableDataset):
    ...     def __iter__(self):
    ...         return iter(range(3))
    >>> list(Counter())
    [0, 1, 2]
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def shard(self, rank: int | None = None, world_size: int | None = None) -> IterableDataset:
        """This rank's share of the stream, by item position: :func:`dataloader.shard`.

        ``rank`` and ``world_size`` default to torch.distributed's when it is
        initialised, else to the ``RANK`` and ``WORLD_SIZE`` environment
        variables.

        Examples
        --------
        >>> from dataloader import IterableDataset
        >>> class Counter(IterableDataset):
        ...     def __iter__(self):
        ...         return iter(range(7))
        >>> list(Counter().shard(rank=1, world_size=2))
        [1, 3, 5]
        """
        from dataloader._distributed import world
        from dataloader._streaming import shard

        world_size, rank = world(world_size, rank)
        return shard(self, rank, world_size)


def is_map_style(dataset: Any) -> bool:
    """Whether the loader addresses ``dataset`` by index."""
    if isinstance(dataset, IterableDataset):
        return False
    return hasattr(type(dataset), "__getitem__")


def is_iterable_style(dataset: Any) -> bool:
    """Whether the loader consumes ``dataset`` as a stream."""
    if isinstance(dataset, IterableDataset):
        return True
    return hasattr(type(dataset), "__iter__") and not hasattr(type(dataset), "__getitem__")
