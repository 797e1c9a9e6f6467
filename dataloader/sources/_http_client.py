"""One HTTP GET as the sources make it: redirects followed here, every error mapped.

Redirects are followed by this module, not by aiohttp (``allow_redirects=False``):
at most ``MAX_REDIRECTS``, to ``http`` and ``https`` URLs only. The caller's
headers and the credentials of the URL (``user:password@``) are sent to the
origin (scheme, host, port) of the URL asked for, and to no other: once a
redirect leads elsewhere they are dropped for the rest of the chain. aiohttp's
own redirects drop only ``Authorization`` and ``Cookie``, so that an API key
in a custom header would follow a redirect to any host.

Every failure a caller sees is an exception of ours, built from our own text
(the redacted URL, the status, the class name of aiohttp's exception), and
raised outside any ``except`` block, so that neither its ``__cause__`` nor its
``__context__`` leads to aiohttp's exception: that exception's message,
``request_info`` and ``history`` hold the signed URL, the request headers and
the credentials. Inside an attempt, errors travel wrapped::

    Failure                 an attempt's error, not yet raised to the caller
    ├── Retryable           tried again within the ``Retry`` policy
    └── Final               raised at once

and ``retrying`` raises the wrapped error, after the except block it caught
the wrapper in.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

from dataloader.sources._retry import Retry

__all__ = [
    "MAX_REDIRECTS", "Failure", "Final", "Retryable", "attempts", "failures", "get", "retrying",
]

T = TypeVar("T")
MAX_REDIRECTS = 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_SCHEMES = ("http", "https")


class Failure(Exception):
    """An attempt's error (``error``), carried to ``retrying`` which raises it."""

    def __init__(self, error: Exception, retry_after: str | None = None) -> None:
        super().__init__()
        self.error = error
        self.retry_after = retry_after


class Retryable(Failure):
    """An error ``Retry`` tries again (timeouts, cut bodies, connections, some statuses)."""


class Final(Failure):
    """An error raised at once (a status, a limit, a refused redirect)."""


def attempts(attempt: int) -> str:
    return f"after {attempt} attempt{'s' if attempt > 1 else ''}"


async def retrying(retry: Retry, attempt: Callable[[int], Awaitable[T]]) -> T:
    """``attempt(n)`` for n = 1, 2, ... until it returns, within ``retry``.

    ``attempt`` raises only ``Failure`` (its body runs under ``failures``);
    the error it carries is raised here, outside the ``except`` block, so
    that it has no ``__context__``.
    """
    retries = 0
    while True:
        try:
            return await attempt(retries + 1)
        except Failure as failure:
            error, retry_after = failure.error, failure.retry_after
            again = isinstance(failure, Retryable) and retries < retry.max_retries
        if not again:
            raise error
        retries += 1
        await asyncio.sleep(retry.backoff(retries, retry_after))


@contextlib.contextmanager
def failures(shown: str, attempt: int, timeout: float) -> Iterator[None]:
    """Any error but a ``Failure`` as the ``Failure`` that stands for it (``mapped``)."""
    try:
        yield
    except (Failure, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 -- every error of the client is mapped
        failure = mapped(exc, shown, attempt, timeout)
    else:
        return
    # Outside the except block: the Failure's own context is the client's error,
    # but it is never raised to a caller (``retrying`` takes ``error`` out of it).
    raise failure


def mapped(exc: Exception, shown: str, attempt: int, timeout: float) -> Failure:
    """The ``Failure`` of ours standing for ``exc``: its class name, never its text."""
    import aiohttp

    name = type(exc).__name__
    after = attempts(attempt)
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts are TimeoutErrors too
        return Retryable(TimeoutError(f"{shown}: timed out after {timeout} s {after}"))
    if isinstance(exc, aiohttp.ClientPayloadError):
        return Retryable(OSError(f"{shown}: body cut short ({name}) {after}"))
    if isinstance(exc, (aiohttp.ClientConnectionError, ConnectionError)):
        return Retryable(OSError(f"{shown}: connection failed ({name}) {after}"))
    if isinstance(exc, aiohttp.InvalidURL):
        return Final(ValueError(f"{shown}: not a valid HTTP URL ({name})"))
    if isinstance(exc, aiohttp.ClientError):  # a malformed response, mostly
        return Final(OSError(f"{shown}: invalid response ({name}) {after}"))
    if isinstance(exc, (ValueError, TypeError)):  # aiohttp's checks of the request
        return Final(ValueError(f"{shown}: request refused by the HTTP client ({name})"))
    return Final(OSError(f"{shown}: request failed ({name}) {after}"))


async def get(session: Any, url: str, shown: str, headers: Mapping[str, str],
              **options: Any) -> Any:
    """The response to a GET of ``url``, redirects followed (see the module docstring).

    ``headers`` (the user's) go to ``url``'s origin only; ``options`` (a
    ``Range`` in ``extra_headers``, a ``timeout``) to every hop. Runs under
    ``failures``: raises ``Failure`` only.
    """
    import aiohttp
    import yarl

    extra = options.pop("extra_headers", None) or {}
    target = yarl.URL(url)
    sent: Mapping[str, str] = headers
    auth = aiohttp.BasicAuth.from_url(target)
    if auth is not None:
        if any(name.lower() == "authorization" for name in headers):
            raise Final(ValueError(
                f"{shown}: the URL's credentials and an Authorization header cannot both "
                "be given"))
        # Sent as a header of the first origin's, so that they follow as the headers do.
        sent = {**headers, "Authorization": auth.encode()}
        target = target.with_user(None)
    origin: tuple[str, str | None, int | None] | None = _origin(target)
    for _ in range(MAX_REDIRECTS + 1):
        response = await session.get(target, headers={**sent, **extra},
                                     allow_redirects=False, **options)
        location = response.headers.get("Location") if response.status in _REDIRECTS else None
        if location is None:
            return response
        response.close()  # its body is not read: a redirect's body is of no use
        try:
            target = target.join(yarl.URL(location))
        except (ValueError, TypeError):
            raise Final(OSError(f"{shown}: redirected to a malformed URL")) from None
        if target.scheme not in _SCHEMES or not target.host:
            raise Final(OSError(
                f"{shown}: redirect to {_scheme(target.scheme)} refused (http and https only)"))
        # Credentials a server writes into its redirect are not used either.
        target = target.with_user(None)
        if _origin(target) != origin:
            # Another origin: neither the headers nor the credentials follow (nor
            # come back, should the chain return).
            sent, origin = {}, None
    raise Final(OSError(f"{shown}: more than {MAX_REDIRECTS} redirects"))


def _origin(url: Any) -> tuple[str, str | None, int | None]:
    return url.scheme, url.host, url.port


def _scheme(scheme: str) -> str:
    """A redirect's scheme, as a message may show it (the server chose it)."""
    if re.fullmatch(r"[a-z][a-z0-9+.-]{0,15}", scheme or ""):
        return f"{scheme}://"
    return "a URL of another scheme"
