"""``HttpDataset``: items fetched by HTTP GET on the loader's event loop (aiohttp).

Requests, redirects and the mapping of the client's errors are
``_http_client``'s. Errors (each message names the URL without its
credentials or query, and holds no text of the client's or the server's:
a status is shown with its standard reason)::

    IndexError          index out of range
    ValueError          body larger than max_bytes (from Content-Length, or
                        counted while streaming: never buffered whole); a
                        URL the client cannot request
    TimeoutError        every attempt timed out (a stream: too slow, see
                        ``ShardLimits.min_rate``)
    FileNotFoundError   HTTP 404 (not retried)
    OSError             any other status, a connection failure, a body cut
                        short, a malformed response, a redirect refused or
                        too many of them; once the retries are spent, says
                        the attempts
"""

from __future__ import annotations

import asyncio
import http
import re
import string
import threading
import weakref
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from dataloader._datasets.asynchronous import AsyncDataset
from dataloader.sources._common import check_max_bytes, item_index, redact_url, require
from dataloader.sources._http_client import (
    Failure,
    Final,
    Retryable,
    attempts,
    failures,
    get,
    retrying,
)
from dataloader.sources._limits import DEFAULT_MAX_BYTES, ShardLimits, Throughput
from dataloader.sources._retry import Retry

__all__ = ["HttpBody", "HttpDataset", "HttpRanges"]

_CHUNK_BYTES = 64 * 1024
# The most bytes one read of a streamed body takes from aiohttp's buffer.
_STREAM_BYTES = 1 << 20
_CONTENT_RANGE = re.compile(r"bytes \d+-\d+/(\d+)")


class HttpDataset(AsyncDataset[bytes]):
    """The bodies of HTTP(S) resources, one URL per item, as ``bytes``.

    Requests run on the loader's event loop, as many at once as the loader
    has worker threads (``max(num_workers, 1) * item_concurrency``), over
    one connection pool per event loop (so, per loader); ``aclose()``
    closes it. Requires the ``http`` extra (``pip install
    "dataloader[http]"``).

    Parameters
    ----------
    urls : sequence of str
        One URL per item, in index order.
    headers : mapping, optional
        Sent with every request (an ``Authorization`` header, say) to the
        URL's origin (scheme, host and port) only: not after a redirect to
        another origin, as credentials in the URL are not; never shown in
        error messages. Redirects are followed up to 10 times, to
        ``http(s)`` URLs only.
    timeout : float, default 30.0
        Seconds for one attempt: connecting, redirects, the headers and the
        whole body.
    max_bytes : int or None, default 1 GiB
        Largest body accepted, else ``ValueError`` naming ``max_bytes``
        (checked from ``Content-Length``, and while the body arrives: never
        buffered beyond it). ``None`` lifts the bound, for servers you trust.
    retry : Retry, default Retry()
        Which failures are retried, and the backoff between attempts.

    Examples
    --------
    A local server stands in for a remote one:

    >>> import functools, http.server, pathlib, tempfile, threading
    >>> from dataloader import DataLoader
    >>> from dataloader.sources import HttpDataset
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> for n in range(4):
    ...     _ = (folder / f"{n}.txt").write_text("x" * n)
    >>> handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=folder)
    >>> handler.log_message = lambda *args: None
    >>> server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    >>> threading.Thread(target=server.serve_forever, daemon=True).start()
    >>> base = f"http://127.0.0.1:{server.server_address[1]}"
    >>> dataset = HttpDataset([f"{base}/{n}.txt" for n in range(4)])
    >>> with DataLoader(dataset, batch_size=2, num_workers=2, item_concurrency=2,
    ...                 transform=lambda index, body: len(body)) as loader:
    ...     [batch.tolist() for batch in loader]
    [[0, 1], [2, 3]]
    >>> server.shutdown()
    """

    def __init__(
        self,
        urls: Iterable[str],
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        retry: Retry = Retry(),  # noqa: B008 -- frozen, so sharing it is safe
    ) -> None:
        self._aiohttp = require("aiohttp", "http", type(self).__name__)
        if not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout should be a positive number of seconds, got {timeout!r}")
        if not isinstance(retry, Retry):
            raise TypeError(f"retry should be a Retry, got {type(retry).__name__}")
        self.urls: Sequence[str] = urls if isinstance(urls, _TemplateUrls) else list(urls)
        self.headers = dict(headers or {})
        self.timeout = float(timeout)
        self.max_bytes = check_max_bytes(max_bytes)
        self.retry = retry
        # One ClientSession per event loop: a session belongs to the loop it
        # was created on, and each loader has its own loop.
        self._sessions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._sessions_lock = threading.Lock()

    @classmethod
    def from_template(
        cls,
        template: str,
        /,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        retry: Retry = Retry(),  # noqa: B008 -- frozen, so sharing it is safe
        **columns: Sequence[Any],
    ) -> HttpDataset:
        """URLs made from a template and columns of values, one row per item.

        ``{name}`` is replaced by ``columns[name][index]``, percent-encoded;
        ``{index}`` is the item's index; ``{{`` and ``}}`` are literal
        braces. Format specifications work (``{x:04d}``). Columns must have
        equal lengths, which is the dataset's length; they cannot be named
        like the keyword arguments.

        Examples
        --------
        >>> from dataloader.sources import HttpDataset
        >>> tiles = HttpDataset.from_template(
        ...     "https://tiles.example/{z}/{x}/{y}.png?item={index}",
        ...     z=[3, 3], x=[1, 2], y=[5, 6])
        >>> len(tiles), tiles.urls[1]
        (2, 'https://tiles.example/3/2/6.png?item=1')
        >>> HttpDataset.from_template("https://h/{name}", name=["a b/c"]).urls[0]
        'https://h/a%20b%2Fc'
        """
        return cls(
            _TemplateUrls(template, columns),
            headers=headers, timeout=timeout, max_bytes=max_bytes, retry=retry,
        )

    def __len__(self) -> int:
        return len(self.urls)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.urls)} URLs, timeout={self.timeout})"

    # The connection pools stay in the process that made them: a copy sent
    # to a worker process (inside a remote ParquetDataset) makes its own.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_aiohttp"], state["_sessions"], state["_sessions_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._aiohttp = require("aiohttp", "http", type(self).__name__)
        self._sessions = weakref.WeakKeyDictionary()
        self._sessions_lock = threading.Lock()

    async def __getitem__(self, index: int) -> bytes:
        url = self.urls[item_index(index, len(self.urls), type(self).__name__)]
        session = self._session()
        body: bytes = await retrying(
            self.retry, lambda attempt: self._attempt(session, url, attempt))
        return body

    async def aclose(self) -> None:
        """Close the connection pool of the running event loop.

        Examples
        --------
        >>> import asyncio
        >>> from dataloader.sources import HttpDataset
        >>> asyncio.run(HttpDataset(["http://127.0.0.1/unused"]).aclose())
        """
        loop = asyncio.get_running_loop()
        with self._sessions_lock:
            session = self._sessions.pop(loop, None)
        if session is not None:
            await session.close()

    def _session(self) -> Any:
        aiohttp = self._aiohttp
        loop = asyncio.get_running_loop()
        with self._sessions_lock:
            session = self._sessions.get(loop)
            if session is None or session.closed:
                # No default headers: ``get`` sends the user's to the URL's origin only.
                session = aiohttp.ClientSession(
                    # The loader bounds the requests in flight; the
                    # connector must not queue them a second time.
                    connector=aiohttp.TCPConnector(limit=0),
                    timeout=aiohttp.ClientTimeout(total=self.timeout),
                )
                self._sessions[loop] = session
            return session

    async def _attempt(self, session: Any, url: str, attempt: int) -> bytes:
        """One GET, its redirects and its body within ``timeout``; raises ``Failure``."""
        shown = f"GET {redact_url(url)}"
        with failures(shown, attempt, self.timeout):
            async with asyncio.timeout(self.timeout):
                response = await get(session, url, shown, self.headers)
                try:
                    self._check_status(response, shown, attempt)
                    return await self._read_body(response, shown)
                finally:
                    response.release()
        raise AssertionError("unreachable: the block returns, or failures() raises")

    async def _open(self, session: Any, url: str, offset: int, attempt: int) -> Any:
        """One GET of the body from byte ``offset``, unread: for a streamed read.

        The timeout bounds connecting and each wait for bytes, not the whole
        body, which may be a shard of gigabytes (``HttpBody`` bounds its rate).
        """
        aiohttp = self._aiohttp
        shown = f"GET {redact_url(url)}"
        extra = {"Range": f"bytes={offset}-"} if offset else None
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout,
                                        sock_read=self.timeout)
        with failures(shown, attempt, self.timeout):
            response = await get(session, url, shown, self.headers, extra_headers=extra,
                                 timeout=timeout)
            try:
                self._check_status(response, shown, attempt)
                if offset and response.status != 206:
                    raise Final(OSError(f"{shown}: the server ignored a Range request"))
            except BaseException:
                response.release()
                raise
            return response
        raise AssertionError("unreachable: the block returns, or failures() raises")

    async def _range(self, session: Any, url: str, start: int, size: int, attempt: int) -> bytes:
        """One GET of bytes ``start`` to ``start + size - 1`` (``size`` 0: the first byte,
        to learn the body's size, returned as its decimal digits); raises ``Failure``."""
        shown = f"GET {redact_url(url)}"
        last = start + max(size, 1) - 1
        if self.max_bytes is not None and size > self.max_bytes:
            raise Final(ValueError(f"{shown}: a read of {size} bytes exceeds "
                                   f"max_bytes={self.max_bytes}"))
        with failures(shown, attempt, self.timeout):
            async with asyncio.timeout(self.timeout):
                response = await get(session, url, shown, self.headers,
                                     extra_headers={"Range": f"bytes={start}-{last}"})
                try:
                    self._check_status(response, shown, attempt)
                    if response.status != 206:
                        raise Final(OSError(f"{shown}: the server ignored a Range request"))
                    if size == 0:
                        total = _body_size(response, start)
                        if total is None:
                            raise Final(OSError(f"{shown}: the server did not say the "
                                                "body's size (Content-Range)"))
                        return str(total).encode()
                    body = await self._read_body(response, shown)
                finally:
                    response.release()
                if len(body) != size:
                    raise Retryable(OSError(f"{shown}: {len(body)} bytes of a range of "
                                            f"{size} {attempts(attempt)}"))
                return body
        raise AssertionError("unreachable: the block returns, or failures() raises")

    def _check_status(self, response: Any, shown: str, attempt: int) -> None:
        status = response.status
        if status < 400:
            return
        reason = _reason(status)
        if status == 404:
            raise Final(FileNotFoundError(f"{shown}: HTTP 404 {reason or 'Not Found'}"))
        error = OSError(f"{shown}: HTTP {status} {reason} {attempts(attempt)}")
        if self.retry.retries_status(status):
            raise Retryable(error, response.headers.get("Retry-After"))
        raise Final(error)

    async def _read_body(self, response: Any, shown: str) -> bytes:
        limit = self.max_bytes
        if limit is None:
            return bytes(await response.read())
        declared = response.content_length
        if declared is not None and declared > limit:
            response.close()
            raise Final(ValueError(
                f"{shown}: Content-Length {declared} exceeds max_bytes={limit}"))
        body = bytearray()
        async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
            body += chunk
            if len(body) > limit:
                response.close()  # stop the transfer: the rest is never read
                raise Final(ValueError(f"{shown}: body exceeds max_bytes={limit}"))
        return bytes(body)


def _reason(status: int) -> str:
    """The standard reason of a status: the server's own may repeat what it was sent."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


class HttpBody:
    """The body of one HTTP GET read synchronously, chunk by chunk (a shard stream).

    Each read runs a private event loop on the calling thread until bytes
    arrive, over the client's aiohttp session for that loop (so, one
    connection per body). Memory is aiohttp's flow-controlled read buffer
    plus the chunk being handed out, whatever the body's size. A body cut
    short, a read that times out, or a transfer slower than
    ``limits.min_rate`` is requested again from the byte where it stopped
    (``Range``) within the client's ``retry``. ``read(n)`` returns ``n``
    bytes, fewer only at the end; ``size`` is the body's length when the
    server said it (else ``None``); ``close()`` ends the request and the loop.
    """

    def __init__(self, client: HttpDataset, url: str, offset: int = 0,
                 limits: ShardLimits | None = None) -> None:
        self._client = client
        self._url = url
        self._offset = offset  # of the next byte not yet received
        self._buffer = memoryview(b"")
        self._response: Any = None
        self._throughput = Throughput(limits or ShardLimits())
        self.size: int | None = None
        self._loop = asyncio.new_event_loop()
        try:
            self._response = self._run(self._reopen())
        except BaseException:
            self.close()
            raise

    def _run(self, awaitable: Awaitable[Any]) -> Any:
        return self._loop.run_until_complete(awaitable)

    async def _reopen(self) -> Any:
        client, url = self._client, self._url
        session = client._session()
        response = await retrying(
            client.retry, lambda attempt: client._open(session, url, self._offset, attempt))
        self.size = _body_size(response, self._offset)
        return response

    async def _chunk(self) -> bytes:
        """The next bytes of the body (``b""`` at its end), reopening it after a failure."""
        client = self._client
        shown = f"GET {redact_url(self._url)}"
        throughput = self._throughput
        retries = 0
        while True:
            try:
                with failures(shown, retries + 1, client.timeout):
                    throughput.start()
                    chunk: bytes = await self._response.content.read(_STREAM_BYTES)
                    slow = throughput.record(len(chunk))
                    if slow is not None:
                        raise Retryable(TimeoutError(
                            f"{shown}: too slow, {slow} {attempts(retries + 1)}"))
                    return chunk
            except Failure as failure:
                error, again = failure.error, isinstance(failure, Retryable)
            # Out of the except block: what is raised from here has no context.
            self._response.release()
            if not again or retries >= client.retry.max_retries:
                raise error
            retries += 1
            await asyncio.sleep(client.retry.backoff(retries, None))
            self._response = await self._reopen()

    def read(self, size: int) -> bytes:
        parts = []
        have = 0
        while True:
            take = self._buffer[:size - have]
            if take:
                parts.append(bytes(take))
                have += len(take)
                self._buffer = self._buffer[len(take):]
            if have >= size or self._response is None:
                break
            chunk = self._run(self._chunk())
            if not chunk:
                self._response.release()
                self._response = None
                break
            self._offset += len(chunk)
            self._buffer = memoryview(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        response, self._response = self._response, None
        if response is not None:
            response.close()
        if not self._loop.is_closed():
            self._run(self._client.aclose())
            self._loop.close()
        self._buffer = memoryview(b"")


class HttpRanges:
    """Byte ranges of one URL read synchronously: a remote file read at random places.

    Each :meth:`read` is one ``GET`` with a ``Range`` header (redirects,
    headers, retries, ``timeout`` and ``max_bytes`` as the client's
    items'), run on a private event loop on the calling thread, so one
    object is used by one thread at a time (a remote columnar file's
    reader, ``dataloader.sources._ranged``). A server that ignores ranges,
    or sends a range of another length, fails the read.

    Examples
    --------
    >>> from dataloader.sources import HttpDataset
    >>> from dataloader.sources._http import HttpRanges
    >>> ranges = HttpRanges(HttpDataset(["http://127.0.0.1/unused"]), 0)
    >>> ranges.url
    'http://127.0.0.1/unused'
    >>> ranges.close()
    """

    def __init__(self, client: HttpDataset, index: int) -> None:
        self._client = client
        self.url = client.urls[item_index(index, len(client.urls), type(client).__name__)]
        self._loop = asyncio.new_event_loop()

    def _run(self, start: int, size: int) -> bytes:
        client, url = self._client, self.url

        async def read() -> bytes:
            session = client._session()
            body: bytes = await retrying(
                client.retry, lambda attempt: client._range(session, url, start, size, attempt))
            return body

        return self._loop.run_until_complete(read())

    def size(self) -> int:
        """The body's length, from the ``Content-Range`` of a one-byte range."""
        return int(self._run(0, 0))

    def read(self, start: int, size: int) -> bytes:
        """Bytes ``start`` to ``start + size - 1`` (``size`` > 0) of the body."""
        return self._run(start, size)

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._client.aclose())
            self._loop.close()


def _body_size(response: Any, offset: int) -> int | None:
    """The whole body's length from a response starting at byte ``offset``, if it says."""
    if response.headers.get("Content-Encoding", "identity").lower() != "identity":
        return None  # Content-Length counts the encoded bytes
    if response.status == 206:
        match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", ""))
        return int(match.group(1)) if match else None
    length = response.content_length
    return None if length is None else offset + length


class _TemplateUrls(Sequence[str]):
    """The URLs of ``HttpDataset.from_template``, formatted when asked for."""

    def __init__(self, template: str, columns: Mapping[str, Sequence[Any]]) -> None:
        fields = set()
        for _, field, _, _ in string.Formatter().parse(template):
            if field is None:
                continue
            if not field.isidentifier():
                raise ValueError(
                    f"template field {{{field}}} should be a plain name "
                    "(a column, or index); write {{ and }} for literal braces"
                )
            fields.add(field)
        if "index" in columns:
            raise ValueError("'index' is the item index; a column cannot be named index")
        missing = sorted(fields - set(columns) - {"index"})
        if missing:
            raise ValueError(f"template fields without a column: {', '.join(missing)}")
        unused = sorted(set(columns) - fields)
        if unused:
            raise ValueError(f"columns not used by the template: {', '.join(unused)}")
        if not columns:
            raise ValueError("from_template needs at least one column: it sets the length")
        lengths = {name: len(values) for name, values in columns.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"columns should have equal lengths, got {lengths}")
        self.template = template
        self.columns = {name: list(values) for name, values in columns.items()}
        self.length = next(iter(lengths.values()))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.length))]
        index = item_index(index, self.length, "template")
        values = {name: _Encoded(column[index]) for name, column in self.columns.items()}
        return self.template.format(index=index, **values)


class _Encoded:
    """A template value: formatted as asked, then percent-encoded (``/`` too)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __format__(self, spec: str) -> str:
        return quote(format(self.value, spec), safe="")
