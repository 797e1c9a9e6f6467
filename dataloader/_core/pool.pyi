MAX_THREADS: int

class Pool:
    """A fixed-size pool of worker pthreads."""

    size: int
    generation: int
    def __init__(self, size: int) -> None: ...
    @property
    def alive(self) -> bool: ...
    def shutdown(self, timeout: float | None = None) -> bool: ...
