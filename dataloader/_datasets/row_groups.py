"""A batch of rows fetched a group at a time, from tables stored as groups of rows.

Arrow tables are chunks (record batches) and Parquet files row groups; a
row is read cheaply only from within its group. A batch's indices are
checked, sorted into the groups they fall in (``ends[k]`` is the index one
past group ``k``'s last row), each group is asked once for its rows, and
the rows are put back in the batch's order (:func:`rows_by_group`).

A group's rows are cut out of its Arrow columns (:class:`GroupColumns`),
column by column:

* a column of integers or floats without nulls is one numpy array over
  Arrow's buffer, and a row's value is its element;
* a list of such numbers is the offsets and the flat values, and a row's
  value is the slice ``values[offsets[i]:offsets[i + 1]]``, a view;
* anything else (strings, nulls, nested structures) is converted to a
  Python object, row by row, by pyarrow.

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

__all__ = ["GroupColumns", "checked_positions", "rows_by_group"]

Taker = Callable[[list[int]], list[Any]]


def rows_by_group(
    indices: Sequence[int] | np.ndarray,
    ends: np.ndarray,
    group_rows: Callable[[int, list[int]], Sequence[Any]],
) -> list[Any]:
    """The rows at ``indices``, asking ``group_rows(group, positions in it)`` once per group.

    Groups are asked in order of number. A batch may touch as many groups
    as it has rows (a shuffled epoch over small chunks), so the grouping is
    done in plain Python lists, not a numpy array per group.
    """
    wanted = checked_positions(indices, int(ends[-1]) if len(ends) else 0)
    numbers = np.searchsorted(ends, wanted, side="right")
    starts = np.concatenate([np.zeros(1, np.int64), ends])[numbers]
    touched: dict[int, tuple[list[int], list[int]]] = {}
    for position, (group, local) in enumerate(
            zip(numbers.tolist(), (wanted - starts).tolist(), strict=True)):
        where, locals_ = touched.setdefault(group, ([], []))
        where.append(position)
        locals_.append(local)
    rows: list[Any] = [None] * len(wanted)
    for group in sorted(touched):
        where, locals_ = touched[group]
        for position, row in zip(where, group_rows(group, locals_), strict=True):
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


class GroupColumns:
    """One group's columns, each as numpy views where Arrow's layout allows.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from dataloader._datasets.row_groups import GroupColumns
    >>> table = pa.table({"ids": [[1, 2], [3]], "text": ["a", "b"]})
    >>> GroupColumns(table).rows([1, 0])
    [{'ids': array([3]), 'text': 'b'}, {'ids': array([1, 2]), 'text': 'a'}]
    """

    __slots__ = ("names", "nbytes", "_takers")

    def __init__(self, table: Any) -> None:
        self.names: tuple[str, ...] = tuple(table.schema.names)
        self.nbytes: int = table.nbytes
        self._takers = [_column_taker(table.column(name)) for name in self.names]

    def rows(self, positions: list[int]) -> list[dict[str, Any]]:
        """The rows at ``positions`` of the group, as ``{column: value}``."""
        names = self.names
        columns = [take(positions) for take in self._takers]
        return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def _column_taker(column: Any) -> Taker:
    """A function from rows' positions in the group to the column's values there."""
    import pyarrow as pa

    # A table's column is chunked (a record batch's is not); a row group is one chunk.
    chunk = column
    if isinstance(column, pa.ChunkedArray):
        chunk = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if _numbers(chunk):
        numbers = _numpy_view(chunk)
        return lambda positions: [numbers[i] for i in positions]
    if _lists_of_numbers(chunk):
        offsets = _numpy_view(chunk.offsets)
        values = _numpy_view(chunk.values)
        return lambda positions: [values[offsets[i]:offsets[i + 1]] for i in positions]
    return lambda positions: [chunk[i].as_py() for i in positions]


def _numpy_view(array: Any) -> np.ndarray:
    """A numpy array over a primitive Arrow array's values, without a copy.

    Made from the data buffer, not by ``Array.to_numpy``, which imports
    pandas when it is installed: a second or more before a first batch.
    """
    dtype = np.dtype(array.type.to_pandas_dtype())
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array),
                         offset=array.offset * dtype.itemsize)


def _numbers(array: Any) -> bool:
    """Integers or floats (not halves, which numpy reads but few expect) without nulls."""
    import pyarrow.types as types

    kind = array.type
    return array.null_count == 0 and (
        types.is_integer(kind) or types.is_float32(kind) or types.is_float64(kind))


def _lists_of_numbers(array: Any) -> bool:
    import pyarrow.types as types

    return (array.null_count == 0 and (types.is_list(array.type) or types.is_large_list(array.type))
            and _numbers(array.values))
