"""Streaming tar parsing and webdataset's grouping of members into samples.

The parser reads a tar stream front to back through a ``read(n)`` callable
and never seeks, so the same code serves local files, HTTP bodies and
object-store streams; memory is one member at a time. It understands the
formats that ``tar`` and Python's ``tarfile`` write: v7, POSIX ustar (the
``prefix`` field), GNU (long names ``L``, base-256 sizes) and pax (``x``
extended headers: ``path`` and ``size``; ``g`` global headers are read
and ignored). Every header's checksum is verified.

What a shard may make the parser hold is bounded (``ShardLimits``): a
member's declared size is checked against ``max_member_bytes``, and against
the stream's end when the stream knows it (``Content-Length``, an object's
size), before any of its bytes are read; the pax and long-name headers
before one member against ``max_header_bytes``, together; the data of
directories, links and devices is passed over, never held.

Errors::

    ValueError (ShardError)   a bad header checksum, a malformed size or pax
                              record, a stream that ends inside a header or
                              a member, a member or headers over a bound, a
                              member memory cannot be found for; the message
                              names the shard and the byte offset of the
                              header at fault
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from typing import Any

from dataloader._core.tar import META_NAME, TarReader, split_name
from dataloader._errors import ShardError
from dataloader.sources._limits import ShardLimits

__all__ = ["ShardError", "group_samples", "shard_samples", "split_name", "tar_members"]

BLOCK = 512
_ZEROS = bytes(BLOCK)
_REGULAR = (b"0", b"\0", b"7")
# Numbers are plain digits, and fit an int64 (the native reader's limits).
_OCTAL = re.compile(rb"[0-7]+")
_DIGITS = re.compile(rb"[0-9]{1,18}")
_LIMIT = 1 << 63
_META = (b"L", b"x", b"g")
# Data passed over (a directory's, a link's) is read this much at a time.
_SKIP_BYTES = 1 << 20


def _octal(field: bytes, url: str, offset: int, what: str) -> int:
    if field[:1] and field[0] & 0x80:  # GNU base-256: big-endian, sign bit set
        value = int.from_bytes(field[1:], "big")
        if field[0] & 0x40:
            raise ShardError(url, offset, f"negative {what} in header")
        if value >= _LIMIT:
            raise ShardError(url, offset, f"{what} too large in header")
        return value
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if _OCTAL.fullmatch(text) is None:
        raise ShardError(url, offset, f"malformed {what} field in header")
    return int(text, 8)


def _checksum_ok(header: bytes, url: str, offset: int) -> bool:
    stored = _octal(header[148:156], url, offset, "checksum")
    # The sum of all bytes with the checksum field counted as spaces; some
    # old writers summed signed chars, which tarfile accepts too.
    unsigned = sum(header) - sum(header[148:156]) + 8 * 32
    if stored == unsigned:
        return True
    signed = unsigned - 256 * sum(1 for byte in header if byte > 127)
    signed += 256 * sum(1 for byte in header[148:156] if byte > 127)
    return stored == signed


def _text(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _pax(data: bytes, url: str, offset: int) -> dict[str, str]:
    """The records ``"<length> <key>=<value>\\n"`` of a pax header."""
    records: dict[str, str] = {}
    position = 0
    while position < len(data) and data[position:position + 1] != b"\0":
        space = data.find(b" ", position)
        length = data[position:space] if space >= 0 else b""
        if _DIGITS.fullmatch(length) is None or not 0 < int(length) <= len(data) - position:
            raise ShardError(url, offset, "malformed pax record")
        end = position + int(length)
        record = data[space + 1:end]
        if space + 1 >= end or not record.endswith(b"\n") or b"=" not in record:
            raise ShardError(url, offset, "malformed pax record")
        key, value = record[:-1].split(b"=", 1)
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        position = end
    return records


def _read(read: Callable[[int], bytes], size: int, url: str, offset: int) -> bytes:
    try:
        data = read(size)
    except MemoryError:
        data = None  # the shard asked for more than there is: raised below, without context
    if data is None:
        raise ShardError(url, offset, f"a member of {size} bytes: out of memory")
    if len(data) != size:
        raise ShardError(url, offset, f"truncated: {len(data)} of {size} bytes")
    return data


def _skip(read: Callable[[int], bytes], size: int, url: str, offset: int) -> None:
    """Pass over ``size`` bytes, never holding more than ``_SKIP_BYTES`` of them."""
    got = 0
    while got < size:
        n = len(read(min(size - got, _SKIP_BYTES)))
        if n == 0:
            raise ShardError(url, offset, f"truncated: {got} of {size} bytes")
        got += n


def tar_members(
    read: Callable[[int], bytes], url: str, offset: int = 0,
    limits: ShardLimits | None = None, end: int | None = None,
) -> Iterator[tuple[str, bytes, int]]:
    """``(name, data, header_offset)`` of every regular file member, in order.

    ``read(n)`` returns the next ``n`` bytes of the stream (fewer only at
    its end); ``offset`` is where in the shard the stream starts, a header
    boundary; ``end``, when known, the shard's size. ``header_offset`` is
    where the member's first header starts (a pax or GNU long-name header
    before it included): reading from there yields this member again.
    """
    limits = limits or ShardLimits()
    max_member, max_meta = limits.max_member_bytes, limits.max_header_bytes
    long_name: str | None = None
    pax: dict[str, str] = {}
    start = offset  # the first header of the member being assembled
    pad = 0  # the previous member's padding, read with the next header: one call, no copy of data
    while True:
        block = read(pad + BLOCK)
        if len(block) < pad:
            raise ShardError(url, offset - pad, f"truncated: {len(block)} of {pad} padding bytes")
        header = block[pad:] if pad else block
        if not header or header == _ZEROS:
            return  # the end-of-archive block, or a stream with none
        if len(header) != BLOCK:
            raise ShardError(url, offset, f"truncated: {len(header)} of {BLOCK} header bytes")
        if not _checksum_ok(header, url, offset):
            raise ShardError(url, offset, "bad header checksum")
        size = _octal(header[124:136], url, offset, "size")
        if "size" in pax:
            if _DIGITS.fullmatch(pax["size"].encode("utf-8", "surrogateescape")) is None:
                raise ShardError(url, offset, "malformed pax size")
            size = int(pax["size"])
        kind = header[156:157]
        padded = -(-size // BLOCK) * BLOCK
        if kind in _META:
            if size > max_meta:
                raise ShardError(url, offset, f"a {kind.decode()} header of {size} bytes, "
                                 f"more than max_header_bytes={max_meta}")
            # The headers before one member, this one's data and padding included.
            if offset - start + BLOCK + padded > max_meta:
                raise ShardError(url, offset, "metadata headers of more than "
                                 f"max_header_bytes={max_meta} bytes before one member")
        elif kind in _REGULAR:
            if max_member is not None and size > max_member:
                raise ShardError(url, offset, f"a member of {size} bytes, "
                                 f"more than max_member_bytes={max_member}")
            if end is not None and end - offset - BLOCK < size:
                # Known to be cut short (a corrupt size, say): nothing is read for it.
                raise ShardError(url, offset,
                                 f"truncated: {max(end - offset - BLOCK, 0)} of {size} bytes")
        if kind in _META or kind in _REGULAR:
            data = _read(read, size, url, offset) if size else b""
        else:
            data = b""  # a directory, link or device: its data (if any) is passed over
            _skip(read, size, url, offset)
        pad = padded - size
        here, offset = offset, offset + BLOCK + padded
        if kind in _META:
            if kind == b"L":
                long_name = _text(data)
            elif kind == b"x":
                pax = _pax(data, url, here)
            continue
        if kind in _REGULAR:
            name = pax.get("path") or long_name
            if name is None:
                name = _text(header[0:100])
                if header[257:263] == b"ustar\0" and header[345]:
                    name = _text(header[345:500]) + "/" + name
            yield name, data, start
        long_name, pax, start = None, {}, offset


def group_samples(
    members: Iterator[tuple[str, bytes, int]], url: str
) -> Iterator[tuple[dict[str, object], int, int | None]]:
    """webdataset's samples of one shard: ``(sample, start, resume)``.

    ``start`` is the offset of the sample's first member; ``resume`` the
    offset of the first member of the next sample (``None`` after the
    last), from which reading continues with the samples after this one.

    Consecutive members sharing a key form one sample ``{"__key__",
    "__url__", extension: bytes, ...}``, extensions lowercased; names
    without an extension and ``__meta__`` members are skipped, as
    webdataset skips them. A repeated extension within a sample is a
    ``ShardError``.
    """
    sample: dict[str, object] | None = None
    start = 0
    for name, data, offset in members:
        if META_NAME.match(name):
            continue
        key, extension = split_name(name)
        if key is None:
            continue
        extension = extension.lower()  # type: ignore[union-attr]
        if sample is None or sample["__key__"] != key:
            if sample is not None and len(sample) > 2:
                yield sample, start, offset
            sample, start = {"__key__": key, "__url__": url}, offset
        if extension in sample:
            raise ShardError(url, offset, f"duplicate member {name!r} in sample {key!r}")
        sample[extension] = data
    if sample is not None and len(sample) > 2:
        yield sample, start, None


def shard_samples(
    stream: Any, url: str, offset: int = 0, limits: ShardLimits | None = None,
) -> Iterator[tuple[dict[str, object], int, int | None]]:
    """The samples of ``stream`` (positioned at shard offset ``offset``), as ``group_samples``.

    A local file is parsed natively (``dataloader._core.tar``: large reads
    without the GIL); any other stream, through its ``read(n)``, here, up to
    its ``size`` when it has one.
    """
    limits = limits or ShardLimits()
    if isinstance(stream, io.FileIO):
        return TarReader(stream.fileno(), url, offset,
                         max_member=limits.max_member_bytes, max_meta=limits.max_header_bytes)
    end = getattr(stream, "size", None)
    return group_samples(tar_members(stream.read, url, offset, limits, end), url)
