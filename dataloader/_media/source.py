"""Opening a video or audio file given as a path or as bytes.

The native module exists only when the library was built with FFmpeg's
libraries; without it every entry point raises ``ImportError`` saying what
to install, at the call, so that importing ``dataloader.kernels`` never
fails for it.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, TypeAlias

import numpy as np

# A media file: its path, or its encoded bytes.
MediaSource: TypeAlias = str | os.PathLike | bytes | bytearray | memoryview | np.ndarray

FFMPEG_PACKAGES = ("libavformat-dev libavcodec-dev libavutil-dev libswscale-dev "
                   "libswresample-dev pkg-config")


def open_media(source: MediaSource, probe_streams: bool = False) -> Any:
    """A ``MediaFile`` (``_core/media.pyx``) over ``source``, to use in a ``with``.

    ``ValueError`` for empty bytes, ``OSError`` for a file that cannot be
    read, ``TypeError`` for anything else than a path or bytes.
    """
    media = native_media()
    if isinstance(source, (str, os.PathLike)):
        return media.MediaFile(source, repr(os.fsdecode(source)), probe_streams)
    if isinstance(source, np.ndarray) and (source.dtype != np.uint8 or source.ndim != 1):
        raise TypeError(f"a media file's bytes must be a 1-D uint8 array, got a {source.dtype} "
                        f"array of shape {source.shape}")
    try:
        data = np.frombuffer(source, np.uint8)
    except (TypeError, ValueError, BufferError) as err:
        raise TypeError("a media file must be a path or bytes-like, got "
                        f"{type(source).__name__}") from err
    if data.size == 0:
        raise ValueError("cannot decode media: the data is empty (0 bytes)")
    return media.MediaFile(data, f"<{data.size} bytes>", probe_streams)


def native_media() -> Any:
    """``dataloader._core.media``, or ``ImportError`` saying what to install."""
    try:
        media = importlib.import_module("dataloader._core.media")
    except ImportError as err:
        raise ImportError(
            "video and audio decoding needs FFmpeg's libraries when dataloader is built: "
            f"apt-get install {FFMPEG_PACKAGES}, then reinstall dataloader") from err
    return media
