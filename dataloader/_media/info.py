"""The streams of a video or audio file: codec, duration, frame rate, frames."""

from __future__ import annotations

import dataclasses

from dataloader._media.source import MediaSource, open_media

__all__ = ["AUDIO_EXTENSIONS", "MEDIA_EXTENSIONS", "VIDEO_EXTENSIONS", "StreamInfo", "media_info"]

# The video and audio files a folder holds, by suffix (``dataloader info``, ``VideoFolder``).
VIDEO_EXTENSIONS = (".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".ts", ".mpg", ".mpeg")
AUDIO_EXTENSIONS = (".m4a", ".mp3", ".wav", ".flac", ".ogg", ".opus", ".aac")
MEDIA_EXTENSIONS = VIDEO_EXTENSIONS + AUDIO_EXTENSIONS


@dataclasses.dataclass(frozen=True)
class StreamInfo:
    """One stream of a media file, as :func:`media_info` reports it.

    ``frames`` of a video stream is counted from its packets (every frame
    shown, whatever the container declares) and ``frame_rate`` is their
    average rate, from the first frame's timestamp to the last's (the
    container's nominal rate for a single frame); ``duration`` is the
    container's (None when it does not say).

    Examples
    --------
    >>> from dataloader.kernels import StreamInfo
    >>> StreamInfo(index=0, kind="audio", codec="aac", duration=2.0, sample_rate=44100,
    ...            channels=2).frames is None
    True
    """

    index: int
    kind: str                      # "video", "audio" or "other"
    codec: str
    duration: float | None = None  # seconds
    frame_rate: float | None = None
    frames: int | None = None
    width: int | None = None
    height: int | None = None
    sample_rate: int | None = None
    channels: int | None = None


def media_info(source: MediaSource) -> list[StreamInfo]:
    """The streams of a video or audio file (every video stream's packets are
    read to count its frames; nothing is decoded).

    Raises ``ValueError`` for a file FFmpeg cannot read.

    Examples
    --------
    >>> from dataloader._media.samples import sample_video
    >>> from dataloader.kernels import media_info
    >>> [(s.kind, s.codec, s.frames, s.frame_rate) for s in media_info(sample_video())]
    [('video', 'h264', 50, 25.0)]
    """
    with open_media(source, probe_streams=True) as media:
        return [_stream_info(media, stream) for stream in media.streams()]


def _stream_info(media, stream: dict) -> StreamInfo:
    facts = {"index": stream["index"], "kind": stream["kind"], "codec": stream["codec"],
             "duration": stream["duration"]}
    if stream["kind"] == "video":
        pts = media.frame_pts(stream["index"])
        numerator, denominator = stream["time_base"]
        span = float(pts[-1] - pts[0]) * numerator / denominator if len(pts) > 1 else 0.0
        facts.update(frame_rate=(len(pts) - 1) / span if span > 0 else stream["frame_rate"],
                     width=stream["width"], height=stream["height"], frames=len(pts))
    elif stream["kind"] == "audio":
        facts.update(sample_rate=stream["sample_rate"], channels=stream["channels"])
    return StreamInfo(**facts)
