"""A batch of rows fetched a group at a time, from tables stored as groups of rows.

Arrow tables are chunks (record batches) and Parquet files row groups; a
row is read cheaply only from within its group. A batch's indices are
checked, sorted into the groups they fall in (``ends[k]`` is the index one
past group ``k``'s last row), each group is asked once for its rows, and
the rows are put back in the batch's order.

Examples
--------
>>> import numpy as np
>>> from dataloader._datasets.row_groups import rows_by_group
>>> groups = [["a", "b"], ["c"], ["d", "e", "f"]]
>>> ends = np.cumsum([len(g) for g in groups])
>>> rows_by_group([5, 0, 2, -1], ends, lambda k, local: [groups[k][i] for i in local])
['f', 'a', 'c', 'f']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["checked_positions", "rows_by_group"]


def rows_by_group(
    indices: Sequence[int] | np.ndarray,
    ends: np.ndarray,
    group_rows: Callable[[int, np.ndarray], Sequence[Any]],
    *,
    start: int = 0,
) -> list[Any]:
    """The rows at ``indices``, asking ``group_rows(group, positions in it)`` once per group.

    Groups are asked in order of number, beginning at the ``start``-th
    group touched (modulo their count) and wrapping round: two threads
    given different starts read different groups first.
    """
    wanted = checked_positions(indices, int(ends[-1]) if len(ends) else 0)
    if not len(wanted):
        return []
    numbers = np.searchsorted(ends, wanted, side="right")
    order = np.argsort(numbers, kind="stable")
    groups, firsts = np.unique(numbers[order], return_index=True)
    touched = list(zip(groups.tolist(), np.split(order, firsts[1:]), strict=True))
    first = start % len(touched)
    rows: list[Any] = [None] * len(wanted)
    for group, where in touched[first:] + touched[:first]:
        group_start = int(ends[group - 1]) if group else 0
        found = group_rows(group, wanted[where] - group_start)
        for position, row in zip(where.tolist(), found, strict=True):
            rows[position] = row
    return rows


def checked_positions(indices: Sequence[int] | np.ndarray, length: int) -> np.ndarray:
    """``indices`` as int64 positions in ``range(length)``, negative ones counting from the end."""
    try:
        wanted = np.asarray(indices, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"indices should be integers, got {indices!r}") from None
    wanted = np.where(wanted < 0, wanted + length, wanted)
    outside = (wanted < 0) | (wanted >= length)
    if outside.any():
        bad = np.asarray(indices).reshape(-1)[np.argmax(outside)]
        raise IndexError(f"index {bad} out of range for {length} rows")
    return wanted
