"""Decoding: header inspection and native or Pillow decoding into uint8 HWC.

JPEG, PNG and WebP are decoded by ``dataloader._core.codecs`` without the
GIL; GIF, BMP and TIFF go through Pillow when it is installed.  Limits are
checked from the header before any pixel memory is allocated.

Pillow is given only the formats the library documents (those the sniffer
of ``src/dl_tables.h`` names), each read by its own plugin: the format is
sniffed from the bytes, its plugin imported, and ``Image.open`` told
``formats=``, so that it never loads the plugins of other formats. Some of
those (EPS, PS, PDF) hand the bytes to programs such as Ghostscript;
untrusted bytes never reach them through this module.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO, TypeAlias

import numpy as np

from dataloader._core import codecs as _codecs
from dataloader._images.arguments import (
    CHANNELS,
    CONVERT_MODES,
    MAX_BYTES,
    MAX_SIDE,
    bytes_view,
    check_choice,
    check_image_shape,
    check_int,
    check_size,
    output,
)

# An encoded file: bytes-like, or a 1-D uint8 array.
EncodedBytes: TypeAlias = bytes | bytearray | memoryview | np.ndarray
_INSTALL_HINT = "install Pillow for more formats: pip install dataloader[images]"
# Pillow's plugin for each format the sniffer names (src/dl_tables.h).
_PLUGINS = {"JPEG": "JpegImagePlugin", "PNG": "PngImagePlugin", "WEBP": "WebPImagePlugin",
            "GIF": "GifImagePlugin", "BMP": "BmpImagePlugin", "TIFF": "TiffImagePlugin"}
# The formats Pillow decodes for ``decode`` and ``image_info``: those without a native decoder.
PILLOW_FORMATS = tuple(name for name in _codecs.FORMATS
                       if name is not None and name not in _codecs.NATIVE_FORMATS)
# Every format the library reads (``pil_loader`` opens these).
FORMATS = tuple(name for name in _codecs.FORMATS if name is not None)


@dataclasses.dataclass(frozen=True)
class ImageInfo:
    """Size, channels and format of an encoded image, read from its header.

    Examples
    --------
    >>> from dataloader.kernels import ImageInfo
    >>> ImageInfo(height=2, width=3, channels=3, format="PNG").width
    3
    """

    height: int
    width: int
    channels: int
    format: str


def open_with_pillow(file: BinaryIO, formats: Iterable[str]) -> Any:
    """``PIL.Image.open(file)`` by the plugins of ``formats`` only (see the module docstring).

    ``file`` is a binary file object, not a path: Pillow would import the
    plugin of a path's extension. Raises ``ImportError`` without Pillow and
    Pillow's own errors for bytes none of the plugins reads.

    Examples
    --------
    >>> import io
    >>> from PIL import Image as PILImage
    >>> from dataloader._images.decode import open_with_pillow
    >>> buffer = io.BytesIO()
    >>> PILImage.new("RGB", (3, 2)).save(buffer, "GIF")
    >>> open_with_pillow(io.BytesIO(buffer.getvalue()), ["GIF"]).size
    (3, 2)
    >>> eps = io.BytesIO(b"%!PS-Adobe-3.0 EPSF-3.0")
    >>> open_with_pillow(eps, ["GIF", "TIFF"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    PIL.UnidentifiedImageError: cannot identify image file <_io.BytesIO object at 0x...>
    """
    from PIL import Image as PILImage

    formats = list(formats)
    for name in formats:
        # Registered before Image.open runs: an unregistered format would make
        # it load every plugin (Image.init), EPS's included.
        importlib.import_module(f"PIL.{_PLUGINS[name]}")
    return PILImage.open(file, formats=formats)


def _pillow(buf: np.ndarray, fmt, file: BinaryIO | None = None):
    """The Pillow image of ``buf`` (or of ``file``, whose first bytes ``buf`` holds)."""
    if fmt not in PILLOW_FORMATS:
        name = fmt or "an unrecognised format"
        raise ValueError(f"cannot decode image: {name} is not a format this library reads "
                         f"({', '.join(sorted(_codecs.NATIVE_FORMATS))} natively, "
                         f"{', '.join(PILLOW_FORMATS)} through Pillow)")
    try:
        from PIL import Image as PILImage  # noqa: F401 -- only whether Pillow is installed
    except ImportError:
        raise ValueError(f"cannot decode image: no native decoder for {fmt} "
                         f"(JPEG, PNG and WebP are native); {_INSTALL_HINT}") from None
    try:
        return open_with_pillow(file or io.BytesIO(buf.tobytes()), [fmt])
    except Exception as err:  # UnidentifiedImageError, DecompressionBombError, OSError
        raise ValueError(f"cannot decode image: {err}") from err


def _pillow_mode(im) -> str:
    if im.mode == "P":
        return "RGBA" if "transparency" in im.info else "RGB"
    if im.mode in ("1", "L") or im.mode.startswith("I") or im.mode == "F":
        return "L"
    return im.mode if im.mode in CONVERT_MODES else "RGB"


def image_info(data: EncodedBytes) -> ImageInfo:
    """Read the size, channels and format of an encoded image from its header.

    Parameters
    ----------
    data : bytes-like
        The encoded file.

    Returns
    -------
    ImageInfo
        ``channels`` is what :func:`decode` returns with ``mode=None``.

    Raises
    ------
    ValueError
        For empty, corrupt or unrecognised data.

    Examples
    --------
    >>> import io
    >>> from PIL import Image as PILImage
    >>> from dataloader.kernels import image_info
    >>> buffer = io.BytesIO()
    >>> PILImage.new("RGB", (5, 3)).save(buffer, "PNG")
    >>> image_info(buffer.getvalue())
    ImageInfo(height=3, width=5, channels=3, format='PNG')
    """
    buf = bytes_view(data)
    fmt = _codecs.sniff(buf)
    if fmt in _codecs.NATIVE_FORMATS:
        fmt, height, width, channels = _codecs.header_info(buf)
        return ImageInfo(height, width, channels, fmt)
    with _pillow(buf, fmt) as im:
        return ImageInfo(im.height, im.width, CONVERT_MODES[_pillow_mode(im)],
                         im.format or str(fmt))


def file_image_info(file: BinaryIO, max_header_bytes: int = 64 << 20) -> ImageInfo:
    """:func:`image_info` of an open binary file, reading only what its header needs.

    The format is sniffed from the first bytes: anything but the documented
    formats is refused at once; Pillow's formats are read by their plugin,
    which seeks to what it needs (a TIFF's directory may be at the end);
    the native formats' headers from growing prefixes of the file, up to
    ``max_header_bytes``.

    Examples
    --------
    >>> import io
    >>> from PIL import Image as PILImage
    >>> from dataloader._images.decode import file_image_info
    >>> buffer = io.BytesIO()
    >>> PILImage.new("L", (5, 3)).save(buffer, "TIFF")
    >>> file_image_info(buffer)
    ImageInfo(height=3, width=5, channels=1, format='TIFF')
    """
    file.seek(0)
    head = file.read(64)
    fmt = _codecs.sniff(bytes_view(head))
    if fmt not in _codecs.NATIVE_FORMATS:
        with _pillow(bytes_view(head), fmt, file) as im:
            return ImageInfo(im.height, im.width, CONVERT_MODES[_pillow_mode(im)],
                             im.format or str(fmt))
    limit = 1 << 16
    while True:
        file.seek(0)
        data = file.read(limit)
        try:
            return image_info(data)
        except ValueError:
            if len(data) < limit or limit >= max_header_bytes:
                raise
        limit = min(limit * 16, max_header_bytes)


def _check_limits(height, width, channels, max_width, max_height, max_bytes, work=0.0):
    # The Decode transform's check (C), the decoder's memory (``work``) counted,
    # then the image rule: Pillow reads some formats (GIF, BMP, TIFF) with a zero side.
    _codecs.check_limits(height, width, channels, max_width, max_height, max_bytes, work)
    check_image_shape((height, width, channels), "HWC", "the decoded image")


def decode(data: EncodedBytes, *, mode: str | None = None, out: np.ndarray | None = None,
           min_size: Sequence[int] | None = None, max_width: int = MAX_SIDE,
           max_height: int = MAX_SIDE, max_bytes: int = MAX_BYTES) -> np.ndarray:
    """Decode a JPEG, PNG or WebP image (GIF, BMP, TIFF through Pillow) into uint8 HWC.

    Parameters
    ----------
    data : bytes-like
        The encoded file; the format is read from its first bytes.
    mode : {None, "L", "RGB", "RGBA"}
        None keeps the image's own channels (1, 2, 3 or 4; palettes become RGB,
        or RGBA with transparency; CMYK JPEGs become RGB); otherwise converted
        as Pillow's ``Image.convert`` does.
    out : ndarray, optional
        uint8 destination of the decoded shape.  Pixels within a row must be
        packed, rows may be further apart (e.g. a slot of a larger canvas).
    min_size : (int, int), optional
        For JPEG, decode at the smallest DCT scale (1/8, 2/8, ..., 7/8) whose
        output is still at least this (height, width); ignored otherwise.
    max_width, max_height, max_bytes : int
        Limits on the decoded size, checked from the header before any
        pixel memory is allocated. ``max_bytes`` counts the decoder's own
        memory too: a progressive JPEG's coefficients (2 bytes per sample of
        every component) and an interlaced PNG's or a WebP's whole image
        when it is converted to other channels.

    Returns
    -------
    ndarray
        ``(H, W, C)`` uint8, or ``out``.

    Raises
    ------
    ValueError
        For empty, truncated or corrupt data (with the codec's message), a
        size over a limit, an unsupported format without Pillow, or an
        ``out`` of the wrong shape or dtype.

    Notes
    -----
    A JPEG that libjpeg-turbo decodes with a warning (truncated or corrupt
    entropy data, which it would fill with gray) is an error.  16-bit PNG
    samples keep their high byte, as Pillow does; a tRNS chunk on a gray or
    RGB PNG is ignored (Pillow keeps it as metadata, not as an alpha channel).
    The size limits apply to the decoded size, after any DCT scaling.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> from PIL import Image as PILImage
    >>> from dataloader.kernels import decode
    >>> buffer = io.BytesIO()
    >>> PILImage.new("RGB", (4, 2), (10, 20, 30)).save(buffer, "PNG")
    >>> pixels = decode(buffer.getvalue())
    >>> pixels.shape, pixels[0, 0].tolist()
    ((2, 4, 3), [10, 20, 30])
    >>> decode(buffer.getvalue(), mode="L")[0, 0].tolist()
    [18]
    """
    # bytes, the usual input, go to the codecs as they are (non-empty).
    buf = data if type(data) is bytes and data else bytes_view(data)
    channels = _mode_channels(mode)
    limits = (check_int("max_width", max_width, 1), check_int("max_height", max_height, 1),
              check_int("max_bytes", max_bytes, 1, MAX_BYTES))
    if out is None and min_size is None:
        # The common case in one native call: header, limits, a new array, decode.
        image = _codecs.decode_new(buf, channels, *limits)
        if image is not None:
            return image
    fmt = _codecs.sniff(buf)
    if fmt not in _codecs.NATIVE_FORMATS:
        return _decode_pillow(bytes_view(buf), fmt, mode, out, limits)
    fmt, height, width, header_channels = _codecs.header_info(buf)
    channels = channels or header_channels
    scale = 8
    if min_size is not None:
        min_h, min_w = check_size("min_size", min_size, allow_int=False)
        if fmt == "JPEG":
            scale = _codecs.jpeg_scale_for(height, width, min_h, min_w)
            height, width = _codecs.jpeg_scaled_size(height, width, scale)
    _check_limits(height, width, channels, *limits, _codecs.decode_work(buf, channels))
    result, target = _decode_target(out, (height, width, channels))
    _codecs.decode_into(buf, target, scale)
    return result


def _mode_channels(mode) -> int:
    """The channels of ``mode``, 0 for None (the image's own)."""
    if mode is None:
        return 0
    if type(mode) is not str or mode not in CHANNELS:
        check_choice("mode", mode, (None, *CHANNELS))
    return CHANNELS[mode]


def _decode_target(out, shape):
    # A given out may be 2-D for one channel, and its rows strided.
    return output(out, shape, np.uint8, flat=out is not None, rows=True)


def _decode_pillow(buf, fmt, mode, out, limits):
    with _pillow(buf, fmt) as im:
        target_mode = mode or _pillow_mode(im)
        channels = CONVERT_MODES[target_mode]
        _check_limits(im.height, im.width, channels, *limits)
        result, target = _decode_target(out, (im.height, im.width, channels))
        try:
            im.load()
            if im.mode.startswith("I;16"):
                # 16-bit gray: keep the high byte, as for native 16-bit PNGs.
                from PIL import Image as PILImage

                im = PILImage.fromarray((np.asarray(im) >> 8).astype(np.uint8))
            array = np.asarray(im.convert(target_mode))
        except Exception as err:
            raise ValueError(f"cannot decode image: {err}") from err
    target[...] = array.reshape(target.shape)
    return result
