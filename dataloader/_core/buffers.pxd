# Batch memory reused across batches (buffers.pyx), shared with image.pyx.
from dataloader._core._sync cimport pthread_mutex_t

cdef extern from "<stdlib.h>" nogil:
    void* aligned_alloc(size_t alignment, size_t size)

# A pooled batch is made on a worker thread and released on the consumer's.
# On the free-threaded build an object's reference count is biased to the
# thread that made it: when another thread drops the last reference, the
# object is queued to its maker and freed only when the maker next runs
# Python code or a collection runs. A worker waiting idle for its next task
# runs none, so the blocks of batches it made stay out of the pool while
# the other workers allocate fresh ones. share_refcount moves an object of
# the calling thread from its biased count to the shared one, as CPython
# does when the maker drops its last reference to an object others still
# hold (a compare-and-swap, like CPython's own merge, keeps a reference
# taken meanwhile by another thread): whichever thread drops the last
# reference then frees it at once. It does nothing on the build with the
# GIL, or to an object another thread made.
cdef extern from *:
    """
    static inline void dl_share_refcount(PyObject *op)
    {
    #ifdef Py_GIL_DISABLED
        if (_Py_IsImmortal(op) || !_Py_IsOwnedByCurrentThread(op)) {
            return;
        }
        Py_ssize_t shared = _Py_atomic_load_ssize_relaxed(&op->ob_ref_shared);
        Py_ssize_t merged;
        do {
            merged = _Py_REF_SHARED(
                Py_ARITHMETIC_RIGHT_SHIFT(Py_ssize_t, shared, _Py_REF_SHARED_SHIFT)
                + (Py_ssize_t)op->ob_ref_local,
                _Py_REF_MERGED);
        } while (!_Py_atomic_compare_exchange_ssize(&op->ob_ref_shared, &shared, merged));
        _Py_atomic_store_uint32_relaxed(&op->ob_ref_local, 0);
        _Py_atomic_store_uintptr_relaxed(&op->ob_tid, _Py_UNOWNED_TID);
    #endif
    }
    """
    void share_refcount "dl_share_refcount"(object made) noexcept

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
