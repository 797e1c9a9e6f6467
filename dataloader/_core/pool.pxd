# The C thread pool (src/dl_pool.c) and its Python-facing owner, `Pool`.

cdef extern from "dl_pool.h" nogil:
    ctypedef void (*dl_task_fn)(void* arg, int cancelled) noexcept nogil
    ctypedef struct dl_pool_t:
        pass
    ctypedef struct dl_pool_hooks_t:
        void (*thread_start)(void* ctx, int thread_index) noexcept nogil
        void (*thread_stop)(void* ctx, int thread_index) noexcept nogil
        void* ctx
    dl_pool_t* dl_pool_create(int n_threads, size_t stack_bytes, const char* name_prefix,
                              dl_pool_hooks_t hooks)
    int dl_pool_submit(dl_pool_t* pool, dl_task_fn fn, void* arg)
    int dl_pool_shutdown(dl_pool_t* pool, int join, double timeout_seconds)
    int dl_pool_owns_current_thread(const dl_pool_t* pool)


from dataloader._core._sync cimport pthread_mutex_t


cdef class Pool:
    cdef dl_pool_t* _pool
    # Guards `_pool` between submit() and shutdown() called from different
    # threads (needed without the GIL); held only around those two calls.
    cdef pthread_mutex_t _lock
    cdef readonly int size
    cdef readonly long generation
    cdef object __weakref__
    cdef int submit(self, dl_task_fn fn, void* arg) noexcept
    cdef bint accepting(self) noexcept nogil


cdef long fork_generation() noexcept nogil
cdef int current_thread_index() noexcept nogil
cdef bint may_attach() noexcept nogil
cpdef double wait_bound(double seconds)
