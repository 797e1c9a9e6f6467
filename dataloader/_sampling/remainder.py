"""What remains of an epoch after ranks stopped in its middle, and how it is dealt again.

An epoch is a list of *entries* shared among *owners* (ranks, or a
stream's workers across ranks): owner ``r`` of ``R`` holds entries ``r,
r + R, r + 2R, ...`` and delivers them in that order. A :class:`Level`
records one such sharing and how many entries each owner delivered, which
is all it takes to know the remaining entries: owner ``r``'s from its
``delivered[r]``-th on. No list of entries is ever kept, so a level costs
one integer per owner whatever the epoch's length.

The remaining entries, in the epoch's order (by entry number), are the
next level's entries: a :class:`Deal` gives them to a new number of owners
the same way (owner ``j`` of ``M`` holds remaining entries ``j, j + M,
...``). A deal may be interrupted in turn, so an epoch's progress is a
stack of levels; entry ``k`` of the newest deal is mapped down through the
stack to an entry of the first level, a position in the epoch's order
(``DistributedSampler``) or in the source stream (``shard``).

Within a level the remaining entries are a *band* (the rows, ``k // R``,
some owners have delivered and others not: at most the spread between the
fastest and slowest owner) followed by a *tail* (every entry from row
``max(delivered)`` on). The tail is plain arithmetic; the band is cut into
segments of rows holding the same owners (at most ``2R``), so an entry is
found with one binary search over segments, vectorised over a chunk.
``docs/architecture.md``, "Elastic resumption", has the picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["UNBOUNDED", "Deal", "Level", "dealt_size"]

# The entry count of a stream of unknown length: more than any real epoch
# holds, small enough that sums over owners stay within int64.
UNBOUNDED = 1 << 50


class Level:
    """``owners`` shared ``size`` entries (``None``: a stream of unknown length) and
    owner ``r`` delivered its first ``delivered[r]``.

    Examples
    --------
    >>> from dataloader._sampling.remainder import Level
    >>> level = Level(2, 10, [3, 1])       # owner 0 delivered 0, 2, 4; owner 1 delivered 1
    >>> level.remaining()
    6
    >>> level.select(np.arange(6)).tolist()
    [3, 5, 6, 7, 8, 9]
    >>> level.index(5), level.index(4)
    (1, None)
    """

    __slots__ = ("_band", "_counts", "_delivered", "_hi", "_segmented", "owners", "size")

    def __init__(self, owners: int, size: int | None, delivered: Sequence[int]) -> None:
        if owners < 1 or len(delivered) != owners:
            raise ValueError(f"a level needs one delivered count per owner, got {owners} owners "
                             f"and {len(delivered)} counts")
        self.owners = int(owners)
        self.size = None if size is None else int(size)
        ranks = np.arange(owners, dtype=np.int64)
        if size is None:
            self._counts = np.full(owners, UNBOUNDED, dtype=np.int64)
        else:
            self._counts = np.maximum(-(-(size - ranks) // owners), 0)
        self._delivered = np.minimum(np.asarray(delivered, dtype=np.int64), self._counts)
        if (self._delivered < 0).any():
            raise ValueError(f"delivered counts cannot be negative, got {list(delivered)}")
        self._hi = int(self._delivered.max())
        self._band = self._before_row(self._hi)
        self._segmented: tuple[np.ndarray, ...] | None = None  # _segments(), once needed

    def to_list(self) -> list[Any]:
        """``[owners, size, delivered]``: plain data for a state."""
        return [self.owners, self.size, self._delivered.tolist()]

    @classmethod
    def from_list(cls, saved: Sequence[Any]) -> Level:
        owners, size, delivered = saved
        return cls(int(owners), None if size is None else int(size), [int(d) for d in delivered])

    def remaining(self) -> int | None:
        """How many entries were not delivered; ``None`` for an unbounded stream."""
        if self.size is None:
            return None
        return self.size - int(self._delivered.sum())

    def _before_row(self, row: int) -> int:
        """Remaining entries in the rows before ``row``."""
        return int(self._rows_before(np.array([row], dtype=np.int64))[0])

    def _present(self, row: int) -> np.ndarray:
        """The owners whose entry in ``row`` remains, ascending."""
        return np.flatnonzero((self._delivered <= row) & (row < self._counts))

    def select(self, t: np.ndarray) -> np.ndarray:
        """The entry numbers of the remaining entries ``t`` (0 = the first remaining)."""
        t = np.asarray(t, dtype=np.int64)
        out = self._hi * self.owners + (t - self._band)
        in_band = np.flatnonzero(t < self._band)
        if len(in_band):
            out[in_band] = self._select_in_band(t[in_band])
        return out

    def _rows_before(self, rows: np.ndarray) -> np.ndarray:
        """Remaining entries in the rows before each of ``rows``."""
        within = np.minimum(rows[:, None], self._counts[None, :]) - self._delivered[None, :]
        return np.clip(within, 0, None).sum(axis=1)

    def _segments(self) -> tuple[np.ndarray, ...]:
        """The band cut where the owners present in a row change: between two
        consecutive delivered counts or entry counts, every row holds the same
        owners. ``(first rows, remaining before them, owners per row, offsets, owners)``,
        the owners of segment ``i`` being ``owners[offsets[i]:offsets[i] + per_row[i]]``."""
        bounds = np.concatenate([self._delivered, self._counts])
        bounds = np.unique(bounds[(bounds >= self._delivered.min()) & (bounds < self._hi)])
        present = (self._delivered[None, :] <= bounds[:, None]) & (
            bounds[:, None] < self._counts[None, :])
        per_row = present.sum(axis=1)
        offsets = np.concatenate([[0], np.cumsum(per_row)[:-1]])
        owners = np.nonzero(present)[1]  # row by row, ascending within a row
        return bounds, self._rows_before(bounds), per_row, offsets, owners

    def _select_in_band(self, t: np.ndarray) -> np.ndarray:
        if self._segmented is None:
            self._segmented = self._segments()
        bounds, before, per_row, offsets, owners = self._segmented
        segment = np.searchsorted(before, t, side="right") - 1
        offset = t - before[segment]
        width = per_row[segment]
        rows = bounds[segment] + offset // width
        owner = owners[offsets[segment] + offset % width]
        return rows * self.owners + owner

    def index(self, k: int) -> int | None:
        """Entry ``k``'s number among the remaining ones; ``None`` if it was delivered."""
        if self.size is not None and k >= self.size:
            return None
        row, owner = divmod(k, self.owners)
        if row < self._delivered[owner]:
            return None
        if row >= self._hi:
            return self._band + k - self._hi * self.owners
        present = self._present(row)
        return self._before_row(row) + int(np.searchsorted(present, owner))

    def first_remaining(self) -> int:
        """An entry number before which every entry was delivered."""
        return int(self._delivered.min()) * self.owners


def dealt_size(remaining: int | None, owners: int, pad: bool | None) -> int | None:
    """The entries of a deal of ``remaining`` entries to ``owners``: padded to a multiple
    of ``owners`` (``pad=True``, entries wrapping round to the first remaining, as
    ``DistributedSampler`` pads), cut to one (``False``), or exactly them (``None``)."""
    if remaining is None or pad is None:
        return remaining
    return (-(-remaining // owners) if pad else remaining // owners) * owners


class Deal:
    """The remaining entries of ``levels``, dealt to ``owners``: ``size`` entries.

    With no levels, the entries are ``[0, size)`` themselves: an epoch's
    ordinary sharing.

    Examples
    --------
    >>> from dataloader._sampling.remainder import Deal, Level
    >>> deal = Deal([Level(2, 10, [3, 1])], owners=3, size=6)
    >>> [deal.entries(owner, 0, deal.count(owner)).tolist() for owner in range(3)]
    [[3, 7], [5, 8], [6, 9]]
    >>> deal.owner_of(8), deal.owner_of(2)
    ((1, 1), None)
    """

    __slots__ = ("levels", "owners", "size")

    def __init__(self, levels: Sequence[Level], owners: int, size: int | None) -> None:
        self.levels = list(levels)
        self.owners = int(owners)
        self.size = size

    def count(self, owner: int) -> int:
        """How many entries ``owner`` holds (``UNBOUNDED`` for an unbounded stream)."""
        if self.size is None:
            return UNBOUNDED
        return len(range(owner, self.size, self.owners))

    def entries(self, owner: int, start: int, count: int) -> np.ndarray:
        """First-level entry numbers of ``owner``'s entries ``start`` to ``start + count - 1``."""
        k = owner + self.owners * (start + np.arange(count, dtype=np.int64))
        for level in reversed(self.levels):
            remaining = level.remaining()
            k = level.select(k if remaining is None else k % remaining)
        return k

    def owner_of(self, entry: int) -> tuple[int, int] | None:
        """``(owner, i)`` holding first-level ``entry`` as its ``i``-th; ``None`` if it was
        delivered before this deal, or cut from it. For deals that were never padded (a
        padded deal holds some entries twice): a stream's."""
        k: int | None = entry
        for level in self.levels:
            k = level.index(k)  # type: ignore[arg-type]
            if k is None:
                return None
        if self.size is not None and k >= self.size:  # type: ignore[operator]
            return None
        owner, i = k % self.owners, k // self.owners  # type: ignore[operator]
        return owner, i

    def first_entry(self) -> int:
        """A first-level entry number before which no entry belongs to this deal."""
        return self.levels[0].first_remaining() if self.levels else 0
