# Batch memory reused across batches (buffers.pyx), shared with image.pyx.
from dataloader._core._sync cimport pthread_mutex_t

cdef extern from "<stdlib.h>" nogil:
    void* aligned_alloc(size_t alignment, size_t size)

# Idle blocks a BufferPool can hold.
cdef enum:
    MAX_POOLED = 64


cdef class BufferPool:
    cdef pthread_mutex_t lock
    cdef void* blocks[MAX_POOLED]
    cdef size_t sizes[MAX_POOLED]
    cdef int count
    cdef readonly int capacity
    # Block address -> size, for blocks registered with an accelerator.
    cdef dict registered
    # What registered them (``dataloader._loading.pinning.host_memory``).
    cdef object host_memory
    cdef void* take(self, size_t size) noexcept nogil
    cdef bint give(self, void* block, size_t size) noexcept nogil
    cdef void release(self, void* block, size_t size) noexcept
    cdef bint register(self, void* block, size_t size, object host_memory) except -1
    cdef void unregister(self, void* block) noexcept
