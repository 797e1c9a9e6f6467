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
    """Copy each non-NULL row into its slot of ``out`` (``row_bytes`` per slot)."""
    cdef Py_ssize_t i
    for i in range(n_rows):
        if rows[i] != NULL:
            memcpy(out + i * row_bytes, rows[i], row_bytes)


cdef bint _same_shape(cnp.ndarray a, cnp.ndarray b):
    cdef int axis
    if cnp.PyArray_NDIM(a) != cnp.PyArray_NDIM(b):
        return False
    for axis in range(cnp.PyArray_NDIM(a)):
        if cnp.PyArray_DIM(a, axis) != cnp.PyArray_DIM(b, axis):
            return False
    return True


def stack_arrays(list arrays, empty=np.empty):
    """Stack numpy arrays of one shape and dtype along a new leading axis.

    Arrays of differing dtypes are stacked with numpy's type promotion
    (as ``numpy.stack`` does); differing shapes raise ``ValueError``.
    Object and string dtypes are rejected by the caller. ``empty(shape,
    dtype)`` allocates the result (a worker process's shared memory).
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

    out = empty((n,) + (<object> first).shape, first_dtype)
    if not cnp.PyArray_IS_C_CONTIGUOUS(out) or out.dtype != first_dtype:
        raise ValueError("stack_arrays: empty() should return a C-contiguous array of the dtype")
    rows = <const char**> malloc(max(n, 1) * sizeof(char*))
    if rows == NULL:
        raise MemoryError()
    cdef Py_ssize_t n_contiguous = 0
    cdef char* out_data = <char*> cnp.PyArray_DATA(out)
    try:
        for i in range(n):
            item = arrays[i]
            if cnp.PyArray_IS_C_CONTIGUOUS(item):
                rows[i] = <const char*> cnp.PyArray_DATA(item)
                n_contiguous += 1
            else:
                # A strided item (a transposed view, say) is copied straight
                # into its row by numpy: one copy, not a contiguous copy first.
                rows[i] = NULL
                out[i] = item
        if n_contiguous:
            with nogil:
                _copy_rows(out_data, rows, n, row_bytes)
    finally:
        free(rows)
    return out


def collate_numbers(list batch, type kind):
    """Convert a list of exact ``int``, ``float`` or ``bool`` objects to a 1-d array.

    Returns ``None`` when an item is not exactly of type ``kind`` (or an int
    does not fit in int64): the caller then takes numpy's general path.
    """
    cdef Py_ssize_t n = len(batch)
    cdef Py_ssize_t i
    cdef cnp.int64_t[::1] ints
    cdef double[::1] floats
    cdef cnp.npy_bool[::1] bools
    if kind is not int and kind is not float and kind is not bool:
        raise TypeError(f"collate_numbers takes int, float or bool, not {kind.__name__}")
    for item in batch:
        if type(item) is not kind:
            return None
    if kind is int:
        out = np.empty(n, dtype=np.int64)
        ints = out
        try:
            for i in range(n):
                ints[i] = batch[i]
        except OverflowError:
            return None
    elif kind is float:
        out = np.empty(n, dtype=np.float64)
        floats = out
        for i in range(n):
            floats[i] = batch[i]
    else:
        out = np.empty(n, dtype=np.bool_)
        bools = out.view(np.uint8)
        for i in range(n):
            bools[i] = batch[i] is True
    return out
