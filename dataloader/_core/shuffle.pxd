# The keyed random-access permutation and the exact in-place shuffle (src/dl_shuffle.h),
# used by shuffle.pyx and sequences.pyx.
from libc.stddef cimport ptrdiff_t

from dataloader._core._typedefs cimport int64_t, uint64_t


cdef extern from "dl_shuffle.h" nogil:
    int DL_SHUFFLE_ROUNDS
    ctypedef struct dl_shuffle_t:
        uint64_t n
        uint64_t walk_limit
        int low_bits
    void dl_shuffle_init(dl_shuffle_t* shuffle, uint64_t n, uint64_t key0, uint64_t key1,
                         uint64_t stream)
    int dl_shuffle_fill(const dl_shuffle_t* shuffle, uint64_t start, uint64_t step,
                        int64_t* out, ptrdiff_t count)
    void dl_shuffle_exact(int64_t* values, ptrdiff_t n, const uint64_t* state)
    void dl_shuffle_exact_steps(int64_t* values, ptrdiff_t n, ptrdiff_t start, ptrdiff_t stop,
                                uint64_t* state)
