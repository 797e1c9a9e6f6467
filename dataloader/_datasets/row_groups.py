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

:func:`gather_columns` gathers the same rows as columns instead
(``dataloader._datasets.column_batch``), without a Python object per row.

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

from dataloader._core.sequences import (
    gather_items_into,
    gather_lists_into,
    list_lengths_into,
    locate_rows_into,
)
from dataloader._datasets.column_batch import Column, ColumnBatch, ListValues

__all__ = [
    "GroupColumns", "checked_positions", "gather_columns", "locate_rows", "rows_by_group",
]


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
    if not len(wanted) or (wanted.min() >= 0 and wanted.max() < length):
        return wanted  # what a sampler gives: nothing to wrap or report
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

    __slots__ = ("names", "nbytes", "columns")

    def __init__(self, table: Any) -> None:
        self.names: tuple[str, ...] = tuple(table.schema.names)
        self.nbytes: int = table.nbytes
        self.columns = [_group_column(table.column(name)) for name in self.names]

    def rows(self, positions: list[int]) -> list[dict[str, Any]]:
        """The rows at ``positions`` of the group, as ``{column: value}``."""
        names = self.names
        columns = [column.take(positions) for column in self.columns]
        return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


class _Numbers:
    """A column of numbers without nulls: one numpy view of Arrow's buffer."""

    __slots__ = ("numbers",)

    def __init__(self, numbers: np.ndarray) -> None:
        self.numbers = numbers

    def take(self, positions: list[int]) -> list[Any]:
        numbers = self.numbers
        return [numbers[i] for i in positions]


class _Lists:
    """A column of lists of numbers without nulls: the offsets and the flat values."""

    __slots__ = ("offsets", "values")

    def __init__(self, offsets: np.ndarray, values: np.ndarray) -> None:
        self.offsets = offsets
        self.values = values

    def take(self, positions: list[int]) -> list[Any]:
        offsets, values = self.offsets, self.values
        return [values[offsets[i]:offsets[i + 1]] for i in positions]


class _Objects:
    """Any other column: each value converted to a Python object by pyarrow."""

    __slots__ = ("chunk",)

    def __init__(self, chunk: Any) -> None:
        self.chunk = chunk

    def take(self, positions: list[int]) -> list[Any]:
        chunk = self.chunk
        return [chunk[i].as_py() for i in positions]


GroupColumn = _Numbers | _Lists | _Objects


def locate_rows(wanted: np.ndarray, ends: np.ndarray) -> tuple[list[int], np.ndarray,
                                                                  np.ndarray]:
    """Where checked positions ``wanted`` lie: the groups touched (in order of number),
    and for each row the index of its group among them and its position in the group
    (both int64).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader._datasets.row_groups import locate_rows
    >>> touched, group_of, rows = locate_rows(np.array([4, 0, 2]), np.array([2, 3, 6]))
    >>> touched, group_of.tolist(), rows.tolist()
    ([0, 1, 2], [2, 0, 1], [1, 0, 0])
    """
    group_of = np.empty(len(wanted), np.int64)
    rows = np.empty(len(wanted), np.int64)
    touched = np.empty(len(wanted), np.int64)
    count = locate_rows_into(np.ascontiguousarray(ends, np.int64),
                             np.ascontiguousarray(wanted, np.int64), group_of, rows, touched)
    return touched[:count].tolist(), group_of, rows


def gather_columns(groups: list[GroupColumns], group_of: np.ndarray,
                   rows: np.ndarray) -> ColumnBatch:
    """Row ``rows[i]`` of ``groups[group_of[i]]`` for every ``i``, as one :class:`ColumnBatch`.

    A column of numbers is gathered by one ``nogil`` call
    (``gather_items_into``), a column of lists of numbers by two, each
    row's values copied into the batch's flat values
    (``list_lengths_into``, ``gather_lists_into``): no Python object per
    row, whatever the number of groups. The batch's rows are the same, in
    the same order, as :func:`rows_by_group`'s.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa
    >>> from dataloader._datasets.row_groups import GroupColumns, gather_columns
    >>> groups = [GroupColumns(pa.table({"ids": [[1, 2], [3]]})),
    ...           GroupColumns(pa.table({"ids": [[4, 5, 6]]}))]
    >>> batch = gather_columns(groups, np.array([1, 0]), np.array([0, 0]))
    >>> batch.columns[0].offsets.tolist(), batch.columns[0].values.tolist()
    ([0, 3, 5], [4, 5, 6, 1, 2])
    """
    if not groups:
        return ColumnBatch((), [])
    names = groups[0].names
    for group in groups:
        if group.names != names:
            raise ValueError(f"a batch's rows have different columns ({list(names)} and "
                             f"{list(group.names)}); read the same columns of every file")
    return ColumnBatch(names, [_gather([group.columns[k] for group in groups], group_of, rows)
                               for k in range(len(names))])


def _gather(columns: list[GroupColumn], group_of: np.ndarray, rows: np.ndarray) -> Column:
    """One column of the batch, from each touched group's column."""
    if all(isinstance(column, _Numbers) for column in columns):
        numbers = [column.numbers for column in columns]  # type: ignore[union-attr]
        if len({array.dtype for array in numbers}) == 1:
            out = np.empty(len(rows), numbers[0].dtype)
            gather_items_into(numbers, group_of, rows, out)
            return out
    if all(isinstance(column, _Lists) for column in columns):
        lists: list[_Lists] = columns  # type: ignore[assignment]
        if len({column.values.dtype for column in lists}) == 1:
            return _gather_lists(lists, group_of, rows)
    # Python objects, or groups that disagree on the dtype: the per-row values.
    values: list[Any] = [None] * len(rows)
    for number, column in enumerate(columns):
        where = np.flatnonzero(group_of == number)
        for position, value in zip(where.tolist(), column.take(rows[where].tolist()),
                                   strict=True):
            values[position] = value
    return values


def _gather_lists(columns: list[_Lists], group_of: np.ndarray, rows: np.ndarray) -> ListValues:
    offsets_of = [column.offsets for column in columns]
    lengths = np.empty(len(rows), np.int64)
    list_lengths_into(offsets_of, group_of, rows, lengths)
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.empty(int(offsets[-1]), columns[0].values.dtype)
    gather_lists_into(offsets_of, [column.values for column in columns], group_of, rows,
                      offsets[:-1], values)
    return ListValues(offsets, values)


def _group_column(column: Any) -> GroupColumn:
    """How a column's values are kept, from rows' positions in the group to their values."""
    import pyarrow as pa

    # A table's column is chunked (a record batch's is not); a row group is one chunk.
    chunk = column
    if isinstance(column, pa.ChunkedArray):
        chunk = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if _numbers(chunk):
        return _Numbers(_numpy_view(chunk))
    if _lists_of_numbers(chunk):
        return _Lists(_numpy_view(chunk.offsets), _numpy_view(chunk.values))
    return _Objects(chunk)


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
