"""``BucketBatchSampler``: batches of items of similar length, by count or by token budget.

An epoch's batches are a function of ``(seed, epoch)`` and of the lengths
alone, computed whole on every rank: the shuffled order is cut into windows
of ``window`` items, each window sorted by length and cut into batches
(``batch_size`` items, or as many as ``max_tokens`` padded tokens hold),
and the batches shuffled. Rank ``r`` of ``R`` then takes batches ``r, r +
R, ...``, so every rank has the same number of batches (the last ones
repeat the first, or are dropped with ``drop_last``) and DDP's last step
never waits for a rank that has no batch. An epoch stopped on N ranks
continues on M as ``DistributedSampler``'s does, with batches for
positions: the batches no rank delivered, in the epoch's order, dealt to
the M ranks in equal counts (``elastic_deal``, ``dataloader._loading.elastic``).
Sorting within a window rather
than the whole epoch keeps the batches' items random while wasting on
padding little more than the whole-epoch sort (``benchmarks/sequences_batching.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from dataloader._core.sequences import bucket_epoch_into
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
        Shuffle the items before windowing and the batches after.
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
        # The last epoch planned: its (seed, epoch), items in order, batches' starts, stops.
        self._plan: tuple[tuple[int, int], np.ndarray, np.ndarray, np.ndarray] | None = None
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
        order, starts, stops = self._epoch_batches()
        numbers = self._rank_batches()
        return (order[start:stop].tolist() for start, stop in
                zip(starts[numbers].tolist(), stops[numbers].tolist(), strict=True))

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
        total = len(self._epoch_batches()[1])
        count = total // self.num_replicas if self.drop_last else -(-total // self.num_replicas)
        return count * self.num_replicas

    def _rank_batches(self) -> np.ndarray:
        """This rank's batches of the epoch, as their numbers in the epoch's batch order."""
        total = len(self._epoch_batches()[1])
        deal = self.active_deal()
        if deal is not None:  # positions of the epoch's padded batch order
            positions = np.asarray(deal.entries(self.rank, 0, deal.count(self.rank)), np.int64)
        else:
            count = self.epoch_positions() // self.num_replicas
            positions = self.rank + self.num_replicas * np.arange(count)
        return positions % max(total, 1)

    def _epoch_batches(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The epoch's items in window-sorted order, and its batches' starts and stops in it."""
        if self._plan is None or self._plan[0] != (self.seed, self.epoch):
            self._plan = ((self.seed, self.epoch), *self._plan_epoch())
        return self._plan[1:]

    def _plan_epoch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Natively (``bucket_epoch_into``), the items shuffled, each window of them sorted
        by padded length (stably: equal lengths keep the shuffled order) and cut into
        batches; then the batches shuffled. An array per epoch rather than an object per
        batch: the plan is made before the epoch's first batch."""
        rng = epoch_generator(self.seed, self.epoch)
        n = len(self.lengths)
        # The item shuffle's generator state: four words of the epoch's generator.
        state = rng.bit_generator.random_raw(4) if self.shuffle else None
        order, stops = np.empty(n, np.int64), np.empty(n, np.int64)
        count = bucket_epoch_into(self.padded, self._key_bytes, state, self.window,
                                  self.batch_size or _UNBOUNDED, self.max_tokens or _UNBOUNDED,
                                  order, stops)
        stops = stops[:count]
        starts = np.zeros(count, np.int64)
        starts[1:] = stops[:-1]
        if (self.drop_last and self.max_tokens is None and count
                and stops[-1] - starts[-1] < self.batch_size):
            starts, stops = starts[:-1], stops[:-1]
        if self.shuffle:
            shuffled = rng.permutation(len(starts))
            starts, stops = starts[shuffled], stops[shuffled]
        return order, starts, stops

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

