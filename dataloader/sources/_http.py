"""``HttpDataset``: items fetched by HTTP GET on the loader's event loop (aiohttp).

Errors (each message names the URL without its credentials or query)::

    IndexError          index out of range
    ValueError          body larger than max_bytes (from Content-Length, or
                        counted while streaming: never buffered whole)
    TimeoutError        every attempt timed out
    FileNotFoundError   HTTP 404 (not retried)
    OSError             any other status, a connection failure or a body cut
                        short, once the retries are spent; says the attempts
"""

from __future__ import annotations

import asyncio
import contextlib
import string
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from dataloader._datasets.asynchronous import AsyncDataset
from dataloader.sources._common import check_max_bytes, item_index, redact_url, require
from dataloader.sources._retry import Retry

__all__ = ["HttpDataset"]

_CHUNK_BYTES = 64 * 1024
# The most bytes one read of a streamed body takes from aiohttp's buffer.
_STREAM_BYTES = 1 << 20


class _Retryable(Exception):
    """An attempt failed in a way ``Retry`` tries again; ``final`` is raised once spent."""

    def __init__(self, final: Exception, retry_after: str | None = None) -> None:
        self.final = final
        self.retry_after = retry_after


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
        Sent with every request (an ``Authorization`` header, say); never
        shown in error messages.
    timeout : float, default 30.0
        Seconds for one attempt: connecting, the headers and the whole body.
    max_bytes : int, optional
        Largest body accepted, else ``ValueError``.
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
        max_bytes: int | None = None,
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
        max_bytes: int | None = None,
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

    async def __getitem__(self, index: int) -> bytes:
        url = self.urls[item_index(index, len(self.urls), type(self).__name__)]
        session = self._session()
        return await self._retrying(lambda attempt: self._attempt(session, url, attempt))

    async def _retrying(self, attempt: Callable[[int], Awaitable[Any]]) -> Any:
        """``attempt(n)`` for n = 1, 2, ... until it returns, within ``self.retry``."""
        retries = 0
        while True:
            try:
                return await attempt(retries + 1)
            except _Retryable as failure:
                if retries >= self.retry.max_retries:
                    raise failure.final from None
                retries += 1
                await asyncio.sleep(self.retry.backoff(retries, failure.retry_after))

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
                session = aiohttp.ClientSession(
                    # The loader bounds the requests in flight; the
                    # connector must not queue them a second time.
                    connector=aiohttp.TCPConnector(limit=0),
                    headers=self.headers,
                    timeout=aiohttp.ClientTimeout(total=self.timeout),
                )
                self._sessions[loop] = session
            return session

    async def _attempt(self, session: Any, url: str, attempt: int) -> bytes:
        """One GET; raises ``_Retryable`` for what ``self.retry`` retries."""
        shown = f"GET {redact_url(url)}"
        with self._failures(shown, attempt):
            async with session.get(url) as response:
                self._check_status(response, shown, attempt)
                return await self._read_body(response, shown)

    async def _open(self, session: Any, url: str, offset: int, attempt: int) -> Any:
        """One GET of the body from byte ``offset``, unread: for a streamed read.

        The timeout bounds connecting and each wait for bytes, not the whole
        body, which may be a shard of gigabytes.
        """
        aiohttp = self._aiohttp
        shown = f"GET {redact_url(url)}"
        headers = {"Range": f"bytes={offset}-"} if offset else None
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout,
                                        sock_read=self.timeout)
        with self._failures(shown, attempt):
            response = await session.get(url, headers=headers, timeout=timeout)
            try:
                self._check_status(response, shown, attempt)
                if offset and response.status != 206:
                    raise OSError(f"{shown}: the server ignored a Range request")
            except BaseException:
                response.release()
                raise
            return response

    def _check_status(self, response: Any, shown: str, attempt: int) -> None:
        status = response.status
        if status == 404:
            raise FileNotFoundError(f"{shown}: HTTP 404 {response.reason or 'Not Found'}")
        if status >= 400:
            error = OSError(f"{shown}: HTTP {status} {response.reason or ''} {_attempts(attempt)}")
            if self.retry.retries_status(status):
                raise _Retryable(error, response.headers.get("Retry-After"))
            raise error

    @contextlib.contextmanager
    def _failures(self, shown: str, attempt: int) -> Iterator[None]:
        """Timeouts, bodies cut short and connection failures as ``_Retryable``."""
        aiohttp = self._aiohttp
        try:
            yield
        except TimeoutError:
            raise _Retryable(
                TimeoutError(f"{shown}: timed out after {self.timeout} s {_attempts(attempt)}")
            ) from None
        except aiohttp.ClientPayloadError as exc:
            raise _Retryable(
                OSError(f"{shown}: body cut short ({type(exc).__name__}) {_attempts(attempt)}")
            ) from None
        except aiohttp.ClientConnectionError as exc:
            raise _Retryable(
                OSError(f"{shown}: connection failed ({type(exc).__name__}) {_attempts(attempt)}")
            ) from None

    async def _read_body(self, response: Any, shown: str) -> bytes:
        limit = self.max_bytes
        if limit is None:
            return await response.read()
        declared = response.content_length
        if declared is not None and declared > limit:
            response.close()
            raise ValueError(
                f"{shown}: Content-Length {declared} exceeds max_bytes={limit}"
            )
        body = bytearray()
        async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
            body += chunk
            if len(body) > limit:
                response.close()  # stop the transfer: the rest is never read
                raise ValueError(f"{shown}: body exceeds max_bytes={limit}")
        return bytes(body)


def _attempts(attempt: int) -> str:
    return f"after {attempt} attempt{'s' if attempt > 1 else ''}"


class HttpBody:
    """The body of one HTTP GET read synchronously, chunk by chunk (a shard stream).

    Each read runs a private event loop on the calling thread until bytes
    arrive, over the client's aiohttp session for that loop (so, one
    connection per body). Memory is aiohttp's flow-controlled read buffer
    plus the chunk being handed out, whatever the body's size. A body cut
    short, or a read that times out, is requested again from the byte
    where it stopped (``Range``) within the client's ``retry``. ``read(n)``
    returns ``n`` bytes, fewer only at the end; ``close()`` ends the
    request and the loop.
    """

    def __init__(self, client: HttpDataset, url: str, offset: int = 0) -> None:
        self._client = client
        self._url = url
        self._offset = offset  # of the next byte not yet received
        self._buffer = memoryview(b"")
        self._response: Any = None
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
        return await client._retrying(
            lambda attempt: client._open(session, url, self._offset, attempt))

    async def _chunk(self) -> bytes:
        """The next bytes of the body (``b""`` at its end), reopening it after a failure."""
        client = self._client
        shown = f"GET {redact_url(self._url)}"
        retries = 0
        while True:
            try:
                with client._failures(shown, retries + 1):
                    return await self._response.content.read(_STREAM_BYTES)
            except _Retryable as failure:
                self._response.release()
                if retries >= client.retry.max_retries:
                    raise failure.final from None
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
