"""Sample videos and audio for examples, tests and benchmarks, made by the
``ffmpeg`` command (Debian's ``ffmpeg`` package).

Videos are a camera pan over a real photograph (``photo_input``: one of
Debian's wallpaper photographs when installed, else one of scikit-image's
bundled ones), or ffmpeg's generated ``testsrc2`` pattern
(``pattern_input``) where neither is there. Both move, so every frame
differs from the next and a frame off by one shows; the photograph gives
the codecs natural texture to code. The audio is two tones, one per channel.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from dataloader._images.samples import INSTALLED_PHOTOS

__all__ = ["encode", "find_photograph", "pan_arguments", "pattern_input", "photo_input",
           "photographs", "sample_audio", "sample_video", "tones_input"]

# scikit-image's bundled colour photographs, by file name, when no
# installed one is found (read from its package folder: nothing imported).
BUNDLED_PHOTOS = ("coffee.png", "chelsea.png", "astronaut.png", "rocket.jpg")


def pattern_input(height: int = 120, width: int = 208, rate: int = 25,
                  seconds: float = 2.0) -> list[str]:
    """ffmpeg's input arguments of the moving ``testsrc2`` pattern."""
    return ["-f", "lavfi", "-i", f"testsrc2=size={width}x{height}:rate={rate}:duration={seconds}"]


def photographs() -> list[Path]:
    """The photographs on this machine: the installed ones (``INSTALLED_PHOTOS``) when
    there are any, else scikit-image's bundled ones (maybe none)."""
    installed = [path for path in map(Path, INSTALLED_PHOTOS) if path.is_file()]
    if installed:
        return installed
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        return []
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    return [path for path in (data / name for name in BUNDLED_PHOTOS) if path.is_file()]


def find_photograph() -> Path | None:
    """The first of ``photographs()``, or None."""
    return next(iter(photographs()), None)


def pan_arguments(photo: Path, height: int, width: int, rate: int,
                  seconds: float) -> list[str]:
    """ffmpeg's input and filter arguments of a camera pan over ``photo``: scaled to twice
    the frame's height, a ``width`` x ``height`` window moving left to right and up and
    down, at least a pixel a frame."""
    travel = f"(iw-{width})*t/{seconds:g}"
    bob = f"(ih-{height})/2*(1+sin(2*PI*t/{seconds:g}))"
    return ["-loop", "1", "-framerate", str(rate), "-t", f"{seconds:g}", "-i", str(photo),
            "-vf", f"scale=-2:{2 * height}:flags=bicubic,scale='max(iw,{2 * width})':-2,"
                   f"crop={width}:{height}:x='{travel}':y='{bob}'"]


def photo_input(folder: Path, height: int = 120, width: int = 208, rate: int = 25,
                seconds: float = 2.0, photo: Path | None = None) -> list[str]:
    """ffmpeg's input arguments of a camera pan over a photograph, ``width`` x ``height``
    at ``rate`` frames a second.

    The photograph (``photo``, else ``find_photograph()``) is panned over as
    ``pan_arguments`` says; the pan is encoded once, losslessly, into
    ``folder`` and that file is the input (so the outputs' own filters
    apply after it). Without any photograph, ``pattern_input``'s arguments.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from dataloader._media.samples import photo_input
    >>> photo_input(Path(tempfile.mkdtemp()), seconds=0.4)[0]
    '-i'
    """
    photo = photo or find_photograph()
    if photo is None:
        return pattern_input(height, width, rate, seconds)
    pan = folder / f"pan-{photo.stem}-{width}x{height}-{rate}-{seconds:g}.nut"
    if not pan.exists():
        arguments = pan_arguments(photo, height, width, rate, seconds)
        arguments[-1] += ",format=yuv444p"
        encode([*arguments, "-c:v", "ffv1", "-f", "nut"], pan)
    return ["-i", str(pan)]


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
    """A 2-second 208x120 H.264 video of 50 frames with B-frames, panning over a
    photograph (``photo_input``): a new file in ``folder``, by default a new
    temporary folder.

    Examples
    --------
    >>> from dataloader._media.samples import sample_video
    >>> sample_video().stat().st_size > 0
    True
    """
    folder = Path(tempfile.mkdtemp()) if folder is None else folder
    return encode([*photo_input(folder), "-c:v", "libx264", "-preset", "veryfast", "-bf", "3",
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
