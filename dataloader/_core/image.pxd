# Image, ImageBatch and the batch buffer pool, shared with pipeline.pyx.
from dataloader._core._sync cimport pthread_mutex_t

cdef extern from "<stdlib.h>" nogil:
    void* aligned_alloc(size_t alignment, size_t size)

# Idle blocks a BufferPool can hold.
cdef enum:
    MAX_POOLED = 64


cdef class _Samples:
    cdef void* data
    cdef readonly str layout
    cdef str _dtype
    cdef int _ndim
    cdef Py_ssize_t _itemsize
    cdef Py_ssize_t _shape[4]
    cdef Py_ssize_t _strides[4]
    cdef bytes _format
    # The object whose memory ``data`` views (an unpickled batch's array), or None
    # when the block is owned.
    cdef object owner
    cdef object __weakref__
    cdef _allocate(self, tuple shape, str dtype, str layout)
    cdef Py_ssize_t _describe(self, tuple shape, str dtype, str layout) except -1
    cdef _Samples _copy(self)
    cdef object _export(self, bint versioned, bint copied)


cimport cython


@cython.final
cdef class Image(_Samples):
    pass


cdef class BufferPool:
    cdef pthread_mutex_t lock
    cdef void* blocks[MAX_POOLED]
    cdef size_t sizes[MAX_POOLED]
    cdef int count
    cdef readonly int capacity
    # Block address -> size, for blocks registered with an accelerator.
    cdef dict registered
    cdef void* take(self, size_t size) noexcept nogil
    cdef bint give(self, void* block, size_t size) noexcept nogil
    cdef bint register(self, void* block, size_t size) except -1
    cdef void unregister(self, void* block) noexcept


@cython.final
cdef class ImageBatch(_Samples):
    cdef BufferPool pool


cdef Image adopt_image(void* data, tuple shape, str dtype, str layout)
cdef ImageBatch pooled_batch(BufferPool pool, tuple shape, str dtype, str layout)
