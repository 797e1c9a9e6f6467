"""A batch of rows held as columns: what a columnar dataset's ``fetch_columns`` returns.

A dataset stored as columns (``ParquetDataset``, ``ArrowDataset``) can
hand the loader a batch without making a Python object per row, when
the collate function can take it that way
(``dataloader._loading.plugins.ColumnFetching``). Each column of the
batch, its rows in the batch's order, is one of:

* a 1-D numpy array: a column of numbers, one element per row (what
  ``default_collate`` makes of the rows' numpy scalars);
* :class:`ListValues`: a column of lists of numbers, the rows' values one
  after the other in one flat array and each row's offset in it;
* a list: each row's value as the per-row path gives it (strings, nulls,
  structures; or columns whose groups disagree on their dtype).

:meth:`ColumnBatch.rows` makes the per-row items back, exactly as the
dataset's ``__getitems__`` gives them.

Examples
--------
>>> import numpy as np
>>> from dataloader._datasets.column_batch import ColumnBatch, ListValues
>>> ids = ListValues(np.array([0, 2, 3]), np.array([7, 8, 9]))
>>> batch = ColumnBatch(("ids", "label"), [ids, np.array([1, 0])])
>>> len(batch), batch.rows()
(2, [{'ids': array([7, 8]), 'label': np.int64(1)}, {'ids': array([9]), 'label': np.int64(0)}])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

__all__ = ["Column", "ColumnBatch", "ListValues"]


@dataclass(frozen=True, slots=True)
class ListValues:
    """A column of lists of numbers: row ``i`` is ``values[offsets[i]:offsets[i + 1]]``.

    Attributes
    ----------
    offsets : numpy.ndarray
        int64, one more than the rows, from 0, never decreasing.
    values : numpy.ndarray
        1-D and C-contiguous: every row's numbers, in the rows' order.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader._datasets.column_batch import ListValues
    >>> column = ListValues(np.array([0, 1, 1, 3]), np.array([4, 5, 6]))
    >>> column.lengths().tolist(), column.rows()[2]
    ([1, 0, 2], array([5, 6]))
    """

    offsets: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        """Each row's number of elements (int64)."""
        return np.diff(self.offsets)

    def rows(self) -> list[np.ndarray]:
        """Each row's numbers, as views of :attr:`values`."""
        values, bounds = self.values, self.offsets.tolist()
        return [values[start:stop] for start, stop in pairwise(bounds)]


Column = np.ndarray | ListValues | list


@dataclass(frozen=True, slots=True)
class ColumnBatch:
    """The rows of a batch as named columns (see the module docstring).

    Attributes
    ----------
    names : tuple of str
        The columns' names, in the rows' key order.
    columns : list
        Each column, a numpy array, :class:`ListValues` or a list, with one
        entry per row of the batch.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader._datasets.column_batch import ColumnBatch
    >>> batch = ColumnBatch(("text",), [["a", "b"]])
    >>> batch.column_rows("text"), len(batch)
    (['a', 'b'], 2)
    """

    names: tuple[str, ...]
    columns: list[Column]

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    def column_rows(self, name: str) -> Sequence[Any]:
        """Column ``name``'s value in each row, as the per-row path gives it."""
        column = self.columns[self.names.index(name)]
        if isinstance(column, ListValues):
            return column.rows()
        return list(column)

    def rows(self) -> list[dict[str, Any]]:
        """The batch's rows as ``{column: value}``, as ``__getitems__`` gives them."""
        columns = [self.column_rows(name) for name in self.names]
        return [dict(zip(self.names, values, strict=True)) for values in zip(*columns, strict=True)]
