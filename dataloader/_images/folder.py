"""``ImageFolder``: images in one subfolder per class, as torchvision's."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dataloader._core.io import read_file
from dataloader._datasets.class_folders import scan_class_folders
from dataloader._images.chains import Transform

__all__ = ["IMAGE_EXTENSIONS", "ImageFolder", "pil_loader"]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")


class ImageFolder:
    """Images in one subfolder per class, as torchvision's ``ImageFolder``.

    Items are ``(data, class_index)``. Without a transform, ``data`` is the
    file's bytes, read without the GIL, for a loader's native chain to
    decode. A native chain (:mod:`dataloader.transforms`) given here is
    applied to those bytes, and runs in a ``DataLoader`` exactly as one
    given to the loader (``transform=``, when the loader has none): the
    loader fetches ``raw_item`` and runs the chain itself, seeded per epoch
    and written straight into the batch, so both ways give the same
    batches. Any other callable gets what torchvision's gets: ``loader(path)``,
    by default the image opened with Pillow and converted to RGB, so a
    torchvision-style pipeline written on PIL images works unchanged.

    Parameters
    ----------
    root : path
    transform : callable, optional
        A native chain (applied to the file's bytes), or any callable
        (applied to ``loader(path)``).
    target_transform : callable, optional
        Applied to each class index, as torchvision's.
    loader : callable, optional
        ``loader(path)`` for a Python ``transform`` (default: a Pillow image
        in RGB, torchvision's ``default_loader``).
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
    >>> from PIL import Image
    >>> Image.new("RGB", (6, 4)).save(root / "dog" / "c.jpg")
    >>> ImageFolder(root, transform=lambda image: image.size)[2]
    ((6, 4), 1)
    """

    def __init__(
        self,
        root: str | os.PathLike,
        transform: Callable[[Any], Any] | None = None,
        extensions: Sequence[str] = IMAGE_EXTENSIONS,
        *,
        target_transform: Callable[[int], Any] | None = None,
        loader: Callable[[str], Any] | None = None,
    ) -> None:
        self.root = Path(root)
        found = scan_class_folders(self.root, extensions, "image")
        self.classes, self.class_to_idx, self.samples = (
            found.classes, found.class_to_idx, found.samples)
        self.targets = [target for _, target in self.samples]
        self.transform = transform
        self.target_transform = target_transform
        self.loader = loader

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        transform = self.transform
        if transform is None or isinstance(transform, Transform):
            data, target = self.raw_item(index)
            if transform is not None:
                data = transform(data)
        else:
            path, target = self.samples[index]
            data = transform((self.loader or pil_loader)(path))
        if self.target_transform is not None:
            return data, self.target_transform(target)
        return data, target

    def raw_item(self, index: int) -> tuple[bytes, int]:
        """Item ``index`` before the transform: the file's bytes and its class index."""
        path, target = self.samples[index]
        return read_file(path), target  # read without the GIL

    def __repr__(self) -> str:
        return (f"ImageFolder(root={str(self.root)!r}, {len(self)} images, "
                f"{len(self.classes)} classes)")


def pil_loader(path: str) -> Any:
    """The image at ``path`` as a Pillow image in RGB: torchvision's ``default_loader``.

    Only the formats of ``IMAGE_EXTENSIONS`` are read, whatever the file's
    name, each by its own Pillow plugin (``decode.open_with_pillow``): a
    file holding EPS, PostScript or PDF bytes is an error, and never reaches
    the programs (Ghostscript) Pillow hands those to.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "grey.png"
    >>> Image.new("L", (3, 2)).save(path)
    >>> pil_loader(str(path)).mode
    'RGB'
    """
    try:
        from PIL import Image  # noqa: F401 -- only whether Pillow is installed
    except ImportError:
        raise ImportError(
            "ImageFolder gives a Python transform a Pillow image, as torchvision's does: "
            "pip install pillow (or pass a native chain of dataloader.transforms, or loader=)"
        ) from None
    from dataloader._images.decode import FORMATS, open_with_pillow

    # A file object, not the path: Pillow would import the plugin of the path's extension.
    with open(path, "rb") as file, open_with_pillow(file, FORMATS) as image:
        return image.convert("RGB")
