"""Shard lists and shard streams: brace patterns, and ``read(n)`` over a location.

A shard is a local path, an ``http(s)://`` URL or an object-store URL
(``s3://``, ``gs://``, ``az://``, ``file://``, ``memory://``). ``open_shard``
returns a stream positioned at a byte offset, so that a reader resumes a
shard where it stopped (HTTP ``Range``, object-store ranged GET, a seek).
HTTP bodies are streamed by the HTTP client of ``HttpDataset`` (aiohttp).
Local files are parsed natively from their descriptor (``dataloader._core.tar``,
large reads without the GIL); socket reads release the GIL while they wait.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from dataloader.sources._common import redact_url, require
from dataloader.sources._limits import ShardLimits, Throughput
from dataloader.sources._retry import Retry

__all__ = ["expand_shards", "open_shard", "shard_name"]

_BRACES = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
_OBJECT_STORES = ("s3", "gs", "gcs", "az", "azure", "abfs", "abfss", "file", "memory")
_READ_BYTES = 1 << 20  # one object-store chunk: large enough that requests cost nothing


def expand_shards(shards: str | os.PathLike[str] | Iterable[Any]) -> list[str]:
    """Shard locations: a brace pattern expanded, or a sequence taken as it is.

    ``{000..003}`` is a zero-padded numeric range (the width of the first
    bound), ``{a,b}`` alternatives; several groups multiply out, left to
    right.

    Examples
    --------
    >>> from dataloader.sources._shards import expand_shards
    >>> expand_shards("train-{00..02}.tar")
    ['train-00.tar', 'train-01.tar', 'train-02.tar']
    >>> expand_shards("{a,b}-{1..2}.tar")
    ['a-1.tar', 'a-2.tar', 'b-1.tar', 'b-2.tar']
    """
    if isinstance(shards, (str, os.PathLike)):
        locations = _expand(os.fspath(shards))
    elif isinstance(shards, (bytes, Mapping)) or not isinstance(shards, Iterable):
        raise TypeError(
            "shards should be a path, a URL, a brace pattern or a sequence of them, "
            f"got {type(shards).__name__}"
        )
    else:
        locations = [os.fspath(shard) for shard in shards]
    for location in locations:
        if not isinstance(location, str):
            raise TypeError(f"shards should hold str paths or URLs, got {location!r}")
    if not locations:
        raise ValueError("shards should name at least one shard, got none")
    return locations


def _expand(pattern: str) -> list[str]:
    match = _BRACES.search(pattern)
    if match is None:
        return [pattern]
    body, head, tail = match.group(1), pattern[:match.start()], pattern[match.end():]
    numbers = _RANGE.match(body)
    if numbers is not None:
        low, high = int(numbers.group(1)), int(numbers.group(2))
        if high < low:
            raise ValueError(f"shards: empty range {{{body}}} in {pattern!r}")
        width = len(numbers.group(1))
        choices = [f"{n:0{width}d}" for n in range(low, high + 1)]
    else:
        choices = body.split(",")
    return [head + choice + rest for choice in choices for rest in _expand(tail)]


def shard_name(location: str) -> str:
    """What messages and samples may show of a location: no credentials, no query."""
    if "://" in location:
        return redact_url(location)
    return location


def open_shard(location: str, offset: int, options: ShardOptions) -> Any:
    """A binary stream of ``location`` from byte ``offset``: ``read(n)`` and ``close()``."""
    scheme = location.split("://", 1)[0].lower() if "://" in location else ""
    if scheme in ("http", "https"):
        return _open_http(location, offset, options)
    if scheme in _OBJECT_STORES:
        return _ObjectStream(location, offset, options)
    if scheme:
        raise ValueError(f"shards: unsupported URL scheme {scheme!r} in {shard_name(location)}")
    # Unbuffered: the native reader reads the descriptor in its own blocks.
    stream = open(location, "rb", buffering=0)  # noqa: SIM115 -- the caller closes
    if offset:
        stream.seek(offset)
    return stream


class ShardOptions:
    """How remote shards are reached (HTTP headers and timeout, store options, retries)
    and the bounds they are read within (``ShardLimits``)."""

    __slots__ = ("_http", "headers", "limits", "retry", "store_options", "timeout")

    def __init__(self, headers: Mapping[str, str] | None, timeout: float, retry: Retry,
                 store_options: Mapping[str, Any] | None,
                 limits: ShardLimits | None = None) -> None:
        if not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout should be a positive number of seconds, got {timeout!r}")
        if not isinstance(retry, Retry):
            raise TypeError(f"retry should be a Retry, got {type(retry).__name__}")
        if limits is None:
            limits = ShardLimits()
        if not isinstance(limits, ShardLimits):
            raise TypeError(f"limits should be a ShardLimits, got {type(limits).__name__}")
        self.limits = limits
        self.headers = dict(headers or {})
        self.timeout = float(timeout)
        self.retry = retry
        self.store_options = dict(store_options or {})
        self._http: Any = None

    def http_client(self) -> Any:
        """The ``HttpDataset`` whose requests, retries and errors shards' GETs use."""
        if self._http is None:
            from dataloader.sources._http import HttpDataset

            # Racing threads may each make one: they are equivalent and hold no connection.
            self._http = HttpDataset((), headers=self.headers, timeout=self.timeout,
                                     retry=self.retry)
        return self._http


def _open_http(url: str, offset: int, options: ShardOptions) -> Any:
    from dataloader.sources._http import HttpBody

    return HttpBody(options.http_client(), url, offset, options.limits)


class _ObjectStream:
    """A ranged object-store GET read as a stream (obstore, synchronous).

    ``size`` is the object's size; reads slower than ``limits.min_rate``
    raise ``TimeoutError`` (obstore's own timeouts bound each request).
    Errors are raised outside the ``except`` block that mapped them (see
    ``_object_store.mapped_error``).
    """

    def __init__(self, url: str, offset: int, options: ShardOptions) -> None:
        from dataloader.sources._object_store import credentials_of, mapped_error

        obstore = require("obstore", "s3", "TarDataset")
        scheme, rest = url.split("://", 1)
        if scheme.lower() in ("file", "memory"):
            root, key = f"{scheme}:///", rest.lstrip("/")
        else:
            bucket, _, key = rest.partition("/")
            root = f"{scheme}://{bucket}"
        self._name = shard_name(url)
        self._throughput = Throughput(options.limits)
        self._buffer = memoryview(b"")
        self._obstore: Any = obstore
        self._credentials = credentials_of(options.store_options)
        error: Exception | None = None
        try:
            store = obstore.store.from_url(root, **options.store_options)
            get_options = {"range": {"offset": offset}} if offset else None
            result = obstore.get(store, key, options=get_options)
            self._chunks = iter(result.stream(min_chunk_size=_READ_BYTES))
            size = result.meta.get("size")
        except Exception as exc:  # noqa: BLE001 -- mapped to a built-in type
            error = mapped_error(exc, self._name, obstore,
                                 credentials_of(options.store_options))
        if error is not None:
            raise error
        self.size: int | None = size if isinstance(size, int) else None

    def read(self, size: int) -> bytes:
        if len(self._buffer) >= size:
            data = bytes(self._buffer[:size])
            self._buffer = self._buffer[size:]
            return data
        parts = [bytes(self._buffer)]
        have = len(parts[0])
        while have < size:
            chunk = self._next_chunk()
            if chunk is None:
                break
            parts.append(bytes(chunk))
            have += len(parts[-1])
        data = b"".join(parts)
        self._buffer = memoryview(data)[size:]
        return data[:size]

    def _next_chunk(self) -> Any:
        from dataloader.sources._object_store import mapped_error

        self._throughput.start()
        try:
            chunk = next(self._chunks, None)
        except Exception as exc:  # noqa: BLE001 -- mapped to a built-in type
            error: Exception = mapped_error(exc, self._name, self._obstore, self._credentials)
        else:
            slow = self._throughput.record(0 if chunk is None else len(chunk))
            if slow is None:
                return chunk
            error = TimeoutError(f"{self._name}: too slow, {slow}")
        raise error

    def close(self) -> None:
        self._chunks = iter(())
        self._buffer = memoryview(b"")

