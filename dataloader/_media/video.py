"""Choosing video frames (by index, by timestamp, as clips) and decoding them.

A video's frames are numbered in presentation order, 0 first, from the
timestamps of every packet of the stream (read, not decoded: see
``src/dl_video.c``); frame ``i`` is shown from its timestamp until frame
``i + 1``'s, and the last for as long as the one before it. Every way of
choosing frames becomes a list of frame numbers here; the native side
decodes each distinct one once, in order, straight into the result.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from dataloader._images.arguments import (
    MAX_BYTES,
    check_choice,
    check_int,
    check_real,
    check_size,
)
from dataloader._media.source import MediaSource, native_media, open_media

__all__ = ["Clip", "FrameGeometry", "FrameSelection", "Timestamps", "decode_frames",
           "decode_video", "frame_numbers", "output_size", "shown_at", "source_box"]

# A timestamp this close to a frame's (in seconds) is that frame's: times
# written as decimals (0.04) are not exact in binary.
_TOLERANCE = 1e-6


class FrameSelection(Protocol):
    """Frames chosen by rule (``Timestamps``, ``Clip``, a ``ClipSampler``'s clip):
    the frame numbers it picks of a video whose frames are shown from ``times``."""

    def frame_numbers(self, times: np.ndarray) -> np.ndarray: ...


@dataclasses.dataclass(frozen=True)
class Timestamps:
    """Frames chosen by time: for each time (seconds of the stream's timeline),
    the frame shown then.

    Examples
    --------
    >>> from dataloader.kernels import Timestamps
    >>> Timestamps([0.5, 1.0]).seconds
    (0.5, 1.0)
    """

    seconds: Sequence[float]

    def __post_init__(self):
        if isinstance(self.seconds, (str, bytes)) or not isinstance(self.seconds, Sequence):
            raise TypeError(f"seconds must be a sequence of numbers, got {self.seconds!r}")
        object.__setattr__(self, "seconds", tuple(
            check_real(f"seconds[{i}]", value) for i, value in enumerate(self.seconds)))

    def frame_numbers(self, times: np.ndarray) -> np.ndarray:
        """The frames shown at ``self.seconds``, of frames shown from ``times``."""
        return shown_at(np.asarray(self.seconds, np.float64), times)


@dataclasses.dataclass(frozen=True)
class Clip:
    """``num_frames`` frames from the one shown at ``start`` seconds (of the
    stream's timeline; None: from the first frame, wherever the timeline
    starts): every ``stride``-th frame, or, with ``fps``, the frames shown
    at ``fps`` times a second (a frame repeats when ``fps`` is above the
    video's rate).

    Examples
    --------
    >>> from dataloader.kernels import Clip
    >>> Clip(16, start=2.0, fps=8.0)
    Clip(num_frames=16, start=2.0, stride=1, fps=8.0)
    """

    num_frames: int
    start: float | None = None
    stride: int = 1
    fps: float | None = None

    def __post_init__(self):
        check_int("num_frames", self.num_frames, 1, 1 << 20)
        check_int("stride", self.stride, 1, 1 << 20)
        if self.start is not None and check_real("start", self.start) < 0:
            raise ValueError(f"start must be >= 0 seconds, got {self.start}")
        if self.fps is not None and check_real("fps", self.fps) <= 0:
            raise ValueError(f"fps must be > 0, got {self.fps}")
        if self.fps is not None and self.stride != 1:
            raise ValueError("a clip takes stride or fps, not both")

    def frame_numbers(self, times: np.ndarray) -> np.ndarray:
        """The clip's frames, of frames shown from ``times``."""
        start = float(times[0]) if self.start is None else self.start
        if self.fps is not None:
            return shown_at(start + np.arange(self.num_frames) / self.fps, times)
        first = int(shown_at(np.array([start]), times)[0])
        last = first + (self.num_frames - 1) * self.stride
        if last >= len(times):
            raise ValueError(f"a clip of {self.num_frames} frames {self.stride} apart from frame "
                             f"{first} ({start:g} s) needs frame {last}; the video has "
                             f"{len(times)}")
        return np.arange(first, last + 1, self.stride, dtype=np.int64)


def decode_video(source: MediaSource, frames: Sequence[int] | FrameSelection | None = None, *,
                 size: int | Sequence[int] | None = None, crop: Sequence[int] | None = None,
                 interpolation: str = "bilinear", threads: int = 1,
                 out: np.ndarray | None = None) -> np.ndarray:
    """Decode chosen frames of a video into uint8 ``(T, H, W, 3)`` RGB.

    Parameters
    ----------
    source : path or bytes-like
        The file, or its bytes. Its best video stream is decoded (FFmpeg's choice).
    frames : sequence of int, Timestamps, Clip, ClipSampler's clip or None
        Frame numbers (0 is the first frame shown; in any order, repeats
        allowed), the frames shown at given times, or a clip; None for
        every frame.
    size : int or (int, int), optional
        Resize each frame at decode to (height, width), or its shorter side
        to an int keeping the aspect ratio; full-size frames are then never
        made.
    crop : (int, int, int, int), optional
        ``(top, left, height, width)`` of the decoded frame to keep, before
        the resize.
    interpolation : {"nearest", "bilinear", "bicubic", "area"}
        libswscale's filter for the resize (and for chroma).
    threads : int, default 1
        The decoder's own threads; 1 is none (a loader's workers are the
        parallelism), 0 lets FFmpeg choose.
    out : ndarray, optional
        A C-contiguous, writable uint8 ``(T, H, W, 3)`` array of the result's
        shape to decode into (a slot of a batch, say); returned.

    Returns
    -------
    ndarray
        uint8 ``(T, H, W, 3)``, in the order of ``frames`` (``out`` when given).

    Raises
    ------
    IndexError
        A frame number outside the video.
    ValueError
        A time or a clip outside the video, no video stream, or a corrupt or
        truncated file (naming the file, the frame and the byte offset).
    ImportError
        The library was built without FFmpeg's libraries.

    Notes
    -----
    Colours follow the stream's matrix and range (BT.601 when untagged).
    The decoder seeks to the keyframe before each frame it needs unless
    decoding on from the last one is shorter; timestamps are matched
    exactly, so variable frame rates, B-frames and timelines that do not
    start at 0 give the same frames as decoding every frame in order.

    Examples
    --------
    >>> from dataloader._media.samples import sample_video
    >>> from dataloader.kernels import Clip, Timestamps, decode_video
    >>> path = sample_video()                      # 2 s, 50 frames of 120x208
    >>> clip = decode_video(path, Clip(4, start=0.5, stride=2), size=(64, 96))
    >>> clip.shape, clip.dtype
    ((4, 64, 96, 3), dtype('uint8'))
    >>> decode_video(path, [49, 0]).shape           # frame numbers, in any order
    (2, 120, 208, 3)
    >>> decode_video(path, Timestamps([1.0]), size=60).shape   # the shorter side to 60
    (1, 60, 104, 3)
    """
    check_choice("interpolation", interpolation, tuple(native_media().FILTERS))
    threads = check_int("threads", threads, 0, 64)

    def geometry(height: int, width: int) -> FrameGeometry:
        box = _crop_box(crop, height, width)
        return FrameGeometry(box, output_size(size, box[2], box[3]), interpolation, out)

    return decode_frames(source, frames, geometry, threads)


@dataclasses.dataclass(frozen=True)
class FrameGeometry:
    """What a decode makes of a stream's frames: the ``box`` ``(top, left, height,
    width)`` cut from each (its top and left rounded down to the chroma grid,
    ``src/dl_video.c``), resized to ``size`` ``(height, width)`` with
    ``interpolation``, and written into ``out`` when it is not None (an array
    of the result's shape)."""

    box: tuple[int, int, int, int]
    size: tuple[int, int]
    interpolation: str
    out: np.ndarray | None = None


def decode_frames(source: MediaSource, frames: Any,
                  geometry: Callable[[int, int], FrameGeometry], threads: int = 1) -> np.ndarray:
    """``decode_video`` with the crop, size and output chosen by ``geometry(height,
    width)`` of the stream's frames once the file is open (a clip transform's
    crop is drawn against them, ``_media/crops.py``); ``threads`` checked."""
    filters = native_media().FILTERS
    with open_media(source) as media:
        stream = _video_stream(media)
        pts = media.frame_pts(stream["index"])
        if len(pts) == 0:
            raise ValueError(f"cannot decode video {media.name}: the video stream has no frames")
        wanted = frame_numbers(frames, pts / _ticks_per_second(stream))
        chosen = geometry(stream["height"], stream["width"])
        height, width = chosen.size
        out = chosen.out
        distinct, order = np.unique(wanted, return_inverse=True)
        _check_bytes(len(distinct), height, width)
        in_order = len(distinct) == len(wanted) and bool(np.all(distinct == wanted))
        if out is not None:
            _check_out(out, (len(wanted), height, width, 3))
        decoded = out if in_order and out is not None else np.empty(
            (len(distinct), height, width, 3), np.uint8)
        media.decode_frames_into(distinct, decoded, chosen.box, filters[chosen.interpolation],
                                 threads)
    if in_order:
        return decoded
    if out is None:
        return decoded[order.reshape(-1)]
    np.take(decoded, order.reshape(-1), axis=0, out=out)
    return out


def source_box(box: tuple[int, int, int, int], frame: tuple[int, int],
               stream: tuple[int, int]) -> tuple[int, int, int, int]:
    """The box of the stream's frames (``stream``: height, width) under ``box`` of the
    same frames resized to ``frame``: each edge scaled and rounded to the nearest
    pixel, the box at least one pixel high and wide and inside the frame."""
    sides = []
    for start, length, scaled, full in ((box[0], box[2], frame[0], stream[0]),
                                        (box[1], box[3], frame[1], stream[1])):
        ratio = full / scaled
        first = min(round(start * ratio), full - 1)
        sides.append((first, max(1, min(round((start + length) * ratio), full) - first)))
    return sides[0][0], sides[1][0], sides[0][1], sides[1][1]


def frame_numbers(frames: Any, times: np.ndarray) -> np.ndarray:
    """The frame numbers ``frames`` chooses, as int64, for a video whose frames
    are shown from ``times`` (seconds, ascending; at least one): all for
    None, a selection's own ``frame_numbers(times)`` (``Timestamps``,
    ``Clip``, a clip sampler's), else the numbers given."""
    if frames is None:
        return np.arange(len(times), dtype=np.int64)
    choose = getattr(frames, "frame_numbers", None)
    if choose is not None:
        return choose(times)
    return _indices(frames, len(times))


def _indices(frames: Any, count: int) -> np.ndarray:
    if isinstance(frames, (str, bytes)) or not isinstance(frames, (Sequence, np.ndarray)):
        raise TypeError("frames must be a sequence of frame numbers, Timestamps, a Clip or "
                        f"None, got {type(frames).__name__}")
    wanted = np.asarray(frames)
    if wanted.ndim != 1 or not (wanted.size == 0 or np.issubdtype(wanted.dtype, np.integer)):
        raise TypeError(f"frames must be a flat sequence of ints, got {frames!r}")
    outside = wanted[(wanted < 0) | (wanted >= count)]
    if outside.size:
        raise IndexError(f"frame {int(outside[0])} is outside the video's {count} frames "
                         f"(0..{count - 1})")
    return wanted.astype(np.int64)


def _end(times: np.ndarray) -> float:
    """When the last frame stops being shown: as long after it as it came after its
    predecessor (never, for a video of one frame)."""
    return float(2 * times[-1] - times[-2]) if len(times) > 1 else np.inf


def shown_at(seconds: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The frames shown at ``seconds``, of frames shown from ``times``."""
    wanted = np.searchsorted(times, seconds + _TOLERANCE, side="right") - 1
    end = _end(times)
    outside = seconds[(wanted < 0) | (seconds >= end)]
    if outside.size:
        raise ValueError(f"no frame is shown at {float(outside[0]):g} s: the video shows "
                         f"frames from {float(times[0]):g} s to {end:g} s")
    return wanted.astype(np.int64)


def _video_stream(media: Any) -> dict:
    index = media.best_stream("video")
    if index < 0:
        raise ValueError(f"cannot decode video {media.name}: the file has no video stream")
    stream = media.streams()[index]
    if not stream["width"] or not stream["height"]:
        raise ValueError(f"cannot decode video {media.name}: the stream does not say its size")
    return stream


def _ticks_per_second(stream: dict) -> float:
    numerator, denominator = stream["time_base"]
    return denominator / numerator


def _crop_box(crop: Any, height: int, width: int) -> tuple[int, int, int, int]:
    if crop is None:
        return 0, 0, height, width
    if isinstance(crop, (str, bytes)) or not isinstance(crop, Sequence) or len(crop) != 4:
        raise TypeError(f"crop must be (top, left, height, width), got {crop!r}")
    top, left = check_int("crop[0]", crop[0]), check_int("crop[1]", crop[1])
    box_h, box_w = check_int("crop[2]", crop[2], 1), check_int("crop[3]", crop[3], 1)
    if top + box_h > height or left + box_w > width:
        raise ValueError(f"crop {tuple(crop)} is outside the {height}x{width} frames")
    return top, left, box_h, box_w


def output_size(size: Any, height: int, width: int) -> tuple[int, int]:
    """The ``(height, width)`` that ``decode_video``'s ``size`` makes of frames of
    ``height`` x ``width`` (None: the same)."""
    if size is None:
        return height, width
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        shorter = check_int("size", size, 1)
        scale = shorter / min(height, width)
        return (max(1, round(height * scale)) if height > width else shorter,
                max(1, round(width * scale)) if width > height else shorter)
    return check_size("size", tuple(size) if isinstance(size, list) else size)


def _check_out(out: Any, shape: tuple[int, ...]) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
    if (out.shape != shape or out.dtype != np.uint8 or not out.flags.c_contiguous
            or not out.flags.writeable):
        raise ValueError(f"out must be a writable C-contiguous uint8 array of shape {shape}, got "
                         f"{'' if out.flags.writeable else 'a read-only '}{out.dtype} array of "
                         f"shape {out.shape}{'' if out.flags.c_contiguous else ', strided'}")


def _check_bytes(count: int, height: int, width: int) -> None:
    total = count * height * width * 3
    if total > MAX_BYTES:
        raise ValueError(f"{count} frames of {height}x{width} would take {total:,} bytes, "
                         f"more than the limit of {MAX_BYTES:,}")
