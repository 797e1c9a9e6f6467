"""torch's dataset utilities that wrap or split datasets.

``Subset``, ``TensorDataset``, ``StackDataset`` and ``random_split`` have
``torch.utils.data``'s names, signatures and meanings (the concatenations,
``ConcatDataset`` and ``ChainDataset``, are beside the bases in
``dataloader._datasets.dataset``, since ``+`` makes them). Where torch would fail
later or with an ``AssertionError``, bad arguments raise ``ValueError`` or
``TypeError`` here, at construction. Beyond torch's: ``TensorDataset``
takes numpy arrays, ``random_split`` takes a numpy generator or an int
seed, and a ``Subset`` of an async dataset is async.

The wrappers forward a batch's ``__getitems__`` to the datasets they wrap,
so a wrapped dataset that fetches whole batches at once still does. A
``Subset`` (and so each part of ``random_split``) of a dataset that applies
its own transform (``ImageFolder(root, transform=chain)``: a
``transform`` and a ``raw_item(index)``, the ``TransformingDataset`` protocol
of ``dataloader._loading.plugins``) offers the same two, so the loader runs
that transform on its fused batch path through the subset too.
"""

from __future__ import annotations

import inspect
import math
import operator
import sys
import warnings
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

import numpy as np

from dataloader._datasets.asynchronous import is_async_dataset
from dataloader._datasets.dataset import Dataset, T_co, forwarded_getitems, is_map_style
from dataloader._errors import DatasetValueError
from dataloader._sampling.seeding import check_seed

__all__ = ["StackDataset", "Subset", "TensorDataset", "random_split"]


class Subset(Dataset[T_co], Sequence[T_co]):
    """The items of ``dataset`` at ``indices``, in that order.

    ``subset[i]`` is ``dataset[indices[i]]``; a batch is fetched with one
    ``dataset.__getitems__`` call when the dataset has one. Indices are
    not checked here: one out of ``dataset``'s range raises when it is
    read, as in torch. A subset is a ``collections.abc.Sequence`` of its
    items, so code that compares sequences item by item compares subsets
    that way too (torch's ``TestCase.assertEqual`` lists its own ``Subset``
    among its sequences for this). A subset of an async dataset (one with ``async def
    __getitem__``, such as :class:`dataloader.HttpDataset`) is async too:
    the loader runs its items on its event loop, one coroutine per item.

    Parameters
    ----------
    dataset : map-style dataset
        The whole dataset.
    indices : sequence of int
        Indices into ``dataset``: a list, a range, a numpy array or a
        tensor. Repeats are allowed.

    Attributes
    ----------
    dataset : map-style dataset
    indices : sequence of int

    Examples
    --------
    >>> from dataloader import DataLoader, Subset
    >>> evens = Subset(list("abcdef"), range(0, 6, 2))
    >>> len(evens), evens[1], evens[-1]
    (3, 'c', 'e')
    >>> [list(batch) for batch in DataLoader(evens, batch_size=2, collate_fn=list)]
    [['a', 'c'], ['e']]
    >>> list(evens), "c" in evens, evens.index("e")
    (['a', 'c', 'e'], True, 2)
    """

    dataset: Any
    indices: Sequence[int]

    def __new__(cls, dataset: Any = None, indices: Any = None) -> Subset[Any]:
        # The loader recognises an async dataset by its class's coroutine
        # methods, so a subset of one needs a class with async methods.
        made = _AsyncSubset if cls is Subset and is_async_dataset(dataset) else cls
        return super().__new__(made)

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        _check_map_style(dataset, "dataset")
        try:
            len(indices)
        except TypeError:
            raise TypeError(
                "indices should be a sequence of ints (a list, a range, an array), but got "
                f"{type(indices).__name__}"
            ) from None
        # The loader fetches batches through __getitems__, which would
        # bypass a subclass's own __getitem__: torch refuses that, and so do we.
        cls = type(self)
        if cls.__getitem__ is not Subset.__getitem__ and cls.__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{cls.__name__} overrides __getitem__ but not __getitems__. When subclassing "
                "Subset and overriding __getitem__, you must also override __getitems__ "
                "(the loader fetches batches with it), for instance:\n\n"
                "def __getitems__(self, indices):\n"
                "    return [self.__getitem__(idx) for idx in indices]"
            )
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            # torch's form: a list of indices is passed on as one list.
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list[T_co]:
        return forwarded_getitems(self.dataset, [self.indices[idx] for idx in indices])

    def __len__(self) -> int:
        return len(self.indices)

    def __getattr__(self, name: str) -> Any:
        # The TransformingDataset protocol, forwarded: present only when the
        # wrapped dataset has it and this subset fetches as Subset does (a
        # subclass with its own fetch, or its own ``transform`` attribute,
        # means something else by its items). Only these two names are
        # looked up here, so unpickling (which asks for others before
        # ``__dict__`` is filled) never recurses.
        if name in ("transform", "raw_item"):
            dataset = self.__dict__.get("dataset")
            cls = type(self)
            if ("transform" not in self.__dict__ and cls.__getitem__ is Subset.__getitem__
                    and cls.__getitems__ is Subset.__getitems__
                    and dataset is not None and callable(getattr(dataset, "raw_item", None))
                    and hasattr(dataset, "transform")):
                return dataset.transform if name == "transform" else self._raw_item
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _raw_item(self, index: int) -> Any:
        return self.dataset.raw_item(self.indices[index])


class _AsyncSubset(Subset[T_co]):
    """A :class:`Subset` of an async dataset: ``subset[i]`` is a coroutine.

    The loader loads its items one by one on its event loop (item lanes),
    and its ``aclose()`` closes the wrapped dataset.
    """

    __getitems__ = None  # type: ignore[assignment]

    async def __getitem__(self, idx: Any) -> Any:  # type: ignore[override]
        item = Subset.__getitem__(self, idx)
        # Only the dataset's __getitems__ may be async; its items are then plain.
        return await item if inspect.isawaitable(item) else item

    async def aclose(self) -> None:
        aclose = getattr(self.dataset, "aclose", None)
        if aclose is not None and inspect.iscoroutinefunction(aclose):
            await aclose()


class TensorDataset(Dataset[tuple[Any, ...]]):
    """Rows of arrays sharing their first dimension: item ``i`` is ``tuple(t[i] for t in tensors)``.

    Parameters
    ----------
    *tensors : numpy.ndarray or torch.Tensor
        At least one, each with at least one dimension, all with the same
        first dimension (the number of items). numpy arrays and torch
        tensors can be mixed; each item's rows keep their array's type.

    Attributes
    ----------
    tensors : tuple
        The arrays, as given (not copied).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import DataLoader, TensorDataset
    >>> features = np.arange(8, dtype=np.float32).reshape(4, 2)
    >>> labels = np.array([0, 1, 0, 1])
    >>> dataset = TensorDataset(features, labels)
    >>> len(dataset), dataset[1]
    (4, (array([2., 3.], dtype=float32), np.int64(1)))
    >>> x, y = next(iter(DataLoader(dataset, batch_size=3)))
    >>> x.shape, y.tolist()
    ((3, 2), [0, 1, 0])
    """

    tensors: tuple[Any, ...]

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for position, tensor in enumerate(tensors):
            if not _is_array(tensor):
                raise TypeError(
                    "TensorDataset takes numpy arrays or torch tensors, but tensor "
                    f"{position} is a {type(tensor).__name__}"
                )
            if len(tensor.shape) == 0:
                raise ValueError(
                    f"TensorDataset's tensors need a first dimension, but tensor {position} "
                    "has none (shape ())"
                )
        sizes = [int(tensor.shape[0]) for tensor in tensors]
        if any(size != sizes[0] for size in sizes):
            raise DatasetValueError(f"Size mismatch between tensors: first dimensions {sizes}")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple[Any, ...]:
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self) -> int:
        return int(self.tensors[0].shape[0])


class StackDataset(Dataset[Any]):
    """Datasets of equal length side by side: item ``i`` gathers item ``i`` of each.

    Given positionally, an item is a tuple; given by keyword, a dict with
    those keys. A batch is fetched with one ``__getitems__`` call per
    dataset that has one.

    Parameters
    ----------
    *args : map-style datasets
        The tuple form.
    **kwargs : map-style datasets
        The dict form (not together with ``args``).

    Examples
    --------
    >>> from dataloader import DataLoader, StackDataset
    >>> pairs = StackDataset(["a", "b", "c"], [1, 2, 3])
    >>> len(pairs), pairs[2]
    (3, ('c', 3))
    >>> named = StackDataset(text=["a", "b", "c"], label=[1, 2, 3])
    >>> named[0]
    {'text': 'a', 'label': 1}
    >>> next(iter(DataLoader(named, batch_size=2)))["label"].tolist()
    [1, 2]
    """

    _datasets: tuple[Any, ...] | dict[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or ``dict``- (via ``kwargs``) "
                "like input/output, but both types are given."
            )
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        named = kwargs if kwargs else {f"args[{i}]": dataset for i, dataset in enumerate(args)}
        for name, dataset in named.items():
            _check_map_style(dataset, name)
            if is_async_dataset(dataset):
                raise TypeError(
                    f"StackDataset cannot hold an async dataset, but {name} is a "
                    f"{type(dataset).__name__} (async def __getitem__): give the async "
                    "dataset's items their other fields itself"
                )
        lengths = {name: len(dataset) for name, dataset in named.items()}
        self._length = next(iter(lengths.values()))
        if any(length != self._length for length in lengths.values()):
            raise ValueError(f"Size mismatch between datasets: lengths {lengths}")
        self._datasets = kwargs if kwargs else args

    def __getitem__(self, index: Any) -> Any:
        if isinstance(self._datasets, dict):
            return {key: dataset[index] for key, dataset in self._datasets.items()}
        return tuple(dataset[index] for dataset in self._datasets)

    def __getitems__(self, indices: list[int]) -> list[Any]:
        if type(self).__getitem__ is not StackDataset.__getitem__:
            return [self[index] for index in indices]  # a subclass's own items
        if isinstance(self._datasets, dict):
            keys = list(self._datasets)
            columns = [forwarded_getitems(self._datasets[key], indices) for key in keys]
            return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]
        columns = [forwarded_getitems(dataset, indices) for dataset in self._datasets]
        return list(zip(*columns, strict=True))

    def __len__(self) -> int:
        return self._length


def random_split(
    dataset: Any, lengths: Sequence[int | float], generator: Any = None
) -> list[Subset[Any]]:
    """Split ``dataset`` at random into non-overlapping parts, each a :class:`Subset`.

    ``lengths`` are either the lengths of the parts (summing to
    ``len(dataset)``) or fractions summing to 1; fractions become
    ``floor(len(dataset) * fraction)`` items each, and the items left over
    go one at a time to the parts in order, from the first, as in torch.
    A part of length 0 gets a warning.

    The order comes from ``generator``:

    - a ``torch.Generator``: ``torch.randperm``, exactly as torch does, so
      ``torch.Generator().manual_seed(s)`` gives torch's split for seed ``s``;
    - a ``numpy.random.Generator``: its ``permutation`` (its state advances);
    - an int seed: ``numpy.random.default_rng(seed).permutation``, the same
      split for the same seed on every machine, without torch;
    - ``None``, as in torch, draws from torch's default generator when
      torch is imported (so ``torch.manual_seed`` fixes the split as it
      does with torch), else from fresh OS entropy.

    Parameters
    ----------
    dataset : map-style dataset
        The dataset to split (it is not copied: the parts index into it).
    lengths : sequence of int or float
        Lengths of the parts, or fractions of the dataset summing to 1.
    generator : torch.Generator, numpy.random.Generator or int, optional
        The source of the order; see above.

    Returns
    -------
    list of Subset
        One part per entry of ``lengths``, in order.

    Examples
    --------
    >>> from dataloader import random_split
    >>> train, val = random_split(range(10), [0.8, 0.2], generator=0)
    >>> len(train), len(val)
    (8, 2)
    >>> sorted(list(train) + list(val)) == list(range(10))
    True
    >>> [len(part) for part in random_split(range(10), [1/3, 1/3, 1/3], generator=0)]
    [4, 3, 3]
    >>> again, _ = random_split(range(10), [0.8, 0.2], generator=0)
    >>> again.indices == train.indices
    True
    """
    _check_map_style(dataset, "dataset")
    total = len(dataset)
    sizes = _split_sizes(total, lengths)
    order = _permutation(total, generator)
    return [
        Subset(dataset, order[end - size : end])
        for end, size in zip(accumulate(sizes), sizes, strict=True)
    ]


def _split_sizes(total: int, lengths: Any) -> list[int]:
    """The lengths of ``random_split``'s parts, by torch's rule for fractions."""
    try:
        values = list(lengths)
    except TypeError:
        raise TypeError(
            f"lengths should be a sequence of ints or fractions, but got lengths={lengths!r}"
        ) from None
    for position, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(
                f"lengths should be ints or fractions, but lengths[{position}]={value!r}"
            )
    if values and math.isclose(sum(values), 1) and sum(values) <= 1:
        sizes = []
        for position, fraction in enumerate(values):
            if not 0 <= fraction <= 1:
                raise ValueError(f"Fraction at index {position} is not between 0 and 1")
            sizes.append(math.floor(total * fraction))
        # torch hands out the remainder round-robin, from the first part.
        for extra in range(total - sum(sizes)):
            sizes[extra % len(sizes)] += 1
        for position, size in enumerate(sizes):
            if size == 0:
                warnings.warn(
                    f"Length of split at index {position} is 0. "
                    "This might result in an empty dataset.",
                    stacklevel=3,
                )
        return sizes
    sizes = []
    for position, value in enumerate(values):
        if not (math.isfinite(value) and value == int(value)):
            raise ValueError(
                "lengths should be ints summing to the dataset's length or fractions summing "
                f"to 1, but lengths[{position}]={value!r}"
            )
        if value < 0:
            raise ValueError(f"lengths should not be negative, but lengths[{position}]={value!r}")
        sizes.append(operator.index(int(value)))
    if sum(sizes) != total:
        raise ValueError(
            "Sum of input lengths does not equal the length of the input dataset! "
            f"({sum(sizes)} != {total})"
        )
    return sizes


def _permutation(n: int, generator: Any) -> list[int]:
    """A random order of ``range(n)`` drawn from ``generator`` (see ``random_split``)."""
    torch = sys.modules.get("torch")
    if torch is not None and (generator is None or isinstance(generator, torch.Generator)):
        # The same call as torch's random_split: the same split for the same state.
        if generator is None:
            generator = torch.default_generator
        return torch.randperm(n, generator=generator).tolist()
    if generator is None:
        generator = np.random.default_rng()
    elif isinstance(generator, (int, np.integer)) and not isinstance(generator, bool):
        generator = np.random.default_rng(check_seed(generator, "generator"))
    elif not isinstance(generator, np.random.Generator):
        raise TypeError(
            "generator should be a torch.Generator, a numpy.random.Generator or an int seed, "
            f"but got generator={generator!r}"
        )
    return generator.permutation(n).tolist()


def _check_map_style(dataset: Any, name: str) -> None:
    if not is_map_style(dataset):
        raise TypeError(
            f"{name} should be a map-style dataset (__getitem__ and __len__), but it is a "
            f"{type(dataset).__name__}"
        )


def _is_array(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)
