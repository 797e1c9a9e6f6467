"""Streaming epochs: batches of an iterable-style dataset, and sharding.

A *stream* is one ``iter(dataset)``. With ``num_workers = n > 0`` there are
``n`` streams, each iterated on its own worker thread with
``get_worker_info()`` describing the stream (``id`` in ``0 .. n - 1``,
``num_workers = n``), so that ``__iter__`` can shard by worker as with
torch; each worker assembles, transforms and collates its own batches, and
the consumer receives them in arrival order (``dataloader._core.stream``);
with ``in_order`` and a dataset whose ``ordered_streams`` is true (its
workers split one order by batch, as ``interleave`` does) by turn
instead, batch ``j`` of every worker before batch ``j + 1`` of any, as
torch delivers them, which puts that order back together.
With ``num_workers = 0`` there is one stream, iterated on the consumer
thread; with ``item_concurrency > 1`` its batches are transformed and
collated on the pool (by the map-style engine, ``dataloader._core.epoch``).

Errors (see ``docs/distributed.md``, "Streaming"): an exception raised by
a stream's iterator is raised from one ``next()`` and ends that stream
(a Python generator cannot go on after raising; the other workers' streams
continue); an exception of ``transform`` or ``collate_fn`` fails its own
batch only.

Every delivered batch carries ``(payload, failed, stream, state)``:
``state`` is ``{"batches": n, "iterator": s}``, the stream's batch count
and its iterator's ``state_dict()`` just after the batch's last item,
recorded when the batch is delivered, so a saved position never counts
batches that were loaded ahead but not delivered (and a resumed epoch
continues the turns where they were).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from dataloader._core.epoch import Epoch, EpochClosedError
from dataloader._core.stream import Stream
from dataloader._dataset import IterableDataset
from dataloader._distributed import AgreedBatches, RankGroup
from dataloader._core.stats import Row
from dataloader._stats import COLLATE, FETCH, TRANSFORM, WAIT, monotonic_ns
from dataloader._worker import WorkerInfo, set_stream_worker

if TYPE_CHECKING:
    from dataloader._loader import DataLoader
    from dataloader._state import EpochProgress

__all__ = ["ShardedIterable", "check_options", "loader_length", "shard", "start_epoch"]

# The state of a batch from an iterator without ``state_dict``; and of an
# error that is no batch (it leaves the stream's saved state as it was).
_NO_STATE = object()
_KEEP_STATE = None

# The limit of an epoch whose ranks agree on their batch count as it goes.
AGREE = -1


def check_options(shuffle: Any, sampler: Any, batch_sampler: Any) -> None:
    """Reject the options that make no sense for a stream, as torch does."""
    for name, value, unset in (
        ("shuffle", shuffle, False), ("sampler", sampler, None),
        ("batch_sampler", batch_sampler, None),
    ):
        if value is not unset and value != unset:
            raise ValueError(
                f"DataLoader with IterableDataset: expected unspecified {name} option, "
                f"but got {name}={value!r}"
            )


# -- sharding ----------------------------------------------------------------


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
        for name, value in (("rank", rank), ("world_size", world_size)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{name} should be an integer, but got {name}={value!r}")
        if world_size < 1:
            raise ValueError(f"world_size should be at least 1, but got world_size={world_size}")
        if not 0 <= rank < world_size:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {world_size - 1}]"
            )
        self.source = source
        self.rank = rank
        self.world_size = world_size

    def __len__(self) -> int:
        return len(range(self.rank, len(self.source), self.world_size))  # type: ignore[arg-type]

    def __iter__(self) -> ShardIterator:
        from dataloader._worker import get_worker_info

        info = get_worker_info()
        if info is None:
            return ShardIterator(self.source, self.rank, self.world_size)
        # Worker w of the rank takes every num_workers-th item of the rank's share.
        step = self.world_size * info.num_workers
        return ShardIterator(self.source, self.rank + self.world_size * info.id, step)


class ShardIterator:
    """Items at positions ``start, start + step, ...`` of a source; saves its position."""

    __slots__ = ("_source", "_iterator", "_start", "_step", "_consumed")

    def __init__(self, source: Iterable[Any], start: int, step: int) -> None:
        self._source = source
        self._iterator: Iterator[Any] | None = None
        self._start = start
        self._step = step
        self._consumed = 0  # items of the source read so far

    def __iter__(self) -> ShardIterator:
        return self

    def __next__(self) -> Any:
        if self._iterator is None:
            self._iterator = iter(self._source)
        while True:
            item = next(self._iterator)
            position = self._consumed
            self._consumed += 1
            if position % self._step == self._start:
                return item

    def state_dict(self) -> dict[str, int]:
        return {"consumed": self._consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Read the source up to the saved position again (without yielding it)."""
        self._iterator = iter(self._source)
        self._consumed = int(state["consumed"])
        for _ in islice(self._iterator, self._consumed):
            pass


# -- lengths and equal batch counts ------------------------------------------


def _batches_of(items: int, batch_size: int | None, drop_last: bool) -> int:
    if batch_size is None:
        return items
    return items // batch_size if drop_last else -(-items // batch_size)


def drops_partial(loader: DataLoader) -> bool:
    """``drop_last``, or ``equal_batches``: every rank then delivers the same number of
    full batches, so the same number of samples (a worker's partial last batch would
    come at a different place, or not at all, on another rank)."""
    return loader.drop_last or (loader.equal_batches and loader.batch_size is not None)


def num_streams(loader: DataLoader) -> int:
    return max(loader.num_workers, 1)


def _known_limit(loader: DataLoader) -> int | None:
    """The smallest rank's batch count, from a sized shard's arithmetic alone."""
    dataset = loader.dataset
    if not isinstance(dataset, ShardedIterable):
        return None
    try:
        n = len(dataset.source)  # type: ignore[arg-type]
    except TypeError:
        return None
    world, streams = dataset.world_size, num_streams(loader)

    def batches_of_rank(rank: int) -> int:
        # Worker w of the rank streams positions rank + world * w (mod world * streams).
        return sum(
            _batches_of(
                len(range(rank + world * w, n, world * streams)), loader.batch_size,
                drops_partial(loader),
            )
            for w in range(streams)
        )

    return min(batches_of_rank(rank) for rank in range(world))


def loader_length(loader: DataLoader) -> int:
    """``len(loader)``: torch's rule for streams, or the equal batch count."""
    if loader.equal_batches:
        limit = _known_limit(loader)
        if limit is not None:
            return limit
    return _batches_of(len(loader.dataset), loader.batch_size, drops_partial(loader))


def check_resumable_state(state: dict[str, Any]) -> None:
    if state.get("streams") is None:
        raise ValueError(
            "this streaming dataset's iterator has no state_dict/load_state_dict, so an "
            "epoch cannot be resumed in its middle (only at an epoch boundary); give the "
            "iterator both methods, or stream through dataloader.shard"
        )


# -- the streams -------------------------------------------------------------


@dataclass(slots=True)
class _Recipe:
    """How items of a stream become a batch; resolved once per epoch."""

    transform: Callable[[int, Any], Any] | None
    collate: Callable[[Any], Any]
    batch_size: int | None
    drop_last: bool
    # A native chain writing each item into its batch slot (ImageCollator).
    assemble: Callable[[list[int], list[Any]], Any] | None = None
    # The map-style engine reads this: a stream batch is never split into lanes.
    batched: bool = False

    def load(self, pending: tuple[int, int, list[Any], Any], row: Row) -> tuple:
        """Transform and collate a batch of fetched items into a delivered entry."""
        stream, start, items, state = pending
        started = monotonic_ns()
        try:
            if self.assemble is not None and self.batch_size is not None:
                batch = self.assemble(list(range(start, start + len(items))), items)
                row.add(TRANSFORM, len(items), monotonic_ns() - started)
                return batch, False, stream, state
            if self.transform is not None:
                items = [self.transform(start + i, item) for i, item in enumerate(items)]
                transformed = monotonic_ns()
                row.add(TRANSFORM, len(items), transformed - started)
                started = transformed
            batch = self.collate(items if self.batch_size is not None else items[0])
            row.add(COLLATE, 1, monotonic_ns() - started)
        except Exception as exc:
            exc.add_note(
                f"dataloader: raised while loading the batch of stream {stream} starting "
                f"at its item {start}"
            )
            return exc, True, stream, state
        return batch, False, stream, state


class _Cursor:
    """One stream: its iterator, position and worker identity."""

    __slots__ = ("recipe", "dataset", "stream", "info", "state", "iterator", "position", "ended",
                 "batches")

    def __init__(self, recipe: _Recipe, dataset: Any, stream: int,
                 info: WorkerInfo | None, state: Any) -> None:
        self.recipe = recipe
        self.dataset = dataset
        self.stream = stream
        self.info = info
        self.state = state  # to restore on open
        self.iterator: Iterator[Any] | None = None
        self.position = 0
        self.ended = False
        self.batches = 0 if state is None else int(state["batches"])

    def open(self) -> None:
        """Start the stream, on the thread that iterates it."""
        if self.info is not None:
            # A worker's get_worker_info() describes its stream while it runs.
            set_stream_worker(self.info)
        self.iterator = iter(self.dataset)
        if self.state is not None:
            self.iterator.load_state_dict(self.state["iterator"])  # type: ignore[attr-defined]

    def close(self) -> None:
        self.iterator = None
        if self.info is not None:
            set_stream_worker(None)

    def fetch(self, row: Row) -> tuple[int, int, list[Any], Any] | None:
        """The next batch's items (``None`` at the end); an iterator error ends the stream."""
        size = self.recipe.batch_size or 1
        items: list[Any] = []
        started = monotonic_ns()
        try:
            for item in islice(self.iterator, size):  # type: ignore[arg-type]
                items.append(item)
        except BaseException as exc:
            self.ended = True
            if isinstance(exc, Exception):
                exc.add_note(f"dataloader: raised by the iterator of stream {self.stream}")
            raise
        finally:
            row.add(FETCH, len(items), monotonic_ns() - started)
        if len(items) < size:
            self.ended = True
            if not items or (self.recipe.drop_last and self.recipe.batch_size is not None):
                return None
        start = self.position
        self.position += len(items)
        self.batches += 1
        save = getattr(self.iterator, "state_dict", None)
        state = {"batches": self.batches, "iterator": save()} if save is not None else _NO_STATE
        return self.stream, start, items, state

    def produce(self, row: Row) -> tuple | None:
        """Fetch, transform and collate the next batch on a worker: a delivered entry."""
        try:
            pending = self.fetch(row)
        except Exception as exc:
            return exc, True, self.stream, _KEEP_STATE
        if pending is None:
            return None
        return self.recipe.load(pending, row)


def _consumer_batches(cursor: _Cursor, row: Row) -> Iterator[tuple]:
    """The batches of a consumer-side stream, for the map-style engine."""
    cursor.open()
    while not cursor.ended:
        pending = cursor.fetch(row)
        if pending is not None:
            yield pending


class _DirectEngine:
    """A stream loaded on the consumer thread: ``num_workers=0``, no lanes."""

    __slots__ = ("_cursor", "_row", "delivered", "_finished")

    def __init__(self, cursor: _Cursor, row: Row) -> None:
        self._cursor = cursor
        self._row = row
        self.delivered = 0
        self._finished = False
        cursor.open()

    def next(self) -> tuple:
        if self._finished or self._cursor.ended:
            raise StopIteration
        started = monotonic_ns()
        try:
            pending = self._cursor.fetch(self._row)
        except BaseException:
            self._finished = True
            raise
        if pending is None:
            self._finished = True
            raise StopIteration
        self.delivered += 1
        entry = self._cursor.recipe.load(pending, self._row)
        self._row.add(WAIT, 1, monotonic_ns() - started)
        return entry

    def cancel(self) -> None:
        self._finished = True


def start_epoch(loader: DataLoader) -> StreamEpoch:
    """``iter(loader)`` for a stream: number the epoch, restore a saved position, start."""
    for previous in list(loader._streams):
        previous.cancel(replaced=True)
    progress, resume = loader._progress.start_epoch(())
    # A stream that shuffles by epoch (a TarDataset) learns the epoch's number.
    set_epoch = getattr(loader.dataset, "set_epoch", None)
    if callable(set_epoch):
        set_epoch(progress.epoch)
    streams = num_streams(loader)
    states: dict[int, Any] = {}
    if resume is not None and resume.batches:
        saved = resume.streams or {}
        if len(saved) != streams:
            raise ValueError(
                f"the state was saved with {len(saved)} stream(s) (num_workers), this loader "
                f"runs {streams}: a streaming epoch resumes only with the same num_workers"
            )
        states = {key: value for key, value in saved.items() if value is not None}
    progress.streams = {stream: states.get(stream) for stream in range(streams)}
    # A native chain, bound to this epoch; with an ImageCollator, written
    # straight into the batch (the fused path of map-style datasets).
    transform, assemble = loader._epoch_transform()
    recipe = _Recipe(transform, loader.collate_fn, loader.batch_size, drops_partial(loader),
                     assemble)
    limit = _limit(loader)
    epoch = StreamEpoch(loader, progress, limit)
    epoch.engine = _engine(loader, recipe, streams, states)
    if limit == AGREE:
        epoch.source = AgreedBatches(
            epoch.engine.next, loader._rank_group, streams * loader.prefetch_factor
        )
    else:
        epoch.source = epoch.engine
    loader._streams.add(epoch)
    return epoch


def _limit(loader: DataLoader) -> int | None:
    """The batch count every rank stops at, ``AGREE`` when the ranks must agree, or ``None``."""
    if not loader.equal_batches:
        return None
    limit = _known_limit(loader)
    if limit is not None:
        return limit
    if loader._rank_group is None:
        loader._rank_group = RankGroup()
    if loader._rank_group.ready():
        return AGREE
    raise ValueError(
        "equal_batches=True needs every rank's batch count: stream through "
        "dataloader.shard over a source with __len__, or initialise torch.distributed "
        "so that the ranks agree on it as the epoch goes"
    )


def _engine(loader: DataLoader, recipe: _Recipe, streams: int, states: dict[int, Any]) -> Any:
    dataset, stats = loader.dataset, loader._stats
    if loader.num_workers == 0:
        cursor = _Cursor(recipe, dataset, 0, None, states.get(0))
        if loader.item_concurrency == 1:
            return _DirectEngine(cursor, stats.rows[0])
        pool = loader._live_pool()
        engine = Epoch(
            pool, recipe, _consumer_batches(cursor, stats.rows[0]), None,
            window=loader.prefetch_factor, item_concurrency=1, in_order=True,
            timeout=float(loader.timeout), worker_setup=loader._worker_setup, stats=stats,
        )
        engine.start()
        return engine
    pool = loader._live_pool()
    cursors = [
        _Cursor(recipe, dataset, stream,
                WorkerInfo(stream, streams, loader._base_seed + stream, dataset,
                           loader.batch_size),
                states.get(stream))
        for stream in range(streams)
    ]
    engine = Stream(pool, cursors, window=streams * loader.prefetch_factor,
                    timeout=float(loader.timeout), worker_setup=loader._worker_setup,
                    stats=stats, in_order=loader.in_order and _ordered(dataset),
                    delivered=[cursor.batches for cursor in cursors])
    engine.start()
    return engine


def _ordered(dataset: Any) -> bool:
    """Whether the dataset's workers split one order by batch (``ordered_streams``):
    then their batches are delivered by turn, which restores that order."""
    return bool(getattr(dataset, "ordered_streams", False))


class StreamEpoch:
    """The iterator of a streaming epoch (see the module docstring).

    Starting another epoch of the same loader ends this one: its workers
    are needed by the new one.
    """

    __slots__ = ("_loader", "engine", "source", "_progress", "_limit", "_done", "_replaced",
                 "__weakref__")

    def __init__(self, loader: DataLoader, progress: EpochProgress, limit: int | None) -> None:
        # Holding the loader keeps its pool and dataset alive while the epoch runs.
        self._loader = loader
        self._progress = progress
        self._limit = limit
        self._done = False
        self._replaced = False
        self.engine: Any = None
        # Where batches come from: the engine, or the ranks' agreement over it.
        self.source: Any = None

    def __iter__(self) -> StreamEpoch:
        return self

    def __len__(self) -> int:
        return max(len(self._loader) - self._progress.delivered, 0)

    def __next__(self) -> Any:
        if self._done:
            if self._replaced:
                raise EpochClosedError("a newer epoch of this DataLoader replaced this one")
            raise StopIteration
        progress, limit = self._progress, self._limit
        if limit is not None and limit >= 0 and progress.delivered >= limit:
            self._end()
            raise StopIteration
        try:
            entry = self.source.next()
        except StopIteration:
            self._end()
            raise
        payload, failed, stream, state = entry
        progress.delivered += 1
        if state is _NO_STATE:
            progress.streams = None
        elif progress.streams is not None and state is not None:
            progress.streams[stream] = state
        if failed:
            raise payload
        return payload

    def _end(self) -> None:
        self._done = True
        self._progress.finished = True
        self.engine.cancel()

    def cancel(self, replaced: bool = False) -> None:
        """End the epoch now; workers stop after their current batch."""
        self._done = True
        self._replaced = replaced
        if self.engine is not None:
            self.engine.cancel()

    def __del__(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.cancel()

