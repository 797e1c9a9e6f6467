from typing import Any

import numpy as np

MAX_SIDE: int
MAX_BYTES: int
IMAGE_RULE: str
FILL_RULE: str

def check_image_shape(shape: tuple[int, ...], layout: str = "HWC", name: str = "img") -> None: ...
def check_nbytes(
    shape: tuple[int, ...], dtype: Any, nbytes: int, name: str = "an image"
) -> None: ...
def check_fill_samples(values: Any, dtype: Any, name: str = "fill") -> None: ...
def as_array(obj: Any, name: str = "obj") -> np.ndarray: ...
