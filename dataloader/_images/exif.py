"""EXIF orientation read from an image file's headers, never its pixels.

JPEG keeps EXIF in an APP1 segment before the first scan, PNG in an
``eXIf`` chunk, WebP in an ``EXIF`` chunk of its RIFF container. Each
container is walked by its segment or chunk headers (seeking over the
payloads that are not EXIF), and the TIFF structure inside is searched for
tag 0x0112 in its first IFD. Nothing here allocates more than one EXIF
block (at most 64 KiB for JPEG).
"""

from __future__ import annotations

import struct
from typing import BinaryIO

__all__ = ["ORIENTATIONS", "orientation"]

# The eight values of tag 0x0112, as the EXIF specification names them.
ORIENTATIONS = {
    1: "normal",
    2: "mirrored",
    3: "rotated 180",
    4: "mirrored vertically",
    5: "mirrored, rotated 90 CCW",
    6: "rotated 90 CW",
    7: "mirrored, rotated 90 CW",
    8: "rotated 90 CCW",
}

_ORIENTATION_TAG = 0x0112
_SHORT = 3
# Most EXIF blocks found inside a PNG or WebP file that are read (a real
# one is a few KiB; the bound keeps a corrupt length from allocating much).
_MAX_EXIF_BYTES = 1 << 20


def orientation(file: BinaryIO) -> int | None:
    """The EXIF orientation (1 to 8) of an open JPEG, PNG or WebP file.

    Parameters
    ----------
    file : binary file
        Read from its current position, which should be the file's start.

    Returns
    -------
    int or None
        ``None`` when the file has no EXIF block, no orientation tag, a
        value outside 1 to 8, or is of another format.

    Examples
    --------
    >>> import io
    >>> from dataloader._images.exif import orientation
    >>> entry = b"\\x12\\x01\\x03\\x00\\x01\\x00\\x00\\x00\\x06\\x00\\x00\\x00"
    >>> tiff = b"II*\\x00\\x08\\x00\\x00\\x00" + b"\\x01\\x00" + entry
    >>> app1 = b"Exif\\x00\\x00" + tiff
    >>> jpeg = b"\\xff\\xd8\\xff\\xe1" + (len(app1) + 2).to_bytes(2, "big") + app1 + b"\\xff\\xda"
    >>> orientation(io.BytesIO(jpeg))
    6
    >>> orientation(io.BytesIO(b"\\xff\\xd8\\xff\\xda")) is None
    True
    """
    start = file.read(12)
    if start[:2] == b"\xff\xd8":
        file.seek(-10, 1)
        tiff = _jpeg_exif(file)
    elif start[:8] == b"\x89PNG\r\n\x1a\n":
        file.seek(-4, 1)
        tiff = _png_exif(file)
    elif start[:4] == b"RIFF" and start[8:12] == b"WEBP":
        tiff = _webp_exif(file)
    else:
        return None
    if tiff is None:
        return None
    value = _tiff_orientation(tiff)
    return value if value in ORIENTATIONS else None


def _jpeg_exif(file: BinaryIO) -> bytes | None:
    """The TIFF block of the first Exif APP1 segment, read up to the first scan."""
    while True:
        marker = file.read(2)
        if len(marker) < 2 or marker[0] != 0xFF:
            return None
        # Fill bytes (0xFF repeated) may stand before a marker.
        while marker[1] == 0xFF:
            next_byte = file.read(1)
            if not next_byte:
                return None
            marker = marker[1:] + next_byte
        kind = marker[1]
        if kind == 0xDA or kind == 0xD9:  # start of scan, end of image: no EXIF before it
            return None
        if kind == 0x01 or 0xD0 <= kind <= 0xD7:  # markers without a length
            continue
        header = file.read(2)
        if len(header) < 2:
            return None
        length = struct.unpack(">H", header)[0] - 2
        if length < 0:
            return None
        if kind == 0xE1:
            payload = file.read(length)
            if payload.startswith(b"Exif\x00\x00"):
                return payload[6:]
        else:
            file.seek(length, 1)


def _png_exif(file: BinaryIO) -> bytes | None:
    """The payload of the ``eXIf`` chunk, looked for before the first ``IDAT``."""
    while True:
        header = file.read(8)
        if len(header) < 8:
            return None
        length, kind = struct.unpack(">I4s", header)
        if kind in (b"IDAT", b"IEND"):
            return None
        if kind == b"eXIf":
            return file.read(min(length, _MAX_EXIF_BYTES))
        file.seek(length + 4, 1)  # the payload and its CRC


def _webp_exif(file: BinaryIO) -> bytes | None:
    """The payload of the ``EXIF`` chunk; it may follow the image data, which is skipped."""
    while True:
        header = file.read(8)
        if len(header) < 8:
            return None
        kind, length = struct.unpack("<4sI", header)
        if kind == b"EXIF":
            payload = file.read(min(length, _MAX_EXIF_BYTES))
            # Some writers keep JPEG's "Exif\0\0" prefix.
            return payload[6:] if payload.startswith(b"Exif\x00\x00") else payload
        file.seek(length + (length & 1), 1)  # chunks are padded to even sizes


def _tiff_orientation(tiff: bytes) -> int | None:
    """Tag 0x0112 of IFD0 in a TIFF block (either byte order)."""
    if tiff[:4] == b"II*\x00":
        order = "<"
    elif tiff[:4] == b"MM\x00*":
        order = ">"
    else:
        return None
    try:
        (ifd,) = struct.unpack_from(order + "I", tiff, 4)
        (count,) = struct.unpack_from(order + "H", tiff, ifd)
        for entry in range(ifd + 2, ifd + 2 + 12 * count, 12):
            tag, kind, n_values = struct.unpack_from(order + "HHI", tiff, entry)
            if tag == _ORIENTATION_TAG:
                if kind != _SHORT or n_values != 1:
                    return None
                return struct.unpack_from(order + "H", tiff, entry + 8)[0]
    except struct.error:  # offsets past the end of a truncated block
        return None
    return None
