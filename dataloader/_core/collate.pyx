"""Collation kernels: stacking equal-shape arrays into one preallocated batch.

``stack_arrays`` is the hot path of ``default_collate`` for numpy items: the
output is allocated once, then every item is copied into its row by a
``nogil`` loop, so other threads keep running while a large batch is built.
"""
import numpy as np

cimport numpy as cnp
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

cnp.import_array()


cdef void _copy_rows(char* out, const char** rows, Py_ssize_t n_rows,
                     Py_ssize_t row_bytes) noexcept nogil:
    """Copy ``n_rows`` rows of ``row_bytes`` each into consecutive slots of ``out``."""
    cdef Py_ssize_t i
    for i in range(n_rows):
        memcpy(out + i * row_bytes, rows[i], row_bytes)


cdef bint _same_shape(cnp.ndarray a, cnp.ndarray b):
    cdef int axis
    if cnp.PyArray_NDIM(a) != cnp.PyArray_NDIM(b):
        return False
    for axis in range(cnp.PyArray_NDIM(a)):
        if cnp.PyArray_DIM(a, axis) != cnp.PyArray_DIM(b, axis):
            return False
    return True


def stack_arrays(list arrays):
    """Stack numpy arrays of one shape and dtype along a new leading axis.

    Arrays of differing dtypes are stacked with numpy's type promotion
    (as ``numpy.stack`` does); differing shapes raise ``ValueError``.
    Object and string dtypes are rejected by the caller.
    """
    cdef Py_ssize_t n = len(arrays)
    cdef Py_ssize_t i
    cdef cnp.ndarray first = arrays[0]
    cdef cnp.ndarray item, out
    cdef const char** rows
    cdef Py_ssize_t row_bytes = cnp.PyArray_NBYTES(first)
    first_dtype = first.dtype
    mixed_dtypes = False
    for i in range(n):
        item = arrays[i]
        if not _same_shape(item, first):
            raise ValueError(
                f"default_collate: cannot stack arrays of different shapes: item {i} "
                f"has shape {(<object> item).shape}, item 0 has shape {(<object> first).shape}"
            )
        if not mixed_dtypes and item.dtype != first_dtype:
            mixed_dtypes = True
    if mixed_dtypes:
        return np.stack(arrays)

    out = np.empty((n,) + (<object> first).shape, dtype=first_dtype)
    # Non-contiguous items are made contiguous first; `contiguous` keeps them
    # alive until the copy below has read them.
    contiguous = [a if cnp.PyArray_IS_C_CONTIGUOUS(a) else np.ascontiguousarray(a)
                  for a in arrays]
    rows = <const char**> malloc(max(n, 1) * sizeof(char*))
    if rows == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            rows[i] = <const char*> cnp.PyArray_DATA(<cnp.ndarray> contiguous[i])
        with nogil:
            _copy_rows(<char*> cnp.PyArray_DATA(out), rows, n, row_bytes)
    finally:
        free(rows)
    return out
