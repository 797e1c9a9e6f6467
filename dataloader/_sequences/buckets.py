"""``BucketBatchSampler``: batches of items of similar length, by count or by token budget.

An epoch's batches are a function of ``(seed, epoch)`` and of the lengths
alone, the same on every rank: the shuffled order is cut into windows of
``window`` items, each window sorted by length and cut into batches
(``batch_size`` items, or as many as ``max_tokens`` padded tokens hold),
and each window's batches shuffled. The windows are planned one at a time
as the epoch reaches them (``_WindowedEpoch``), so the first batch waits
for one window, not the epoch. Rank ``r`` of ``R`` takes batches ``r, r +
R, ...``, so every rank has the same number of batches (the last ones
repeat the first, or are dropped with ``drop_last``) and DDP's last step
never waits for a rank that has no batch. ``len()`` plans the whole epoch,
so the loader does not ask for it before the first batch
(``length_plans_epoch``). An epoch stopped on N ranks
continues on M as ``DistributedSampler``'s does, with batches for
positions: the batches no rank delivered, in the epoch's order, dealt to
the M ranks in equal counts (``elastic_deal``, ``dataloader._loading.elastic``).
Sorting within a window rather
than the whole epoch keeps the batches' items random while wasting on
padding little more than the whole-epoch sort (``benchmarks/sequences_batching.py``).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

import numpy as np

from dataloader._core.sequences import bucket_window_into, order_into
from dataloader._sampling.distributed import in_distributed_job, world
from dataloader._sampling.remainder import Deal
from dataloader._sampling.sampler import Sampler, trust_batch_indices
from dataloader._sampling.seeding import EpochSeeded, check_seed, epoch_generator
from dataloader._sequences.arguments import check_lengths, check_optional_positive
from dataloader._sequences.padding import PadCollator

__all__ = ["BucketBatchSampler"]

# Batches per window when ``window`` is not given: enough for the lengths in
# a window to be close to each other after sorting, few enough for them to be
# a random draw of the epoch.
_BATCHES_PER_WINDOW = 256
# No limit, for the kernel: batch_size or max_tokens not given.
_UNBOUNDED = np.iinfo(np.int64).max


@trust_batch_indices  # its batches are lists of positions of lengths, from .tolist()
class BucketBatchSampler(Sampler[list[int]], EpochSeeded):
    """Batches of indices whose items have similar lengths; the same count on every rank.

    Parameters
    ----------
    lengths : sequence of int
        The length of every item of the dataset (its tokens, say).
    batch_size : int, optional
        Items per batch (the last batch of an epoch may be shorter).
    max_tokens : int, optional
        Instead of (or as well as) ``batch_size``: the most padded tokens a
        batch holds, ``items * padded length of its longest item``.
    padding : PadCollator, optional
        The collator whose padding (``pad_to_multiple_of``, ``max_length``)
        ``max_tokens`` counts; by default, none.
    window : int, optional
        Items sorted together; by default 256 batches' worth.
    shuffle : bool, default True
        Shuffle the items before windowing, and each window's batches.
    seed : int, default 0
        The same on every rank.
    drop_last : bool, default False
        Drop a short last batch (of ``batch_size``), and the batches beyond
        a multiple of ``num_replicas`` instead of repeating the first ones.
    num_replicas, rank : int, optional
        The ranks, as :class:`~dataloader.DistributedSampler`'s: by default
        ``torch.distributed``'s or the environment's, else one rank.

    Examples
    --------
    >>> from dataloader import BucketBatchSampler
    >>> lengths = [5, 1, 9, 2, 8, 1, 7, 3]
    >>> sampler = BucketBatchSampler(lengths, max_tokens=16, seed=0)
    >>> batches = list(sampler)
    >>> sorted(i for batch in batches for i in batch)
    [0, 1, 2, 3, 4, 5, 6, 7]
    >>> all(len(batch) * max(lengths[i] for i in batch) <= 16 for batch in batches)
    True
    >>> ranks = [BucketBatchSampler(lengths, batch_size=3, num_replicas=2, rank=r) for r in (0, 1)]
    >>> [len(sampler) for sampler in ranks]
    [2, 2]
    """

    # len() plans the whole epoch: the loader asks for it when it needs it, not
    # before the first batch (DataLoader._length_before_epoch).
    length_plans_epoch = True

    def __init__(self, lengths: Any, batch_size: int | None = None, *,
                 max_tokens: int | None = None, padding: PadCollator | None = None,
                 window: int | None = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, num_replicas: int | None = None,
                 rank: int | None = None) -> None:
        self.lengths = check_lengths(lengths)
        self.batch_size = check_optional_positive("batch_size", batch_size)
        self.max_tokens = check_optional_positive("max_tokens", max_tokens)
        if self.batch_size is None and self.max_tokens is None:
            raise ValueError("BucketBatchSampler needs batch_size, max_tokens or both")
        if padding is not None and not isinstance(padding, PadCollator):
            raise TypeError(f"padding should be a PadCollator, got {type(padding).__name__}")
        self.padding = padding or PadCollator()
        self.padded = self.padding.padded_lengths(self.lengths)
        # The bytes of the longest padded length: the passes of each window's radix sort.
        longest = int(self.padded.max()) if len(self.padded) else 0
        self._key_bytes = max(-(-longest.bit_length() // 8), 1)
        self._check_budget()
        self.window = check_optional_positive("window", window) or self._default_window()
        if self.max_tokens is None:
            # Whole batches per window: only the epoch's last batch may be short.
            self.window = -(-self.window // self.batch_size) * self.batch_size  # type: ignore[operator]
        self.shuffle = bool(shuffle)
        self.seed = check_seed(seed)
        self.drop_last = bool(drop_last)
        if num_replicas is None and rank is None and not in_distributed_job():
            num_replicas, rank = 1, 0
        self.num_replicas, self.rank = world(num_replicas, rank)
        self.epoch = 0
        # The last epoch planned: its (seed, epoch) and its plan.
        self._plan: tuple[tuple[int, int], _WindowedEpoch] | None = None
        # The entries the next plan shuffles, written with the lengths (they are the
        # same every epoch), so that the first epoch's first batch waits for its first
        # window alone; each later plan writes its own.
        self._entries: np.ndarray | None = self._new_entries()
        # (epoch, deal): that epoch's remaining batches dealt to these ranks, after a job
        # on another number of ranks stopped in its middle (dataloader._loading.elastic).
        self.elastic_deal: tuple[int, Deal] | None = None

    def _check_budget(self) -> None:
        if self.max_tokens is None or not len(self.padded):
            return
        longest = int(np.argmax(self.padded))
        if self.padded[longest] > self.max_tokens:
            raise ValueError(
                f"item {longest} alone takes {self.padded[longest]} padded tokens, more than "
                f"max_tokens={self.max_tokens}: raise max_tokens, or cut the item "
                "(PadCollator's max_length)")

    def _default_window(self) -> int:
        if self.batch_size is not None:
            return self.batch_size * _BATCHES_PER_WINDOW
        mean = max(float(self.padded.mean()) if len(self.padded) else 1.0, 1.0)
        return max(int(self.max_tokens / mean) * _BATCHES_PER_WINDOW, 1)  # type: ignore[operator]

    def __len__(self) -> int:
        return len(self._rank_batches())

    def __iter__(self) -> Iterator[list[int]]:
        plan = self._epoch_plan()
        if self.active_deal() is not None:
            return map(plan.batch, self._rank_batches().tolist())
        return self._rank_share(plan)

    def _rank_share(self, plan: _WindowedEpoch) -> Iterator[list[int]]:
        """Positions ``rank``, ``rank + R``, ... of the epoch's batch order, each planned
        when reached; past the epoch's last batch, the first ones again (or, with
        ``drop_last``, no round that the batches do not fill)."""
        replicas, round_start = self.num_replicas, 0
        while True:
            position = round_start + self.rank
            needed = round_start + replicas if self.drop_last else position + 1
            planned = plan.planned(needed)
            if planned >= needed:
                yield plan.batch(position)
            elif self.drop_last or round_start >= planned:
                return
            else:  # a round begun inside the epoch, completed by its first batches
                yield plan.batch(position % planned)
            round_start += replicas

    def active_deal(self) -> Deal | None:
        """The elastic deal of the current epoch, if it resumes one on other ranks.

        Examples
        --------
        >>> from dataloader import BucketBatchSampler
        >>> BucketBatchSampler([3, 1, 2], batch_size=2).active_deal() is None
        True
        """
        if self.elastic_deal is not None and self.elastic_deal[0] == self.epoch:
            return self.elastic_deal[1]
        return None

    def epoch_positions(self) -> int:
        """The positions of the current epoch's batch order that the ranks share: the
        batches padded (or cut, with ``drop_last``) to a multiple of ``num_replicas``.

        Examples
        --------
        >>> from dataloader import BucketBatchSampler
        >>> BucketBatchSampler([3, 1, 2, 5, 4], batch_size=2, num_replicas=2,
        ...                    rank=0).epoch_positions()
        4
        """
        total = self._epoch_plan().planned()
        count = total // self.num_replicas if self.drop_last else -(-total // self.num_replicas)
        return count * self.num_replicas

    def _rank_batches(self) -> np.ndarray:
        """This rank's batches of the epoch, as their numbers in the epoch's batch order."""
        total = self._epoch_plan().planned()
        deal = self.active_deal()
        if deal is not None:  # positions of the epoch's padded batch order
            positions = np.asarray(deal.entries(self.rank, 0, deal.count(self.rank)), np.int64)
        else:
            count = self.epoch_positions() // self.num_replicas
            positions = self.rank + self.num_replicas * np.arange(count)
        return positions % max(total, 1)

    def _epoch_plan(self) -> _WindowedEpoch:
        """The current epoch's plan, made as far as its batches have been asked for."""
        if self._plan is None or self._plan[0] != (self.seed, self.epoch):
            self._plan = ((self.seed, self.epoch), _WindowedEpoch(self))
        return self._plan[1]

    def _new_entries(self) -> np.ndarray:
        """The epoch's entries before its shuffle (``order_into``)."""
        entries = np.empty(len(self.padded), np.int64)
        order_into(self.padded, self._key_bytes, entries)
        return entries

    def _take_entries(self) -> np.ndarray:
        """Entries for a new plan to shuffle: those made ahead, else new ones."""
        entries, self._entries = self._entries, None
        return self._new_entries() if entries is None else entries

    def __getstate__(self) -> dict[str, Any]:
        # A plan holds a lock, and both are remade from the lengths where needed.
        return {**self.__dict__, "_plan": None, "_entries": None}

    def state_dict(self) -> dict[str, Any]:
        """The seed, the epoch and the number of ranks (the same on every rank)."""
        return {"seed": self.seed, "epoch": self.epoch, "num_replicas": self.num_replicas}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; the number of ranks must not have changed."""
        saved = state.get("num_replicas", self.num_replicas)
        if saved != self.num_replicas:
            raise ValueError(f"the state was saved with num_replicas={saved}, this sampler has "
                             f"num_replicas={self.num_replicas}")
        super().load_state_dict(state)



class _WindowedEpoch:
    """One epoch's batches, planned a window at a time as they are asked for.

    The items of window ``w`` are drawn by steps of an exact Fisher-Yates
    shuffle that continue where window ``w - 1``'s stopped
    (``bucket_window_into``), then sorted by padded length and cut into
    batches, and the window's batches shuffled among themselves. The first
    batch therefore costs one window's work, not the epoch's (whose
    entries, for the first epoch, were written with the sampler). The
    epoch's batch count is known once its last window is planned.
    """

    def __init__(self, sampler: BucketBatchSampler) -> None:
        self._sampler = sampler
        n = len(sampler.padded)
        self._rng = epoch_generator(sampler.seed, sampler.epoch)
        # The item shuffle's generator state: four words of the epoch's generator.
        self._state = self._rng.bit_generator.random_raw(4) if sampler.shuffle else None
        self._order = sampler._take_entries()
        self._scratch = np.empty(3 * min(sampler.window, n), np.int64)
        self._ends = np.empty(min(sampler.window, n), np.int64)
        # Per window planned: its first batch's number, and its batches' starts and
        # stops in self._order, in the window's shuffled order.
        self._firsts: list[int] = []
        self._windows: list[tuple[np.ndarray, np.ndarray]] = []
        self._items = self._batches = 0
        self._lock = threading.Lock()  # batches are asked for on the loader's threads

    def planned(self, wanted: int | None = None) -> int:
        """Plan windows until ``wanted`` batches (every batch, by default) are planned or
        the epoch is; return how many are."""
        with self._lock:
            while (wanted is None or self._batches < wanted) and self._items < len(self._order):
                self._plan_window()
            return self._batches

    def batch(self, number: int) -> list[int]:
        """Planned batch ``number``'s items."""
        window = bisect_right(self._firsts, number) - 1
        starts, stops = self._windows[window]
        number -= self._firsts[window]
        return self._order[starts[number]:stops[number]].tolist()

    def _plan_window(self) -> None:
        sampler, start = self._sampler, self._items
        size = min(sampler.window, len(self._order) - start)
        count = bucket_window_into(
            sampler.padded, sampler._key_bytes, self._state, self._order, start, size,
            sampler.batch_size or _UNBOUNDED, sampler.max_tokens or _UNBOUNDED,
            self._scratch, self._ends)
        stops = self._ends[:count].copy()
        starts = np.empty(count, np.int64)
        starts[0] = start
        starts[1:] = stops[:-1]
        self._items = start + size
        if (self._items == len(self._order) and sampler.drop_last and sampler.max_tokens is None
                and stops[-1] - starts[-1] < sampler.batch_size):
            starts, stops = starts[:-1], stops[:-1]  # the epoch's short last batch
        if sampler.shuffle:
            shuffled = self._rng.permutation(len(starts))
            starts, stops = starts[shuffled], stops[shuffled]
        if len(starts):
            self._firsts.append(self._batches)
            self._windows.append((starts, stops))
            self._batches += len(starts)
