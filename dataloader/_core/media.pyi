import os
from types import TracebackType
from typing import Any

import numpy as np

FILTERS: dict[str, int]

class MediaFile:
    name: str
    def __init__(
        self, source: str | os.PathLike[str] | np.ndarray, name: str, probe_streams: bool = False
    ) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> MediaFile: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...
    def streams(self) -> list[dict[str, Any]]: ...
    def best_stream(self, kind: str) -> int: ...
    def frame_pts(self, stream: int) -> np.ndarray: ...
    def decode_frames_into(
        self, frames: np.ndarray, out: np.ndarray, crop: tuple[int, int, int, int], filter: int,
        threads: int,
    ) -> None: ...
    def decode_audio(
        self, stream: int, sample_rate: int, channels: int, start: float, end: float
    ) -> np.ndarray: ...
