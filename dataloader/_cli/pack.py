"""``dataloader pack``: an image folder or a JSON-lines index written as tar shards.

Samples go into ``OUT/<prefix>-000000.tar``, ``-000001.tar``, ... through
:class:`~dataloader.sources.TarWriter`, in the webdataset layout:

* an image folder (one subfolder per class, as ``ImageFolder``): each image
  as ``<key>.<its extension>`` and its class index as ``<key>.cls``, keys
  numbered in ``ImageFolder``'s order;
* a JSON-lines file: one object per line with ``"path"`` (an image or any
  file, relative to the index's folder), optionally ``"key"`` and
  ``"label"`` (written as ``cls``); the other fields go to ``<key>.json``.

Pack reads inside SRC only (the folder, or the index's folder) and writes
inside OUT only: a file reached through a symbolic link leading out of it,
an absolute path or one climbing out with ``..`` in an index, and a
``--prefix`` naming another folder are refused before anything is written.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dataloader._core.io import read_file
from dataloader._errors import UsageError

__all__ = ["add_pack_command", "parse_size"]

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
# A shard name's prefix: a file name, not a path.
_PREFIX = re.compile(r"[^/\\\0]+")


def parse_size(text: str) -> int:
    """Bytes from ``"256MB"``, ``"1.5GiB"``, ``"4096"`` (decimal and binary units).

    Examples
    --------
    >>> from dataloader._cli.pack import parse_size
    >>> parse_size("256MB"), parse_size("1GiB"), parse_size("512")
    (256000000, 1073741824, 512)
    """
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a positive size such as 256MB or 1GiB, got {text!r}")
    return int(float(match.group(1)) * _UNITS[unit])


def add_pack_command(commands: Any) -> None:
    """Register ``pack`` on the command line's subcommand parsers.

    Examples
    --------
    >>> import argparse
    >>> from dataloader._cli.pack import add_pack_command
    >>> parser = argparse.ArgumentParser(prog="dataloader")
    >>> add_pack_command(parser.add_subparsers(dest="command"))
    >>> parser.parse_args(["pack", "train/", "shards/", "--shard-size", "1GB"]).shard_size
    1000000000
    """
    pack = commands.add_parser(
        "pack", help="write an image folder or a JSON-lines index as tar shards",
        description="Write SRC as tar shards in the webdataset layout (for TarDataset): an image "
                    "folder with one subfolder per class gives <key>.<ext> and <key>.cls "
                    "members; a JSON-lines index (one {\"path\": ..., \"label\": ...} object per "
                    "line, paths relative to the index) gives the file, cls and the other "
                    "fields as json.",
        epilog="examples:\n  dataloader pack train/ shards/ --shard-size 256MB\n"
               "  dataloader pack index.jsonl shards/ --prefix val --shuffle --seed 0",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    pack.add_argument("src", type=Path, metavar="SRC",
                      help="an image folder (class subfolders) or a .jsonl index")
    pack.add_argument("out", type=Path, metavar="OUT", help="the folder to write shards into")
    pack.add_argument("--shard-size", type=parse_size, default=parse_size("256MB"),
                      metavar="SIZE", help="bytes per shard, e.g. 256MB or 1GiB (default: 256MB)")
    pack.add_argument("--prefix", default="shard",
                      help="shard file names: PREFIX-000000.tar, ... (default: shard)")
    pack.add_argument("--shuffle", action="store_true",
                      help="write the samples in a seeded random order")
    pack.add_argument("--seed", type=int, default=0, help="seed of --shuffle (default: 0)")
    pack.set_defaults(run=_pack)


def _pack(args: argparse.Namespace) -> int:
    from dataloader._cli.bench import Progress
    from dataloader.sources import TarWriter

    if not args.src.exists():
        raise UsageError(f"SRC not found: {args.src}")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"OUT is not a folder: {args.out}")
    if not _PREFIX.fullmatch(args.prefix) or args.prefix in (".", ".."):
        raise UsageError(f"--prefix should be a file name, without a folder, got {args.prefix!r}")
    entries = _index(args.src) if args.src.is_file() else _folder(args.src)
    if args.shuffle:
        order = np.random.default_rng(args.seed).permutation(len(entries))
        entries = [entries[i] for i in order]
    args.out.mkdir(parents=True, exist_ok=True)
    progress = Progress(len(entries), "pack")
    written = 0
    try:
        prefix = args.prefix.replace("{", "{{").replace("}", "}}")  # literal in the pattern
        with TarWriter(str(args.out / f"{prefix}-{{:06d}}.tar"),
                       shard_size=args.shard_size) as writer:
            for sample in _samples(entries):
                writer.write(sample)
                written += 1
                progress(1)
    finally:
        progress.close()
    total = sum(Path(shard).stat().st_size for shard in writer.shards)
    print(f"{written} samples in {len(writer.shards)} shards ({total / 1e6:,.1f} MB) "
          f"in {args.out}")
    return 0


def _folder(root: Path) -> list[dict[str, Any]]:
    from dataloader._images.folder import ImageFolder

    folder = ImageFolder(root)
    width = max(len(str(len(folder) - 1)), 6)
    # ImageFolder's paths are root / class / ...: checked relative to root.
    return [{"key": f"{n:0{width}d}", "path": _inside(Path(path).relative_to(folder.root),
                                                      folder.root, root),
             "label": label}
            for n, (path, label) in enumerate(folder.samples)]


def _inside(path: Path, root: Path, shown: Path) -> Path:
    """``root / path``, refused unless it stays in ``root`` (``shown`` names the source).

    Resolved first, so that a symbolic link (of the file, or of a folder on
    its way) leading out of ``root`` is refused as ``..`` is.
    """
    if path.is_absolute():
        raise ValueError(f"{shown}: {path} is an absolute path; paths are relative to the "
                         "index's folder")
    file = root / path
    if not file.resolve().is_relative_to(root.resolve()):
        raise ValueError(f"{shown}: {path} leads out of {root} (through '..' or a symbolic "
                         "link); pack reads inside SRC only")
    return file


def _index(path: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}, line {number}: not JSON ({exc.msg})") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
                raise ValueError(f"{path}, line {number}: expected an object with a \"path\"")
            entry.setdefault("key", f"{len(entries):09d}")
            entry["path"] = _inside(Path(entry["path"]), path.parent,
                                    Path(f"{path}, line {number}"))
            entries.append(entry)
    if not entries:
        raise ValueError(f"{path}: no entries")
    return entries


def _samples(entries: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for entry in entries:
        file = entry["path"]  # checked by _inside: in SRC's folder
        extension = file.suffix.lower().lstrip(".") or "bin"
        sample: dict[str, Any] = {"__key__": str(entry["key"]), extension: read_file(file)}
        if "label" in entry:
            sample["cls"] = entry["label"]
        extra = {k: v for k, v in entry.items() if k not in ("key", "path", "label")}
        if extra:
            sample["json"] = json.dumps(extra, ensure_ascii=False)
        yield sample
