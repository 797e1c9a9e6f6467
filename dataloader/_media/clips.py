"""Clips in the loader: one random draw per clip, and clips collated into pooled batches.

A clip is a uint8 ``(T, H, W, C)`` array (what ``decode_video`` returns).
:class:`ClipTransform` runs a native image chain on every frame of a clip
with the clip's one seed, so a random crop, flip or colour jitter is drawn
once and applied to every frame alike (the native draws depend on the seed
and the frame's size only). :class:`ClipCollator` writes clips into pooled
``(B, T, C, H, W)`` or ``(B, T, H, W, C)`` batches; given an epoch's clip
transform that says its clips' shape (:class:`EpochClips`: a
``ClipTransform``'s, or a ``VideoFolder``'s decoder) its assembler writes
each clip straight into its slot of the batch: decoded there by libswscale,
or written there by the chain's last op.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataloader._core.buffers import POOL_CAPACITY_MAX, BufferPool, pooled_array
from dataloader._core.pipeline import Chain
from dataloader._core.pipeline import item_seed as _native_item_seed
from dataloader._images.arguments import check_choice, check_int, check_seed
from dataloader._images.chains import Compose, Transform, compile_chain, output_shape
from dataloader._images.conversion import ToChw, ToRgb
from dataloader._loading.collate import (
    PooledCollator,
    allocate,
    default_collate,
    has_batch_memory,
)

__all__ = ["ClipCollator", "ClipSlots", "ClipTransform", "EpochClipTransform", "EpochClips",
           "check_clip", "clip_seed", "run_frames"]

_SEED_MASK = 2**63 - 1
_LAYOUTS = ("NTCHW", "NTHWC")


def clip_seed(seed: int, epoch: int, index: int) -> int:
    """The seed of item ``index``'s clip transform in one epoch (the image chains' rule)."""
    return _native_item_seed(seed, epoch, index) & _SEED_MASK


def check_clip(clip: Any, name: str = "clip") -> np.ndarray:
    """``clip`` as a C-contiguous uint8 or float32 ``(T, H, W, C)`` array, or ``ValueError``."""
    if not isinstance(clip, np.ndarray):
        raise TypeError(f"{name} must be a numpy array (T, H, W, C), got {type(clip).__name__}")
    if clip.ndim != 4 or clip.dtype not in (np.uint8, np.float32) or not 1 <= clip.shape[3] <= 4:
        raise ValueError(f"{name} must be a uint8 or float32 (T, H, W, C) array of 1 to 4 "
                         f"channels, got {clip.dtype} of shape {clip.shape}")
    return np.ascontiguousarray(clip)


def run_frames(chain: Chain, clip: np.ndarray, seed: int, out: np.ndarray | None = None,
               chw: bool = False) -> np.ndarray:
    """Run a compiled ``chain`` on every frame of uint8 ``clip`` with one ``seed``, into
    ``out`` (frames of the chain's output, CHW with ``chw``), or into a new array
    whose frame shape the first frame's result says."""
    if out is not None:
        chain.apply_frames_into(clip, seed, out, chw)
        return out
    first = chain.apply(clip[0], seed)
    if first.layout != ("CHW" if chw else "HWC"):
        raise ValueError(f"the clip transform ends in {first.layout} frames; clips stay "
                         "(T, H, W, C): leave out ToChw and collate with "
                         "ClipCollator(layout='NTCHW')")
    first_array = np.asarray(first)
    out = np.empty((len(clip), *first_array.shape), first_array.dtype)
    out[0] = first_array
    chain.apply_frames_into(clip[1:], seed, out[1:], chw)
    return out


class EpochClips:
    """An epoch's clip transform, ``transform(index, item)``, that can also write its
    clips into batch slots: what :meth:`ClipCollator.assembler` looks for."""

    def clip_shape(self) -> tuple[int, int, int, int, str] | None:
        """``(T, H, W, C, dtype)`` of every clip, or ``None`` when it depends on the item."""
        raise NotImplementedError

    def clip_into(self, index: int, data: Any, out: np.ndarray, chw: bool) -> None:
        """Write item ``index``'s clip, made from ``data``, into ``out``: ``(T, C, H, W)``
        with ``chw``, else ``(T, H, W, C)``."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class ClipTransform:
    """A native image transform applied to every frame of a clip with one random draw.

    Random crops, flips and colour changes are drawn once per clip (from
    its seed) and applied to every frame alike; in a ``DataLoader`` the
    seed is the item's, from ``(seed, epoch, index)``, as for images. The
    frames stay HWC: ``ClipCollator(layout="NTCHW")`` makes the batch CHW.

    Parameters
    ----------
    transform : Transform
        A chain of ``dataloader.transforms`` on uint8 HWC images (no
        ``Decode``, and no ``ToChw``/``ToTensor``: clips are ``(T, H, W, C)``).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import ClipTransform
    >>> from dataloader.transforms import ColorJitter, Compose, RandomHFlip, RandomResizedCrop
    >>> augment = ClipTransform(Compose([RandomResizedCrop(32), RandomHFlip(),
    ...                                  ColorJitter(0.4, 0.4)]))
    >>> clip = np.random.default_rng(0).integers(0, 256, (8, 48, 64, 3), np.uint8)
    >>> clip[:] = clip[0]                       # eight equal frames
    >>> out = augment(clip, seed=7)
    >>> out.shape, bool((out == out[0]).all())  # one draw: still eight equal frames
    ((8, 32, 32, 3), True)
    >>> bool((augment(clip, seed=7) == out).all())
    True
    """

    transform: Transform

    def __post_init__(self) -> None:
        if isinstance(self.transform, Compose) and not self.transform.transforms:
            raise ValueError("ClipTransform got an empty Compose")
        if not isinstance(self.transform, Transform):
            raise TypeError(f"ClipTransform takes a dataloader.transforms Transform, got "
                            f"{type(self.transform).__name__}")
        shape = output_shape(Compose([ToRgb(), self.transform]))
        if shape is not None and shape[4] != "HWC":
            raise ValueError(f"ClipTransform({self.transform!r}) ends in CHW frames; clips stay "
                             "(T, H, W, C): leave out ToChw and collate with "
                             "ClipCollator(layout='NTCHW')")

    def __call__(self, clip: Any, *, seed: int | None = None) -> np.ndarray:
        """The transformed clip, ``(T, H', W', C')``; ``seed`` (0 to 2**64 - 1) fixes its draw."""
        if seed is None:
            seed = int(np.random.default_rng().integers(2**63))
        return self.apply(check_clip(clip), check_seed(seed))

    def frame_shape(self, channels: int | None = None) -> tuple[int, int, int, str] | None:
        """``(H, W, C, dtype)`` of every output frame (of frames of ``channels`` channels,
        when known), or ``None`` when it depends on the clip."""
        # The native shape rule knows the channels only after a conversion;
        # ToRgb on RGB frames stands for "three channels" and changes nothing.
        known = Compose([ToRgb(), self.transform]) if channels == 3 else self.transform
        shape = output_shape(known)
        return None if shape is None else shape[:4]

    def apply(self, clip: np.ndarray, seed: int) -> np.ndarray:
        """The transformed clip (``clip`` checked by :func:`check_clip`, uint8)."""
        if clip.dtype != np.uint8:
            raise ValueError(f"ClipTransform takes uint8 clips, got {clip.dtype}")
        shape = self.frame_shape(clip.shape[3])
        if shape is not None:
            height, width, channels, dtype = shape
            out = np.empty((len(clip), height, width, channels), dtype)
            compile_chain(self.transform).apply_frames_into(clip, seed, out, False)
            return out
        # The size depends on the frames: the first one says it.
        return run_frames(compile_chain(self.transform), clip, seed)

    def clip_into(self, clip: np.ndarray, seed: int, out: np.ndarray, chw: bool) -> None:
        """Write the transformed ``clip`` (uint8) into ``out``, of CHW frames with ``chw``."""
        transform = Compose([self.transform, ToChw()]) if chw else self.transform
        compile_chain(transform).apply_frames_into(clip, seed, out, chw)

    def bind_epoch(self, seed: int, epoch: int) -> EpochClipTransform:
        """This transform as the loader runs it in one epoch: ``transform(index, item)``,
        the clip (or the first element of a tuple ``(clip, label, ...)``) drawn from
        ``(seed, epoch, index)``.

        Examples
        --------
        >>> import numpy as np
        >>> from dataloader import ClipTransform
        >>> from dataloader.transforms import RandomCrop
        >>> bound = ClipTransform(RandomCrop(4)).bind_epoch(seed=0, epoch=1)
        >>> clip, label = bound(3, (np.zeros((2, 8, 8, 3), np.uint8), 5))
        >>> clip.shape, label
        ((2, 4, 4, 3), 5)
        """
        return EpochClipTransform(self, seed, epoch)


class EpochClipTransform(EpochClips):
    """A :class:`ClipTransform` bound to one epoch (``ClipTransform.bind_epoch``)."""

    __slots__ = ("epoch", "seed", "transform")

    def __init__(self, transform: ClipTransform, seed: int, epoch: int) -> None:
        self.transform, self.seed, self.epoch = transform, seed, epoch

    def __call__(self, index: int, item: Any) -> Any:
        seed = clip_seed(self.seed, self.epoch, index)
        if isinstance(item, (tuple, list)):
            if not item:
                raise ValueError(f"item {index} is an empty {type(item).__name__}: a clip "
                                 "transform takes a clip, or a tuple (clip, label, ...)")
            return (self.transform.apply(check_clip(item[0], f"item {index}'s clip"), seed),
                    *item[1:])
        return self.transform.apply(check_clip(item, f"item {index}"), seed)

    def clip_shape(self) -> None:
        # The frame count is the items': only a clip decoder knows it beforehand.
        return None

    def clip_into(self, index: int, data: Any, out: np.ndarray, chw: bool) -> None:
        self.transform.clip_into(check_clip(data, f"item {index}"),
                                 clip_seed(self.seed, self.epoch, index), out, chw)


class ClipCollator(PooledCollator):
    """Collate clips of one shape into one pooled ``(B, T, C, H, W)`` or ``(B, T, H, W, C)``
    array.

    Items are uint8 or float32 ``(T, H, W, C)`` clips, or tuples ``(clip, label,
    ...)``: those give ``(clips, labels, ...)`` with the rest collated by
    :func:`~dataloader.default_collate`. Batch memory is a worker's (a
    worker thread's pool, a worker process's shared slot) or this
    collator's pool, and returns to it when the batch and every view of it
    are gone. With a ``VideoFolder`` whose clips have a fixed size (a
    ``(height, width)`` ``size``, or a clip transform of fixed output) each
    clip is decoded (and transformed) straight into its slot of the batch.

    Parameters
    ----------
    layout : {"NTCHW", "NTHWC"}, default "NTCHW"
    dtype : {None, "uint8", "float32"}
        ``None`` keeps the clips' sample type; ``"float32"`` converts uint8
        samples to float32 in [0, 1].
    pool_capacity : int, default 8
        Idle batch buffers kept for reuse.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import ClipCollator
    >>> clips = [np.full((4, 6, 8, 3), i, np.uint8) for i in range(2)]
    >>> batch, labels = ClipCollator()([(clip, i) for i, clip in enumerate(clips)])
    >>> batch.shape, batch.dtype, labels.tolist()
    ((2, 4, 3, 6, 8), dtype('uint8'), [0, 1])
    >>> ClipCollator("NTHWC", dtype="float32")(clips).shape
    (2, 4, 6, 8, 3)
    """

    def __init__(self, layout: str = "NTCHW", dtype: str | None = None,
                 pool_capacity: int = 8) -> None:
        self.layout = check_choice("layout", layout, _LAYOUTS)
        self.dtype = check_choice("dtype", dtype, (None, "uint8", "float32"))
        self.pool = BufferPool(check_int("pool_capacity", pool_capacity, 0, POOL_CAPACITY_MAX))

    def __repr__(self) -> str:
        return f"ClipCollator(layout={self.layout!r}, dtype={self.dtype!r})"

    def __call__(self, items: Sequence[Any]) -> Any:
        if len(items) == 0:
            raise ValueError("ClipCollator got an empty batch")
        if not isinstance(items[0], (tuple, list)):
            return self.stack(items)
        for position, item in enumerate(items):
            if not isinstance(item, (tuple, list)) or not 1 <= len(item) == len(items[0]):
                raise ValueError(
                    f"ClipCollator: item {position} is {type(item).__name__}, item 0 a "
                    f"{type(items[0]).__name__} of length {len(items[0])}: items must all be "
                    "clips, or all tuples (clip, label, ...) of one length")
        rest = default_collate([tuple(item[1:]) for item in items])
        return (self.stack([item[0] for item in items]), *rest)

    def stack(self, clips: Sequence[Any]) -> np.ndarray:
        """One pooled batch holding ``clips`` (all of one shape and sample type)."""
        arrays = [check_clip(clip, f"ClipCollator: item {position}")
                  for position, clip in enumerate(clips)]
        if not arrays:
            raise ValueError("ClipCollator got an empty batch")
        first = arrays[0]
        for position, array in enumerate(arrays):
            if array.shape != first.shape or array.dtype != first.dtype:
                raise ValueError(f"ClipCollator: item {position} is a {array.dtype} clip of shape "
                                 f"(T, H, W, C) {array.shape}, item 0 a {first.dtype} clip of "
                                 f"shape {first.shape}")
        dtype = self.dtype or str(first.dtype)
        if dtype == "uint8" and first.dtype != np.uint8:
            raise ValueError("ClipCollator: cannot store float32 clips as uint8")
        batch = self.new_batch(len(arrays), first.shape, dtype)
        for position, array in enumerate(arrays):
            slot = batch[position].transpose(0, 2, 3, 1) if self.chw else batch[position]
            if slot.dtype != array.dtype:
                np.divide(array, np.float32(255), out=slot, dtype=np.float32)
            else:
                slot[...] = array
        return batch

    @property
    def chw(self) -> bool:
        return self.layout == "NTCHW"

    def new_batch(self, n: int, clip_shape: tuple[int, ...], dtype: str) -> np.ndarray:
        """Uninitialised batch memory for ``n`` clips of ``(T, H, W, C)`` ``clip_shape``, in
        this collator's layout."""
        frames, height, width, channels = clip_shape
        shape = ((n, frames, channels, height, width) if self.chw
                 else (n, frames, height, width, channels))
        if has_batch_memory():
            return allocate(shape, np.dtype(dtype))
        return pooled_array(self.pool, shape, np.dtype(dtype))

    def assembler(self, transform: Any) -> Callable[[list[int], Sequence[Any]], Any] | None:
        """A function writing each item's clip straight into its batch slot.

        ``None`` unless ``transform`` is an epoch's clip transform that says
        its clips' shape (:class:`EpochClips`) in this collator's dtype.
        """
        if not isinstance(transform, EpochClips):
            return None
        shape = transform.clip_shape()
        if shape is None or (self.dtype is not None and self.dtype != shape[4]):
            return None
        clip_shape, dtype, chw = shape[:4], shape[4], self.chw

        def assemble(indices: list[int], items: Sequence[Any]) -> Any:
            batch = self.new_batch(len(items), clip_shape, dtype)
            labelled = len(items) > 0 and isinstance(items[0], (tuple, list))
            for position, (index, item) in enumerate(zip(indices, items, strict=True)):
                transform.clip_into(index, item[0] if labelled else item, batch[position], chw)
            if not labelled:
                return batch
            return (batch, *default_collate([tuple(item[1:]) for item in items]))

        def slots(count: int) -> ClipSlots:
            return ClipSlots(self, transform, count, (clip_shape, dtype))

        # The batches are this collator's of the clips transformed one by one.
        assemble.same_as_collate = True  # type: ignore[attr-defined]
        assemble.slots = slots  # type: ignore[attr-defined]
        return assemble


class ClipSlots:
    """One batch of clips assembled an item at a time, from any threads.

    ``put(position, index, item)`` writes item ``index``'s clip, made from
    its raw ``item`` (``data`` or ``(data, label, ...)``), straight into
    slot ``position`` of the batch; ``finish()``, once every slot is put,
    returns what the assembler returns for the batch: the collator's
    collation of the clips transformed one by one. Puts of different slots
    may run at once on different threads (they write disjoint memory); the
    batch memory is taken by the first put, from that thread's batch
    memory (a worker thread's pool), as a whole batch's would be.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import ClipCollator, ClipTransform
    >>> from dataloader.transforms import CenterCrop
    >>> bound = ClipTransform(CenterCrop(4)).bind_epoch(seed=0, epoch=0)
    >>> class Fixed(type(bound)):
    ...     def clip_shape(self):
    ...         return (2, 4, 4, 3, "uint8")
    >>> slots = ClipCollator("NTHWC").assembler(Fixed(bound.transform, 0, 0)).slots(2)
    >>> for position in (1, 0):
    ...     slots.put(position, position, (np.full((2, 8, 8, 3), position, np.uint8), position))
    >>> clips, labels = slots.finish()
    >>> clips.shape, clips[:, 0, 0, 0, 0].tolist(), labels.tolist()
    ((2, 2, 4, 4, 3), [0, 1], [0, 1])
    """

    def __init__(self, collator: ClipCollator, transform: EpochClips, count: int,
                 shape: tuple[tuple[int, ...], str]) -> None:
        self.collator, self.transform, self.count, self.shape = collator, transform, count, shape
        self.batch: np.ndarray | None = None
        self.lock = threading.Lock()   # guards the batch's allocation, by the first put
        # Each slot's item was a tuple, and what follows its clip (collated at the end).
        self.labelled: list[bool | None] = [None] * count
        self.rest: list[tuple[Any, ...]] = [()] * count

    def put(self, position: int, index: int, item: Any) -> None:
        """Write item ``index``'s clip into slot ``position``."""
        labelled = isinstance(item, (tuple, list))
        self.transform.clip_into(index, item[0] if labelled else item,
                                 self._memory()[position], self.collator.chw)
        self.labelled[position] = labelled
        self.rest[position] = tuple(item[1:]) if labelled else ()

    def finish(self) -> Any:
        """The batch, once every slot is put: ``batch`` or ``(batch, labels, ...)``."""
        if self.count == 0:
            raise ValueError("ClipCollator got an empty batch")
        for position, labelled in enumerate(self.labelled):
            if labelled != self.labelled[0] or (labelled and len(self.rest[position]) !=
                                                len(self.rest[0])):
                raise ValueError(
                    f"ClipCollator: item {position} and item 0 differ in structure: items "
                    "must all be clips, or all tuples (clip, label, ...) of one length")
        batch = self._memory()
        if not self.labelled[0]:
            return batch
        return (batch, *default_collate(self.rest))

    def _memory(self) -> np.ndarray:
        with self.lock:
            if self.batch is None:
                clip_shape, dtype = self.shape
                self.batch = self.collator.new_batch(self.count, clip_shape, dtype)
            return self.batch
