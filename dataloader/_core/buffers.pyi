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

class HostMemory:
    """Registration of host buffers with the accelerator (CUDA's ``cudaHostRegister``)."""

    def register(self, address: int, nbytes: int) -> bool: ...
    def unregister(self, address: int) -> None: ...

host_memory: HostMemory
