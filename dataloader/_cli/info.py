"""``dataloader info``: format, size, channels and EXIF orientation of image files.

Only headers are read, never pixels: a file of another kind is refused
from its first bytes. A folder stands for the images under it, found by
extension as ``show`` and ``bench`` find them.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from dataloader._cli.bench import format_table
from dataloader._cli.common import error_message, wrap
from dataloader._core.codecs import MODES
from dataloader._errors import CommandError, UsageError
from dataloader._images.decode import file_image_info
from dataloader._images.exif import ORIENTATIONS, orientation
from dataloader._images.folder import IMAGE_EXTENSIONS

__all__ = ["add_info_command", "file_info"]

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
        "info", help="format, size, channels and EXIF orientation of image files",
        description=wrap("Read each file's header (never its pixels) and print its format, size, "
                    "channels, the mode it decodes to, and its EXIF orientation (JPEG, PNG and "
                    "WebP; '-' when absent)."),
        epilog="examples:\n  dataloader info photo.jpg\n  dataloader info train/\n"
               "  dataloader info --json train/*/*.jpg",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    info.add_argument("files", nargs="+", type=Path, metavar="PATH",
                      help="image files, or folders whose images (by extension) to read")
    info.add_argument("--json", action="store_true", help="one JSON object per line")
    info.set_defaults(run=_info)


def _info(args: argparse.Namespace) -> int:
    missing = [str(path) for path in args.files if not path.exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")
    rows = []
    failed = 0
    for path in _image_files(args.files):
        try:
            rows.append(file_info(path))
        except (OSError, ValueError) as err:
            failed += 1
            print(f"dataloader info: {path}: {error_message(err)}", file=sys.stderr)
    if args.json:
        for row in rows:
            print(json.dumps(row))
    elif rows:
        headers = ["file", "format", "size", "channels", "mode", "orientation", "bytes"]
        print(format_table(headers, [[
            row["file"], row["format"], f"{row['width']}x{row['height']}", str(row["channels"]),
            row["mode"], _orientation_text(row["orientation"]), f"{row['bytes']:,}",
        ] for row in rows], align="llrrllr"))
    return 1 if failed else 0


def _image_files(paths: list[Path]) -> list[Path]:
    """``paths`` with each folder replaced by the images under it (as ``show`` and
    ``bench`` read a folder: by extension, class subfolders included), sorted."""
    files = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        found = sorted(entry for entry in path.rglob("*")
                       if entry.suffix.lower() in IMAGE_EXTENSIONS and entry.is_file())
        if not found:
            raise CommandError(f"no images ({', '.join(IMAGE_EXTENSIONS)}) under {path}")
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


def _orientation_text(value: int | None) -> str:
    return "-" if value is None else f"{value} ({ORIENTATIONS[value]})"
