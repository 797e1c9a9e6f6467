"""A clip transform's first crop, done by libswscale while it converts the decoded frames.

When a :class:`~dataloader._media.clips.ClipTransform` starts with a crop
(``Crop``, ``CenterCrop``, ``RandomCrop``, ``RandomResizedCrop``: the ops
the native plan pass names as windows, ``dl_chain_lead_window`` in
``src/dl_plan.c``), a ``VideoFolder`` does not make whole frames to cut
them afterwards: the clip's one window is drawn from its seed against the
frames the transform would see (the stream's, or those of the folder's
``size``), mapped onto the stream's frames, and libswscale scales that
rectangle of the decoder's planes straight to the crop's output size. The
rest of the chain then runs on those frames from the generator's state
after the crop's draws, so a flip or colour draw is the one the whole
chain makes for that seed. A window reaching past the frame (``RandomCrop``
padding, a ``CenterCrop`` larger than the frame) or a filter libswscale
lacks (``lanczos``) leaves the clip to the whole chain.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataloader._core.pipeline import Chain, step
from dataloader._core.resize import FILTERS as RESIZE_FILTERS
from dataloader._images.chains import compile_chain
from dataloader._media.clips import ClipTransform, run_frames
from dataloader._media.source import native_media
from dataloader._media.video import FrameGeometry, output_size, source_box

__all__ = ["DecodeCrop", "PlannedCrop"]


class PlannedCrop:
    """One clip's crop, once its stream's frame size is known: the decode's geometry
    (``geometry(height, width)``, for ``decode_frames``) and then the rest of the
    chain (``finish``)."""

    __slots__ = ("chw", "crop", "fused", "interpolation", "out", "seed", "size")

    def __init__(self, crop: DecodeCrop, seed: int, size: Any, interpolation: str,
                 out: np.ndarray | None, chw: bool) -> None:
        self.crop, self.seed, self.size, self.interpolation = crop, seed, size, interpolation
        self.out, self.chw = out, chw
        self.fused = False

    def geometry(self, height: int, width: int) -> FrameGeometry:
        frame = output_size(self.size, height, width)   # what the transform would get
        window = self.crop.chain.lead_window(frame[0], frame[1], 3, self.seed)
        filter_code = -1 if window is None else window[6]
        interpolation = self.interpolation if filter_code < 0 else RESIZE_FILTERS[filter_code]
        if window is None or interpolation not in native_media().FILTERS:
            return FrameGeometry((0, 0, height, width), frame, self.interpolation)
        top, left, window_height, window_width, out_height, out_width, _, rest_seed = window
        self.fused, self.seed = True, rest_seed
        box = source_box((top, left, window_height, window_width), frame, (height, width))
        # Nothing after the crop: the decode writes the result itself.
        into = self.out if self.crop.rest[self.chw] is None else None
        return FrameGeometry(box, (out_height, out_width), interpolation, into)

    def finish(self, frames: np.ndarray) -> np.ndarray:
        """The transformed clip from the decoded ``frames`` (in ``out`` when given)."""
        chain = self.crop.rest[self.chw] if self.fused else self.crop.whole[self.chw]
        if chain is None:   # decoded into out (or a new array) already
            return frames
        return run_frames(chain, frames, self.seed, self.out, self.chw)


class DecodeCrop:
    """A clip transform split for a decode that does its first crop (see the module).

    Examples
    --------
    >>> from dataloader._media.clips import ClipTransform
    >>> from dataloader._media.crops import DecodeCrop
    >>> from dataloader._media.samples import sample_video
    >>> from dataloader._media.video import Clip, decode_frames
    >>> from dataloader.transforms import Compose, RandomHFlip, RandomResizedCrop
    >>> crop = DecodeCrop(ClipTransform(Compose([RandomResizedCrop(32), RandomHFlip()])))
    >>> planned = crop.plan(seed=5)
    >>> clip = planned.finish(decode_frames(sample_video(), Clip(4), planned.geometry))
    >>> clip.shape, planned.fused
    ((4, 32, 32, 3), True)
    """

    def __init__(self, transform: ClipTransform) -> None:
        self.transform = transform
        self.chain = compile_chain(transform.transform)
        steps = self.chain.steps
        self.rest = {chw: _chain(steps[1:], chw) for chw in (False, True)}
        self.whole = {False: self.chain, True: _chain(steps, True)}

    def __reduce__(self) -> tuple[Any, ...]:
        return DecodeCrop, (self.transform,)

    def plan(self, seed: int, size: Any = None, interpolation: str = "bilinear",
             out: np.ndarray | None = None, chw: bool = False) -> PlannedCrop:
        """The crop of the clip of ``seed`` whose frames are decoded at ``size``
        (``decode_video``'s) with ``interpolation``; the clip written into ``out``
        when given, of CHW frames with ``chw``."""
        return PlannedCrop(self, seed, size, interpolation, out, chw)


def _chain(steps: tuple[Any, ...], chw: bool) -> Any:
    """The chain of ``steps``, then ToChw with ``chw``; None when that is no op."""
    ops = [*steps, *([step("to_chw")] if chw else [])]
    return Chain(ops) if ops else None
