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
from itertools import pairwise
from typing import Any

import numpy as np

from dataloader._core.sequences import cut_batches
from dataloader._sampling.distributed import in_distributed_job, world
from dataloader._sampling.remainder import Deal
from dataloader._sampling.sampler import Sampler, trust_batch_indices
from dataloader._sampling.seeding import EpochSeeded, check_seed, epoch_generator
from dataloader._sequences.arguments import check_lengths, check_optional_positive
from dataloader._sequences.padding import PadCollator

__all__ = ["BucketBatchSampler", "cut_by_budget"]

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
        # The keys each window is sorted by: the same order as the int64 lengths', but
        # numpy's stable sort of 16-bit keys is a radix sort, several times faster (an
        # epoch's plan is made before its first batch).
        fits = not len(self.padded) or int(self.padded.max()) < 1 << 16
        self._sort_keys = self.padded.astype(np.uint16) if fits else self.padded
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
        # The last epoch planned: its (seed, epoch), items in order, batches.
        self._plan: tuple[tuple[int, int], np.ndarray, list[slice]] | None = None
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
        order, _ = self._epoch_batches()
        return (order[batch].tolist() for batch in self._rank_batches())

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

    def _rank_batches(self) -> list[slice]:
        """This rank's batches of the epoch, as slices of its sorted order."""
        _, batches = self._epoch_batches()
        total = len(batches)
        deal = self.active_deal()
        if deal is not None:  # positions of the epoch's padded batch order
            positions = deal.entries(self.rank, 0, deal.count(self.rank))
        else:
            count = self.epoch_positions() // self.num_replicas
            positions = self.rank + self.num_replicas * np.arange(count)
        return [batches[position % total] for position in positions.tolist()]

    def _epoch_batches(self) -> tuple[np.ndarray, list[slice]]:
        """The epoch's items in window-sorted order, and its batches as slices of it."""
        if self._plan is None or self._plan[0] != (self.seed, self.epoch):
            self._plan = ((self.seed, self.epoch), *self._plan_epoch())
        return self._plan[1], self._plan[2]

    def _plan_epoch(self) -> tuple[np.ndarray, list[slice]]:
        rng = epoch_generator(self.seed, self.epoch)
        n = len(self.lengths)
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        batches: list[slice] = []
        for start in range(0, n, self.window):
            window = order[start:start + self.window]
            # Stable: equal lengths keep the shuffled order.
            order[start:start + self.window] = window[np.argsort(self._sort_keys[window],
                                                                 kind="stable")]
            cuts = cut_by_budget(self.padded[order[start:start + self.window]],
                                 self.batch_size, self.max_tokens)
            batches += [slice(start + a, start + b) for a, b in pairwise(cuts)]
        if self.drop_last and self.max_tokens is None and batches:
            last = batches[-1]
            if last.stop - last.start < self.batch_size:
                batches.pop()
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches)).tolist()]
        return order, batches

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


def cut_by_budget(padded: np.ndarray, batch_size: int | None,
                  max_tokens: int | None) -> list[int]:
    """Where to cut ``padded`` (ascending padded lengths) into batches: ``[0, ..., n]``.

    Each batch takes as many items as fit: at most ``batch_size``, and with
    ``max_tokens`` as long as ``count * its longest <= max_tokens``
    (natively, ``dataloader._core.sequences.cut_batches``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader._sequences.buckets import cut_by_budget
    >>> cut_by_budget(np.array([1, 2, 2, 3, 8]), None, 8)
    [0, 3, 4, 5]
    >>> cut_by_budget(np.array([1, 2, 2, 3, 8]), 2, None)
    [0, 2, 4, 5]
    """
    cuts = np.empty(len(padded) + 1, np.int64)
    count = cut_batches(np.ascontiguousarray(padded, np.int64), batch_size or _UNBOUNDED,
                        max_tokens or _UNBOUNDED, cuts)
    return cuts[:count].tolist()
