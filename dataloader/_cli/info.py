"""``dataloader info``: format, size, channels and EXIF orientation of image files,
and the streams of video and audio files.

An image's headers are read, never its pixels; a file whose first bytes are
no image format's is read as video or audio by FFmpeg (its packets, to count
the frames, never decoded). A folder stands for the images, videos and
audio files under it, found by extension as ``show`` and ``bench`` find
images.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from dataloader._cli.bench import format_table
from dataloader._cli.common import error_message, wrap
from dataloader._core.codecs import MODES, sniff
from dataloader._errors import CommandError, UsageError
from dataloader._images.decode import file_image_info
from dataloader._images.exif import ORIENTATIONS, orientation
from dataloader._images.folder import IMAGE_EXTENSIONS
from dataloader._media.info import MEDIA_EXTENSIONS, StreamInfo, media_info

__all__ = ["add_info_command", "file_info", "media_file_info"]

# Pixel mode names by channel count, as ``info`` prints them.
_MODES = {channels: mode for mode, channels in MODES.items()}


def add_info_command(commands: Any) -> None:
    """Register ``info`` on the command line's subcommand parsers.

    Examples
    --------
    >>> import argparse
    >>> from dataloader._cli.info import add_info_command
    >>> parser = argparse.ArgumentParser(prog="dataloader")
    >>> add_info_command(parser.add_subparsers(dest="command"))
    >>> parser.parse_args(["info", "--json", "photo.jpg"]).json
    True
    """
    info = commands.add_parser(
        "info", help="image files' format, size and orientation; video and audio files' streams",
        description=wrap("Read each image's header (never its pixels) and print its format, "
                    "size, channels, the mode it decodes to, and its EXIF orientation (JPEG, "
                    "PNG and WebP; '-' when absent). For a video or audio file, print each "
                    "stream's kind, codec, duration, frame rate and frame count (counted from "
                    "the packets, nothing decoded), size or sample rate and channels."),
        epilog="examples:\n  dataloader info photo.jpg\n  dataloader info train/\n"
               "  dataloader info --json train/*/*.jpg\n  dataloader info clip.mp4 speech.wav",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    info.add_argument("files", nargs="+", type=Path, metavar="PATH",
                      help="image, video or audio files, or folders whose files (by extension) "
                           "to read")
    info.add_argument("--json", action="store_true", help="one JSON object per line")
    info.set_defaults(run=_info)


def _info(args: argparse.Namespace) -> int:
    missing = [str(path) for path in args.files if not path.exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")
    images, media = [], []
    failed = 0
    for path in _files(args.files):
        try:
            if _is_image(path):
                images.append(file_info(path))
            else:
                media.append(media_file_info(path))
        except (OSError, ValueError, ImportError) as err:
            failed += 1
            print(f"dataloader info: {path}: {error_message(err)}", file=sys.stderr)
    if args.json:
        for row in images + media:
            print(json.dumps(row))
        return 1 if failed else 0
    if images:
        headers = ["file", "format", "size", "channels", "mode", "orientation", "bytes"]
        print(format_table(headers, [[
            row["file"], row["format"], f"{row['width']}x{row['height']}", str(row["channels"]),
            row["mode"], _orientation_text(row["orientation"]), f"{row['bytes']:,}",
        ] for row in images], align="llrrllr"))
    if media:
        print("\n" if images else "", end="")
        print(_streams_table(media))
    return 1 if failed else 0


def _is_image(path: Path) -> bool:
    """Whether the file starts as an image format does (else it is read as media)."""
    with open(path, "rb") as file:
        head = file.read(64)
    return bool(head) and sniff(head) is not None


def _streams_table(rows: list[dict[str, Any]]) -> str:
    headers = ["file", "stream", "kind", "codec", "duration", "rate", "frames", "size"]
    table = []
    for row in rows:
        for stream in map(lambda facts: StreamInfo(**facts), row["streams"]):
            table.append([row["file"], str(stream.index), stream.kind, stream.codec,
                          _number(stream.duration, " s"), *_stream_facts(stream)])
    return format_table(headers, table, align="lrllrrrr")


def _stream_facts(stream: StreamInfo) -> list[str]:
    """The rate, frames and size columns of a stream."""
    if stream.kind == "video":
        return [_number(stream.frame_rate, " fps"), str(stream.frames),
                f"{stream.width}x{stream.height}"]
    if stream.kind == "audio":
        return [f"{stream.sample_rate} Hz", "-", f"{stream.channels} ch"]
    return ["-", "-", "-"]


def _number(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:.3f}".rstrip("0").rstrip(".") + unit


def _files(paths: list[Path]) -> list[Path]:
    """``paths`` with each folder replaced by the images, videos and audio files
    under it (as ``show`` and ``bench`` read a folder: by extension, class
    subfolders included), sorted."""
    extensions = IMAGE_EXTENSIONS + MEDIA_EXTENSIONS
    files = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        found = sorted(entry for entry in path.rglob("*")
                       if entry.suffix.lower() in extensions and entry.is_file())
        if not found:
            raise CommandError(f"no images, videos or audio files ({', '.join(extensions)}) "
                               f"under {path}")
        files += found
    return files


def file_info(path: Path) -> dict[str, Any]:
    """Header facts about one image file (see ``dataloader info``).

    Examples
    --------
    >>> import io, tempfile, pathlib
    >>> from PIL import Image as PILImage
    >>> from dataloader._cli.info import file_info
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.png"
    >>> PILImage.new("RGBA", (5, 3)).save(path)
    >>> facts = file_info(path)
    >>> facts["format"], facts["width"], facts["height"], facts["mode"], facts["orientation"]
    ('PNG', 5, 3, 'RGBA', None)
    """
    size = path.stat().st_size
    with open(path, "rb") as file:
        if size == 0:
            raise ValueError("cannot decode image: data is empty (0 bytes)")
        with warnings.catch_warnings():  # Pillow warns about truncated metadata
            warnings.simplefilter("ignore")
            # Only the header: a file of another kind is refused from its first bytes.
            info = file_image_info(file)
        file.seek(0)
        value = orientation(file)
    return {
        "file": str(path),
        "format": info.format,
        "width": info.width,
        "height": info.height,
        "channels": info.channels,
        "mode": _MODES.get(info.channels, "?"),
        "orientation": value,
        "bytes": size,
    }


def media_file_info(path: Path) -> dict[str, Any]:
    """The streams of one video or audio file (see ``dataloader info``).

    Examples
    --------
    >>> from dataloader._cli.info import media_file_info
    >>> from dataloader._media.samples import sample_video
    >>> facts = media_file_info(sample_video())
    >>> [(s["kind"], s["codec"], s["frames"], s["width"]) for s in facts["streams"]]
    [('video', 'h264', 50, 208)]
    """
    streams = media_info(path)
    return {"file": str(path), "streams": [dataclasses.asdict(stream) for stream in streams],
            "bytes": path.stat().st_size}


def _orientation_text(value: int | None) -> str:
    return "-" if value is None else f"{value} ({ORIENTATIONS[value]})"
