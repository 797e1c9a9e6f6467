"""Files in one subfolder per class: the layout of ``ImageFolder`` and ``VideoFolder``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ClassFolders", "scan_class_folders"]


@dataclass(frozen=True)
class ClassFolders:
    """What :func:`scan_class_folders` found: torchvision's ``DatasetFolder`` attributes."""

    classes: list[str]
    class_to_idx: dict[str, int]
    samples: list[tuple[str, int]]


def scan_class_folders(root: Path, extensions: Sequence[str], kind: str) -> ClassFolders:
    """The classes of ``root`` (its subfolders, sorted) and their files whose suffix is
    one of ``extensions`` (any case), in sorted order as torchvision finds them.

    ``kind`` names the files in errors: ``FileNotFoundError`` for a missing
    root, a root without subfolders, or subfolders without such files.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from dataloader._datasets.class_folders import scan_class_folders
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("dog/b.JPG", "cat/a.jpg", "cat/notes.txt"):
    ...     (root / name).parent.mkdir(exist_ok=True)
    ...     _ = (root / name).write_bytes(b"")
    >>> found = scan_class_folders(root, (".jpg",), "image")
    >>> found.classes, [(pathlib.Path(path).name, label) for path, label in found.samples]
    (['cat', 'dog'], [('a.jpg', 0), ('b.JPG', 1)])
    """
    if not root.is_dir():
        raise FileNotFoundError(f"{kind} folder not found: {root}")
    suffixes = tuple(extension.lower() for extension in extensions)
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    if not classes:
        raise FileNotFoundError(f"no class subfolders in {root}")
    class_to_idx = {name: index for index, name in enumerate(classes)}
    samples = [
        (str(path), class_to_idx[name])
        for name in classes
        for path in sorted((root / name).rglob("*"))
        if path.suffix.lower() in suffixes and path.is_file()
    ]
    if not samples:
        raise FileNotFoundError(f"no {kind}s with extensions {list(suffixes)} under {root}")
    return ClassFolders(classes, class_to_idx, samples)
