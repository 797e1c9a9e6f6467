"""What ``ParquetDataset`` and ``ArrowDataset`` share: rows of Arrow groups as numpy views.

A columnar file is a list of *groups* (Parquet row groups, Arrow record
batches), each read whole. The map-style dataset numbers the rows of every
group of every file one after the other:

    files ──> groups (file, group, rows) ──> cumulative row counts ──> index

A batch of indices is sorted into groups, each group is read once (a
bounded cache keeps recently read groups, decoded) and every row of the
batch is cut out of its group's columns without a copy
(``dataloader._datasets.row_groups``: ``rows_by_group``, ``GroupColumns``),
or, for a collate function that takes columns, the batch's rows are
gathered column by column (``fetch_columns``, ``gather_columns``).

:class:`RowGroupStream` (``_row_stream.py``) streams the same groups.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any

import numpy as np

from dataloader._datasets.column_batch import ColumnBatch
from dataloader._datasets.dataset import Dataset
from dataloader._datasets.row_groups import (
    GroupColumns,
    checked_positions,
    gather_columns,
    locate_rows,
    rows_by_group,
)
from dataloader.sources._common import require
from dataloader.sources._ranged import RemoteFile, resolve_files
from dataloader.sources._row_stream import RowGroupStream

__all__ = ["DEFAULT_CACHE_BYTES", "ColumnarDataset", "GroupCache"]

# Groups decoded (Parquet) or viewed (Arrow) kept for later batches, per process.
DEFAULT_CACHE_BYTES = 256 << 20


class GroupCache:
    """Groups read recently, up to ``max_bytes`` in all; shared by the threads.

    A group is read by one thread at a time: another thread wanting it
    meanwhile waits for that read (a ``Future``, which waits without the
    interpreter) instead of decoding it a second time.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._groups: OrderedDict[tuple[int, int], GroupColumns] = OrderedDict()
        self._reading: dict[tuple[int, int], Future[GroupColumns]] = {}
        self._bytes = 0

    def get(self, key: tuple[int, int], read: Callable[[], GroupColumns]) -> GroupColumns:
        """The group ``key``: kept, being read by another thread (waited for), or read now."""
        with self._lock:
            found = self._groups.get(key)
            if found is not None:
                self._groups.move_to_end(key)
                return found
            pending = self._reading.get(key)
            if pending is None:
                pending = self._reading[key] = Future()
                mine = True
            else:
                mine = False
        return self._read(key, read, pending) if mine else pending.result()

    def kept(self, keys: list[tuple[int, int]]) -> list[GroupColumns] | None:
        """The groups ``keys``, when every one of them is kept (else ``None``).

        A batch's fetch asks this first: once the groups it touches are
        decoded, one lock acquisition finds them all.
        """
        groups = self._groups
        with self._lock:
            if not all(key in groups for key in keys):
                return None
            for key in keys:
                groups.move_to_end(key)
            return [groups[key] for key in keys]

    def read_absent(self, reads: dict[tuple[int, int], Callable[[], GroupColumns]]) -> None:
        """Read the groups of ``reads`` that are neither kept nor being read, while there is room.

        A batch's fetch calls this first, so that threads fetching batches
        at once decode different groups, each passing over those another
        is reading, and only then wait for them. It stops once the cache is
        full, so that it never evicts a group the batch is about to use.
        """
        for key, read in reads.items():
            with self._lock:
                if self._bytes >= self.max_bytes:
                    return
                if key in self._groups or key in self._reading:
                    continue
                pending = self._reading[key] = Future()
            self._read(key, read, pending)

    def _read(self, key: tuple[int, int], read: Callable[[], GroupColumns],
              pending: Future[GroupColumns]) -> GroupColumns:
        """Read ``key``, which this thread has claimed, and hand it to those waiting."""
        try:
            group = read()
        except BaseException as error:
            with self._lock:
                del self._reading[key]
            pending.set_exception(error)
            raise
        with self._lock:
            del self._reading[key]
            self._keep(key, group)
        pending.set_result(group)
        return group

    def _keep(self, key: tuple[int, int], group: GroupColumns) -> None:
        """Add ``group``, then drop the least recently used groups beyond the budget."""
        self._bytes += group.nbytes
        self._groups[key] = group
        while self._bytes > self.max_bytes and len(self._groups) > 1:
            _, evicted = self._groups.popitem(last=False)
            self._bytes -= evicted.nbytes


class ColumnarDataset(Dataset[dict], ABC):
    """Rows of the groups of columnar files, addressed by index (see the module docstring).

    Subclasses say how a file is opened (``_open``: a local path, or a
    remote file read by ranges, ``_ranged.RemoteFile``), its column names
    (``_schema_names``), its groups' row counts (``_row_counts``) and how
    one group is read, as a pyarrow table or record batch of the selected
    ``columns`` (``_read_group``).
    """

    # pyarrow reads and decodes without the interpreter: worker_type="auto" keeps threads.
    native_loading = True

    def __init__(
        self,
        paths: Any,
        columns: Sequence[str] | None,
        max_cached_bytes: int,
    ) -> None:
        require("pyarrow", "arrow", type(self).__name__)
        # Local paths, or remote files whose sizes are asked here, once.
        self.files = resolve_files(paths)
        self.paths = [file if isinstance(file, str) else file.name for file in self.files]
        if not self.paths:
            raise ValueError(f"{type(self).__name__} needs at least one file, got paths=[]")
        if isinstance(max_cached_bytes, bool) or not isinstance(max_cached_bytes, int) \
                or max_cached_bytes < 0:
            raise ValueError(
                "max_cached_bytes should be a non-negative int, "
                f"got max_cached_bytes={max_cached_bytes!r}")
        self.max_cached_bytes = max_cached_bytes
        self.columns = None if columns is None else _checked_names(columns)
        self._handles: dict[tuple[int, int, int], Any] = {}
        self.groups: list[tuple[int, int]] = []
        rows: list[int] = []
        for file, path in enumerate(self.paths):
            handle = self._handle(file)
            _check_columns(self.columns, self._schema_names(handle), path)
            counts = self._row_counts(handle)
            self.groups += [(file, group) for group in range(len(counts))]
            rows += counts
        # group_ends[k]: the index one past group k's last row.
        self.group_ends = np.cumsum(rows, dtype=np.int64)
        self._cache = GroupCache(max_cached_bytes)

    # The files' handles and the cache stay in the process that made them:
    # a worker process opens the files again (pyarrow's readers do not pickle).
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_handles"], state["_cache"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._handles = {}
        self._cache = GroupCache(self.max_cached_bytes)

    def _handle(self, file: int) -> Any:
        """This thread's open reader of file ``file``: pyarrow's readers are not
        documented as safe to share between threads reading at once.

        Kept by the dataset, not in thread-local storage: a remote file's
        reader holds Python objects (``_ranged.RangedFile``), which pyarrow
        must not release while a worker thread of the loader is exiting.
        A forked worker process opens its own (a remote file's connection
        is the parent's).
        """
        key = (os.getpid(), threading.get_ident(), file)
        handle = self._handles.get(key)
        if handle is None:
            handle = self._handles.setdefault(key, self._open(self.files[file]))
        return handle

    @abstractmethod
    def _open(self, file: str | RemoteFile) -> Any:
        """See the class docstring."""

    @abstractmethod
    def _row_counts(self, handle: Any) -> list[int]:
        """See the class docstring."""

    @abstractmethod
    def _schema_names(self, handle: Any) -> list[str]:
        """See the class docstring."""

    @abstractmethod
    def _read_group(self, handle: Any, group: int) -> Any:
        """See the class docstring."""

    def read_columns(self, number: int) -> GroupColumns:
        """The columns of group ``number`` (of :attr:`groups`), read now."""
        return GroupColumns(self._group_table(number))

    def _group_table(self, number: int) -> Any:
        """Group ``number``'s table (or record batch) of the selected columns."""
        file, group = self.groups[number]
        return self._read_group(self._handle(file), group)

    def group_start(self, number: int) -> int:
        """The index of group ``number``'s first row."""
        return int(self.group_ends[number - 1]) if number else 0

    def group_rows(self, number: int) -> int:
        """The number of rows of group ``number``."""
        return int(self.group_ends[number]) - self.group_start(number)

    def __len__(self) -> int:
        return int(self.group_ends[-1]) if len(self.group_ends) else 0

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """The rows at ``indices``, reading each group they fall in once."""
        wanted = checked_positions(indices, len(self))
        touched = np.unique(np.searchsorted(self.group_ends, wanted, side="right")).tolist()
        self._read_absent(touched)
        return rows_by_group(wanted, self.group_ends, self._rows_in_group)

    def _rows_in_group(self, number: int, positions: list[int]) -> list[dict[str, Any]]:
        return self._group_columns(number).rows(positions)

    def _read_absent(self, numbers: list[int]) -> None:
        """Read those of groups ``numbers`` that no thread has read or is reading."""
        self._cache.read_absent(
            {self.groups[number]: partial(self.read_columns, number) for number in numbers})

    def _group_columns(self, number: int) -> GroupColumns:
        return self._cache.get(self.groups[number], partial(self.read_columns, number))

    def fetch_columns(self, indices: Sequence[int]) -> ColumnBatch:
        """The rows at ``indices`` as columns, without a Python object per row.

        The same rows, in the same order, as :meth:`__getitems__`
        (``ColumnBatch.rows()`` makes them); the loader fetches a batch this
        way when its collate function takes columns (``PadCollator``).

        Examples
        --------
        >>> import pathlib, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> from dataloader.sources import ParquetDataset
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "ids.parquet"
        >>> pq.write_table(pa.table({"ids": [[1, 2], [3], [4, 5, 6]]}), path, row_group_size=2)
        >>> ids = ParquetDataset(path).fetch_columns([2, 0]).columns[0]
        >>> ids.offsets.tolist(), ids.values.tolist()
        ([0, 3, 5], [4, 5, 6, 1, 2])
        """
        touched, group_of, rows = locate_rows(checked_positions(indices, len(self)),
                                              self.group_ends)
        groups = self._cache.kept([self.groups[number] for number in touched])
        if groups is None:
            self._read_absent(touched)
            groups = [self._group_columns(number) for number in touched]
        return gather_columns(groups, group_of, rows)

    def stream(self, *, shuffle: bool = False, seed: int = 0) -> RowGroupStream:
        """These rows as a stream of groups, sharded and shuffled: :class:`RowGroupStream`.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> from dataloader.sources import ParquetDataset
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "n.parquet"
        >>> pq.write_table(pa.table({"n": range(6)}), path, row_group_size=2)
        >>> [int(row["n"]) for row in ParquetDataset(path).stream()]
        [0, 1, 2, 3, 4, 5]
        """
        return RowGroupStream(self, shuffle=shuffle, seed=seed)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({len(self.paths)} files, {len(self.groups)} groups, "
                f"{len(self)} rows, columns={self.columns})")


def _checked_names(columns: Any) -> list[str]:
    if isinstance(columns, str) or not all(isinstance(name, str) for name in columns):
        raise TypeError(f"columns should be a sequence of column names, got columns={columns!r}")
    return list(columns)


def _check_columns(columns: list[str] | None, available: list[str], path: str) -> None:
    missing = [name for name in columns or () if name not in available]
    if missing:
        raise KeyError(f"{path} has no column {missing[0]!r} (its columns: {available})")
