"""``ParquetDataset``: the rows of Parquet files, read a row group at a time."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

from dataloader.sources._columnar import DEFAULT_CACHE_BYTES, ColumnarDataset
from dataloader.sources._decoded import DecodedGroups
from dataloader.sources._ranged import RemoteFile

__all__ = ["ParquetDataset"]


class ParquetDataset(ColumnarDataset):
    """The rows of one or many Parquet files, by index, as ``{column: value}`` dicts.

    Index ``i`` counts the rows of every row group of every file in order.
    The loader fetches a batch through ``__getitems__``: each row group the
    batch touches is read and decoded once by pyarrow (without the
    interpreter) and kept in a cache of ``max_cached_bytes``; each row is
    then cut out of it without a copy. A number is a numpy scalar, a list
    of numbers a numpy view of the row group's values (token ids: a 1-D
    array), and other values (strings, nulls, structures) Python objects,
    as ``pyarrow``'s ``to_pylist`` gives them. :meth:`stream` reads the
    same rows as a stream of row groups, sharded and shuffled.

    Parameters
    ----------
    paths : str, path, URL, HttpDataset, ObjectStoreDataset or iterable of them
        The Parquet files, read in this order: local paths, ``http(s)://``
        URLs, or the items of an ``HttpDataset`` (with its headers,
        timeout, retries and ``max_bytes``) or of an ``ObjectStoreDataset``.
        A remote file's size is asked once, here; then its footer and each
        row group read are ranged requests, never the whole file.
    columns : sequence of str, optional
        The columns to read; all by default.
    max_cached_bytes : int, default 256 MiB
        Decoded row groups kept for later batches (per process); a shuffled
        epoch over a dataset larger than this reads a row group per batch
        and row group touched.
    cache_dir : str or path, optional
        A folder where each row group, once decoded, is kept as an Arrow IPC
        stream (uncompressed, as Hugging Face ``datasets`` caches a Parquet
        file), and memory-mapped whenever it is needed again: by this
        dataset once ``max_cached_bytes`` dropped it, by worker processes,
        by other loaders and later runs on the machine. A batch whose row
        groups are all kept costs no decoding, and its rows are views of
        the page cache that all of them share. The files are named after
        the Parquet file (a local one's path, size and modification time; a
        remote one's URL and size), the row group and the columns, so a
        changed file is decoded again; nothing removes them but you. The
        cache fills as batches touch row groups, or at once with
        :meth:`fill_cache`. By default nothing is written.

    Raises
    ------
    FileNotFoundError, OSError
        A file that cannot be opened.
    ValueError
        A file that is not Parquet (pyarrow's ``ArrowInvalid``).
    KeyError
        A column named in ``columns`` that a file lacks.
    IndexError
        An index out of range.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> from dataloader import DataLoader
    >>> from dataloader.sources import ParquetDataset
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tokens.parquet"
    >>> table = pa.table({"tokens": [[1, 2, 3], [4], [5, 6]], "label": [0, 1, 0]})
    >>> pq.write_table(table, path, row_group_size=2)
    >>> dataset = ParquetDataset(path)
    >>> len(dataset), dataset[2]["tokens"], int(dataset[2]["label"])
    (3, array([5, 6]), 0)
    >>> loader = DataLoader(ParquetDataset(path, columns=["label"]), batch_size=2)
    >>> [batch["label"].tolist() for batch in loader]
    [[0, 1], [0]]
    >>> cached = ParquetDataset(path, cache_dir=path.parent / "decoded")
    >>> cached.fill_cache(), cached[2]["tokens"]
    (2, array([5, 6]))
    """

    def __init__(
        self,
        paths: str | os.PathLike[str] | Iterable[Any] | Any,
        *,
        columns: Sequence[str] | None = None,
        max_cached_bytes: int = DEFAULT_CACHE_BYTES,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(paths, columns, max_cached_bytes)
        self.decoded = None if cache_dir is None else \
            DecodedGroups(cache_dir, self.files, self.columns)

    def fill_cache(self) -> int:
        """Decode into ``cache_dir`` every row group not kept there yet; how many were.

        Worth doing once before a job whose every batch should start
        without decoding (a job's ranks on one machine, say): afterwards
        the rows are read from the mapped files only.

        Raises
        ------
        ValueError
            This dataset was made without ``cache_dir``.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> from dataloader.sources import ParquetDataset
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "n.parquet"
        >>> pq.write_table(pa.table({"n": range(6)}), path, row_group_size=4)
        >>> dataset = ParquetDataset(path, cache_dir=path.parent / "decoded")
        >>> dataset.fill_cache(), dataset.fill_cache()
        (2, 0)
        """
        if self.decoded is None:
            raise ValueError("fill_cache needs a cache_dir: ParquetDataset(..., cache_dir=...)")
        missing = [number for number, key in enumerate(self.groups) if key not in self.decoded]
        for number in missing:
            self._group_table(number)
        return len(missing)

    def _group_table(self, number: int) -> Any:
        if self.decoded is None:
            return super()._group_table(number)
        file, group = self.groups[number]
        return self.decoded.table(file, group, self.group_rows(number),
                                  partial(super()._group_table, number))

    def _open(self, file: str | RemoteFile) -> Any:
        import pyarrow.parquet as pq

        if isinstance(file, RemoteFile):
            return pq.ParquetFile(file.open())
        return pq.ParquetFile(file, memory_map=True)

    def _schema_names(self, handle: Any) -> list[str]:
        return list(handle.schema_arrow.names)

    def _row_counts(self, handle: Any) -> list[int]:
        metadata = handle.metadata
        return [metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)]

    def _read_group(self, handle: Any, group: int) -> Any:
        # On the calling thread: the loader's workers already read groups side by side,
        # and pyarrow's own threads, splitting a group by column, only add hand-offs
        # (a one-column group of 64 Ki rows took twice as long with them on 2 CPUs).
        return handle.read_row_group(group, columns=self.columns, use_threads=False)
