"""A keyed permutation of ``[0, n)`` with random access, for shuffled epochs.

``Permutation(n, key0, key1, stream)`` is one fixed bijection of ``[0, n)``
(a Feistel network with cycle-walking, ``src/dl_shuffle.c``); ``fill_into``
writes the indices at evenly spaced positions into a buffer without the
GIL. ``shuffle_exact_into`` shuffles an array in place, exactly
(Fisher-Yates from a seeded xoshiro256**). Arguments are checked by ``dataloader._sampling.shuffle`` before the call.
"""
from dataloader._core._typedefs cimport int64_t, uint64_t

ROUNDS = DL_SHUFFLE_ROUNDS


cdef class Permutation:
    """One permutation of ``[0, n)`` (``n >= 1``), selected by a 128-bit key and a stream."""

    cdef dl_shuffle_t state

    def __init__(self, uint64_t n, uint64_t key0, uint64_t key1, uint64_t stream=0):
        if n == 0 or n >= (<uint64_t>1) << 63:
            raise ValueError(f"n should be in [1, 2**63), but got n={n}")
        dl_shuffle_init(&self.state, n, key0, key1, stream)

    @property
    def n(self):
        return self.state.n

    @property
    def walk_limit(self):
        """The most cycle-walking steps any position can take."""
        return self.state.walk_limit

    def fill_into(self, uint64_t start, uint64_t step,
                  int64_t[::1] out):  # OUT
        """``out[i]`` = the index at position ``(start + i * step) % n``."""
        cdef Py_ssize_t count = out.shape[0]
        cdef int status
        if count == 0:
            return
        with nogil:
            status = dl_shuffle_fill(&self.state, start, step, &out[0], count)
        if status != 0:
            raise RuntimeError("the shuffle network is not a bijection (a bug in dl_shuffle.c)")


def shuffle_exact_into(int64_t[::1] values, const uint64_t[::1] state):  # IN/OUT; IN
    """Shuffle ``values`` in place, uniformly, from the 4-word generator ``state``
    (``dl_shuffle_exact``): the same state gives the same order."""
    if state.shape[0] != 4:
        raise ValueError(f"state should hold 4 words, got {state.shape[0]}")
    if values.shape[0] > 1:
        with nogil:
            dl_shuffle_exact(&values[0], values.shape[0], &state[0])
