"""Samplers: which indices an epoch visits, and in which order.

The constructors and meanings are ``torch.utils.data``'s, but randomness
comes from numpy's ``Generator`` and indices are produced in vectorised
chunks, so an epoch over 10^10 items never builds an array or a list of
10^10 ints. Shuffled orders come from ``dataloader._sampling.shuffle``: any position
of them is computed directly. Samplers defined here share one internal
protocol, ``_index_chunks(start)`` (the epoch's indices from position
``start`` on), which :class:`BatchSampler` uses to cut batches with numpy
instead of a Python loop, and a resumed epoch to start where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from itertools import chain, islice
from typing import Any, Generic, TypeVar

import numpy as np

from dataloader._sampling import torch_order
from dataloader._sampling.seeding import EpochSeeded, check_seed, epoch_generator
from dataloader._sampling.shuffle import CHUNK as _CHUNK
from dataloader._sampling.shuffle import FIRST_CHUNK as _FIRST_CHUNK
from dataloader._sampling.shuffle import draw_key, pass_chunks

T_co = TypeVar("T_co", covariant=True)
S = TypeVar("S", bound=type)

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]

class Sampler(Generic[T_co]):
    """Base class of samplers: an iterable of dataset indices.

    Subclasses define ``__iter__`` and, when the count is known, ``__len__``.
    Any iterable works as a sampler; subclassing is optional.

    Examples
    --------
    >>> from dataloader import Sampler
    >>> class EvenIndices(Sampler):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def __iter__(self):
    ...         return iter(range(0, self.n, 2))
    ...     def __len__(self):
    ...         return (self.n + 1) // 2
    >>> list(EvenIndices(5))
    [0, 2, 4]
    """

    def __init__(self, data_source: Sized | None = None) -> None:
        # Accepted for torch compatibility; the base class stores nothing.
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class _ChunkedSampler(Sampler[int]):
    """A sampler whose indices come from numpy chunks (see module docstring)."""

    def _index_chunks(self, start: int = 0) -> Iterator[np.ndarray]:
        """The epoch's indices from position ``start`` on, as int64 chunks."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[int]:
        # Chained list iterators: no Python frame runs per index.
        return chain.from_iterable(map(np.ndarray.tolist, self._index_chunks()))


def index_chunks(sampler: Any, start: int = 0) -> Iterator[np.ndarray] | None:
    """Our sampler's numpy chunks from position ``start``; ``None`` for any other iterable.

    A subclass that overrides ``__iter__`` is treated as a foreign sampler, so
    its own ``__iter__`` is what the loader follows.
    """
    if index_chunks_available(sampler):
        return sampler._index_chunks(start)
    return None


def skip_indices(chunks: Iterator[np.ndarray], count: int) -> Iterator[np.ndarray]:
    """``chunks`` without their first ``count`` indices (computed, then cut off).

    For orders drawn one after the other from a generator (draws with
    replacement, weighted draws), which cannot start anywhere else.
    """
    for chunk in chunks:
        if count >= len(chunk):
            count -= len(chunk)
            continue
        yield chunk[count:] if count else chunk
        count = 0


def check_generator(generator: Any) -> None:
    """Raise ``TypeError`` unless ``generator`` is None, a numpy or a torch Generator."""
    if generator is None or isinstance(generator, np.random.Generator):
        return
    if _is_torch_generator(generator):
        return
    raise TypeError(
        "generator must be a numpy.random.Generator or a torch.Generator, "
        f"got {type(generator).__name__}"
    )


def epoch_rng(generator: Any) -> np.random.Generator:
    """The numpy generator that draws one epoch's randomness.

    A numpy generator is used as it is, so its state advances from epoch to
    epoch; a torch generator seeds a fresh numpy generator with one draw, as
    torch's own samplers do; ``None`` gives fresh OS entropy.
    """
    if generator is None:
        return np.random.default_rng()
    if isinstance(generator, np.random.Generator):
        return generator
    import torch

    seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())
    return np.random.default_rng(seed & (2**63 - 1))


class _SeededChunkedSampler(_ChunkedSampler, EpochSeeded):
    """A random sampler: its order comes from ``generator``, or from ``(seed, epoch)``.

    With a ``seed``, the order of epoch ``e`` is a function of ``(seed, e)``
    alone (see ``dataloader._sampling.seeding``), so it can be recomputed anywhere.
    With a ``torch.Generator`` it is drawn by torch's own algorithm
    (``dataloader._sampling.torch_order``), the same order as torch's sampler.
    """

    # Whether no generator and no seed means torch's default generator (as
    # in torch, and in dataloader.torch) rather than fresh OS entropy.
    _torch_by_default = False

    def _init_randomness(self, generator: Any, seed: int | None) -> None:
        check_generator(generator)
        if seed is not None:
            seed = check_seed(seed)
            if generator is not None:
                raise ValueError("pass either seed or generator, not both")
        self.generator = generator
        self.seed = seed  # type: ignore[assignment]

    @property
    def _draws_from_torch(self) -> bool:
        """Whether the order is torch's draw (from ``generator``, or torch's default one)."""
        if self.seed is not None:
            return False
        if self.generator is None:
            return self._torch_by_default
        return _is_torch_generator(self.generator)

    def _rng(self) -> np.random.Generator:
        if self.seed is not None:
            return epoch_generator(self.seed, self.epoch)
        return epoch_rng(self.generator)


def is_epoch_seeded(sampler: Any) -> bool:
    """Whether ``sampler``'s order is a function of ``(seed, epoch)``."""
    return isinstance(sampler, EpochSeeded) and getattr(sampler, "seed", None) is not None


def _is_torch_generator(obj: Any) -> bool:
    torch = __import__("sys").modules.get("torch")
    return torch is not None and isinstance(obj, torch.Generator)


def _check_positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value!r}")


def _check_bool(name: str, value: Any, error: type[Exception] = ValueError) -> None:
    if not isinstance(value, bool):
        raise error(f"{name} should be a boolean value, but got {name}={value!r}")


def _chunks_of(array: np.ndarray) -> Iterator[np.ndarray]:
    for start in range(0, len(array), _CHUNK):
        yield array[start : start + _CHUNK]


class SequentialSampler(_ChunkedSampler):
    """Indices ``0, 1, ..., len(data_source) - 1`` in order.

    Examples
    --------
    >>> from dataloader import SequentialSampler
    >>> list(SequentialSampler("abc"))
    [0, 1, 2]
    """

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def _index_chunks(self, start: int = 0) -> Iterator[np.ndarray]:
        n = len(self.data_source)
        size = _FIRST_CHUNK  # doubling up to _CHUNK: the first batch comes at once
        while start < n:
            yield np.arange(start, min(start + size, n), dtype=np.int64)
            start, size = start + size, min(size * 2, _CHUNK)

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(_SeededChunkedSampler):
    """Random indices: a permutation, or draws with replacement.

    Without replacement, the order of an epoch of any length is computed
    position by position (``docs/datasets.md``, "How shuffled orders are
    made"): its first indices come at once, with no array of the dataset's
    length.

    Parameters
    ----------
    data_source : sized
        The dataset; only its length is used.
    replacement : bool, default False
        Draw ``num_samples`` indices independently instead of permuting.
    num_samples : int, optional
        How many indices an epoch yields; defaults to ``len(data_source)``.
        Without replacement and larger than the dataset, whole permutations
        follow one another, the last one cut short.
    generator : numpy.random.Generator or torch.Generator, optional
        Source of randomness; each epoch draws from it anew.
    seed : int, optional
        Instead of ``generator``: the order of epoch ``e`` is a function of
        ``(seed, e)``; ``set_epoch(e)`` selects the epoch (the loader
        advances it on every pass when the user does not).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import RandomSampler
    >>> sampler = RandomSampler(range(5), generator=np.random.default_rng(0))
    >>> sorted(sampler)
    [0, 1, 2, 3, 4]
    >>> sampler = RandomSampler(range(5), seed=3)
    >>> list(sampler) == list(sampler)  # the same epoch, the same order
    True
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Any = None,
        *,
        seed: int | None = None,
    ) -> None:
        _check_bool("replacement", replacement, TypeError)
        if num_samples is not None:
            _check_positive_int("num_samples", num_samples)
        self._init_randomness(generator, seed)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples

    @property
    def num_samples(self) -> int:
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def _index_chunks(self, start: int = 0) -> Iterator[np.ndarray]:
        n = len(self.data_source)
        total = self.num_samples
        if self._draws_from_torch:
            yield from skip_indices(self._torch_draws(n, total), start)
            return
        rng = self._rng()
        if self.replacement:
            if n == 0 and total > 0:
                raise ValueError("cannot draw samples with replacement from an empty dataset")
            yield from skip_indices(self._draws(rng, n, total), start)
            return
        if n == 0:
            return
        # Past n, whole permutations follow one another: pass_chunks gives
        # each pass its own.
        yield from pass_chunks(n, draw_key(rng), start, total)

    def _torch_draws(self, n: int, total: int) -> Iterator[np.ndarray]:
        if self.replacement:
            if n == 0 and total > 0:
                raise ValueError("cannot draw samples with replacement from an empty dataset")
            return torch_order.uniform_draws(n, total, self.generator)
        return torch_order.permutations(n, total, self.generator) if n else iter(())

    @staticmethod
    def _draws(rng: np.random.Generator, n: int, total: int) -> Iterator[np.ndarray]:
        for first in range(0, total, _CHUNK):
            yield rng.integers(0, n, size=min(_CHUNK, total - first), dtype=np.int64)

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(_SeededChunkedSampler):
    """The given indices, in a random order each epoch.

    ``generator`` or ``seed`` as for :class:`RandomSampler`. The order is
    made as :class:`RandomSampler`'s, over the positions of ``indices``; a
    ``range`` of indices is never materialised.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import SubsetRandomSampler
    >>> sorted(SubsetRandomSampler([7, 3, 5], generator=np.random.default_rng(0)))
    [3, 5, 7]
    """

    def __init__(
        self, indices: Sequence[int], generator: Any = None, *, seed: int | None = None
    ) -> None:
        self._init_randomness(generator, seed)
        self.indices = indices

    def _index_chunks(self, start: int = 0) -> Iterator[np.ndarray]:
        n = len(self.indices)
        if self._draws_from_torch:
            positions = torch_order.subset_permutation(n, self.generator)
            values = np.asarray(self.indices, dtype=np.int64)
            yield from skip_indices(_chunks_of(values[positions]), start)
            return
        rng = self._rng()
        if n == 0:
            return
        key = draw_key(rng)
        indices = self.indices
        if isinstance(indices, range):
            for positions in pass_chunks(n, key, start, n):
                yield indices.start + indices.step * positions
            return
        values = np.asarray(indices, dtype=np.int64)
        for positions in pass_chunks(n, key, start, n):
            yield values[positions]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(_SeededChunkedSampler):
    """Indices drawn with probabilities proportional to ``weights``.

    Parameters
    ----------
    weights : sequence of float
        One non-negative weight per index; they need not sum to one.
    num_samples : int
        How many indices an epoch yields.
    replacement : bool, default True
        Without replacement an index is drawn at most once per epoch.
    generator : numpy.random.Generator or torch.Generator, optional
    seed : int, optional
        Instead of ``generator``, as for :class:`RandomSampler`.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import WeightedRandomSampler
    >>> sampler = WeightedRandomSampler([0.0, 1.0, 0.0], 4, generator=np.random.default_rng(0))
    >>> list(sampler)
    [1, 1, 1, 1]
    """

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: Any = None,
        *,
        seed: int | None = None,
    ) -> None:
        _check_positive_int("num_samples", num_samples)
        _check_bool("replacement", replacement)
        self._init_randomness(generator, seed)
        weights_array = np.asarray(weights, dtype=np.float64)
        if weights_array.ndim != 1:
            raise ValueError(
                "weights should be a 1d sequence but given weights have shape "
                f"{weights_array.shape}"
            )
        if not np.all(np.isfinite(weights_array)) or np.any(weights_array < 0):
            raise ValueError("weights must be finite and non-negative")
        if weights_array.sum() <= 0:
            raise ValueError("weights must have a positive sum")
        if not replacement and num_samples > np.count_nonzero(weights_array):
            raise ValueError(
                f"cannot draw num_samples={num_samples} without replacement from "
                f"{np.count_nonzero(weights_array)} indices of non-zero weight"
            )
        self.weights = weights_array
        self.num_samples = num_samples
        self.replacement = replacement

    def _index_chunks(self, start: int = 0) -> Iterator[np.ndarray]:
        if self._draws_from_torch:
            drawn = torch_order.weighted_draws(self.weights, self.num_samples, self.replacement,
                                               self.generator)
            yield from skip_indices(_chunks_of(drawn), start)
            return
        yield from skip_indices(self._draws(self._rng()), start)

    def _draws(self, rng: np.random.Generator) -> Iterator[np.ndarray]:
        probabilities = self.weights / self.weights.sum()
        if not self.replacement:
            drawn = rng.choice(len(self.weights), self.num_samples, replace=False, p=probabilities)
            yield from _chunks_of(drawn.astype(np.int64))
            return
        cumulative = np.cumsum(probabilities)
        cumulative /= cumulative[-1]
        for start in range(0, self.num_samples, _CHUNK):
            draws = rng.random(min(_CHUNK, self.num_samples - start))
            # side="right" never lands on an index of zero weight.
            yield np.searchsorted(cumulative, draws, side="right").astype(np.int64)

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Groups the indices of ``sampler`` into lists of ``batch_size``.

    Parameters
    ----------
    sampler : iterable of int
    batch_size : int
    drop_last : bool
        Drop the last batch when it would be shorter than ``batch_size``.

    Examples
    --------
    >>> from dataloader import BatchSampler, SequentialSampler
    >>> list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False))
    [[0, 1, 2], [3, 4, 5], [6]]
    >>> list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=True))
    [[0, 1, 2], [3, 4, 5]]
    """

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        _check_positive_int("batch_size", batch_size)
        _check_bool("drop_last", drop_last)
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        chunks = index_chunks(self.sampler)
        if chunks is None:
            return self._batches_of_iterable()
        return self._batches_of_chunks(chunks)

    def _batches_of_iterable(self) -> Iterator[list[int]]:
        return _Batches(iter(self.sampler), self.batch_size, self.drop_last)

    def _batches_of_chunks(self, chunks: Iterator[np.ndarray]) -> Iterator[list[int]]:
        return _ChunkBatches(chunks, self.batch_size, self.drop_last)

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size


class _Batches:
    """Lists of ``size`` indices taken from ``indices``, the last one kept unless
    ``drop_last`` and short.

    An iterator object, not a generator: an exception raised while it takes
    a batch (Ctrl-C landing there, on the consumer's thread) leaves it
    usable, where it would end a generator and with it the epoch. The batch
    being taken may be lost; the next ones come, none twice.
    """

    __slots__ = ("indices", "size", "drop_last")

    def __init__(self, indices: Iterator[Any], size: int, drop_last: bool) -> None:
        self.indices, self.size, self.drop_last = indices, size, drop_last

    def __iter__(self) -> _Batches:
        return self

    def __next__(self) -> list[int]:
        batch = self._take()
        if not batch or (self.drop_last and len(batch) < self.size):
            raise StopIteration
        return batch

    def _take(self) -> list[int]:
        """The next ``size`` indices; fewer, or none, at the end."""
        return list(islice(self.indices, self.size))


class _ChunkBatches(_Batches):
    """:class:`_Batches` cut with numpy from our samplers' chunks of indices
    (``indices`` yields int64 arrays).

    A block of rows (batches) becomes Python lists in one call: few rows for
    the epoch's first batch, doubling up to a chunk's worth. Every step
    changes the state in one assignment, or in the one call that takes a
    chunk and stores it, so an exception never leaves a step half done.
    (Ctrl-C landing inside the chunks' own generator still ends it, and the
    epoch with it.)
    """

    __slots__ = ("_state", "_rows", "_most_rows")

    def __init__(self, chunks: Iterator[np.ndarray], size: int, drop_last: bool) -> None:
        super().__init__(chunks, size, drop_last)
        # Every index not yet handed out is in exactly one of: the batches
        # cut, the indices not yet cut, the chunk pulled from ``indices``
        # and not yet joined to them.
        self._state: tuple[Iterator[list[int]], np.ndarray, list[np.ndarray]] = (
            iter(()), np.empty(0, dtype=np.int64), [])
        self._rows, self._most_rows = max(_FIRST_CHUNK // size, 1), max(_CHUNK // size, 1)

    def _take(self) -> list[int]:
        size = self.size
        while True:
            batches, pending, pulled = self._state
            batch = next(batches, None)
            if batch is not None:
                return batch
            if pulled:
                chunk = pulled[0]
                joined = np.concatenate([pending, chunk]) if len(pending) else chunk
                self._state = batches, joined, []
                continue
            cut = min(len(pending) // size, self._rows) * size
            if cut:
                rows = pending[:cut].reshape(-1, size).tolist()
                self._state = iter(rows), pending[cut:], pulled
                self._rows = min(self._rows * 2, self._most_rows)
                continue
            # Not ``next()``: Ctrl-C raised as it returns would lose the chunk.
            pulled.extend(islice(self.indices, 1))
            if not pulled:  # the end: what is left is the last, short batch
                self._state = batches, pending[:0], pulled
                return pending.tolist()


# The ``__iter__`` of batch samplers defined elsewhere whose indices are valid by
# construction: each class registers itself (``trust_batch_indices``).
_TRUSTED_BATCH_ITERATORS: set[Callable[..., Any]] = set()


def trust_batch_indices(sampler_class: S) -> S:
    """Register a batch sampler class whose ``__iter__`` yields only lists of valid
    indices (non-negative ints), so that the loader does not check each one.

    A subclass that overrides ``__iter__`` is checked again.

    Examples
    --------
    >>> from dataloader._sampling.sampler import trust_batch_indices, yields_valid_indices
    >>> @trust_batch_indices
    ... class Pairs:
    ...     def __iter__(self):
    ...         return iter([[0, 1], [2, 3]])
    >>> yields_valid_indices(Pairs())
    True
    """
    _TRUSTED_BATCH_ITERATORS.add(sampler_class.__iter__)  # type: ignore[attr-defined]
    return sampler_class


def yields_valid_indices(index_sampler: Any) -> bool:
    """Whether ``index_sampler`` only yields valid indices by construction.

    True for our own samplers, for our ``BatchSampler`` over one of them and
    for the batch samplers registered by :func:`trust_batch_indices`; the
    loader checks what any other sampler yields.
    """
    if getattr(type(index_sampler), "__iter__", None) in _TRUSTED_BATCH_ITERATORS:
        return True
    if type(index_sampler) is BatchSampler:
        index_sampler = index_sampler.sampler
    return index_chunks_available(index_sampler)


def index_chunks_available(sampler: Any) -> bool:
    return (isinstance(sampler, _ChunkedSampler)
            and type(sampler).__iter__ is _ChunkedSampler.__iter__)
