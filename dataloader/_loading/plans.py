"""What an epoch needs from its loader, resolved once when it starts.

``DataLoader`` builds one plan per ``iter(loader)``: an ``EpochPlan`` for
a map-style dataset, a ``StreamPlan`` for an iterable-style one. Epochs
and engines read the plan and nothing of the loader but its public
attributes, so that what an epoch depends on is written down in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dataloader._core.load import Recipe
    from dataloader._loading.fetch import SkipBudget
    from dataloader._loading.stats import Stats
    from dataloader._sampling.distributed import RankGroup
    from dataloader._sampling.state import EpochProgress, Resume

__all__ = ["EpochPlan", "StreamPlan"]


@dataclass(slots=True)
class EpochPlan:
    """A map-style epoch: its batches of indices and how to load them.

    Attributes
    ----------
    batches : iterator
        Lists of indices (or single indices when batching is off), in order.
    total : int or None
        The number of batches, when the sampler knows its length.
    check_indices : callable or None
        Validates (and normalises) what the sampler yielded; ``None`` when
        the sampler is one of ours and yields valid indices by construction.
    recipe : Recipe or None
        How indices become a batch (``dataloader._core.load``); ``None`` on
        worker processes, which bind the epoch themselves.
    progress : EpochProgress
        The loader's record of this epoch, kept up to date by the iterator.
    stats : Stats
        The loader's counters.
    item_lanes : bool
        Load item by item (lanes) even with ``item_concurrency=1``.
    on_cancel : callable or None
        Called when a threaded epoch is dropped, after the engine's own
        cancel (an async dataset cancels its coroutines in flight).
    skip : SkipBudget or None
        ``on_error="skip"``: the epoch's budget of skipped items, spent by
        the recipe, or (on worker processes) by the engine in delivery order.
    window : int
        Threaded epochs: batches in flight or waiting to be delivered.
    item_concurrency : int
        Threaded epochs: lanes per batch.
    in_order : bool
        Threaded epochs: deliver in sampler order (else as batches complete).
    timeout : float
        Threaded epochs: seconds to wait for one batch; 0 waits forever.
    worker_setup : callable or None
        Threaded epochs: ``worker_setup(thread_index)``, run by each task
        before it loads (worker info, ``worker_init_fn``).
    first : int
        The epoch's number of the plan's first batch, which errors name and
        worker processes take turns from (the batches before it were
        delivered before a resume, or loaded by another engine).
    """

    batches: Iterator[Any]
    total: int | None
    check_indices: Callable[[Any], Any] | None
    recipe: Recipe | None
    progress: EpochProgress
    stats: Stats
    item_lanes: bool = False
    on_cancel: Callable[[], None] | None = None
    skip: SkipBudget | None = None
    window: int = 1
    item_concurrency: int = 1
    in_order: bool = True
    timeout: float = 0.0
    worker_setup: Callable[[int], None] | None = None
    first: int = 0


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """A streaming epoch: its streams, how to batch them, where to run them.

    Attributes
    ----------
    dataset : iterable
        The loader's dataset; each stream is one ``iter(dataset)``.
    num_workers : int
        Worker threads, each iterating its own stream; 0 iterates one
        stream on the calling thread.
    recipe : Recipe
        How a stream's items become a batch (``dataloader._core.load``).
    batch_size : int or None
        Items per batch; ``None`` delivers items one by one.
    drop_last : bool
        Drop a stream's last batch when it is short.
    progress : EpochProgress
        The loader's record of this epoch.
    resume : Resume or None
        The saved position this epoch resumes from.
    limit : int or None
        The batch count every rank stops at; ``AGREE`` (-1) when the ranks
        agree on it as the epoch goes (``rank_group``); ``None``: no limit.
    stats : Stats
        The loader's counters.
    base_seed : int
        A stream's ``WorkerInfo.seed`` is ``base_seed + stream``.
    prefetch_factor : int
        Batches loaded ahead per stream.
    timeout : float
        Seconds to wait for one batch; 0 waits forever.
    rank_group : RankGroup or None
        The ranks' own process group, with ``limit == AGREE``.
    in_order : bool
        Deliver the workers' batches by turn, batch ``j`` of every stream
        before batch ``j + 1`` of any, as torch does (the loader's
        ``in_order``); else in arrival order.
    worker_setup : callable or None
        On worker threads: ``worker_setup(thread_index)``, run on a pool
        thread before it loads (set by ``dataloader._worker_kinds.Threads``).
    """

    dataset: Any
    num_workers: int
    recipe: Recipe
    batch_size: int | None
    drop_last: bool
    progress: EpochProgress
    resume: Resume | None
    limit: int | None
    stats: Stats
    base_seed: int
    prefetch_factor: int
    timeout: float
    rank_group: RankGroup | None = None
    in_order: bool = False
    worker_setup: Callable[[int], None] | None = None

    @property
    def streams(self) -> int:
        """The number of streams, ``max(num_workers, 1)``."""
        return max(self.num_workers, 1)

    @property
    def delivered_by_stream(self) -> list[int]:
        """Each stream's batches delivered before the saved position (all 0 without one):
        where a resumed epoch's turns continue."""
        saved = self.resume.streams if self.resume is not None and self.resume.batches else None
        states = saved or {}
        return [
            int(state["batches"]) if isinstance(state, dict) else 0
            for state in (states.get(stream) for stream in range(self.streams))
        ]
