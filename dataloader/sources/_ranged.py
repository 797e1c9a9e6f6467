"""Remote columnar files: read at random places, one ranged request per read.

``ParquetDataset`` and ``ArrowDataset`` take, besides local paths, files
on an HTTP server (``http(s)://`` URLs, or an ``HttpDataset`` whose URLs
are the files, with its headers, timeout, retries and ``max_bytes``) or in
an object store (an ``ObjectStoreDataset`` whose keys are the files)::

    paths ──resolve_files──> local paths | RemoteFile (source, index, size)
    RemoteFile.open() ──> RangedFile: seek anywhere, each read one ranged GET

The size of each remote file is asked once, when the dataset is made
(``RemoteFile.size``), and travels with it to worker processes; pyarrow
then reads a Parquet footer, or an Arrow file's footer, and each row
group or record batch it needs, as ranges of the file (``HttpRanges``,
``ObjectStoreDataset.read_range``), never the whole file. Each read is
bounded by the source's ``max_bytes``; redirects and headers go as the
source sends them for its items.

Examples
--------
>>> from dataloader.sources._ranged import RangedFile
>>> data = b"0123456789"
>>> file = RangedFile(lambda start, size: data[start:start + size], len(data), "digits")
>>> _ = file.seek(-3, 2)
>>> file.read(), file.tell()
(b'789', 10)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dataloader.sources._common import redact_url
from dataloader.sources._http import HttpDataset, HttpRanges
from dataloader.sources._object_store import ObjectStoreDataset, _store_name

__all__ = ["RangedFile", "RemoteFile", "resolve_files"]

_URL_SCHEMES = ("http://", "https://")


class RangedFile:
    """A read-only, seekable file of ``size`` bytes whose reads are ``read_range(start, size)``.

    What pyarrow opens a remote file as (``pyarrow.PythonFile`` over it).
    A lock makes each read whole even if pyarrow reads from its own
    threads.
    """

    def __init__(self, read_range: Callable[[int, int], bytes], size: int, name: str,
                 close: Callable[[], None] | None = None) -> None:
        self._read_range = read_range
        self._size = size
        self._position = 0
        self._close = close
        self._lock = threading.Lock()
        self.name = name
        self.closed = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def size(self) -> int:
        return self._size

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"{self.name}: seek to {base + offset}, before the start")
        self._position = base + offset
        return self._position

    def read(self, size: int = -1) -> bytes:
        with self._lock:
            start = self._position
            stop = self._size if size is None or size < 0 else min(self._size, start + size)
            if stop <= start:
                return b""
            data = self._read_range(start, stop - start)
            self._position = stop
            return data

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self._close is not None:
                self._close()

    def __enter__(self) -> RangedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class RemoteFile:
    """Item ``index`` of an ``HttpDataset`` or ``ObjectStoreDataset``, of ``size`` bytes."""

    source: HttpDataset | ObjectStoreDataset
    index: int
    size: int
    name: str

    @classmethod
    def of(cls, source: HttpDataset | ObjectStoreDataset, index: int) -> RemoteFile:
        """Item ``index`` of ``source``, its size asked now (the one time it is)."""
        if isinstance(source, HttpDataset):
            ranges = HttpRanges(source, index)
            try:
                size = ranges.size()
            finally:
                ranges.close()
            return cls(source, index, size, redact_url(ranges.url))
        name = f"{_store_name(source.store)}: key {source.keys[index]!r}"
        return cls(source, index, source.size_of(index), name)

    def open(self) -> Any:
        """A ``pyarrow.PythonFile`` reading this file by ranges (one per thread)."""
        import pyarrow as pa

        source, index = self.source, self.index
        if isinstance(source, HttpDataset):
            ranges = HttpRanges(source, index)
            file = RangedFile(ranges.read, self.size, self.name, ranges.close)
        else:
            file = RangedFile(lambda start, size: source.read_range(index, start, size),
                              self.size, self.name)
        return pa.PythonFile(file, mode="r")


def resolve_files(paths: Any) -> list[str | RemoteFile]:
    """Each file of ``paths``: a local path, or a :class:`RemoteFile` with its size.

    ``paths`` is a path, a URL, an ``HttpDataset`` or ``ObjectStoreDataset``
    (each of its items a file), or an iterable of any of them.

    Examples
    --------
    >>> from dataloader.sources._ranged import resolve_files
    >>> resolve_files(["a.parquet", "b.parquet"])
    ['a.parquet', 'b.parquet']
    """
    if isinstance(paths, (str, os.PathLike, HttpDataset, ObjectStoreDataset)):
        paths = [paths]
    files: list[str | RemoteFile] = []
    for path in _iterable(paths):
        if isinstance(path, (HttpDataset, ObjectStoreDataset)):
            files += [RemoteFile.of(path, index) for index in range(len(path))]
        elif isinstance(path, str) and path.startswith(_URL_SCHEMES):
            files.append(RemoteFile.of(HttpDataset([path]), 0))
        else:
            files.append(os.fspath(path))
    return files


def _iterable(paths: Any) -> Iterable[Any]:
    try:
        return iter(paths)
    except TypeError:
        raise TypeError("paths should be a path, a URL, an HttpDataset or ObjectStoreDataset, "
                        f"or an iterable of them, got {type(paths).__name__}") from None
