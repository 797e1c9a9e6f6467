"""What a ``TarDataset`` stream reads in an epoch, and what it left when it stopped.

A stream of a ``TarDataset`` is owner ``rank + world_size * worker`` of
``world_size * workers`` (the layout of ``shard``'s streams). In an
ordinary epoch it reads positions ``owner, owner + owners, ...`` of the
epoch's shard order, each a whole shard. A stream's work is a list of
*reads*, ``(shard, offset, one)``: the shard's samples from the byte
``offset`` on, or its one sample there (``one``).

An epoch stopped on some ranks and dealt again to others
(``dataloader._loading.elastic``) is a :class:`TarWork`: the whole shards
no stream had started, as levels over the epoch's shard order
(``dataloader._sampling.remainder``: one count per stream), and the
*pieces* the stopped streams were in the middle of: the rest of each open
shard, from the offset its state names, and each buffered sample (read
but not delivered), by its location. A new stream reads its pieces
(``pieces[owner::owners]``) first, then its deal of the whole shards. The
pieces are bounded (a shuffle buffer and an open shard per stream), so the
state stays small whatever the number of shards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dataloader._sampling.remainder import Deal, Level

__all__ = ["Read", "TarWork", "shard_order", "stream_left"]

# (index in the dataset's shards, byte offset where reading starts, one sample only)
Read = tuple[int, int, bool]


def shard_order(count: int, shuffle: bool, seed: int, epoch: int) -> np.ndarray:
    """The epoch's order of ``count`` shards: a permutation keyed by ``(seed, epoch)``,
    or the shards' own order.

    Examples
    --------
    >>> from dataloader.sources._tar_work import shard_order
    >>> shard_order(4, False, 0, 3).tolist()
    [0, 1, 2, 3]
    >>> sorted(shard_order(4, True, 0, 3).tolist())
    [0, 1, 2, 3]
    """
    if shuffle:
        return np.random.default_rng([seed, epoch]).permutation(count)
    return np.arange(count)


class TarWork:
    """The work of an epoch dealt again: whole shards by ``levels``, then ``pieces``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader._sampling.remainder import Level
    >>> from dataloader.sources._tar_work import TarWork
    >>> work = TarWork([Level(2, 6, [2, 1])], [[3, 512, 0], [1, 1024, 1]])
    >>> work.reads(np.arange(6), 0, 2)      # a rest of shard 3, then whole shards
    [(3, 512, False), (3, 0, False), (5, 0, False)]
    >>> work.reads(np.arange(6), 1, 2)      # one buffered sample of shard 1, then shard 4
    [(1, 1024, True), (4, 0, False)]
    """

    __slots__ = ("levels", "pieces")

    def __init__(self, levels: Sequence[Level], pieces: Sequence[Sequence[int]]) -> None:
        self.levels = list(levels)
        self.pieces = [[int(shard), int(offset), int(one)] for shard, offset, one in pieces]

    def reads(self, order: np.ndarray, owner: int, owners: int) -> list[Read]:
        """Stream ``owner`` of ``owners``' reads: its pieces, then its whole shards."""
        mine: list[Read] = [(shard, offset, bool(one))
                            for shard, offset, one in self.pieces[owner::owners]]
        size = self.levels[-1].remaining() if self.levels else len(order)
        deal = Deal(self.levels, owners, size)
        positions = deal.entries(owner, 0, deal.count(owner))
        return mine + [(int(shard), 0, False) for shard in order[positions].tolist()]

    def pieces_of(self, owner: int, owners: int) -> int:
        """How many of stream ``owner``'s reads are pieces (they come first).

        Examples
        --------
        >>> from dataloader.sources._tar_work import TarWork
        >>> TarWork([], [[3, 512, 0], [1, 1024, 1], [2, 0, 1]]).pieces_of(0, 2)
        2
        """
        return len(range(owner, len(self.pieces), owners))


def stream_left(reads: Sequence[Read], pieces: int,
                state: Mapping[str, Any] | None) -> tuple[int, list[list[int]]]:
    """What a stream with ``reads`` (the first ``pieces`` of them pieces) left, as of its
    iterator's ``state`` (``None``: it delivered nothing): how many whole shards it had
    started (they are delivered, or in the pieces), and its pieces left.

    Examples
    --------
    >>> from dataloader.sources._tar_work import stream_left
    >>> reads = [(7, 0, False), (2, 0, False), (5, 0, False)]
    >>> stream_left(reads, 0, {"shard": 1, "offset": 2048, "buffer": [[0, 512], [1, 0]]})
    (2, [[7, 512, 1], [2, 0, 1], [2, 2048, 0]])
    """
    if state is None:
        position, offset, buffer = 0, (reads[0][1] if reads else 0), []
    else:
        position, offset, buffer = int(state["shard"]), int(state["offset"]), state["buffer"]
    left = [[reads[p][0], int(start), 1] for p, start in buffer]
    # A read is started once a sample of it was taken: its offset moved on. A single
    # sample's read ends as it is taken, so only a rest of a shard is ever open.
    started = position < len(reads) and offset != reads[position][1]
    if started:
        left.append([reads[position][0], offset, 0])
    after = position + int(started)
    left += [[shard, start, int(one)] for shard, start, one in reads[after:pieces]]
    return max(after - pieces, 0), left
