"""``interleave``: datasets mixed by weight, with Hugging Face ``interleave_datasets`` semantics.

Choosing the source of each example:

* ``probabilities=None``: round robin, one example of each source in turn;
* otherwise each example's source is drawn with those probabilities from
  a numpy generator seeded with ``seed`` (and, for streams, the epoch and
  the worker).

Stopping (``stopping_strategy``):

* ``"first_exhausted"``: stop once a source has given its last example
  (undersampling);
* ``"all_exhausted"``: a source that runs out starts again from its first
  example, until every source has run out at least once (oversampling).

All map-style sources give a map-style dataset whose index list is
computed up front, so the mixture is the same whatever the loader's
workers and samplers, and resumes as any map-style dataset does.

When one source is a stream, the result is a stream, and still one
mixture whatever the worker count: its draws are seeded by ``(seed,
epoch)`` only, and every worker walks the whole mixture, keeping example
``p`` when its batch ``p // batch_size`` is the worker's turn (``(p //
batch_size) % num_workers``). The loader delivers the workers' batches by
turn (with ``in_order=True``), so they arrive in the
mixture's order, as with ``num_workers=0``. A map-style source fetches
only the examples a worker keeps; a streaming source is read whole by
every worker (each as the only worker of the source), so its reading,
not its transforms, is repeated per worker. An iterator saves the
position, the draws' generator and each source's state, so an epoch
resumes exactly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataloader._datasets.dataset import Dataset, IterableDataset, is_iterable_style, is_map_style
from dataloader._datasets.hooks import announce_epoch, state_saver
from dataloader._datasets.worker_info import WorkerInfo, get_worker_info, set_stream_worker

__all__ = ["interleave"]

_STRATEGIES = ("first_exhausted", "all_exhausted")


def interleave(
    datasets: Sequence[Any],
    probabilities: Sequence[float] | None = None,
    seed: int | None = None,
    stopping_strategy: str = "first_exhausted",
) -> Dataset | IterableDataset:
    """One dataset drawing from several, in turn or at random by weight.

    The result's ``stats()`` gives the examples taken from each source and
    their realised proportions.

    Parameters
    ----------
    datasets : sequence of datasets
        Map-style (``__getitem__`` and ``__len__``) or streaming sources.
    probabilities : sequence of float, optional
        The chance of each source per example, summing to 1; ``None`` for
        round robin.
    seed : int, optional
        Seeds the draws (default 0); the same seed gives the same mixture.
    stopping_strategy : {"first_exhausted", "all_exhausted"}
        Stop when the first source runs out, or when all have run out at
        least once (the others starting again meanwhile).

    Examples
    --------
    >>> from dataloader import interleave
    >>> list(interleave([[0, 1, 2], [10, 11, 12, 13]]))
    [0, 10, 1, 11, 2, 12]
    >>> list(interleave([[0, 1, 2], [10, 11, 12, 13]], stopping_strategy="all_exhausted"))
    [0, 10, 1, 11, 2, 12, 0, 13]
    >>> mixed = interleave([range(100), range(100, 200)], probabilities=[0.8, 0.2], seed=0)
    >>> items = list(mixed)
    >>> len(items) > 100, mixed.stats()["proportions"][0] > 0.6
    (True, True)
    """
    datasets = list(datasets)
    if not datasets:
        raise ValueError("datasets should hold at least one dataset, got none")
    for i, dataset in enumerate(datasets):
        if not (is_map_style(dataset) or is_iterable_style(dataset)):
            raise TypeError(f"datasets[{i}] should be a dataset, got {type(dataset).__name__}")
    if stopping_strategy not in _STRATEGIES:
        raise ValueError(
            "stopping_strategy should be 'first_exhausted' or 'all_exhausted', "
            f"got stopping_strategy={stopping_strategy!r}"
        )
    weights = _check_probabilities(probabilities, len(datasets))
    if seed is None:
        seed = 0
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed should be a non-negative int, got seed={seed!r}")
    if all(is_map_style(dataset) for dataset in datasets):
        return InterleavedDataset(datasets, weights, int(seed), stopping_strategy)
    return InterleavedStream(datasets, weights, int(seed), stopping_strategy)


def _check_probabilities(probabilities: Any, n: int) -> np.ndarray | None:
    if probabilities is None:
        return None
    weights = np.asarray(probabilities, dtype=np.float64)
    if weights.shape != (n,):
        raise ValueError(
            f"probabilities should have one entry per dataset ({n}), got {list(probabilities)!r}"
        )
    if (weights < 0).any() or not np.isclose(weights.sum(), 1.0):
        raise ValueError(
            f"probabilities should be non-negative and sum to 1, got {list(probabilities)!r}"
        )
    return np.cumsum(weights)


class _Choices:
    """Which source gives each example: round robin or seeded draws; state is small."""

    __slots__ = ("_cumulative", "_n", "_rng", "_turn")

    def __init__(self, cumulative: np.ndarray | None, n: int, seed: Sequence[int]) -> None:
        self._cumulative = cumulative
        self._n = n
        self._rng = np.random.default_rng(list(seed))
        self._turn = 0

    def next(self) -> int:
        if self._cumulative is None:
            source, self._turn = self._turn, (self._turn + 1) % self._n
            return source
        draw = self._rng.random() * self._cumulative[-1]
        return min(int(np.searchsorted(self._cumulative, draw, side="right")), self._n - 1)

    def state(self) -> dict[str, Any]:
        return {"turn": self._turn, "rng": self._rng.bit_generator.state}

    def load(self, state: dict[str, Any]) -> None:
        self._turn = int(state["turn"])
        self._rng.bit_generator.state = state["rng"]


class _Counts:
    """Examples taken from each source, over every iterator or fetch."""

    def __init__(self, n: int) -> None:
        self._lock = threading.Lock()
        self._counts = [0] * n

    def add(self, source: int) -> None:
        with self._lock:
            self._counts[source] += 1

    def snapshot(self) -> dict[str, list]:
        with self._lock:
            counts = list(self._counts)
        total = sum(counts)
        return {"counts": counts, "proportions": [c / total if total else 0.0 for c in counts]}


def _plan(lengths: list[int], cumulative: np.ndarray | None, seed: int,
          strategy: str) -> np.ndarray:
    """The mixture's (source, index) pairs, as HF's map-style interleaving computes them."""
    n = len(lengths)
    if min(lengths) == 0 and strategy == "first_exhausted":
        return np.zeros((0, 2), dtype=np.int64)
    if cumulative is None:
        rounds = min(lengths) if strategy == "first_exhausted" else max(lengths)
        steps = np.arange(rounds, dtype=np.int64).reshape(-1, 1)
        index = steps % np.asarray(lengths, dtype=np.int64).reshape(1, -1)
        sources = np.broadcast_to(np.arange(n), index.shape)
        return np.stack([sources.ravel(), index.ravel()], axis=1)
    choices = _Choices(cumulative, n, (seed,))
    position = [0] * n
    exhausted = [length == 0 for length in lengths]
    done = any if strategy == "first_exhausted" else all
    pairs = []
    while not done(exhausted):
        source = choices.next()
        if lengths[source] == 0:
            continue
        pairs.append((source, position[source]))
        position[source] += 1
        if position[source] >= lengths[source]:
            exhausted[source] = True
            position[source] = 0
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)


class InterleavedDataset(Dataset):
    """Map-style sources interleaved: item ``i`` is one source's item (see :func:`interleave`)."""

    def __init__(self, datasets: list[Any], cumulative: np.ndarray | None, seed: int,
                 strategy: str) -> None:
        self.datasets = datasets
        self.pairs = _plan([len(d) for d in datasets], cumulative, seed, strategy)
        self._counts = _Counts(len(datasets))

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> Any:
        source, position = self.pairs[index]
        item = self.datasets[source][int(position)]
        self._counts.add(int(source))
        return item

    def stats(self) -> dict[str, list]:
        """Items fetched from each source, and their proportions of all fetched."""
        return self._counts.snapshot()


class InterleavedStream(IterableDataset):
    """Sources interleaved as a stream (see :func:`interleave`); ``set_epoch`` reseeds."""

    def __init__(self, datasets: list[Any], cumulative: np.ndarray | None, seed: int,
                 strategy: str) -> None:
        self.datasets = datasets
        self.cumulative = cumulative
        self.seed = seed
        self.stopping_strategy = strategy
        self.epoch = 0
        self._counts = _Counts(len(datasets))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        for dataset in self.datasets:
            announce_epoch(dataset, epoch)

    def stats(self) -> dict[str, list]:
        """Examples taken from each source, and their proportions of all taken."""
        return self._counts.snapshot()

    def __iter__(self) -> _StreamIterator:
        info = get_worker_info()
        if info is None:
            return _StreamIterator(self, 0, 1, 1)
        return _StreamIterator(self, info.id, info.num_workers, info.batch_size or 1)


class _MapCursor:
    """A map-style source read in index order; only the examples kept are fetched."""

    def __init__(self, dataset: Any) -> None:
        self._dataset, self._next = dataset, 0

    def advance(self, keep: bool) -> Any:
        if self._next >= len(self._dataset):
            raise StopIteration
        self._next += 1
        return self._dataset[self._next - 1] if keep else None

    def state_dict(self) -> dict[str, int]:
        return {"next": self._next}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._next = int(state["next"])


class _WholeStream:
    """A streaming source read whole on a loader worker.

    The source is iterated as the only worker of a one-worker loader would
    iterate it (``get_worker_info()`` says so while it runs), so every
    worker sees the same examples in the same order; each keeps its share.
    """

    def __init__(self, dataset: Any) -> None:
        info = get_worker_info()
        self._view = None if info is None else WorkerInfo(0, 1, info.seed, dataset,
                                                          info.batch_size)
        self._dataset = dataset
        self._iterator = self._as_one_worker(iter, dataset)

    def _as_one_worker(self, call: Callable[[Any], Any], argument: Any) -> Any:
        if self._view is None:
            return call(argument)
        worker = get_worker_info()
        set_stream_worker(self._view)
        try:
            return call(argument)
        finally:
            set_stream_worker(worker)

    def advance(self, keep: bool) -> Any:
        item = self._as_one_worker(next, self._iterator)
        return item if keep else None

    def state_dict(self) -> Any:
        save = state_saver(self._iterator)
        return save() if save is not None else None

    def load_state_dict(self, state: Any) -> None:
        self._iterator.load_state_dict(state)


class _StreamIterator:
    """One worker's share of the stream's mixture (see the module docstring)."""

    def __init__(self, owner: InterleavedStream, worker: int, workers: int, block: int) -> None:
        self._owner, self._worker, self._workers, self._block = owner, worker, workers, block
        n = len(owner.datasets)
        # Seeded by the epoch alone: every worker draws the same mixture.
        self._choices = _Choices(owner.cumulative, n, (owner.seed, owner.epoch))
        self._sources = [self._open(i) for i in range(n)]
        self._exhausted = [False] * n
        self._ended = False
        self._position = 0  # examples of the mixture drawn so far, by every worker

    def _open(self, source: int) -> Any:
        dataset = self._owner.datasets[source]
        return _MapCursor(dataset) if is_map_style(dataset) else _WholeStream(dataset)

    def __iter__(self) -> _StreamIterator:
        return self

    def __next__(self) -> Any:
        first = self._owner.stopping_strategy == "first_exhausted"
        while not self._ended:
            source = self._choices.next()
            # Example p of the mixture is in batch p // block, which the
            # loader delivers from worker (p // block) % workers.
            mine = (self._position // self._block) % self._workers == self._worker
            try:
                item = self._sources[source].advance(mine)
            except StopIteration:
                self._exhausted[source] = True
                if first or all(self._exhausted):
                    self._ended = True
                    break
                self._sources[source] = self._open(source)  # oversample: start it again
                try:
                    item = self._sources[source].advance(mine)
                except StopIteration:
                    continue  # an empty source: draw again
            self._position += 1
            if mine:
                self._owner._counts.add(source)
                return item
        raise StopIteration

    def state_dict(self) -> dict[str, Any]:
        return {"choices": self._choices.state(),
                "sources": [source.state_dict() for source in self._sources],
                "exhausted": list(self._exhausted), "ended": self._ended,
                "position": self._position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for i, saved in enumerate(state["sources"]):
            if saved is None:
                raise ValueError(
                    f"datasets[{i}]'s iterator has no state_dict, so the interleaved stream "
                    "cannot resume mid-epoch"
                )
            self._sources[i] = self._open(i)
            self._sources[i].load_state_dict(saved)
        self._choices.load(state["choices"])
        self._exhausted = [bool(x) for x in state["exhausted"]]
        self._ended = bool(state["ended"])
        self._position = int(state["position"])
