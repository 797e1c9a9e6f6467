"""``TarWriter``: samples written as webdataset-layout tar shards."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Mapping
from typing import Any

__all__ = ["TarWriter"]

_BLOCK = 512


class TarWriter:
    """Writes samples (dicts grouped by key) into tar shards, starting a new one by size.

    Each sample ``{"__key__": "000123", "jpg": b"...", "cls": 3}`` becomes
    the members ``000123.jpg`` and ``000123.cls``, in the sample's order;
    ``str`` and ``int`` values are written as UTF-8 text, ``bytes`` as they
    are. Members carry no owner and a zero modification time, so the same
    samples give byte-identical shards. A sample is never split across
    shards.

    Parameters
    ----------
    pattern : str or path
        The shard path, formatted with the shard number when it holds a
        ``{}`` field (``"out/train-{:06d}.tar"``).
    shard_size : int, optional
        Bytes after which the next sample starts a new shard; needs a
        ``{}`` field in ``pattern``. Without it everything goes to one file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from dataloader.sources import TarDataset, TarWriter
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> with TarWriter(str(folder / "s-{:02d}.tar"), shard_size=6000) as writer:
    ...     for n in range(4):
    ...         writer.write({"__key__": f"{n:03d}", "txt": "x" * 1000, "cls": n})
    >>> [pathlib.Path(path).name for path in writer.shards]
    ['s-00.tar', 's-01.tar']
    >>> [int(s["cls"]) for s in TarDataset(writer.shards)]
    [0, 1, 2, 3]
    """

    def __init__(self, pattern: str | os.PathLike[str], *, shard_size: int | None = None) -> None:
        pattern = os.fspath(pattern)
        if not isinstance(pattern, str):
            raise TypeError(f"pattern should be a str path, got {pattern!r}")
        numbered = "{" in pattern
        if shard_size is not None:
            if not isinstance(shard_size, int) or isinstance(shard_size, bool) or shard_size <= 0:
                raise ValueError(
                    f"shard_size should be a positive int, got shard_size={shard_size!r}")
            if not numbered:
                raise ValueError(
                    "shard_size needs a {} field in pattern for the shard number, "
                    f"got {pattern!r}"
                )
        self.pattern = pattern
        self.shard_size = shard_size
        self.shards: list[str] = []
        self._numbered = numbered
        self._tar: tarfile.TarFile | None = None
        self._size = 0
        self._keys = 0

    def write(self, sample: Mapping[str, Any]) -> None:
        """Add one sample: ``__key__`` and one member per other (non-``__``) field."""
        key = sample.get("__key__")
        if not isinstance(key, str) or not key or "." in os.path.basename(key):
            raise ValueError(
                f"sample['__key__'] should be a non-empty str without a dot in its basename, "
                f"got {key!r}"
            )
        members = []
        for extension, value in sample.items():
            if extension.startswith("__"):
                continue
            if isinstance(value, str):
                value = value.encode()
            elif isinstance(value, int) and not isinstance(value, bool):
                value = str(value).encode()
            elif not isinstance(value, (bytes, bytearray, memoryview)):
                raise TypeError(
                    f"sample[{extension!r}] should be bytes, str or int, got {type(value).__name__}"
                )
            members.append((f"{key}.{extension}", bytes(value)))
        if not members:
            raise ValueError(f"sample {key!r} has no member to write")
        size = sum(_BLOCK + -(-len(data) // _BLOCK) * _BLOCK for _, data in members)
        if self._tar is None or (
            self.shard_size is not None and self._keys and self._size + size > self.shard_size
        ):
            self._next_shard()
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o444
            self._tar.addfile(info, io.BytesIO(data))  # type: ignore[union-attr]
        self._size += size
        self._keys += 1

    def _next_shard(self) -> None:
        self._close_shard()
        path = self.pattern.format(len(self.shards)) if self._numbered else self.pattern
        self._tar = tarfile.open(path, "w", format=tarfile.PAX_FORMAT)  # noqa: SIM115
        self.shards.append(path)
        self._size = 0
        self._keys = 0

    def _close_shard(self) -> None:
        tar, self._tar = self._tar, None
        if tar is not None:
            tar.close()

    def close(self) -> None:
        """Finish the shard being written."""
        self._close_shard()

    def __enter__(self) -> TarWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
