"""``dataloader show``: one augmented batch written as an image grid.

``--transform`` is read by :func:`parse_transforms`, which evaluates
nothing: each element must be a call of a public transform with literal
arguments. The chain is ``Decode("RGB")`` followed by those transforms,
run by a ``DataLoader`` over one shuffled batch; :func:`image_grid` tiles
the results into the PNG written.
"""

from __future__ import annotations

import argparse
import ast
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dataloader import transforms as _transforms
from dataloader._cli.common import image_dataset, named_error, positive_int, require, wrap
from dataloader._errors import UsageError
from dataloader._images.names import transform_hint
from dataloader._loader import DataLoader

__all__ = ["add_show_command", "image_grid", "parse_transforms", "viewable"]

# The longest --transform text read (a chain is a line; this bounds the parser's work).
_MAX_TRANSFORM_TEXT = 10_000
# Transforms that ``--transform`` may not name: show builds the chain itself.
_NOT_IN_TRANSFORM = {"BatchTransform", "Compose", "CutMix", "Decode", "MixUp", "RandomChoice",
                     "Transform"}


def add_show_command(commands: Any) -> None:
    """Register ``show`` on the command line's subcommand parsers.

    Examples
    --------
    >>> import argparse
    >>> from dataloader._cli.show import add_show_command
    >>> parser = argparse.ArgumentParser(prog="dataloader")
    >>> add_show_command(parser.add_subparsers(dest="command"))
    >>> parser.parse_args(["show", "train/", "--out", "grid.png"]).transform
    'RandomResizedCrop(224), RandomHFlip()'
    """
    show = commands.add_parser(
        "show", help="write one augmented batch as an image grid",
        description=wrap("Run Compose([Decode('RGB'), *TRANSFORM]) over one shuffled batch of "
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
    show.add_argument("--batch-size", type=positive_int, default=16, metavar="N",
                      help="images in the grid (default: 16)")
    show.set_defaults(run=_show)


def _show(args: argparse.Namespace) -> int:
    if args.out.suffix.lower() != ".png":
        raise UsageError(f"--out must name a .png file, got {args.out}")
    if not args.out.parent.is_dir():
        raise UsageError(f"--out: no such folder: {args.out.parent}")
    try:
        steps = parse_transforms(args.transform)
    except ValueError as err:
        raise UsageError(f"--transform: {err}") from None
    require("PIL", "show writes PNG files with Pillow: pip install pillow")
    dataset = image_dataset(args.path, repeat_file=args.batch_size)
    chain = _transforms.Compose([_transforms.Decode("RGB"), *steps])
    loader: DataLoader[Any] = DataLoader(
        dataset, batch_size=min(args.batch_size, len(dataset)), shuffle=True, seed=args.seed,
        transform=chain, collate_fn=list)
    try:
        with loader:
            items = next(iter(loader))
    except (ValueError, OSError) as err:
        raise named_error(err, dataset, chain) from None
    captions = [dataset.classes[label] if len(dataset.classes) > 1 else "" for _, label in items]
    grid = image_grid([viewable(image) for image, _ in items], captions)
    from PIL import Image as PILImage

    PILImage.fromarray(grid).save(args.out, "PNG")
    print(f"wrote {args.out}: {len(items)} images, {grid.shape[1]}x{grid.shape[0]} pixels, "
          f"seed {args.seed}, {chain!r}")
    return 0


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
    >>> from dataloader._cli.show import parse_transforms
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


def viewable(image: Any) -> np.ndarray:
    """uint8 RGB HWC pixels of a chain's output, whatever its layout, type or channels.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader._cli.show import viewable
    >>> pixels = viewable(np.array([[[-1.0], [3.0]]], np.float32))  # normalised, 1 channel
    >>> pixels.shape, pixels[0, :, 0].tolist()
    ((1, 2, 3), [0, 255])
    """
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
    >>> from dataloader._cli.show import image_grid
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
