"""Decoding and conversions of an image's representation, as native ops.

``Decode`` turns encoded bytes into uint8 HWC pixels; the others convert
what a pixel is: its channels (``ToRgb``, ``ToRgba``, ``ToGray``), its
sample type (``ToFloat``, and ``Normalize``, which writes float32), and
the layout (``ToChw``, ``ToHwc``, and ``ToTensor``, torchvision's float
CHW). A float tail after the last resize is fused into its last pass
(``docs/transforms.md``, "Fusion"). Re-exported by ``dataloader.transforms``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._core.pipeline import step
from dataloader._images.arguments import (
    CHANNELS,
    MAX_BYTES,
    MAX_SIDE,
    check_bool,
    check_choice,
    check_int,
    check_mean_std,
)
from dataloader._images.chains import Transform, frozen, set_checked
from dataloader._images.decode import decode

__all__ = ["Decode", "Normalize", "ToChw", "ToFloat", "ToGray", "ToHwc", "ToRgb", "ToRgba",
           "ToTensor"]


@frozen
class Decode(Transform):
    """Decode JPEG, PNG or WebP bytes (GIF, BMP, TIFF through Pillow) into uint8 HWC.

    Parameters
    ----------
    mode : {None, "L", "RGB", "RGBA"}
        Convert while decoding; ``None`` keeps the image's own channels.
    max_width, max_height, max_bytes : int
        Limits checked from the header before any pixel memory is allocated;
        ``max_bytes`` counts the decoder's own memory with the output (see
        :func:`dataloader.kernels.decode`).
    exact : bool, default False
        Turn DCT scaling off: by default a JPEG that the next op shrinks is
        decoded at a DCT scale n/8 that stays 3 times its target, which is
        faster and changes pixels slightly (docs/transforms.md, "Fusion").
        Either way a crop after ``Decode`` decodes only its window, with the
        same pixels as the whole image cut.

    Examples
    --------
    >>> from dataloader.transforms import Compose, Decode, Resize
    >>> chain = Compose([Decode("L"), Resize((2, 4))])
    >>> import io
    >>> from PIL import Image as PILImage
    >>> png = io.BytesIO()
    >>> PILImage.new("RGB", (8, 4), (10, 20, 30)).save(png, "PNG")
    >>> chain(png.getvalue()).shape
    (2, 4, 1)
    """

    mode: str | None = None
    max_width: int = MAX_SIDE
    max_height: int = MAX_SIDE
    max_bytes: int = MAX_BYTES
    exact: bool = False

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, (None, *CHANNELS))
        set_checked(self, "max_width", check_int("max_width", self.max_width, 1))
        set_checked(self, "max_height", check_int("max_height", self.max_height, 1))
        set_checked(self, "max_bytes", check_int("max_bytes", self.max_bytes, 1, MAX_BYTES))
        set_checked(self, "exact", check_bool("exact", self.exact))

    def _steps(self):
        return [step("decode", channels=CHANNELS[self.mode] if self.mode else 0,
                     max_width=self.max_width, max_height=self.max_height,
                     exact=self.exact, max_bytes=self.max_bytes)]

    def _fallback(self, data: Any) -> np.ndarray:
        return decode(data, mode=self.mode, max_width=self.max_width,
                      max_height=self.max_height, max_bytes=self.max_bytes)


def _converter(name: str, mode: str, doc: str) -> type:
    channels = CHANNELS[mode]

    @frozen
    class Convert(Transform):
        def _steps(self):
            return [step("convert", channels=channels)]

    Convert.__name__ = Convert.__qualname__ = name
    Convert.__doc__ = doc
    return Convert


ToRgb = _converter("ToRgb", "RGB", """Convert to 3 channels, as Pillow's ``convert("RGB")``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToRgb
    >>> ToRgb()(np.zeros((2, 2), np.uint8)).shape
    (2, 2, 3)
    """)
ToRgba = _converter("ToRgba", "RGBA", """Convert to 4 channels (alpha 255 when added).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToRgba
    >>> ToRgba()(np.zeros((2, 2, 3), np.uint8))[0, 0].tolist()
    [0, 0, 0, 255]
    """)
ToGray = _converter("ToGray", "L", """Convert to 1 channel, as Pillow's ``convert("L")``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToGray
    >>> ToGray()(np.full((1, 1, 3), 200, np.uint8)).tolist()
    [[[200]]]
    """)


@frozen
class ToFloat(Transform):
    """uint8 samples to float32 in [0, 1] (divided by 255).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToFloat
    >>> ToFloat()(np.array([[0, 255]], np.uint8))[:, :, 0].tolist()
    [[0.0, 1.0]]
    """

    def _steps(self):
        return [step("to_float")]


@frozen
class Normalize(Transform):
    """``(x - mean[c]) / std[c]`` in float32, as torchvision's ``Normalize``.

    uint8 input is first divided by 255 (as :class:`ToFloat`).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import Normalize
    >>> Normalize([0.5], [0.5])(np.array([[0.0, 1.0]], np.float32))[:, :, 0].tolist()
    [[-1.0, 1.0]]
    """

    mean: Sequence[float]
    std: Sequence[float]

    def __post_init__(self) -> None:
        mean, std = check_mean_std(self.mean, self.std)
        set_checked(self, "mean", mean)
        set_checked(self, "std", std)

    def _steps(self):
        return [step("normalize", channels=len(self.mean), mean=self.mean, std=self.std)]


@frozen
class ToChw(Transform):
    """HWC to CHW (channels first).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToChw
    >>> ToChw()(np.zeros((4, 5, 3), np.uint8)).shape
    (3, 4, 5)
    """

    def _steps(self):
        return [step("to_chw")]


@frozen
class ToTensor(Transform):
    """torchvision's ``ToTensor``: uint8 HWC to float32 CHW in [0, 1].

    The same as ``ToFloat()`` then ``ToChw()``. The result is an ``Image``
    (an array for an array), not a tensor: a batch of them
    (``ImageCollator``) becomes a torch tensor with ``torch.from_dlpack``,
    without a copy.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.transforms import ToTensor
    >>> chw = ToTensor()(np.full((4, 5, 3), 255, np.uint8))
    >>> chw.shape, chw.dtype, float(chw.max())
    ((3, 4, 5), dtype('float32'), 1.0)
    """

    def _steps(self):
        return [step("to_float"), step("to_chw")]


@frozen
class ToHwc(Transform):
    """CHW back to HWC.

    Examples
    --------
    >>> from dataloader.kernels import Image
    >>> from dataloader.transforms import ToHwc
    >>> ToHwc()(Image(4, 5, 3, layout="CHW")).shape
    (4, 5, 3)
    """

    def _steps(self):
        return [step("to_hwc")]
