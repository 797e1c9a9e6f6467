"""What the ``dataloader`` commands share: their errors, argument types and image input.

A command raises :class:`UsageError` (exit status 2) for a command line that
cannot be acted on as written, and :class:`CommandError` (exit status 1)
when the work fails; ``dataloader._cli.main`` turns either into one line on
stderr. ``bench`` and ``show`` read their images through
:func:`image_dataset`, and name the file behind a loader's error with
:func:`named_error`.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dataloader._errors import CommandError, UsageError, context_of
from dataloader._images.folder import IMAGE_EXTENSIONS, ImageFolder

__all__ = ["ImageFiles", "error_message", "image_dataset",
           "named_error", "non_negative_int", "positive_int", "require", "wrap"]


def wrap(text: str) -> str:
    """A description filled to the terminal's width (the formatter keeps epilogs as written).

    Examples
    --------
    >>> from dataloader._cli.common import wrap
    >>> wrap("Read each file's header.")
    "Read each file's header."
    """
    width = min(shutil.get_terminal_size().columns, 100) - 2
    return textwrap.fill(text, width=width)


def positive_int(text: str) -> int:
    """An option's value as an int of at least 1 (argparse's ``type=``).

    Examples
    --------
    >>> from dataloader._cli.common import positive_int
    >>> positive_int("64")
    64
    >>> positive_int("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be at least 1, got 0
    """
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An option's value as an int of at least 0 (argparse's ``type=``).

    Examples
    --------
    >>> from dataloader._cli.common import non_negative_int
    >>> non_negative_int("0")
    0
    >>> non_negative_int("two")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: not an integer: 'two'
    """
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def require(module: str, message: str) -> None:
    """Raise :class:`CommandError` with ``message`` unless ``module`` can be imported.

    Examples
    --------
    >>> from dataloader._cli.common import require
    >>> require("numpy", "needs numpy")
    >>> require("no_such_module", "needs no_such_module: pip install it")
    Traceback (most recent call last):
    dataloader._errors.CommandError: needs no_such_module: pip install it
    """
    if importlib.util.find_spec(module) is None:
        raise CommandError(message)


class ImageFiles:
    """Image files as ``(bytes, 0)`` items, for a folder without class subfolders.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from dataloader._cli.common import ImageFiles
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.jpg"
    >>> _ = path.write_bytes(b"not decoded here")
    >>> files = ImageFiles([path])
    >>> len(files), files[0], files.classes
    (1, (b'not decoded here', 0), [''])
    """

    def __init__(self, paths: Sequence[Path]) -> None:
        self.samples = [(str(path), 0) for path in paths]
        self.classes = [""]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[bytes, int]:
        with open(self.samples[index][0], "rb") as file:
            return file.read(), 0


def image_dataset(path: Path, repeat_file: int = 0) -> Any:
    """An ``ImageFolder``, or ``ImageFiles`` for a flat folder or one file ``repeat_file`` times.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from dataloader._cli.common import image_dataset
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.jpg"
    >>> _ = path.write_bytes(b"")
    >>> len(image_dataset(path, repeat_file=3)), len(image_dataset(path.parent))
    (3, 1)
    """
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


def named_error(err: Exception, dataset: Any, chain: Callable[..., Any]) -> CommandError:
    """The loader's error, naming the file that fails ``chain`` when the error says which batch.

    The error's ``LoadingContext`` (``dataloader._errors``) gives the
    failing batch's indices, and the failing item's when the loader knows
    it: that item first, then each index of the batch, is loaded and
    transformed again until one fails.

    Examples
    --------
    >>> from dataloader._cli.common import named_error
    >>> str(named_error(OSError("disk gone"), dataset=None, chain=None))
    'disk gone'
    """
    context = context_of(err)
    if context is None or context.indices is None:
        return CommandError(error_message(err))
    batch = context.indices if isinstance(context.indices, list) else [context.indices]
    indices = [index for index in (context.index, *batch) if index is not None]
    for index in dict.fromkeys(indices):  # the failing item first, each index once
        try:
            chain(dataset[index][0], seed=0)
        except (ValueError, OSError) as failure:
            return CommandError(f"{dataset.samples[index][0]}: {error_message(failure)}")
    paths = ", ".join(dataset.samples[index][0] for index in batch[:4])
    return CommandError(f"{error_message(err)} (in a batch with {paths}, ...)")


def error_message(err: BaseException) -> str:
    """An error's message without the in-memory file objects that Pillow names.

    Examples
    --------
    >>> from dataloader._cli.common import error_message
    >>> error_message(OSError("cannot identify image file <_io.BytesIO object at 0x7f00>"))
    'cannot identify image file'
    """
    return re.sub(r"\s*<_io\.BytesIO object at 0x[0-9a-f]+>", "", str(err))
