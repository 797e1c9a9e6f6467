"""Decoded Parquet row groups kept on disk as Arrow IPC streams, memory-mapped when read again.

Decoding a row group is most of what a Parquet batch costs (pyarrow's
decompression and decoding, ~25 ms for 64 Ki rows of token lists); an
Arrow IPC stream of the decoded columns costs nothing to read: it is
mapped, and its rows are views of the page cache that every process and
every later run on the machine shares. This is what Hugging Face
``datasets`` does with a Parquet file (an Arrow cache made once); here
the cache fills a row group at a time, as batches first touch them, or
all at once with ``ParquetDataset.fill_cache``. The stream format rather
than the file format: its reader opens a mapped file in a quarter to a
half of the time, which a first batch touching every group pays per group.

A cached group is named by a hash of what it was decoded from: the file
(a local file's real path, size and modification time; a remote file's
URL and size), the row group's number and the columns read. A changed
file thus misses the cache rather than reading stale rows. Files are
written under a temporary name and renamed, so a reader, in this process
or another, sees a whole file or none; an unreadable one is decoded and
written again, as is one whose rows are not the group's (a stream cut at
a message's end reads without error).
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dataloader.sources._ranged import RemoteFile

__all__ = ["DecodedGroups"]


class DecodedGroups:
    """The decoded row groups of some files, as Arrow IPC streams in ``folder``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import pyarrow as pa
    >>> from dataloader.sources._decoded import DecodedGroups
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> source = folder / "n.parquet"
    >>> source.write_bytes(b"the file the group is decoded from")
    34
    >>> cache = DecodedGroups(folder / "decoded", [str(source)], None)
    >>> decoded = []
    >>> def decode():
    ...     decoded.append(1)
    ...     return pa.table({"n": [1, 2]})
    >>> [cache.table(0, 0, 2, decode)["n"].to_pylist() for _ in range(2)], len(decoded)
    ([[1, 2], [1, 2]], 1)
    """

    def __init__(self, folder: str | os.PathLike[str], files: Sequence[str | RemoteFile],
                 columns: Sequence[str] | None) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._file_keys = [_file_key(file) for file in files]
        self._columns = None if columns is None else list(columns)
        self._warned = False

    def path(self, file: int, group: int) -> Path:
        """Where row group ``group`` of file ``file`` is kept, decoded."""
        identity = repr((self._file_keys[file], group, self._columns)).encode()
        return self.folder / f"{hashlib.sha256(identity).hexdigest()[:40]}.arrows"

    def table(self, file: int, group: int, rows: int, decode: Callable[[], Any]) -> Any:
        """The group's table of ``rows`` rows: mapped from its file, else ``decode()``-d
        and kept in one."""
        path = self.path(file, group)
        mapped = _mapped(path, rows)
        if mapped is not None:
            return mapped
        table = decode()
        if self._write(path, table):  # read back mapped: the decoded copy can be freed
            mapped = _mapped(path, rows)
        return table if mapped is None else mapped

    def __contains__(self, key: tuple[int, int]) -> bool:
        return self.path(*key).exists()

    def _write(self, path: Path, table: Any) -> bool:
        """Keep ``table`` at ``path`` (whole or not at all); ``False`` if the disk refused."""
        import pyarrow as pa

        partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.partial")
        try:
            with pa.OSFile(str(partial), "wb") as sink, \
                    pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            os.replace(partial, path)
        except OSError as error:  # a full or read-only disk: the batch goes on without it
            partial.unlink(missing_ok=True)
            if not self._warned:
                self._warned = True
                warnings.warn(f"cannot keep decoded row groups in {self.folder}: {error}; "
                              "they are decoded again when needed", RuntimeWarning, stacklevel=4)
            return False
        return True


def _file_key(file: str | RemoteFile) -> tuple[Any, ...]:
    """What names a file's contents: a local file's real path, size and modification time."""
    if isinstance(file, RemoteFile):
        return (file.name, file.size)
    info = os.stat(file)
    return (os.path.realpath(file), info.st_size, info.st_mtime_ns)


def _mapped(path: Path, rows: int) -> Any:
    """The table kept at ``path``, memory-mapped; ``None`` if absent, unreadable or
    not of ``rows`` rows."""
    import pyarrow as pa

    try:
        # Closing the file keeps the mapping: the table's buffers hold it.
        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_stream(source).read_all()
    except FileNotFoundError:
        return None
    except (pa.ArrowInvalid, OSError):  # cut short or overwritten by hand: decode again
        return None
    return table if table.num_rows == rows else None
