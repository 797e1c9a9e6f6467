from typing import Any, Literal

import numpy as np

from dataloader._core.buffers import BufferPool

MAX_SIDE: int
MAX_BYTES: int

def check_image_shape(shape: tuple[int, ...], layout: str = "HWC", name: str = "img") -> None: ...

class _Samples:
    @property
    def layout(self) -> str: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def __array_interface__(self) -> dict[str, Any]: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any: ...

class Image(_Samples):
    def __init__(
        self,
        height: int,
        width: int,
        channels: int = 3,
        dtype: Literal["uint8", "float32"] = "uint8",
        layout: Literal["HWC", "CHW"] = "HWC",
    ) -> None: ...
    @property
    def height(self) -> int: ...
    @property
    def width(self) -> int: ...
    @property
    def channels(self) -> int: ...
    @staticmethod
    def from_array(obj: Any, layout: Literal["HWC", "CHW"] = "HWC") -> Image: ...

class ImageBatch(_Samples):
    def __init__(
        self,
        n: int,
        height: int,
        width: int,
        channels: int = 3,
        dtype: Literal["uint8", "float32"] = "uint8",
        layout: Literal["NCHW", "NHWC"] = "NCHW",
    ) -> None: ...
    @staticmethod
    def from_array(obj: Any, layout: Literal["NCHW", "NHWC"] = "NCHW") -> ImageBatch: ...
    def pin_memory(self) -> Any: ...

def new_batch(
    pool: BufferPool, shape: tuple[int, int, int, int], dtype: str, layout: str
) -> ImageBatch: ...
