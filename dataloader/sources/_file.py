"""``FileDataset``: local files, read whole on the worker threads without the interpreter."""

from __future__ import annotations

import os
from collections.abc import Iterable

from dataloader._core.io import read_file
from dataloader._datasets.dataset import Dataset
from dataloader.sources._common import check_max_bytes, item_index

__all__ = ["FileDataset"]


class FileDataset(Dataset[bytes]):
    """The bytes of local files, one file per item.

    Each item is read by a native reader (``open``, ``fstat``, one ``bytes``
    object of the file's size, ``read``) with the interpreter released, so
    worker threads read files in parallel. No event loop is involved.

    Parameters
    ----------
    paths : iterable of str or os.PathLike
        One file per item, in index order.
    max_bytes : int, optional
        Largest file accepted; a larger one raises ``ValueError`` before any
        of it is read.

    Raises
    ------
    IndexError
        For an index out of range.
    FileNotFoundError, PermissionError, IsADirectoryError, OSError
        When the file cannot be read; the message names the path.
    ValueError
        For a file larger than ``max_bytes``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from dataloader import DataLoader
    >>> from dataloader.sources import FileDataset
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> paths = []
    >>> for n in range(4):
    ...     path = folder / f"{n}.txt"
    ...     _ = path.write_bytes(b"x" * n)
    ...     paths.append(path)
    >>> dataset = FileDataset(paths)
    >>> dataset[2]
    b'xx'
    >>> loader = DataLoader(dataset, batch_size=2, num_workers=2,
    ...                     transform=lambda index, data: len(data))
    >>> [batch.tolist() for batch in loader]
    [[0, 1], [2, 3]]
    """

    # Read by native code, in parallel on threads: worker_type="auto" keeps threads.
    native_loading = True

    def __init__(self, paths: Iterable[str | os.PathLike[str]], *, max_bytes: int | None = None):
        self.paths = [os.fspath(path) for path in paths]
        self.max_bytes = check_max_bytes(max_bytes)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> bytes:
        path = self.paths[item_index(index, len(self.paths), "FileDataset")]
        return read_file(path, -1 if self.max_bytes is None else self.max_bytes)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.paths)} files, max_bytes={self.max_bytes})"
