"""``ObjectStoreDataset``: objects of S3, GCS, Azure, local or in-memory stores (obstore).

Errors (messages name the store and the key, never credentials; obstore's
error is described by its class and the first line of its message, without
URL queries, URL credentials or the server's text, and is neither the
``__cause__`` nor the ``__context__`` of ours)::

    IndexError          index out of range
    ValueError          object larger than max_bytes (from its size, or
                        counted while streaming: never buffered whole)
    FileNotFoundError   no object at the key
    PermissionError     access denied, or no valid credentials
    TimeoutError        the store timed out
    OSError             any other failure of the store
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dataloader._datasets.asynchronous import AsyncDataset
from dataloader.sources._common import check_max_bytes, item_index, redact, require
from dataloader.sources._limits import DEFAULT_MAX_BYTES

__all__ = ["ObjectStoreDataset", "credentials_of", "mapped_error"]

# Configuration keys whose values are credentials: scrubbed from obstore's messages.
_CREDENTIAL_KEYS = re.compile(r"key|secret|token|password|credential|sas|signature", re.I)


class ObjectStoreDataset(AsyncDataset[bytes]):
    """The bytes of objects in an object store, one key per item.

    Built on `obstore <https://developmentseed.org/obstore/>`_; requires the
    ``s3`` extra (``pip install "dataloader[s3]"``). Reads run on the
    loader's event loop, as many at once as the loader has worker threads.
    Credentials, region and retries come from the store's own configuration
    (its keyword arguments, then the usual environment variables such as
    ``AWS_ACCESS_KEY_ID``).

    Parameters
    ----------
    store : obstore store
        ``S3Store``, ``GCSStore``, ``AzureStore``, ``LocalStore``,
        ``MemoryStore``, ...
    keys : iterable of str
        One object per item, in index order, relative to the store's prefix.
    max_bytes : int or None, default 1 GiB
        Largest object accepted, else ``ValueError`` naming ``max_bytes``
        (checked from the object's size before it is read, and while it
        arrives). ``None`` lifts the bound, for stores you trust.

    Examples
    --------
    >>> from obstore.store import MemoryStore
    >>> import obstore
    >>> from dataloader import DataLoader
    >>> from dataloader.sources import ObjectStoreDataset
    >>> store = MemoryStore()
    >>> for n in range(4):
    ...     _ = obstore.put(store, f"images/{n}.bin", b"x" * n)
    >>> dataset = ObjectStoreDataset(store, [f"images/{n}.bin" for n in range(4)])
    >>> with DataLoader(dataset, batch_size=2, num_workers=2,
    ...                 transform=lambda index, data: len(data)) as loader:
    ...     [batch.tolist() for batch in loader]
    [[0, 1], [2, 3]]
    """

    def __init__(self, store: Any, keys: Iterable[str], *,
                 max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
        self._obstore = require("obstore", "s3", type(self).__name__)
        self.store = store
        self.keys: Sequence[str] = list(keys)
        self.max_bytes = check_max_bytes(max_bytes)
        self._pid = os.getpid()

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        suffixes: Iterable[str] | None = None,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        **store_options: Any,
    ) -> ObjectStoreDataset:
        """Every object under a URL's prefix (optionally only some suffixes), sorted by key.

        ``url`` is ``s3://bucket/prefix``, ``gs://bucket/prefix``,
        ``az://account/container/prefix``, ``file:///directory`` or
        ``memory:///``; ``store_options`` go to ``obstore.store.from_url``
        (``endpoint``, ``region``, ``access_key_id``, ``client_options``,
        ``retry_config``, ...). The listing is done once, here.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from dataloader.sources import ObjectStoreDataset
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> for name in ["b.jpg", "a.jpg", "notes.txt"]:
        ...     _ = (folder / name).write_bytes(name.encode())
        >>> dataset = ObjectStoreDataset.from_url(folder.as_uri(), suffixes=(".jpg",))
        >>> dataset.keys
        ['a.jpg', 'b.jpg']
        """
        obstore = require("obstore", "s3", cls.__name__)
        wanted = tuple(suffixes) if suffixes is not None else None
        try:
            store = obstore.store.from_url(url, **store_options)
            keys = sorted(
                entry["path"]
                for chunk in obstore.list(store)
                for entry in chunk
                if wanted is None or entry["path"].endswith(wanted)
            )
        except Exception as exc:  # noqa: BLE001 -- mapped to a built-in type
            error = mapped_error(exc, f"listing {_store_name(url)}", obstore,
                                 credentials_of(store_options))
        else:
            return cls(store, keys, max_bytes=max_bytes)
        raise error  # outside the except block: no __context__ (see mapped_error)

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.keys)} keys, store={_store_name(self.store)})"

    async def __getitem__(self, index: int) -> bytes:
        key = self.keys[item_index(index, len(self.keys), type(self).__name__)]
        obstore = self._obstore
        what = f"{_store_name(self.store)}: key {key!r}"
        try:
            return await self._get(key, what)
        except _Limit as limit:
            error: Exception = limit.error
        except Exception as exc:  # noqa: BLE001 -- mapped to a built-in type
            error = mapped_error(exc, what, obstore, credentials_of(self.store))
        raise error  # outside the except block: no __context__ (see mapped_error)

    # The obstore module stays behind; the store itself pickles (S3, GCS,
    # Azure and local stores do), so that a remote ParquetDataset's worker
    # processes read the same objects.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_obstore"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._obstore = require("obstore", "s3", type(self).__name__)
        self._pid = os.getpid()

    def _check_process(self, what: str) -> None:
        """obstore's runtime does not survive ``fork``: a forked copy would wait forever."""
        if os.getpid() != self._pid:
            raise OSError(
                f"{what}: this ObjectStoreDataset was copied into a process started by fork, "
                "where obstore cannot run; load with worker threads (worker_type='thread'), "
                "or start worker processes with multiprocessing_context='spawn' or "
                "'forkserver'")

    def size_of(self, index: int) -> int:
        """The size in bytes of object ``index`` (one ``HEAD``).

        Examples
        --------
        >>> from obstore.store import MemoryStore
        >>> import obstore
        >>> from dataloader.sources import ObjectStoreDataset
        >>> store = MemoryStore()
        >>> _ = obstore.put(store, "a.bin", b"abcdef")
        >>> dataset = ObjectStoreDataset(store, ["a.bin"])
        >>> dataset.size_of(0), dataset.read_range(0, 2, 3)
        (6, b'cde')
        """
        key, what = self._key(index)
        self._check_process(what)
        try:
            return int(self._obstore.head(self.store, key)["size"])
        except Exception as exc:  # noqa: BLE001 -- mapped to a built-in type
            error = mapped_error(exc, what, self._obstore, credentials_of(self.store))
        raise error  # outside the except block: no __context__ (see mapped_error)

    def read_range(self, index: int, start: int, size: int) -> bytes:
        """Bytes ``start`` to ``start + size - 1`` of object ``index``, at most
        ``max_bytes`` (a remote columnar file's read; see :meth:`size_of`)."""
        key, what = self._key(index)
        self._check_process(what)
        limit = self.max_bytes
        if limit is not None and size > limit:
            raise ValueError(f"{what}: a read of {size} bytes exceeds max_bytes={limit}")
        try:
            body = bytes(self._obstore.get_range(self.store, key, start=start, length=size))
        except Exception as exc:  # noqa: BLE001 -- mapped to a built-in type
            error = mapped_error(exc, what, self._obstore, credentials_of(self.store))
        else:
            if len(body) != size:
                raise OSError(f"{what}: {len(body)} bytes of a range of {size}")
            return body
        raise error  # outside the except block: no __context__ (see mapped_error)

    def _key(self, index: int) -> tuple[str, str]:
        key = self.keys[item_index(index, len(self.keys), type(self).__name__)]
        return key, f"{_store_name(self.store)}: key {key!r}"

    async def _get(self, key: str, what: str) -> bytes:
        result = await self._obstore.get_async(self.store, key)
        limit = self.max_bytes
        size = result.meta.get("size")
        if limit is not None and size is not None and size > limit:
            raise _Limit(ValueError(f"{what} is {size} bytes, more than max_bytes={limit}"))
        if size is not None:  # the store's client reads no more than the size it said
            return bytes(await result.bytes_async())
        body = bytearray()  # size unknown: counted while it arrives
        async for chunk in result.stream():
            body += chunk
            if limit is not None and len(body) > limit:
                raise _Limit(ValueError(f"{what} exceeds max_bytes={limit}"))
        return bytes(body)


class _Limit(Exception):
    """A bound of ours broken inside a read (``error``), passed by the mapping of obstore's."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error


def _store_name(store: Any) -> str:
    """A store's kind and location, for messages: ``S3Store(bucket/prefix)``."""
    if isinstance(store, str):
        return redact(store)
    return redact(repr(store))


def credentials_of(config: Any) -> tuple[str, ...]:
    """The credentials among a store's configuration (a store, or its options)."""
    if not isinstance(config, Mapping):
        config = getattr(config, "config", None)
    if not isinstance(config, Mapping):
        return ()
    return tuple(str(value) for key, value in config.items()
                 if _CREDENTIAL_KEYS.search(str(key)) and len(str(value)) >= 4)


def mapped_error(exc: Exception, what: str, obstore: Any,
                 credentials: Iterable[str] = ()) -> Exception:
    """The built-in exception a caller catches for ``exc``, with a safe message.

    obstore's message names the request's URL and may quote the server's
    reply, which may repeat the request's headers: only its first line is
    kept, without URL queries and credentials, the server's text, and any of
    ``credentials``. Raise the result outside the ``except`` block that
    caught ``exc``: raised inside, it would keep ``exc`` as its
    ``__context__`` (``from None`` only hides it).
    """
    errors = obstore.exceptions
    detail = f"{type(exc).__name__}: {redact(str(exc))}"
    for secret in credentials:
        detail = detail.replace(secret, "***")
    if isinstance(exc, (FileNotFoundError, errors.NotFoundError)):
        return FileNotFoundError(f"{what} not found")
    denied = (PermissionError, errors.PermissionDeniedError, errors.UnauthenticatedError)
    if isinstance(exc, denied):
        return PermissionError(f"{what}: access denied ({detail})")
    if isinstance(exc, TimeoutError):
        return TimeoutError(f"{what}: timed out ({detail})")
    return OSError(f"{what}: {detail}")
