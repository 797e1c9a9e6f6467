"""Hugging Face ``datasets.Dataset`` s fetched a batch at a time from their Arrow table.

Indexing a ``datasets.Dataset`` runs its formatting layers for every call;
a loader instead gathers a whole batch out of the chunks of the dataset's
Arrow table into one small table, which pyarrow converts to Python values
at once, giving the same rows as ``dataset[i]`` for each index:
:func:`arrow_batches` is the batch fetch that
:func:`dataloader._datasets.hooks.batch_fetch` returns for such a dataset.
``datasets`` is never imported here: a dataset is recognised only once
its user has imported it (``sys.modules``).

Only datasets whose rows are the table's plain values take this path: no
output format (``with_format``/``set_transform``) and no feature that
decodes (images, audio). Any other keeps its own ``__getitems__``.

Examples
--------
>>> import datasets
>>> from dataloader._datasets.hugging_face import arrow_batches
>>> table = datasets.Dataset.from_dict({"tokens": [[1, 2], [3], [4, 5, 6]], "label": [0, 1, 0]})
>>> arrow_batches(table)([2, 0])
[{'tokens': [4, 5, 6], 'label': 0}, {'tokens': [1, 2], 'label': 0}]
>>> arrow_batches(table.with_format("numpy")) is None
True
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataloader._datasets.row_groups import checked_positions

__all__ = ["arrow_batches"]


def arrow_batches(dataset: Any) -> Callable[[Sequence[int]], list[dict]] | None:
    """The batch fetch of a plain ``datasets.Dataset``; ``None`` for anything else."""
    module = sys.modules.get("datasets")
    if module is None or not isinstance(dataset, module.Dataset) or not _plain_rows(dataset):
        return None
    return _ArrowBatches(dataset)


def _plain_rows(dataset: Any) -> bool:
    """Whether ``dataset[i]`` is row ``i`` of its table as pyarrow converts it."""
    from datasets.features.features import require_decoding

    form = dataset.format
    if form["type"] is not None or form["format_kwargs"]:
        return False
    return not any(require_decoding(dataset.features[name]) for name in _columns(dataset))


def _columns(dataset: Any) -> list[str]:
    """The columns of ``dataset[i]``."""
    form = dataset.format
    return dataset.column_names if form["output_all_columns"] else form["columns"]


class _ArrowBatches:
    """Rows of a ``datasets.Dataset`` taken from its Arrow table a batch at a time.

    The table is memory-mapped in chunks (of 1000 rows, as ``datasets``
    writes them), and a batch falls in as many chunks as it has rows. A
    ``take`` over the whole table would first join the chunks (a copy of
    every column); instead each row is a one-row slice of its chunk (no
    copy), and the slices make the batch's table.
    """

    def __init__(self, dataset: Any) -> None:
        self._length = len(dataset)
        table = dataset.data.table.select(_columns(dataset))
        self._schema = table.schema
        self._chunks = table.to_batches()
        ends = np.cumsum([chunk.num_rows for chunk in self._chunks], dtype=np.int64)
        self._ends, self._starts = ends, ends - [chunk.num_rows for chunk in self._chunks]
        # select(), shuffle() and the like keep the table and map indices through this.
        mapping = dataset._indices
        # (uint64 there: int64 here, so that positions stay integers in arithmetic with int64)
        self._mapping = None if mapping is None else mapping.column(0).to_numpy().astype(np.int64)

    def __call__(self, indices: Sequence[int]) -> list[dict]:
        import pyarrow as pa

        rows = checked_positions(indices, self._length)
        if self._mapping is not None:
            rows = self._mapping[rows]
        chunks = np.searchsorted(self._ends, rows, side="right")
        local = rows - self._starts[chunks]
        batch = pa.Table.from_batches(
            [self._chunks[chunk].slice(row, 1)
             for chunk, row in zip(chunks.tolist(), local.tolist(), strict=True)],
            schema=self._schema)
        columns = batch.to_pydict()
        return [dict(zip(columns, values, strict=True))
                for values in zip(*columns.values(), strict=True)]
