# The one loading path (load.pyx): fetch, transform, skip policy, collate.
from dataloader._core.stats cimport Row

cdef class Recipe:
    cdef readonly object fetch, getitem, transform, collate, assemble, skip
    cdef readonly object rows, slots
    # Set by the first batch whose items would not pay for rows (a C flag:
    # worker threads may set it at once, also without a GIL).
    cdef bint rows_declined
    cdef readonly bint batched, split_first
    cpdef object fetch_items(self, object indices)

cdef class Fetched:
    cdef readonly Py_ssize_t stream
    cdef readonly object positions, items, state

cpdef object load_batch(Recipe recipe, object indices, Row row, object items=*)
cpdef object load_item(Recipe recipe, object index, Row row, object value=*)
cpdef object collate_items(Recipe recipe, list items, Row row)
cpdef object load_lane_item(Recipe recipe, object index, Row row, object slots,
                            Py_ssize_t position)
cpdef object collate_lanes(Recipe recipe, list items, object slots, Row row)
cpdef tuple load_fetched(Recipe recipe, Fetched fetched, Row row)
cpdef object load_direct(Recipe recipe, object indices, Row row)
