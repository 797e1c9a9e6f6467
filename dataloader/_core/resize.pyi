import numpy as np

FILTERS: tuple[str, ...]

def resize_into(src: np.ndarray, out: np.ndarray, filter: int, antialias: bool) -> None: ...
