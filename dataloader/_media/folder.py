"""``VideoFolder``: videos in one subfolder per class, read as clips.

A :class:`ClipSampler` says which clips: ``clips_per_video`` of
``num_frames`` frames ``stride`` apart from each video, at random places
(training) or evenly spaced (evaluation). In a ``DataLoader`` the folder's
``transform`` is bound to the loader's seed and each epoch (the loader's
``bind_epoch`` protocol, ``_loading/plugins.py``), so a random clip is a
function of ``(seed, epoch, index)``: the same whichever worker decodes it,
different each epoch, and repeated exactly by a resumed epoch.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np

from dataloader._datasets.class_folders import scan_class_folders
from dataloader._images.arguments import check_bool, check_int, check_size
from dataloader._images.chains import Transform
from dataloader._media.clips import ClipTransform, EpochClips, clip_seed
from dataloader._media.crops import DecodeCrop
from dataloader._media.info import VIDEO_EXTENSIONS
from dataloader._media.video import decode_frames, decode_video
from dataloader._sampling.seeding import item_seed

__all__ = ["ClipSampler", "VideoFolder"]


@dataclasses.dataclass(frozen=True)
class ClipSampler:
    """Which clips a :class:`VideoFolder` reads from each video.

    Parameters
    ----------
    num_frames : int
        Frames per clip.
    stride : int
        Frames between two of a clip's frames (1: consecutive).
    clips_per_video : int
        Clips read from each video: the folder has this many items per video.
    random : bool
        True: each clip starts at a random frame, drawn from ``(seed, epoch,
        index)``; False: the clips of a video start evenly spaced, at the
        middles of ``clips_per_video`` equal parts of the possible starts.
        A video shorter than a clip repeats its last frame.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import ClipSampler
    >>> sampler = ClipSampler(4, stride=2, clips_per_video=2, random=False)
    >>> times = np.arange(20) / 25.0            # 20 frames at 25 fps
    >>> [sampler.clip(k, 0.0).frame_numbers(times).tolist() for k in range(2)]
    [[3, 5, 7, 9], [10, 12, 14, 16]]
    """

    num_frames: int
    stride: int = 1
    clips_per_video: int = 1
    random: bool = True

    def __post_init__(self):
        check_int("num_frames", self.num_frames, 1, 1 << 20)
        check_int("stride", self.stride, 1, 1 << 20)
        check_int("clips_per_video", self.clips_per_video, 1, 1 << 20)
        check_bool("random", self.random)

    def clip(self, which: int, draw: float) -> SampledClip:
        """Clip ``which`` (0 to clips_per_video - 1) of a video; ``draw`` in [0, 1)
        places a random clip."""
        place = draw if self.random else (which + 0.5) / self.clips_per_video
        return SampledClip(self.num_frames, self.stride, place)


@dataclasses.dataclass(frozen=True)
class SampledClip:
    """A clip at ``place`` (0: the first possible start, 1: the last) of any video:
    a frame selection for ``decode_video``."""

    num_frames: int
    stride: int
    place: float

    def frame_numbers(self, times: np.ndarray) -> np.ndarray:
        span = (self.num_frames - 1) * self.stride + 1
        starts = max(len(times) - span + 1, 1)
        first = min(int(self.place * starts), starts - 1)
        frames = first + self.stride * np.arange(self.num_frames, dtype=np.int64)
        return np.minimum(frames, len(times) - 1)


@dataclasses.dataclass(frozen=True)
class ClipDecoder:
    """A :class:`VideoFolder`'s transform: ``(path, class_index)`` to ``(clip,
    class_index)``, bound to each epoch by the loader."""

    sampler: ClipSampler
    size: Any = None
    transform: ClipTransform | None = None

    def bind_epoch(self, seed: int, epoch: int) -> EpochClipDecoder:
        return EpochClipDecoder(self, seed, epoch)


class EpochClipDecoder(EpochClips):
    """A :class:`ClipDecoder` bound to one epoch: each item's clip place and its clip
    transform's draw come from ``(seed, epoch, index)``. A transform that starts
    with a crop has it done at decode (``_media/crops.py``)."""

    __slots__ = ("crop", "decoder", "epoch", "seed")

    def __init__(self, decoder: ClipDecoder, seed: int, epoch: int) -> None:
        self.decoder, self.seed, self.epoch = decoder, seed, epoch
        transform = decoder.transform
        self.crop = None if transform is None else DecodeCrop(transform)

    def __call__(self, index: int, item: tuple[str, int]) -> tuple[np.ndarray, int]:
        path, target = item
        return self._decode(index, path, None, False), target

    def _clip(self, index: int) -> SampledClip:
        sampler = self.decoder.sampler
        draw = np.random.default_rng(item_seed(self.seed, self.epoch, index)).random()
        return sampler.clip(index % sampler.clips_per_video, draw)

    def _decode(self, index: int, source: Any, out: np.ndarray | None, chw: bool) -> np.ndarray:
        size = self.decoder.size
        if self.crop is None and not chw:
            return decode_video(source, self._clip(index), size=size, out=out)
        if self.crop is None:   # CHW slots (clip_into): the decoded clip transposed there
            clip = decode_video(source, self._clip(index), size=size)
            assert out is not None
            np.copyto(out, clip.transpose(0, 3, 1, 2))
            return out
        planned = self.crop.plan(clip_seed(self.seed, self.epoch, index), size, out=out, chw=chw)
        return planned.finish(decode_frames(source, self._clip(index), planned.geometry))

    def clip_shape(self) -> tuple[int, int, int, int, str] | None:
        frames, size, transform = self.decoder.sampler.num_frames, self.decoder.size, (
            self.decoder.transform)
        if transform is not None:
            shape = transform.frame_shape(3)   # decoded frames are RGB
            return None if shape is None else (frames, *shape)
        if isinstance(size, tuple):   # (height, width): every video's frames at that size
            return (frames, *size, 3, "uint8")
        return None

    def clip_into(self, index: int, data: Any, out: np.ndarray, chw: bool) -> None:
        self._decode(index, data, out, chw)


class VideoFolder:
    """Videos in one subfolder per class, as clips: items are ``(clip, class_index)``
    with ``clip`` uint8 ``(num_frames, H, W, 3)``.

    Item ``i`` is clip ``i % clips_per_video`` of video ``i // clips_per_video``
    (``samples`` lists the videos). Batches of the default collation are
    ``(B, T, H, W, 3)``. Outside a loader, ``folder[i]`` is the clip of
    seed 0 and epoch 0.

    Parameters
    ----------
    root : path
    sampler : ClipSampler
    size : int or (int, int), optional
        Each frame resized at decode (``decode_video``'s ``size``).
    transform : ClipTransform or Transform, optional
        Applied to every frame of each clip with one random draw per clip
        (a ``Transform`` is wrapped in a :class:`ClipTransform`), seeded by
        ``(seed, epoch, index)``. A first op that crops (``RandomResizedCrop``,
        ``RandomCrop``, ``CenterCrop``, ``Crop``) is done at decode: only its
        window is converted, scaled straight to its size (docs/video.md).
    extensions : tuple of str
        File name suffixes (case-insensitive) that count as videos.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from dataloader import ClipSampler, DataLoader, VideoFolder
    >>> from dataloader._media.samples import sample_video
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("run", "walk"):
    ...     (root / name).mkdir()
    ...     path = sample_video(root / name)
    >>> folder = VideoFolder(root, ClipSampler(8, stride=2, clips_per_video=3), size=(56, 96))
    >>> len(folder), folder.classes
    (6, ['run', 'walk'])
    >>> clips, labels = next(iter(DataLoader(folder, batch_size=4, shuffle=True, seed=0)))
    >>> clips.shape, clips.dtype
    ((4, 8, 56, 96, 3), dtype('uint8'))

    One random crop and flip per clip, into pooled ``(B, T, C, H, W)`` batches:

    >>> from dataloader import ClipCollator
    >>> from dataloader.transforms import Compose, RandomHFlip, RandomResizedCrop
    >>> folder = VideoFolder(root, ClipSampler(8, clips_per_video=2), size=(56, 96),
    ...                      transform=Compose([RandomResizedCrop(48), RandomHFlip()]))
    >>> loader = DataLoader(folder, batch_size=4, seed=0, collate_fn=ClipCollator())
    >>> next(iter(loader))[0].shape
    (4, 8, 3, 48, 48)
    """

    def __init__(self, root: str | os.PathLike, sampler: ClipSampler, *, size: Any = None,
                 transform: ClipTransform | Transform | None = None,
                 extensions: tuple[str, ...] = VIDEO_EXTENSIONS) -> None:
        if not isinstance(sampler, ClipSampler):
            raise TypeError(f"sampler must be a ClipSampler, got {type(sampler).__name__}")
        if isinstance(transform, Transform):
            transform = ClipTransform(transform)
        if transform is not None and not isinstance(transform, ClipTransform):
            raise TypeError("transform must be a ClipTransform or a dataloader.transforms "
                            f"Transform, got {type(transform).__name__}")
        if size is not None and not isinstance(size, numbers.Integral):
            size = check_size("size", tuple(size) if isinstance(size, list) else size, False)
        self.root = Path(root)
        found = scan_class_folders(self.root, extensions, "video")
        self.classes, self.class_to_idx, self.samples = (
            found.classes, found.class_to_idx, found.samples)
        self.sampler = sampler
        self.transform = ClipDecoder(sampler, size, transform)

    def __len__(self) -> int:
        return len(self.samples) * self.sampler.clips_per_video

    def raw_item(self, index: int) -> tuple[str, int]:
        """Item ``index`` before the transform: its video's path and class index."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is out of range for {len(self)} clips")
        return self.samples[index // self.sampler.clips_per_video]

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.transform.bind_epoch(0, 0)(index, self.raw_item(index))

    def __repr__(self) -> str:
        return (f"VideoFolder(root={str(self.root)!r}, {len(self.samples)} videos, "
                f"{len(self.classes)} classes, {self.sampler})")
