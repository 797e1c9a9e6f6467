"""Bounds on what remote and untrusted input may make a reader do.

A server or a shard decides how many bytes it sends, how large a member
it declares and how slowly it sends them. Each decision has a bound here,
set by default to what real data never reaches, so that a hostile or broken
source fails with an error naming the bound instead of filling memory or
holding a reader forever::

    DEFAULT_MAX_BYTES            one body, object or tar member held in memory
    ShardLimits.max_member_bytes a tar member (checked from its header, before reading)
    ShardLimits.max_header_bytes the pax and long-name headers before one member
    ShardLimits.min_rate         a streamed shard's transfer rate (Throughput)

The table of bounds and what each protects against is in
``docs/reliability.md`` (*Untrusted input*).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from dataloader._core.tar import MAX_META

__all__ = ["DEFAULT_MAX_BYTES", "ShardLimits", "Throughput"]

# The largest body, object or member a source holds in memory by default: 1 GiB.
DEFAULT_MAX_BYTES = 1 << 30


@dataclass(frozen=True)
class ShardLimits:
    """Bounds on tar shards: member size, header size, transfer rate.

    Their defaults are far beyond real shards (webdataset shards hold
    members of kilobytes to megabytes, and stream at megabytes per second);
    they stop a hostile or broken shard or server from filling memory or
    holding a reader forever. A shard breaking one raises ``ShardError``
    (or ``TimeoutError`` for the rate) naming the bound, and with
    ``on_error="skip"`` it is skipped.

    Parameters
    ----------
    max_member_bytes : int or None, default 1 GiB
        Largest member read into memory, checked against the size its
        header declares before any of it is read (and against the shard's
        size, where it is known). ``None`` lifts the bound.
    max_header_bytes : int, default 16 MiB
        Most bytes of pax and GNU long-name headers before one member,
        their 512-byte header blocks included.
    min_rate : float, default 1024.0
        Bytes per second a remote shard must arrive at, averaged over each
        ``rate_window`` seconds spent waiting for it (time the reader spends
        elsewhere does not count); slower is a timeout, retried as one.
        0 lifts the bound.
    rate_window : float, default 30.0
        Seconds of waiting over which the rate is averaged.

    Examples
    --------
    >>> from dataloader.sources import ShardLimits
    >>> limits = ShardLimits(max_member_bytes=64 << 20)
    >>> limits.max_member_bytes, limits.max_header_bytes
    (67108864, 16777216)
    >>> ShardLimits(min_rate=-1)
    Traceback (most recent call last):
    ...
    ValueError: min_rate should be a non-negative number of bytes per second, got -1
    """

    max_member_bytes: int | None = DEFAULT_MAX_BYTES
    max_header_bytes: int = MAX_META
    min_rate: float = 1024.0
    rate_window: float = 30.0

    def __post_init__(self) -> None:
        member = self.max_member_bytes
        if member is not None and (not _is_int(member) or member < 0):
            raise ValueError(
                f"max_member_bytes should be a non-negative int or None, got {member!r}")
        header = self.max_header_bytes
        if not _is_int(header) or not 512 <= header <= MAX_META:
            raise ValueError(
                f"max_header_bytes should be an int from 512 to {MAX_META}, got {header!r}")
        if not _is_number(self.min_rate) or self.min_rate < 0:
            raise ValueError("min_rate should be a non-negative number of bytes per second, "
                             f"got {self.min_rate!r}")
        if not _is_number(self.rate_window) or not self.rate_window > 0:
            raise ValueError(
                f"rate_window should be a positive number of seconds, got {self.rate_window!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


class Throughput:
    """A stream's transfer rate, measured over the time spent waiting for its bytes.

    ``start()`` before a wait and ``record(n)`` after it (``n`` bytes
    received); ``record`` returns a message once a window of
    ``rate_window`` seconds of waiting brought fewer than ``min_rate``
    bytes a second. Time between waits (the reader busy elsewhere) is not
    counted: a reader that stops reading makes the server stop sending.
    """

    __slots__ = ("_bytes", "_began", "_min_rate", "_shown", "_waited", "_window")

    def __init__(self, limits: ShardLimits) -> None:
        self._min_rate = float(limits.min_rate)
        self._shown = limits.min_rate  # as the user wrote it, for messages
        self._window = float(limits.rate_window)
        self._waited = 0.0
        self._bytes = 0
        self._began = 0.0

    def start(self) -> None:
        self._began = time.monotonic()

    def record(self, received: int) -> str | None:
        """``None``, or why the stream is too slow (a message naming ``min_rate``)."""
        if not self._min_rate:
            return None
        self._waited += time.monotonic() - self._began
        self._bytes += received
        if self._waited < self._window:
            return None
        rate, waited = self._bytes / self._waited, self._waited
        self._waited, self._bytes = 0.0, 0
        if rate >= self._min_rate:
            return None
        return (f"{rate:.0f} bytes/s over {waited:.1f} s, slower than "
                f"ShardLimits.min_rate={self._shown}")
