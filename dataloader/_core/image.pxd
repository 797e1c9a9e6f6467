# Image and ImageBatch, shared with pipeline.pyx.
from dataloader._core.buffers cimport BufferPool, aligned_alloc, share_refcount


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


@cython.final
cdef class ImageBatch(_Samples):
    cdef BufferPool pool


cdef Image adopt_image(void* data, tuple shape, str dtype, str layout)
cdef ImageBatch pooled_batch(BufferPool pool, tuple shape, str dtype, str layout)
