"""Sample videos and audio for examples, tests and benchmarks, made by the
``ffmpeg`` command (Debian's ``ffmpeg`` package) from its generated patterns.

``testsrc2`` is a moving pattern, so every frame differs from the next and
a frame off by one shows; the audio is two tones, one per channel.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["encode", "pattern_input", "sample_audio", "sample_video", "tones_input"]


def pattern_input(height: int = 120, width: int = 208, rate: int = 25,
                  seconds: float = 2.0) -> list[str]:
    """ffmpeg's input arguments of the moving ``testsrc2`` pattern."""
    return ["-f", "lavfi", "-i", f"testsrc2=size={width}x{height}:rate={rate}:duration={seconds}"]


def tones_input(sample_rate: int = 44100, seconds: float = 2.0) -> list[str]:
    """ffmpeg's input arguments of a stereo signal: 440 Hz left, 660 Hz right."""
    return ["-f", "lavfi", "-i", f"aevalsrc=0.5*sin(440*2*PI*t)|0.3*sin(660*2*PI*t)"
                                 f":s={sample_rate}:d={seconds}"]


def encode(arguments: Sequence[str], path: Path) -> Path:
    """Run ``ffmpeg`` with ``arguments`` (inputs, codecs) writing ``path``; the file
    appears only once complete. ``RuntimeError`` says how to install ffmpeg."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise RuntimeError("making sample media needs the ffmpeg command: apt-get install ffmpeg")
    partial = path.with_name("partial-" + path.name)
    done = subprocess.run([ffmpeg, "-nostdin", "-loglevel", "error", "-y", *arguments,
                           str(partial)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"ffmpeg could not make {path.name}: {done.stderr.strip()}")
    return partial.replace(path)


def sample_video(folder: Path | None = None, name: str = "sample.mp4") -> Path:
    """A 2-second 208x120 H.264 video of 50 frames with B-frames (a new file in
    ``folder``, by default a new temporary folder).

    Examples
    --------
    >>> from dataloader._media.samples import sample_video
    >>> sample_video().stat().st_size > 0
    True
    """
    folder = Path(tempfile.mkdtemp()) if folder is None else folder
    return encode([*pattern_input(), "-c:v", "libx264", "-preset", "veryfast", "-bf", "3",
                   "-pix_fmt", "yuv420p"], folder / name)


def sample_audio(folder: Path | None = None, name: str = "sample.m4a") -> Path:
    """A 2-second stereo AAC file at 44.1 kHz of two tones.

    Examples
    --------
    >>> from dataloader._media.samples import sample_audio
    >>> sample_audio().suffix
    '.m4a'
    """
    folder = Path(tempfile.mkdtemp()) if folder is None else folder
    return encode([*tones_input(), "-c:a", "aac"], folder / name)
