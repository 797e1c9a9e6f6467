"""The ``dataloader`` command: ``bench``, ``info``, ``show`` and ``pack``.

``main(argv)`` returns the exit status instead of exiting, so the commands
run in-process too. Exit status 2 is a usage error (a bad option, a path
that does not exist, a ``--transform`` that does not parse); 1 is a failure
while doing the work (no images found, an unreadable image, a missing
optional dependency). Errors are one line on stderr, without a traceback.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import re
import shutil
import sys
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dataloader import transforms as _transforms
from dataloader._cli.bench import (
    Progress,
    format_table,
    native_chain,
    report,
    run_native,
    run_torch,
    short_run_warning,
)
from dataloader._cli.pack import add_pack_command
from dataloader._core.codecs import MODES
from dataloader._errors import context_of
from dataloader._images.decode import file_image_info
from dataloader._images.exif import ORIENTATIONS, orientation
from dataloader._images.folder import IMAGE_EXTENSIONS, ImageFolder
from dataloader._images.names import transform_hint
from dataloader._loading.loader import DataLoader

__all__ = ["main", "parse_transforms"]

# Pixel mode names by channel count, as ``info`` prints them.
_MODES = {channels: mode for mode, channels in MODES.items()}
# Header prefixes tried by ``info`` before the whole file: a JPEG's frame
# header follows its EXIF and ICC segments, which fit in 64 KiB or 1 MiB.
# The longest --transform text read (a chain is a line; this bounds the parser's work).
_MAX_TRANSFORM_TEXT = 10_000
# Transforms that ``--transform`` may not name: show builds the chain itself.
_NOT_IN_TRANSFORM = {"BatchTransform", "Compose", "CutMix", "Decode", "MixUp", "RandomChoice",
                     "Transform"}

_EPILOG = """\
examples:
  dataloader bench                                 256 generated JPEGs, all cores
  dataloader bench train/ --workers 8 --against torch
  dataloader info photo.jpg scans/*.png
  dataloader show train/ --out grid.png --transform "RandomResizedCrop(224), RandomHFlip()"
  dataloader pack train/ shards/ --shard-size 256MB

exit status: 0 success, 1 the work failed (no images, an unreadable image),
2 usage error (bad option, missing path, a --transform that does not parse).
"""


class UsageError(Exception):
    """The command line cannot be acted on as written (exit status 2)."""


class CommandError(Exception):
    """The work failed (exit status 1)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dataloader`` command with ``argv`` (default ``sys.argv[1:]``); return its status.

    Examples
    --------
    >>> from dataloader._cli.main import main
    >>> main(["info", "no-such-file.jpg"])
    2
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or argparse's usage error
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        return args.run(args)
    except UsageError as err:
        print(f"dataloader {args.command}: error: {err}", file=sys.stderr)
        return 2
    except (CommandError, OSError, ValueError, RuntimeError) as err:
        print(f"dataloader {args.command}: {_message(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"dataloader {args.command}: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dataloader",
        description="Measure the native image pipeline, inspect image headers, "
                    "and look at what an augmentation chain does.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from dataloader import __version__

    parser.add_argument("--version", action="version", version=f"dataloader {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    bench = commands.add_parser(
        "bench", help="time the image pipeline over a folder (or generated images)",
        description=_wrap("Load an image folder through ImageFolder + Compose([Decode('RGB'), "
                    "RandomResizedCrop(SIZE), RandomHFlip(), ToFloat(), Normalize(ImageNet), "
                    "ToChw()]) + ImageCollator on worker threads, and report images/s, MB/s of "
                    "compressed files read, and the time of each stage. Without PATH, a small "
                    "set of generated JPEGs (kept in the temporary directory) is used."),
        epilog="examples:\n  dataloader bench\n  dataloader bench train/ --batch-size 128 "
               "--workers 8 --epochs 2\n  dataloader bench train/ --against torch",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("path", nargs="?", type=Path, metavar="PATH",
                       help="an image folder: one subfolder per class (as torchvision's "
                            "ImageFolder), or images directly inside")
    bench.add_argument("--batch-size", type=_positive_int, default=64, metavar="N",
                       help="images per batch (default: 64)")
    bench.add_argument("--workers", type=_non_negative_int, default=_cpu_count(), metavar="N",
                       help=f"worker threads, and torch's worker processes "
                            f"(default: the usable cores, {_cpu_count()} here)")
    bench.add_argument("--size", type=_positive_int, default=224, metavar="PIXELS",
                       help="side of the square crops (default: 224)")
    bench.add_argument("--epochs", type=_positive_int, default=1, metavar="N",
                       help="passes over the folder (default: 1)")
    bench.add_argument("--against", choices=["torch"],
                       help="also run torch's DataLoader with worker processes doing the same "
                            "work with Pillow and torch, and compare")
    bench.add_argument("--sample-images", type=_positive_int, default=256, metavar="N",
                       help="without PATH: how many images to generate (default: 256)")
    bench.set_defaults(run=_bench)

    info = commands.add_parser(
        "info", help="format, size, channels and EXIF orientation of image files",
        description=_wrap("Read each file's header (never its pixels) and print its format, size, "
                    "channels, the mode it decodes to, and its EXIF orientation (JPEG, PNG and "
                    "WebP; '-' when absent)."),
        epilog="examples:\n  dataloader info photo.jpg\n  dataloader info train/\n"
               "  dataloader info --json train/*/*.jpg",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    info.add_argument("files", nargs="+", type=Path, metavar="PATH",
                      help="image files, or folders whose images (by extension) to read")
    info.add_argument("--json", action="store_true", help="one JSON object per line")
    info.set_defaults(run=_info)

    show = commands.add_parser(
        "show", help="write one augmented batch as an image grid",
        description=_wrap("Run Compose([Decode('RGB'), *TRANSFORM]) over one shuffled batch of "
                    "PATH and write the results side by side as a PNG, to see what an augmentation "
                    "does. TRANSFORM is a comma-separated list of dataloader.transforms calls "
                    "with literal arguments. Float output (ToFloat, Normalize) is rescaled to "
                    "0..255 for viewing; CHW output is shown as HWC."),
        epilog="examples:\n"
               "  dataloader show train/ --out grid.png\n"
               "  dataloader show photo.jpg --out crops.png --batch-size 9 \\\n"
               "      --transform \"RandomResizedCrop(160, scale=(0.2, 1.0)), RandomHFlip()\"\n"
               "  dataloader show train/ --out grid.png --transform \"Resize(256), "
               "CenterCrop(224)\" --seed 3",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("path", type=Path, metavar="PATH",
                      help="an image folder (class subfolders or images directly inside) or "
                           "one image file (augmented BATCH_SIZE times)")
    show.add_argument("--out", type=Path, required=True, metavar="FILE.png",
                      help="the PNG file to write")
    show.add_argument("--transform", default="RandomResizedCrop(224), RandomHFlip()",
                      metavar="TRANSFORM",
                      help="transforms after Decode('RGB') "
                           "(default: \"RandomResizedCrop(224), RandomHFlip()\")")
    show.add_argument("--seed", type=int, default=0,
                      help="seed of the shuffle and the random transforms (default: 0)")
    show.add_argument("--batch-size", type=_positive_int, default=16, metavar="N",
                      help="images in the grid (default: 16)")
    show.set_defaults(run=_show)
    add_pack_command(commands, UsageError)
    return parser


def _wrap(text: str) -> str:
    """A description filled to the terminal's width (the formatter keeps epilogs as written)."""
    width = min(shutil.get_terminal_size().columns, 100) - 2
    return textwrap.fill(text, width=width)


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# --- datasets -------------------------------------------------------------


class ImageFiles:
    """Image files as ``(bytes, 0)`` items, for a folder without class subfolders."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.samples = [(str(path), 0) for path in paths]
        self.classes = [""]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[bytes, int]:
        with open(self.samples[index][0], "rb") as file:
            return file.read(), 0


def _image_dataset(path: Path, repeat_file: int = 0) -> Any:
    """An ``ImageFolder``, or ``ImageFiles`` for a flat folder or one file ``repeat_file`` times."""
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if path.is_file():
        if not repeat_file:
            raise UsageError(f"{path} is a file; pass a folder of images")
        return ImageFiles([path] * repeat_file)
    try:
        return ImageFolder(path)
    except FileNotFoundError:
        pass  # no class subfolders, or none with images: try the folder itself
    except PermissionError as err:
        raise CommandError(f"cannot read {err.filename}: permission denied") from None
    files = sorted(entry for entry in path.iterdir()
                   if entry.suffix.lower() in IMAGE_EXTENSIONS and entry.is_file())
    if not files:
        raise CommandError(f"no images ({', '.join(IMAGE_EXTENSIONS)}) in {path} "
                           "or in its class subfolders")
    return ImageFiles(files)


def _named_error(err: Exception, dataset: Any, chain: _transforms.Transform) -> CommandError:
    """The loader's error, naming the file that fails ``chain`` when the error says which batch.

    The error's ``LoadingContext`` (``dataloader._errors``) gives the
    failing batch's indices, and the failing item's when the loader knows
    it: that item first, then each index of the batch, is loaded and
    transformed again until one fails.
    """
    context = context_of(err)
    if context is None or context.indices is None:
        return CommandError(_message(err))
    batch = context.indices if isinstance(context.indices, list) else [context.indices]
    indices = [index for index in (context.index, *batch) if index is not None]
    for index in dict.fromkeys(indices):  # the failing item first, each index once
        try:
            chain(dataset[index][0], seed=0)
        except (ValueError, OSError) as failure:
            return CommandError(f"{dataset.samples[index][0]}: {_message(failure)}")
    paths = ", ".join(dataset.samples[index][0] for index in batch[:4])
    return CommandError(f"{_message(err)} (in a batch with {paths}, ...)")


def _message(err: BaseException) -> str:
    """An error's message without the in-memory file objects that Pillow names."""
    return re.sub(r"\s*<_io\.BytesIO object at 0x[0-9a-f]+>", "", str(err))


# --- bench ----------------------------------------------------------------


def _bench(args: argparse.Namespace) -> int:
    if args.against == "torch":
        _require("torch", "--against torch needs torch: pip install torch")
        _require("PIL", "--against torch needs Pillow: pip install pillow")
    if args.path is None:
        from dataloader._images.samples import sample_image_folder

        root = sample_image_folder(args.sample_images, n_classes=4)
        print(f"generated images: {root}", file=sys.stderr)
    else:
        root = args.path
    folder = _image_dataset(root)
    print(f"{len(folder)} images in {len(folder.classes)} classes, batch size {args.batch_size}, "
          f"{args.workers} workers, {args.size}x{args.size} crops, {args.epochs} epoch(s)")
    options = dict(batch_size=args.batch_size, workers=args.workers, size=args.size,
                   epochs=args.epochs)
    total = len(folder) * args.epochs
    progress = Progress(total, "dataloader")
    try:
        ours = run_native(folder, progress=progress, **options)
    except (ValueError, OSError) as err:
        raise _named_error(err, folder, native_chain(args.size)) from None
    finally:
        progress.close()
    theirs = None
    if args.against == "torch":
        import torch.utils.data  # noqa: F401  (imported before the clock starts)

        progress = Progress(total, "torch")
        try:
            theirs = run_torch(folder, progress=progress, **options)
        finally:
            progress.close()
    print()
    print(report(ours, theirs))
    warning = short_run_warning([ours] if theirs is None else [ours, theirs])
    if warning:
        print("\n" + textwrap.fill(warning, 80), file=sys.stderr)
    return 0


def _require(module: str, message: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise CommandError(message)


# --- info -----------------------------------------------------------------


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
            print(f"dataloader info: {path}: {_message(err)}", file=sys.stderr)
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
    >>> from dataloader._cli.main import file_info
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


# --- show -----------------------------------------------------------------


def parse_transforms(text: str) -> list[_transforms.Transform]:
    """Transforms from text such as ``"RandomResizedCrop(224), RandomHFlip()"``, safely.

    Each element is a call (or a bare name) of a transform in
    ``dataloader.transforms.__all__``; every argument must be a Python
    literal (read with ``ast.literal_eval``). Nothing is evaluated.

    Raises
    ------
    ValueError
        Naming the element that does not parse, is not a transform, or
        whose arguments the transform refuses.

    Examples
    --------
    >>> from dataloader._cli.main import parse_transforms
    >>> parse_transforms("Resize(256), CenterCrop(size=224), RandomHFlip")
    [Resize(size=256), CenterCrop(size=(224, 224)), RandomHFlip()]
    >>> try:
    ...     parse_transforms("__import__('os')")
    ... except ValueError as error:
    ...     print(error)  # doctest: +ELLIPSIS
    __import__('os'): not a transform; use one of AutoAugment, CenterCrop, ...
    >>> try:
    ...     parse_transforms("RandomResizedCrop(224), RandomHorizonalFlip()")
    ... except ValueError as error:
    ...     print(error)
    RandomHorizonalFlip(): not a transform; did you mean 'RandomHorizontalFlip'?
    """
    if len(text) > _MAX_TRANSFORM_TEXT:
        raise ValueError(f"{len(text):,} characters, more than {_MAX_TRANSFORM_TEXT:,}: "
                         "a chain of transforms is a short text")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as err:
        raise ValueError(f"cannot parse {text!r}: {err.msg}") from None
    except (MemoryError, RecursionError):  # the parser's stack: nested far too deep
        raise ValueError("cannot parse: nested too deeply") from None
    nodes = tree.elts if isinstance(tree, ast.Tuple) else [tree]
    names = sorted(set(_transforms.__all__) - _NOT_IN_TRANSFORM)
    parsed = []
    for node in nodes:
        source = ast.get_source_segment(text.strip(), node) or _shown(node)
        source = source if len(source) <= 80 else f"{source[:77]}..."
        call = node if isinstance(node, ast.Call) else ast.Call(node, [], [])
        name = call.func.id if isinstance(call.func, ast.Name) else None
        if name not in names:
            if name == "Decode":
                hint = "Decode('RGB') comes first already"
            else:
                hint = (name and transform_hint(name, names)) or \
                    f"use one of {', '.join(names)}"
            raise ValueError(f"{source}: not a transform; {hint}")
        try:
            positional = [_literal(argument) for argument in call.args]
            keywords = {}
            for keyword in call.keywords:
                if keyword.arg is None:
                    raise ValueError("** arguments are not allowed")
                keywords[keyword.arg] = _literal(keyword.value)
            parsed.append(getattr(_transforms, name)(*positional, **keywords))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{source}: {err}") from None
    return parsed


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Starred):
        raise ValueError("* arguments are not allowed")
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass  # raised below, outside the handler
    raise ValueError(f"arguments must be literals, got {_shown(node)}")


def _shown(node: ast.AST) -> str:
    """``node`` as source text for a message, shortened; deep nesting is not recursed into."""
    try:
        text = ast.unparse(node)
    except RecursionError:
        return "an expression nested too deeply"
    return text if len(text) <= 80 else f"{text[:77]}..."


def _show(args: argparse.Namespace) -> int:
    if args.out.suffix.lower() != ".png":
        raise UsageError(f"--out must name a .png file, got {args.out}")
    if not args.out.parent.is_dir():
        raise UsageError(f"--out: no such folder: {args.out.parent}")
    try:
        steps = parse_transforms(args.transform)
    except ValueError as err:
        raise UsageError(f"--transform: {err}") from None
    _require("PIL", "show writes PNG files with Pillow: pip install pillow")
    dataset = _image_dataset(args.path, repeat_file=args.batch_size)
    chain = _transforms.Compose([_transforms.Decode("RGB"), *steps])
    loader = DataLoader(dataset, batch_size=min(args.batch_size, len(dataset)), shuffle=True,
                        seed=args.seed, transform=chain, collate_fn=list)
    try:
        with loader:
            items = next(iter(loader))
    except (ValueError, OSError) as err:
        raise _named_error(err, dataset, chain) from None
    captions = [dataset.classes[label] if len(dataset.classes) > 1 else "" for _, label in items]
    grid = image_grid([_viewable(image) for image, _ in items], captions)
    from PIL import Image as PILImage

    PILImage.fromarray(grid).save(args.out, "PNG")
    print(f"wrote {args.out}: {len(items)} images, {grid.shape[1]}x{grid.shape[0]} pixels, "
          f"seed {args.seed}, {chain!r}")
    return 0


def _viewable(image: Any) -> np.ndarray:
    """uint8 RGB HWC pixels of a chain's output, whatever its layout, type or channels."""
    array = np.asarray(image)
    if getattr(image, "layout", "HWC") == "CHW":
        array = array.transpose(1, 2, 0)
    if array.dtype != np.uint8:
        low, high = float(array.min()), float(array.max())
        if low < 0 or high > 1:  # normalised: stretch this image to 0..1
            array = (array - low) / max(high - low, 1e-12)
        array = np.clip(np.rint(array * 255), 0, 255).astype(np.uint8)
    channels = array.shape[2]
    if channels in (1, 2):
        array = np.repeat(array[:, :, :1], 3, axis=2)
    return np.ascontiguousarray(array[:, :, :3])


def image_grid(images: Sequence[np.ndarray], captions: Sequence[str] = (),
               gap: int = 4) -> np.ndarray:
    """Tile RGB images into a near-square grid of equal cells, each image centred.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader._cli.main import image_grid
    >>> image_grid([np.zeros((10, 20, 3), np.uint8)] * 5).shape
    (32, 76, 3)
    """
    columns = math.ceil(math.sqrt(len(images)))
    rows = math.ceil(len(images) / columns)
    caption_height = 12 if any(captions) else 0
    cell_h = max(image.shape[0] for image in images) + caption_height
    cell_w = max(image.shape[1] for image in images)
    grid = np.full((rows * (cell_h + gap) + gap, columns * (cell_w + gap) + gap, 3), 32, np.uint8)
    for position, image in enumerate(images):
        row, column = divmod(position, columns)
        top = gap + row * (cell_h + gap) + (cell_h - caption_height - image.shape[0]) // 2
        left = gap + column * (cell_w + gap) + (cell_w - image.shape[1]) // 2
        grid[top:top + image.shape[0], left:left + image.shape[1]] = image
    if caption_height:
        from PIL import Image as PILImage
        from PIL import ImageDraw

        canvas = PILImage.fromarray(grid)
        draw = ImageDraw.Draw(canvas)
        for position, caption in enumerate(captions):
            row, column = divmod(position, columns)
            x = gap + column * (cell_w + gap) + 2
            y = gap + row * (cell_h + gap) + cell_h - caption_height
            draw.text((x, y), caption, fill=(230, 230, 230))
        grid = np.asarray(canvas)
    return grid
