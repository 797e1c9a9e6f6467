"""``Retry``: which failures of a request are tried again, and after how long."""

from __future__ import annotations

import email.utils
import math
import random
import time
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["Retry"]


@dataclass(frozen=True)
class Retry:
    """Exponential backoff with jitter for transient request failures.

    A failed attempt is retried when it is a connection error, a timeout, a
    body cut short, or one of the HTTP statuses in ``statuses`` (408, 429,
    500, 502, 503, 504); any other status fails at once. Before retry
    ``n`` (from 1) the request waits a random time between 0 and
    ``min(max_backoff, initial_backoff * 2 ** (n - 1))`` ("full jitter",
    so that many clients failing together do not retry together), or what
    the server's ``Retry-After`` asks, up to ``max_backoff``.

    Parameters
    ----------
    max_retries : int, default 3
        Retries after the first attempt (0 never retries).
    initial_backoff : float, default 0.1
        Seconds: the ceiling of the first wait.
    max_backoff : float, default 10.0
        Seconds: the ceiling of every wait, ``Retry-After`` included.

    Examples
    --------
    >>> from dataloader.sources import Retry
    >>> retry = Retry(max_retries=5, initial_backoff=0.5, max_backoff=4.0)
    >>> [retry.ceiling(n) for n in range(1, 6)]
    [0.5, 1.0, 2.0, 4.0, 4.0]
    >>> 0.0 <= retry.backoff(2) <= 1.0
    True
    >>> retry.backoff(1, retry_after="120")  # the server's wish, capped
    4.0
    >>> retry.retries_status(503), retry.retries_status(403)
    (True, False)
    """

    max_retries: int = 3
    initial_backoff: float = 0.1
    max_backoff: float = 10.0

    statuses: ClassVar[frozenset[int]] = frozenset({408, 429, 500, 502, 503, 504})

    def __post_init__(self) -> None:
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(
                f"max_retries should be a non-negative int, got max_retries={self.max_retries!r}"
            )
        for name in ("initial_backoff", "max_backoff"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"{name} should be a non-negative number of seconds, got {value!r}"
                )

    def retries_status(self, status: int) -> bool:
        """Whether an HTTP ``status`` is worth another attempt.

        Examples
        --------
        >>> from dataloader.sources import Retry
        >>> Retry().retries_status(429)
        True
        """
        return status in self.statuses

    def ceiling(self, retry: int) -> float:
        """The longest wait before retry number ``retry`` (from 1), without ``Retry-After``.

        Examples
        --------
        >>> from dataloader.sources import Retry
        >>> Retry(initial_backoff=0.1).ceiling(3)
        0.4
        """
        return min(self.max_backoff, self.initial_backoff * 2.0 ** (retry - 1))

    def backoff(self, retry: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (from 1).

        ``retry_after`` is the server's ``Retry-After`` header, in seconds
        or as an HTTP date; it is honoured up to ``max_backoff``.

        Examples
        --------
        >>> from dataloader.sources import Retry
        >>> Retry(max_backoff=10.0).backoff(1, retry_after="2")
        2.0
        """
        wanted = _parse_retry_after(retry_after) if retry_after else None
        if wanted is not None:
            return min(wanted, self.max_backoff)
        return random.uniform(0.0, self.ceiling(retry))


def _parse_retry_after(value: str) -> float | None:
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)
