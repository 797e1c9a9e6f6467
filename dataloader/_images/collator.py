"""Images in the loader: ``ImageCollator`` and native chains bound to an epoch.

A native :class:`~dataloader.transforms.Transform` given to a ``DataLoader``
is bound, each epoch, to the loader's seed and the epoch number
(:class:`ItemTransform`), so every item draws its random crops and flips
from its own generator, whichever thread runs it. When the chain has a fixed
output shape and the loader collates with an :class:`ImageCollator`, each
item's last op writes straight into its slot of a pooled batch buffer
(:meth:`ImageCollator.assembler`); otherwise items become ``Image`` objects
and the collator copies them into the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataloader._core.buffers import POOL_CAPACITY_MAX, BufferPool
from dataloader._core.image import Image, ImageBatch, new_batch
from dataloader._images.arguments import check_choice, check_image_shape, check_int
from dataloader._images.chains import ItemTransform, output_shape
from dataloader._loading.collate import PooledCollator, default_collate, register_collate

__all__ = ["ImageCollator", "default_image_collator"]

class ImageCollator(PooledCollator):
    """Collate images of one shape into one :class:`~dataloader.kernels.ImageBatch`.

    Items are ``Image`` objects (or uint8/float32 HWC arrays), or tuples
    ``(image, label, ...)``: those give ``(ImageBatch, labels, ...)`` with
    the rest collated by :func:`default_collate`. Batch memory comes from
    this collator's pool and returns to it when the batch and every view of
    it are gone, so a steady epoch allocates no new batch memory.

    Parameters
    ----------
    layout : {"NCHW", "NHWC"}, default "NCHW"
    dtype : {None, "uint8", "float32"}
        ``None`` keeps the images' sample type; ``"float32"`` converts uint8
        samples to float32 in [0, 1] (as ``ToFloat``).
    pool_capacity : int, default 8
        Idle batch buffers kept for reuse.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import ImageCollator
    >>> from dataloader.kernels import Image
    >>> images = [Image.from_array(np.full((2, 3, 3), i, np.uint8)) for i in range(4)]
    >>> batch, labels = ImageCollator()([(image, i) for i, image in enumerate(images)])
    >>> batch.shape, labels.tolist()
    ((4, 3, 2, 3), [0, 1, 2, 3])
    """

    def __init__(self, layout: str = "NCHW", dtype: str | None = None, pool_capacity: int = 8):
        self.layout = check_choice("layout", layout, ("NCHW", "NHWC"))
        self.dtype = check_choice("dtype", dtype, (None, "uint8", "float32"))
        self.pool = BufferPool(check_int("pool_capacity", pool_capacity, 0, POOL_CAPACITY_MAX))

    def __repr__(self) -> str:
        return f"ImageCollator(layout={self.layout!r}, dtype={self.dtype!r})"


    def __call__(self, items: Sequence[Any]) -> Any:
        if len(items) == 0:
            raise ValueError("ImageCollator got an empty batch")
        if isinstance(items[0], (tuple, list)):
            # Every item (image, label, ...) alike, as default_collate wants its fields.
            for position, item in enumerate(items):
                if not isinstance(item, (tuple, list)) or not 1 <= len(item) == len(items[0]):
                    raise ValueError(
                        f"ImageCollator: item {position} is {type(item).__name__} of length "
                        f"{len(item) if isinstance(item, (tuple, list)) else '-'}, item 0 is "
                        f"{type(items[0]).__name__} of length {len(items[0])}: items must all be "
                        "images, or all tuples (image, label, ...) of one length")
            images = [item[0] for item in items]
            rest = default_collate([tuple(item[1:]) for item in items])
            return (self.stack(images), *rest)
        return self.stack(items)

    def stack(self, images: Sequence[Any]) -> ImageBatch:
        """One pooled ``ImageBatch`` holding ``images`` (all of one shape and type)."""
        arrays = [_hwc_array(image, position) for position, image in enumerate(images)]
        if not arrays:
            raise ValueError("ImageCollator got an empty batch")
        first = arrays[0]
        for position, array in enumerate(arrays):
            if array.shape != first.shape or array.dtype != first.dtype:
                raise ValueError(
                    f"ImageCollator: item {position} is a {array.dtype} image of shape (H, W, C) "
                    f"{array.shape}, item 0 is a {first.dtype} image of shape {first.shape}"
                )
        dtype = self.dtype or str(first.dtype)
        if dtype == "uint8" and first.dtype != np.uint8:
            raise ValueError("ImageCollator: cannot store float32 images as uint8")
        height, width, channels = first.shape  # (H, W, C): _hwc_array checked it
        batch = self.new_batch(len(arrays), height, width, channels, dtype)
        slots = np.asarray(batch)
        for position, array in enumerate(arrays):
            slot = slots[position].transpose(1, 2, 0) if self.layout == "NCHW" else slots[position]
            if slot.dtype != array.dtype:
                np.divide(array, np.float32(255), out=slot, dtype=np.float32)
            else:
                slot[...] = array
        return batch

    def new_batch(self, n: int, height: int, width: int, channels: int, dtype: str) -> ImageBatch:
        """An uninitialised pooled batch of ``n`` images in this collator's layout."""
        nchw = self.layout == "NCHW"
        shape = (n, channels, height, width) if nchw else (n, height, width, channels)
        return new_batch(self.pool, shape, dtype, self.layout)

    def assembler(self, transform: Any) -> Callable[[list[int], list[Any]], Any] | None:
        """A function writing each item's transform straight into its batch slot.

        ``None`` unless ``transform`` is a native chain bound to an epoch
        (``Transform.bind_epoch``) whose output shape is fixed and fits this
        collator's layout and dtype.
        """
        if not isinstance(transform, ItemTransform):
            return None
        shape = output_shape(transform.transform)
        if shape is None:
            return None
        height, width, channels, dtype, layout = shape
        if layout != self.layout[1:] or (self.dtype is not None and self.dtype != dtype):
            return None
        chain = transform.chain

        def assemble(indices: list[int], items: list[Any]) -> Any:
            batch = self.new_batch(len(items), height, width, channels, dtype)
            labelled = len(items) > 0 and isinstance(items[0], (tuple, list))
            for position, (index, item) in enumerate(zip(indices, items, strict=True)):
                data = item[0] if labelled else item
                chain.apply_into(data, transform.item_seed(index), batch, position)
            if not labelled:
                return batch
            return (batch, *default_collate([tuple(item[1:]) for item in items]))

        # The batches are this collator's of the images transformed one by one:
        # the same chain with the same seeds, written where stack() would copy it.
        assemble.same_as_collate = True  # type: ignore[attr-defined]
        return assemble


_DEFAULT_COLLATOR: list[ImageCollator] = []


def default_image_collator() -> ImageCollator:
    """The collator ``default_collate`` uses for ``Image`` items (one pool per process)."""
    if not _DEFAULT_COLLATOR:
        _DEFAULT_COLLATOR.append(ImageCollator())
    return _DEFAULT_COLLATOR[0]


def _collate_images(images: list[Any]) -> ImageBatch:
    return default_image_collator().stack(images)


def _collate_image_batches(batches: list[Any]) -> np.ndarray:
    # As tensors stack: one array with a new leading axis, in each batch's layout.
    return default_collate([np.asarray(batch) for batch in batches])


register_collate(Image, _collate_images)
register_collate(ImageBatch, _collate_image_batches)


def _hwc_array(image: Any, position: int) -> np.ndarray:
    if isinstance(image, Image):
        array = np.asarray(image)
        return array.transpose(1, 2, 0) if image.layout == "CHW" else array
    if isinstance(image, np.ndarray) and image.dtype in (np.uint8, np.float32):
        check_image_shape(image.shape, "HWC", f"ImageCollator: item {position}")
        return image[:, :, None] if image.ndim == 2 else image
    raise ValueError(f"ImageCollator: item {position} is {type(image).__name__}, expected an "
                     "Image or a uint8/float32 (H, W, C) array")
