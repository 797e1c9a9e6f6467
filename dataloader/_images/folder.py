"""``ImageFolder``: images in one subfolder per class, as torchvision's."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dataloader._core.io import read_file

__all__ = ["IMAGE_EXTENSIONS", "ImageFolder"]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")


class ImageFolder:
    """Images in one subfolder per class, as torchvision's ``ImageFolder``.

    Items are ``(data, class_index)``: ``data`` is the file's bytes, read
    without the GIL, or ``transform(data)`` when a transform is given.
    ``raw_item(index)`` is the item before the transform. A native chain
    given here runs in a ``DataLoader`` exactly as one given to the loader
    (``transform=``, when the loader has none): the loader fetches
    ``raw_item`` and runs the chain itself, seeded per epoch and written
    straight into the batch, so both ways give the same batches.

    Parameters
    ----------
    root : path
    transform : callable, optional
        Applied to each file's bytes.
    extensions : tuple of str
        File name suffixes (case-insensitive) that count as images.

    Attributes
    ----------
    classes : list of str
        Sorted subfolder names.
    class_to_idx : dict
        Class name to index.
    samples : list of (str, int)
        Every image path with its class index.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("cat/a.jpg", "cat/b.png", "dog/c.jpg"):
    ...     (root / name).parent.mkdir(exist_ok=True)
    ...     _ = (root / name).write_bytes(b"...")
    >>> from dataloader import ImageFolder
    >>> folder = ImageFolder(root)
    >>> folder.classes, len(folder), folder[2][1]
    (['cat', 'dog'], 3, 1)
    """

    def __init__(
        self,
        root: str | os.PathLike,
        transform: Callable[[Any], Any] | None = None,
        extensions: Sequence[str] = IMAGE_EXTENSIONS,
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"image folder not found: {self.root}")
        suffixes = tuple(extension.lower() for extension in extensions)
        self.classes = sorted(entry.name for entry in os.scandir(self.root) if entry.is_dir())
        if not self.classes:
            raise FileNotFoundError(f"no class subfolders in {self.root}")
        self.class_to_idx = {name: index for index, name in enumerate(self.classes)}
        self.samples = [
            (str(path), self.class_to_idx[name])
            for name in self.classes
            for path in sorted((self.root / name).rglob("*"))
            if path.suffix.lower() in suffixes and path.is_file()
        ]
        if not self.samples:
            raise FileNotFoundError(f"no images with extensions {list(suffixes)} under {self.root}")
        self.targets = [target for _, target in self.samples]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        data, target = self.raw_item(index)
        if self.transform is not None:
            data = self.transform(data)
        return data, target

    def raw_item(self, index: int) -> tuple[bytes, int]:
        """Item ``index`` before the transform: the file's bytes and its class index."""
        path, target = self.samples[index]
        return read_file(path), target  # read without the GIL

    def __repr__(self) -> str:
        return (f"ImageFolder(root={str(self.root)!r}, {len(self)} images, "
                f"{len(self.classes)} classes)")
