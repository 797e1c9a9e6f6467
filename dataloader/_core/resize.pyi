import numpy as np

FILTERS: tuple[str, ...]

def resize_into(src: np.ndarray, out: np.ndarray, filter: int, antialias: bool,
                fast: bool = False) -> None: ...
def vectorised(request: bool | None = None) -> bool: ...
