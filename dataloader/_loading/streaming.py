"""Streaming epochs: batches of an iterable-style dataset.

A *stream* is one ``iter(dataset)``. With ``num_workers = n > 0`` there are
``n`` streams, each iterated on its own worker thread with
``get_worker_info()`` describing the stream (``id`` in ``0 .. n - 1``,
``num_workers = n``), so that ``__iter__`` can shard by worker as with
torch; each worker assembles, transforms and collates its own batches
(``dataloader._core.stream``). With ``in_order`` (the default) the consumer
takes them by turn, as torch does: batch ``j`` of every worker before batch
``j + 1`` of any, a worker whose stream has ended leaving the rotation, so
the order is the same on every run (and a dataset whose workers split one
order by batch, as ``interleave``'s do, gets that order back); with
``in_order=False``, in arrival order.
With ``num_workers = 0`` there is one stream, iterated on the consumer
thread; with ``item_concurrency > 1`` its batches are transformed and
collated on the pool (by the map-style engine, ``dataloader._core.epoch``).

Errors (see ``docs/distributed.md``, "Streaming"): an exception raised by
a stream's iterator is raised from one ``next()`` and ends that stream
(a Python generator cannot go on after raising; the other workers' streams
continue); an exception of ``transform`` or ``collate_fn`` fails its own
batch only.

The loader hands a stream epoch a ``StreamPlan`` (``dataloader._loading.plans``):
everything it needs, resolved when ``iter(loader)`` starts it.

Every delivered batch carries ``(payload, failed, stream, state)``:
``state`` is ``{"batches": n, "iterator": s}``, the stream's batch count
and its iterator's ``state_dict()`` just after the batch's last item,
recorded when the batch is delivered, so a saved position never counts
batches that were loaded ahead but not delivered (and a resumed epoch
continues the turns where they were).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from dataloader._core.epoch import Epoch
from dataloader._core.load import Fetched, Recipe, load_fetched
from dataloader._core.pool import Pool
from dataloader._core.stats import Row
from dataloader._core.stream import Stream
from dataloader._datasets.hooks import announce_epoch, state_saver, stream_counter
from dataloader._datasets.worker_info import WorkerInfo, set_stream_worker
from dataloader._errors import STREAM_ITERATOR, EpochClosedError, LoadingContext, add_context
from dataloader._loading.plans import EpochPlan, StreamPlan
from dataloader._loading.plugins import bind_epoch
from dataloader._loading.stats import FETCH, WAIT, monotonic_ns
from dataloader._sampling.distributed import AgreedBatches, RankGroup

if TYPE_CHECKING:
    from dataloader._loader import DataLoader
    from dataloader._sampling.state import EpochProgress

__all__ = [
    "Cursor",
    "InlineStreamEngine",
    "StreamIterator",
    "bind_stream_epoch",
    "check_options",
    "drops_partial",
    "epoch_limit",
    "inline_stream_engine",
    "loader_length",
    "start_epoch",
    "threaded_stream_engine",
]

# The state of a batch from an iterator without ``state_dict``; and of an
# error that is no batch (it leaves the stream's saved state as it was).
class _NoState:
    """The state of a batch from an iterator without ``state_dict``: one object, also
    after crossing from a worker process (it pickles as a reference to its name)."""

    def __reduce__(self) -> str:
        return "_NO_STATE"


_NO_STATE = _NoState()
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
    dataset = stream_counter(loader.dataset)
    if dataset is None:
        return None
    streams = num_streams(loader)
    if dataset.stream_length(0, streams) is None:
        return None

    def batches_of_rank(rank: int) -> int:
        return sum(
            _batches_of(dataset.stream_length(w, streams, rank) or 0, loader.batch_size,
                        drops_partial(loader))
            for w in range(streams)
        )

    return min(batches_of_rank(rank) for rank in range(dataset.world_size))


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


def bind_stream_epoch(transform: Any, collate: Any, batch_size: int | None, *, seed: int,
                      epoch: int, lanes: bool) -> Recipe:
    """How a stream's items become a batch in epoch ``epoch``: the one binder of a
    streaming epoch, on the consumer's side and in each worker process alike.

    Its items arrive fetched (``Fetched``); a native chain is bound to the
    seed and the epoch, and with an ``ImageCollator`` (unless items load on
    ``lanes``) writes each item straight into its batch, the fused path of
    map-style datasets (``plugins.bind_epoch``).
    """
    bound, assemble = bind_epoch(transform, collate, seed=seed, epoch=epoch, lanes=lanes)
    return Recipe(None, None, bound, collate, batch_size is not None, assemble)


class CursorPlan(Protocol):
    """What a ``Cursor`` reads of its plan: a ``StreamPlan``, or a worker process's
    ``StreamSpec``."""

    @property
    def dataset(self) -> Any: ...
    @property
    def batch_size(self) -> int | None: ...
    @property
    def drop_last(self) -> bool: ...


class Cursor:
    """One stream: its iterator, position and worker identity."""

    __slots__ = ("dataset", "stream", "info", "state", "iterator", "position", "ended",
                 "batch_size", "drop_last", "batches")

    def __init__(self, plan: CursorPlan, stream: int, info: WorkerInfo | None,
                 state: Any) -> None:
        self.dataset = plan.dataset
        self.batch_size = plan.batch_size
        self.drop_last = plan.drop_last
        self.stream = stream
        self.info = info
        self.state = state  # to restore on open
        self.iterator: Iterator[Any] | None = None
        self.ended = False
        self.batches = 0 if state is None else int(state["batches"])
        # Every batch before a saved state was full (only a stream's last
        # batch is short): a resumed stream's items keep their positions.
        self.position = self.batches * (self.batch_size or 1)

    def open(self) -> None:
        """Start the stream, on the thread that iterates it."""
        if self.info is not None:
            # A worker's get_worker_info() describes its stream while it runs.
            set_stream_worker(self.info)
        # The dataset's own iterator: a saved state means it has load_state_dict.
        iterator: Any = iter(self.dataset)
        self.iterator = iterator
        if self.state is not None:
            iterator.load_state_dict(self.state["iterator"])

    def close(self) -> None:
        self.iterator = None
        if self.info is not None:
            set_stream_worker(None)

    def fetch(self, row: Row) -> Fetched | None:
        """The next batch's items (``None`` at the end); an iterator error ends the stream."""
        size = self.batch_size or 1
        items: list[Any] = []
        started = monotonic_ns()
        try:
            for item in islice(self.iterator, size):  # type: ignore[arg-type]
                items.append(item)
        except BaseException as exc:
            self.ended = True
            add_context(exc, LoadingContext(STREAM_ITERATOR, stream=self.stream))
            raise
        finally:
            row.add(FETCH, len(items), monotonic_ns() - started)
        if len(items) < size:
            self.ended = True
            if not items or (self.drop_last and self.batch_size is not None):
                return None
        start = self.position
        self.position += len(items)
        self.batches += 1
        save = state_saver(self.iterator)
        state = {"batches": self.batches, "iterator": save()} if save is not None else _NO_STATE
        if self.batch_size is None:
            return Fetched(self.stream, start, items[0], state)
        return Fetched(self.stream, list(range(start, start + len(items))), items, state)


def _consumer_batches(cursor: Cursor, row: Row) -> Iterator[Fetched]:
    """The batches of a consumer-side stream, for the map-style engine."""
    cursor.open()
    while not cursor.ended:
        fetched = cursor.fetch(row)
        if fetched is not None:
            yield fetched


class InlineStreamEngine:
    """A stream loaded on the consumer thread: ``num_workers=0``, no lanes."""

    __slots__ = ("_cursor", "_recipe", "_row", "delivered", "_finished")

    def __init__(self, cursor: Cursor, recipe: Recipe, row: Row) -> None:
        self._cursor = cursor
        self._recipe = recipe
        self._row = row
        self.delivered = 0
        self._finished = False
        cursor.open()

    def next(self) -> tuple:
        if self._finished or self._cursor.ended:
            raise StopIteration
        started = monotonic_ns()
        try:
            fetched = self._cursor.fetch(self._row)
        except BaseException:
            self._finished = True
            raise
        if fetched is None:
            self._finished = True
            raise StopIteration
        self.delivered += 1
        entry = load_fetched(self._recipe, fetched, self._row)
        self._row.add(WAIT, 1, monotonic_ns() - started)
        return entry

    def cancel(self) -> None:
        self._finished = True


def start_epoch(loader: DataLoader, plan: StreamPlan,
                engine_for: Callable[[StreamPlan, dict[int, Any]], Any]) -> StreamIterator:
    """``iter(loader)`` for a stream: restore a saved position, start the streams on the
    engine ``engine_for(plan, states)`` makes (``states``: each stream's saved state).

    ``loader`` is kept alive by the epoch and asked only its length.
    """
    progress, resume = plan.progress, plan.resume
    # A stream that shuffles by epoch (a TarDataset) learns the epoch's number.
    announce_epoch(plan.dataset, progress.epoch)
    streams = plan.streams
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
    epoch = StreamIterator(loader, progress, plan.limit)
    epoch.engine = engine_for(plan, states)
    if plan.limit == AGREE and plan.rank_group is not None:
        epoch.source = AgreedBatches(
            epoch.engine.next, plan.rank_group, streams * plan.prefetch_factor
        )
    else:
        epoch.source = epoch.engine
    return epoch


def epoch_limit(loader: DataLoader, rank_group: RankGroup | None) -> int | None:
    """The batch count every rank stops at, ``AGREE`` when the ranks must agree, or ``None``.

    ``rank_group`` is the loader's own group, asked only when the counts
    are not known from the shard's arithmetic.
    """
    if not loader.equal_batches:
        return None
    # A stream whose shares change with the epoch (RowGroupStream) counts this epoch's.
    announce_epoch(loader.dataset, loader.epoch)
    limit = _known_limit(loader)
    if limit is not None:
        return limit
    if rank_group is not None and rank_group.ready():
        return AGREE
    raise ValueError(
        "equal_batches=True needs every rank's batch count: stream through "
        "dataloader.shard over a source with __len__, or initialise torch.distributed "
        "so that the ranks agree on it as the epoch goes"
    )


def inline_stream_engine(plan: StreamPlan, states: dict[int, Any]) -> InlineStreamEngine:
    """The engine of a stream iterated and loaded on the calling thread."""
    return InlineStreamEngine(Cursor(plan, 0, None, states.get(0)), plan.recipe,
                              plan.stats.rows[0])


def threaded_stream_engine(plan: StreamPlan, states: dict[int, Any], pool: Pool) -> Any:
    """The engine of streams loaded on ``pool``: one stream per worker thread, or (with
    ``num_workers=0``) one iterated on the calling thread whose batches the pool transforms
    and collates."""
    stats, recipe = plan.stats, plan.recipe
    engine: Epoch | Stream
    if plan.num_workers == 0:
        cursor = Cursor(plan, 0, None, states.get(0))
        engine = Epoch(pool, EpochPlan(
            _consumer_batches(cursor, stats.rows[0]), None, None, recipe, plan.progress,
            stats, window=plan.prefetch_factor, timeout=plan.timeout,
            worker_setup=plan.worker_setup,
        ))
        engine.start()
        return engine
    streams = plan.streams
    cursors = [
        Cursor(plan, stream,
                WorkerInfo(stream, streams, plan.base_seed + stream, plan.dataset,
                           plan.batch_size),
                states.get(stream))
        for stream in range(streams)
    ]
    engine = Stream(pool, cursors, recipe, streams * plan.prefetch_factor, plan)
    engine.start()
    return engine


class StreamIterator:
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

    def __iter__(self) -> StreamIterator:
        return self

    @property
    def _workers(self) -> list[Any]:
        """Worker processes only: their ``multiprocessing.Process`` objects, as torch's
        iterator names them (``AttributeError`` on threads, as torch's single-process one)."""
        return self.engine._workers

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
        stats = self._loader._stats
        stats.asked()
        try:
            entry = self.source.next()
        except StopIteration:
            stats.answered(False)
            self._end()
            raise
        stats.answered(True)
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

