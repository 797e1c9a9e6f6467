"""Decoding audio into float32 ``(channels, n)``, resampled, within a time window."""

from __future__ import annotations

import numpy as np

from dataloader._images.arguments import check_int, check_real
from dataloader._media.source import MediaSource, open_media

__all__ = ["decode_audio"]

# What the output may ask for: what a stream may claim (dl_media.h's DL_AUDIO_MAX_*).
MAX_SAMPLE_RATE = 768_000
MAX_CHANNELS = 64


def decode_audio(source: MediaSource, *, sample_rate: int | None = None,
                 channels: int | None = None, start: float = 0.0,
                 end: float | None = None) -> np.ndarray:
    """Decode a file's audio into float32 ``(channels, n)``, resampled by libswresample.

    Parameters
    ----------
    source : path or bytes-like
        The file, or its bytes. Its best audio stream is decoded (FFmpeg's choice).
    sample_rate : int, optional
        Samples per second of the result; the stream's own by default.
    channels : int, optional
        Channels of the result, in FFmpeg's default layout for that count
        (1: mono, 2: stereo, ...), mixed as libswresample mixes; the
        stream's own count by default.
    start, end : float
        The window, in seconds of the stream's timeline: the samples from
        ``start`` up to (not including) ``end``; ``end=None`` is the end of
        the stream.

    Returns
    -------
    ndarray
        float32 ``(channels, n)``.

    Raises
    ------
    ValueError
        No audio stream, a bad window, or a corrupt or truncated file
        (naming the file and the position).
    ImportError
        The library was built without FFmpeg's libraries.

    Notes
    -----
    A window's samples are the whole stream's resampled samples at the same
    positions; decoding stops at the window's end. Output sample ``k`` is
    at ``t0 + k / sample_rate`` seconds, ``t0`` being the first decoded
    frame's timestamp. A window starting 4 s or more into the stream is
    reached by a seek to 1 s before it, where the decoder and the resampler
    (started in the whole stream's phase) settle; otherwise, or when the
    seek cannot land there, the stream is decoded from its start.

    Examples
    --------
    >>> from dataloader._media.samples import sample_audio
    >>> from dataloader.kernels import decode_audio
    >>> path = sample_audio()                      # 2 s of stereo AAC at 44.1 kHz
    >>> samples = decode_audio(path, sample_rate=16000, channels=1, start=0.5, end=1.5)
    >>> samples.shape, samples.dtype
    ((1, 16000), dtype('float32'))
    """
    if check_real("start", start) < 0:
        raise ValueError(f"start must be >= 0 seconds, got {start}")
    if end is not None and check_real("end", end) <= start:
        raise ValueError(f"end must be after start ({start} s), got {end}")
    with open_media(source) as media:
        index = media.best_stream("audio")
        if index < 0:
            raise ValueError(f"cannot decode audio {media.name}: the file has no audio stream")
        stream = media.streams()[index]
        rate = stream["sample_rate"] if sample_rate is None else sample_rate
        count = stream["channels"] if channels is None else channels
        return media.decode_audio(index, check_int("sample_rate", rate, 1, MAX_SAMPLE_RATE),
                                  check_int("channels", count, 1, MAX_CHANNELS), start,
                                  -1.0 if end is None else end)
