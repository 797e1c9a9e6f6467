"""Dataset base classes with ``torch.utils.data``'s names and meanings.

Subclassing is optional: the loader treats any object with ``__getitem__``
and ``__len__`` as a map-style dataset (a list works), and any object with
``__iter__`` but no ``__getitem__`` as an iterable-style dataset.

``dataset_a + dataset_b`` concatenates: :class:`ConcatDataset` for
map-style datasets, :class:`ChainDataset` for streams, so both live here
beside the bases. torch's other dataset utilities (``Subset``,
``TensorDataset``, ``StackDataset``, ``random_split``) are in
``dataloader._datasets.wrappers``.
"""

from __future__ import annotations

import bisect
import operator
import sys
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, Generic, TypeVar

from dataloader._datasets.asynchronous import is_async_dataset
from dataloader._datasets.hooks import announce_epoch, batch_fetch
from dataloader._datasets.worker_info import WorkerInfo, get_worker_info, set_stream_worker
from dataloader._errors import DatasetTypeError, DatasetValueError
from dataloader._sampling.distributed import check_rank, world
from dataloader._sampling.remainder import Deal, Level

T_co = TypeVar("T_co", covariant=True)

__all__ = ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "forwarded_getitems"]


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

    def __add__(self, other: Any) -> ConcatDataset[T_co]:
        """``self`` then ``other``, as one :class:`ConcatDataset`.

        Examples
        --------
        >>> from dataloader import Dataset
        >>> class Letters(Dataset):
        ...     def __init__(self, text):
        ...         self.text = text
        ...     def __len__(self):
        ...         return len(self.text)
        ...     def __getitem__(self, index):
        ...         return self.text[index]
        >>> both = Letters("ab") + Letters("xyz")
        >>> [both[i] for i in range(len(both))], both.cumulative_sizes
        (['a', 'b', 'x', 'y', 'z'], [2, 5])
        """
        return ConcatDataset([self, other])


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

    def __add__(self, other: Any) -> ChainDataset:
        """``self`` then ``other``, as one :class:`ChainDataset`.

        Examples
        --------
        >>> from dataloader import IterableDataset
        >>> class Counter(IterableDataset):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def __iter__(self):
        ...         return iter(range(self.n))
        >>> list(Counter(2) + Counter(3))
        [0, 1, 0, 1, 2]
        """
        return ChainDataset([self, other])

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
        world_size, rank = world(world_size, rank)
        return shard(self, rank, world_size)


def _is_declared_stream(dataset: Any) -> bool:
    """Whether ``dataset`` subclasses this library's or torch's ``IterableDataset``.

    torch's ``Dataset`` base defines ``__getitem__`` (raising
    ``NotImplementedError``), so its streams must be recognised by class; a
    torch dataset exists only once torch is imported, hence the
    ``sys.modules`` look-up instead of an import.
    """
    if isinstance(dataset, IterableDataset):
        return True
    torch_data = sys.modules.get("torch.utils.data")
    return torch_data is not None and isinstance(dataset, torch_data.IterableDataset)


def is_map_style(dataset: Any) -> bool:
    """Whether the loader addresses ``dataset`` by index."""
    if _is_declared_stream(dataset):
        return False
    return hasattr(type(dataset), "__getitem__")


def is_iterable_style(dataset: Any) -> bool:
    """Whether the loader consumes ``dataset`` as a stream."""
    if _is_declared_stream(dataset):
        return True
    return hasattr(type(dataset), "__iter__") and not hasattr(type(dataset), "__getitem__")


class ConcatDataset(Dataset[T_co]):
    """Map-style datasets one after the other, addressed as one.

    Index ``i`` is item ``i - cumulative_sizes[k - 1]`` of the ``k``-th
    dataset, the first whose cumulative size exceeds ``i``. Negative
    indices count from the end, as in torch; ``-len(self) - 1`` and below
    raise ``ValueError`` (torch's choice) and ``len(self)`` and above raise
    ``IndexError``. A batch is fetched with one ``__getitems__`` call per
    member dataset that has one, so concatenating keeps their batched
    fetching.

    Parameters
    ----------
    datasets : iterable of map-style datasets
        At least one; none of them an :class:`IterableDataset` (use
        :class:`ChainDataset` for streams). The lengths are read once, here.

    Attributes
    ----------
    datasets : list
        The datasets, in order.
    cumulative_sizes : list of int
        ``cumulative_sizes[k]`` is the total length of ``datasets[: k + 1]``.

    Examples
    --------
    >>> from dataloader import ConcatDataset, DataLoader
    >>> both = ConcatDataset([[0, 1, 2], [10, 11]])
    >>> len(both), both.cumulative_sizes, both[3], both[-1]
    (5, [3, 5], 10, 11)
    >>> [batch.tolist() for batch in DataLoader(both, batch_size=2)]
    [[0, 1], [2, 10], [11]]
    """

    datasets: list[Any]
    cumulative_sizes: list[int]

    @staticmethod
    def cumsum(sequence: Iterable[Any]) -> list[int]:
        """The running totals of the lengths of ``sequence``'s datasets (torch's helper).

        Examples
        --------
        >>> from dataloader import ConcatDataset
        >>> ConcatDataset.cumsum([[0, 1], [], [2, 3, 4]])
        [2, 2, 5]
        """
        totals, total = [], 0
        for dataset in sequence:
            total += len(dataset)
            totals.append(total)
        return totals

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise DatasetValueError("datasets should not be an empty iterable")
        for position, dataset in enumerate(self.datasets):
            if is_iterable_style(dataset):
                raise DatasetTypeError(
                    "ConcatDataset does not support IterableDataset (use ChainDataset for "
                    f"streams), but datasets[{position}] is a {type(dataset).__name__}"
                )
            if not is_map_style(dataset):
                raise TypeError(
                    "ConcatDataset takes map-style datasets (__getitem__ and __len__), but "
                    f"datasets[{position}] is a {type(dataset).__name__}"
                )
            if is_async_dataset(dataset):
                raise TypeError(
                    "ConcatDataset cannot hold an async dataset, but "
                    f"datasets[{position}] is a {type(dataset).__name__} (async def "
                    "__getitem__): make one dataset of the sources (one list of URLs, say)"
                )
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        member, local = self._locate(idx)
        return self.datasets[member][local]

    def __getitems__(self, indices: Sequence[int]) -> list[T_co]:
        if type(self).__getitem__ is not ConcatDataset.__getitem__:
            return [self[index] for index in indices]  # a subclass's own items
        # Group the batch's indices by member dataset, fetch each group in
        # one call where the member can, and put the items back in order.
        groups: dict[int, tuple[list[int], list[int]]] = {}
        for position, index in enumerate(indices):
            member, local = self._locate(index)
            positions, locals_ = groups.setdefault(member, ([], []))
            positions.append(position)
            locals_.append(local)
        items: list[Any] = [None] * len(indices)
        for member, (positions, locals_) in groups.items():
            fetched = forwarded_getitems(self.datasets[member], locals_)
            for position, item in zip(positions, fetched, strict=True):
                items[position] = item
        return items

    def _locate(self, idx: Any) -> tuple[int, int]:
        """The member dataset of ``idx``, and the index within it."""
        try:
            index = operator.index(idx)
        except TypeError:
            raise TypeError(
                f"ConcatDataset indices should be integers, but got idx={idx!r} "
                f"({type(idx).__name__})"
            ) from None
        length = self.cumulative_sizes[-1]
        if index < 0:
            if -index > length:
                raise ValueError("absolute value of index should not exceed dataset length")
            index += length
        member = bisect.bisect_right(self.cumulative_sizes, index)
        if member == len(self.datasets):
            raise IndexError(
                f"ConcatDataset index {idx} is out of range for a dataset of length {length}"
            )
        return member, index - (self.cumulative_sizes[member - 1] if member else 0)


class ChainDataset(IterableDataset):
    """Streams one after the other: each iterated to its end, then the next.

    Chaining happens on the fly, so long or endless streams cost nothing
    up front. Each iteration goes through the datasets again; in a
    loader's worker every member is iterated by that worker, so members
    that split their items among workers (``get_worker_info()``, or a
    :func:`dataloader.shard`) still do. ``len()`` is the sum of the
    members' lengths, and a ``TypeError`` when one of them has none.

    Parameters
    ----------
    datasets : iterable of iterable-style datasets
        Each an :class:`IterableDataset` or another object the loader
        streams (``__iter__`` and no ``__getitem__``); torch accepts
        :class:`IterableDataset` only, and map-style datasets are refused
        here too (index them through :class:`ConcatDataset` instead).

    Attributes
    ----------
    datasets : list
        The datasets, in order.

    Examples
    --------
    >>> from dataloader import ChainDataset, DataLoader, IterableDataset
    >>> class Counter(IterableDataset):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def __iter__(self):
    ...         return iter(range(self.n))
    ...     def __len__(self):
    ...         return self.n
    >>> chain = ChainDataset([Counter(3), Counter(2)])
    >>> list(chain), len(chain)
    ([0, 1, 2, 0, 1], 5)
    >>> [batch.tolist() for batch in DataLoader(chain, batch_size=2)]
    [[0, 1], [2, 0], [1]]
    """

    datasets: list[Any]

    def __init__(self, datasets: Iterable[Any]) -> None:
        # A list, not the given iterable: a generator of datasets would
        # leave every epoch after the first empty.
        self.datasets = list(datasets)
        for position, dataset in enumerate(self.datasets):
            if not is_iterable_style(dataset):
                raise DatasetTypeError(
                    "ChainDataset only supports IterableDataset (use ConcatDataset for "
                    f"map-style datasets), but datasets[{position}] is a "
                    f"{type(dataset).__name__}"
                )

    def __iter__(self) -> Iterator[Any]:
        for dataset in self.datasets:
            yield from dataset

    def __len__(self) -> int:
        return sum(len(dataset) for dataset in self.datasets)


def forwarded_getitems(dataset: Any, indices: list[Any]) -> list[Any]:
    """``dataset``'s items at ``indices``: one ``__getitems__`` call if it has one.

    The wrappers (``ConcatDataset``, ``Subset``, ``StackDataset``) fetch
    through this, so a wrapped dataset's batched fetching is kept.
    """
    getitems = batch_fetch(dataset)
    if getitems is None:
        return [dataset[index] for index in indices]
    items = getitems(indices)
    if len(items) != len(indices):
        raise ValueError(
            f"Nested dataset's output size mismatch. Expected {len(indices)}, got "
            f"{len(items)} items: {type(dataset).__name__}.__getitems__ should return one "
            "item per index"
        )
    return list(items)


def shard(iterable: Iterable[Any], rank: int, world_size: int) -> ShardedIterable:
    """The items of ``iterable`` whose position is ``rank`` modulo ``world_size``.

    Iterated on a loader's worker, the rank's share is split again among
    the workers (by position too), so that every item goes to exactly one
    worker of one rank. When ``iterable`` has a length, so does the shard,
    and ``DataLoader(..., equal_batches=True)`` computes every rank's batch
    count without communicating. Iterators of a shard save and restore
    their position (``state_dict``/``load_state_dict``), so a loader over
    a shard resumes mid-epoch (the source is read again up to the saved
    position).

    Parameters
    ----------
    iterable : iterable
        The whole stream, the same on every rank.
    rank : int
        This process's rank, in ``[0, world_size)``.
    world_size : int
        The number of ranks.

    Examples
    --------
    >>> from dataloader import shard
    >>> [list(shard(range(10), rank, 3)) for rank in range(3)]
    [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    >>> len(shard(range(10), 1, 3))
    3
    """
    return ShardedIterable(iterable, rank, world_size)


class ShardedIterable(IterableDataset):
    """One rank's share of a stream, by item position (see :func:`shard`)."""

    def __init__(self, source: Iterable[Any], rank: int, world_size: int) -> None:
        world_size, rank = check_rank(world_size, rank, "world_size")
        self.source = source
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        # (epoch, levels): what remained of that epoch when a job on other ranks (or
        # workers) stopped in its middle, dealt to this job's streams
        # (dataloader._loading.elastic).
        self.elastic_levels: tuple[int, list[Level]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iterators take; passed on to the source."""
        self.epoch = int(epoch)
        announce_epoch(self.source, epoch)

    def active_levels(self) -> list[Level] | None:
        """The interrupted progress of the current epoch, when it resumes one elsewhere."""
        if self.elastic_levels is not None and self.elastic_levels[0] == self.epoch:
            return self.elastic_levels[1]
        return None

    def _deal(self, workers: int) -> Deal:
        levels = self.active_levels() or []
        size = levels[-1].remaining() if levels else _length(self.source)
        return Deal(levels, self.world_size * workers, size)

    def __len__(self) -> int:
        # The rank's streams are the owners congruent to its rank, whatever the workers.
        size = self._deal(1).size
        if size is None:
            raise TypeError(f"the source of this shard ({type(self.source).__name__}) has no len()")
        return len(range(self.rank, size, self.world_size))

    def stream_length(self, worker: int, workers: int, rank: int | None = None) -> int | None:
        """Items of worker ``worker`` of ``workers`` on ``rank`` (default: this rank),
        when the source is sized."""
        deal = self._deal(workers)
        rank = self.rank if rank is None else rank
        return None if deal.size is None else deal.count(rank + self.world_size * worker)

    def entry_items(self, depth: int, owner: int, owners: int, start: int,
                    count: int) -> list[Any]:
        """The items of entries ``start`` to ``start + count - 1`` of stream ``owner`` of
        ``owners`` (ranks times workers), as dealt by the first ``depth`` levels of the
        current epoch's progress (0: its ordinary sharing); fewer where the source ends.
        The source is read again, as its only worker, up to the last of them: a stream
        takes over what another stream of a stopped job was working on
        (``PackedDataset``'s pieces).

        Examples
        --------
        >>> from dataloader import shard
        >>> shard(range(20), 0, 2).entry_items(0, owner=1, owners=4, start=2, count=3)
        [9, 13, 17]
        """
        levels = (self.active_levels() or [])[:depth]
        if len(levels) < depth:
            raise ValueError(f"entries dealt by {depth} level(s) of an epoch dealt by "
                             f"{len(levels)}: a state of another epoch or job")
        size = levels[-1].remaining() if levels else _length(self.source)
        deal = Deal(levels, owners, size)
        count = max(min(count, deal.count(owner) - start), 0)
        wanted = deal.entries(owner, start, count).tolist()
        if not wanted:
            return []
        info = get_worker_info()
        view = None if info is None else WorkerInfo(0, 1, info.seed, self.source,
                                                    info.batch_size)
        items: list[Any] = []
        for position, item in enumerate(ShardIterator(self.source, 0, 1, view)):
            if position == wanted[len(items)]:
                items.append(item)
                if len(items) == len(wanted):
                    break
        return items

    def __iter__(self) -> ShardIterator:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        # Worker w of the rank takes every num_workers-th item of the rank's share;
        # the source is read whole, as the only worker of a one-worker loader.
        view = None if info is None else WorkerInfo(0, 1, info.seed, self.source,
                                                    info.batch_size)
        deal = self._deal(workers) if self.active_levels() else None
        return ShardIterator(self.source, self.rank + self.world_size * worker,
                             self.world_size * workers, view, deal)


def _length(source: Any) -> int | None:
    try:
        return len(source)
    except TypeError:
        return None


class ShardIterator:
    """Items at positions ``start, start + step, ...`` of a source (or, resuming an epoch
    dealt again to other ranks, the entries ``deal`` gives owner ``start``); saves its
    position."""

    __slots__ = ("_source", "_iterator", "_start", "_step", "_consumed", "_yielded", "_view",
                 "_deal")

    def __init__(self, source: Iterable[Any], start: int, step: int,
                 view: WorkerInfo | None = None, deal: Deal | None = None) -> None:
        self._source = source
        self._iterator: Iterator[Any] | None = None
        self._start = start
        self._step = step
        self._consumed = 0  # items of the source read so far
        self._yielded = 0  # items returned so far
        self._view = view
        self._deal = deal

    def __iter__(self) -> ShardIterator:
        return self

    def _as_only_worker(self, call: Any, *arguments: Any) -> Any:
        """``call(*arguments)`` with ``get_worker_info()`` saying the one-worker view."""
        if self._view is None:
            return call(*arguments)
        worker = get_worker_info()
        set_stream_worker(self._view)
        try:
            return call(*arguments)
        finally:
            set_stream_worker(worker)

    def _open(self, skip: int) -> None:
        """Read the source again up to position ``skip`` (without yielding)."""
        self._iterator = iter(self._source)
        self._consumed = skip
        for _ in islice(self._iterator, skip):
            pass

    def __next__(self) -> Any:
        return self._as_only_worker(self._next)

    def _next(self) -> Any:
        if self._iterator is None:
            self._open(self._deal.first_entry() if self._deal is not None else 0)
        iterator, deal = self._iterator, self._deal
        assert iterator is not None  # opened just above
        while True:
            item = next(iterator)
            position = self._consumed
            self._consumed += 1
            if deal is None:
                mine = position % self._step == self._start
            else:
                found = deal.owner_of(position)
                mine = found is not None and found[0] == self._start
            if mine:
                self._yielded += 1
                return item

    def state_dict(self) -> dict[str, int]:
        return {"consumed": self._consumed, "yielded": self._yielded}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Read the source up to the saved position again (without yielding it)."""
        self._as_only_worker(self._open, int(state["consumed"]))
        self._yielded = int(state.get("yielded", 0))

