"""``ArrowDataset``: the rows of Arrow IPC files, memory-mapped, a record batch at a time."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from dataloader.sources._columnar import DEFAULT_CACHE_BYTES, ColumnarDataset
from dataloader.sources._ranged import RemoteFile

__all__ = ["ArrowDataset"]


class ArrowDataset(ColumnarDataset):
    """The rows of one or many Arrow IPC files, by index, as ``{column: value}`` dicts.

    Files in the IPC file format (Feather v2, ``.arrow``) and in the
    stream format (what Hugging Face ``datasets`` writes in its cache) are
    memory-mapped, so a record batch costs no read: a row's numbers and
    lists of numbers are numpy views of the mapped file (a list of token ids
    is a 1-D array), other values Python objects. Index ``i`` counts the
    rows of every record batch of every file in order; the loader fetches
    a batch through ``__getitems__``, a record batch at a time.
    :meth:`stream` reads the same rows as a stream of record batches,
    sharded and shuffled.

    Parameters
    ----------
    paths : str, path, URL, HttpDataset, ObjectStoreDataset or iterable of them
        The Arrow IPC files, read in this order: local paths (memory-mapped),
        ``http(s)://`` URLs, or the items of an ``HttpDataset`` or
        ``ObjectStoreDataset``. A remote file's size is asked once, here,
        and each record batch read by a ranged request when a batch needs
        it (its rows are counted here, reading each once); a remote file in
        the stream format, which has no index, is read whole.
    columns : sequence of str, optional
        The columns to read; all by default.
    max_cached_bytes : int, default 256 MiB
        Record batches whose views are kept for later batches (per process).

    Raises
    ------
    FileNotFoundError, OSError
        A file that cannot be opened.
    ValueError
        A file that is not Arrow IPC (pyarrow's ``ArrowInvalid``).
    KeyError
        A column named in ``columns`` that a file lacks.
    IndexError
        An index out of range.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import pyarrow as pa, pyarrow.feather as feather
    >>> from dataloader import DataLoader
    >>> from dataloader.sources import ArrowDataset
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tokens.arrow"
    >>> feather.write_feather(pa.table({"tokens": [[1, 2], [3], [4, 5, 6]]}), path)
    >>> dataset = ArrowDataset(path)
    >>> len(dataset), dataset[0]["tokens"]
    (3, array([1, 2]))
    >>> loader = DataLoader(dataset, batch_size=2, collate_fn=lambda rows: len(rows))
    >>> list(loader)
    [2, 1]
    """

    def __init__(
        self,
        paths: str | os.PathLike[str] | Iterable[Any] | Any,
        *,
        columns: Sequence[str] | None = None,
        max_cached_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        super().__init__(paths, columns, max_cached_bytes)

    def _open(self, file: str | RemoteFile) -> Any:
        """The file's reader (a remote file's, reading each record batch when asked), or
        its record batches (the stream format, over its mapping or read whole)."""
        import pyarrow as pa

        source = file.open() if isinstance(file, RemoteFile) else pa.memory_map(file)
        try:
            reader = pa.ipc.open_file(source)
        except pa.ArrowInvalid:  # no file footer: the stream format
            source.seek(0)
            return list(pa.ipc.open_stream(source))
        if isinstance(file, RemoteFile):
            return reader
        return [reader.get_batch(i) for i in range(reader.num_record_batches)]

    def _schema_names(self, handle: Any) -> list[str]:
        if isinstance(handle, list):
            return list(handle[0].schema.names) if handle else []
        return list(handle.schema.names)

    def _row_counts(self, handle: Any) -> list[int]:
        if isinstance(handle, list):
            return [batch.num_rows for batch in handle]
        # Only a record batch's own header says its rows: each is read once, here.
        return [handle.get_batch(i).num_rows for i in range(handle.num_record_batches)]

    def _read_group(self, handle: Any, group: int) -> Any:
        batch = handle[group] if isinstance(handle, list) else handle.get_batch(group)
        return batch if self.columns is None else batch.select(self.columns)
