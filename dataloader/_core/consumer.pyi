from typing import Any

class Consumer:
    """The consumer's side of a threaded epoch: guard, fork check, sliced wait."""

    @property
    def delivered(self) -> int: ...
    def next(self) -> Any: ...

def wait_slice(started: float, timeout: float, position: int) -> float:
    """Seconds to wait next for batch ``position``, or ``BatchTimeoutError`` past ``timeout``."""
