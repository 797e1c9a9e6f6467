"""Batch memory that is reused instead of freed: ``BufferPool``."""

from typing import Any

import numpy as np

POOL_CAPACITY_MAX: int

class BufferPool:
    """Batch memory that is reused instead of freed."""

    capacity: int
    def __init__(self, capacity: int = 8) -> None: ...
    @property
    def idle(self) -> int: ...
    @property
    def registered_blocks(self) -> int: ...

def pooled_array(pool: BufferPool, shape: tuple[int, ...], dtype: Any) -> np.ndarray: ...

class Lease:
    """The first ``nbytes`` of ``exporter``'s buffer, lent out until the last view of them
    is gone."""

    def __init__(self, exporter: Any, nbytes: int, returned: Any, token: Any,
                 wake: Any = None, remove_pages: bool = False) -> None: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class HostMemory:
    """Registration of host buffers with the accelerator (CUDA's ``cudaHostRegister``)."""

    def register(self, address: int, nbytes: int) -> bool: ...
    def unregister(self, address: int) -> None: ...

host_memory: HostMemory
