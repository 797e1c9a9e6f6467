"""Batch memory that is reused instead of freed: ``BufferPool``; memory lent
until its last view is gone: ``Lease``.

A training epoch makes batches of one size over and over. Memory freed to
the system and allocated again costs a page fault and a page of zeroes per
4 KiB on every batch (about a fifth of a cheap item's loading time for a
batch of images); a pool hands the same blocks back instead. Collators take
their batch memory from a pool: ``ImageCollator`` (as ``ImageBatch``) and,
on worker threads, ``default_collate`` (as numpy arrays, see
``dataloader._loading.collate``).
"""
cimport cython
from cpython.buffer cimport (
    PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_FillInfo, PyBuffer_Release, PyObject_GetBuffer,
)
from libc.stdlib cimport free
from posix.mman cimport MADV_REMOVE, madvise
from posix.unistd cimport write

from dataloader._core._sync cimport (
    pthread_mutex_destroy, pthread_mutex_init, pthread_mutex_lock, pthread_mutex_unlock,
)

import numpy as np

# Idle blocks a BufferPool can hold at most.
POOL_CAPACITY_MAX = MAX_POOLED

# Pooled blocks start and end on page boundaries: an accelerator registers
# whole pages, so no two blocks may share one.
cdef size_t _PAGE = 4096


cdef inline size_t _page_size(size_t size) noexcept nogil:
    return (size + _PAGE - 1) // _PAGE * _PAGE


cdef class BufferPool:
    """Batch memory that is reused instead of freed.

    A batch made from a pool (an ``ImageBatch``, or an array from
    :func:`pooled_array`) gives its memory back when the batch and every
    view of it (numpy arrays, torch tensors, DLPack tensors) are gone; the
    next batch of the same size takes it, so a steady epoch allocates no new
    batch memory and touches no fresh pages. At most ``capacity`` idle
    blocks are kept; the rest are freed.

    Examples
    --------
    >>> from dataloader._core.buffers import BufferPool, pooled_array
    >>> pool = BufferPool(capacity=2)
    >>> batch = pooled_array(pool, (4, 3), "float32")
    >>> del batch
    >>> pool.idle
    1
    """

    def __cinit__(self, int capacity=8):
        if not 0 <= capacity <= MAX_POOLED:
            raise ValueError(f"capacity must be 0 to {MAX_POOLED}, got {capacity}")
        self.capacity = capacity
        self.registered = {}
        pthread_mutex_init(&self.lock, NULL)

    def __dealloc__(self):
        cdef int i
        for i in range(self.count):
            self.unregister(self.blocks[i])
            free(self.blocks[i])
        pthread_mutex_destroy(&self.lock)

    @property
    def registered_blocks(self):
        """The number of this pool's blocks registered with an accelerator (page-locked)."""
        return len(self.registered) if self.registered else 0

    cdef bint register(self, void* block, size_t size, object host_memory) except -1:
        """Page-lock ``block`` (taken from this pool) once with ``host_memory`` (the
        accelerator's, from ``dataloader._loading.pinning``); ``False`` when it cannot."""
        address = <size_t> block
        if address in self.registered:
            return True
        if not host_memory.register(address, _page_size(size)):
            return False
        self.host_memory = host_memory
        self.registered[address] = size
        return True

    cdef void unregister(self, void* block) noexcept:
        """Before ``block`` is freed: release its registration, if it has one."""
        if not self.registered or self.registered.pop(<size_t> block, None) is None:
            return
        try:
            self.host_memory.unregister(<size_t> block)
        except BaseException:
            pass  # at exit the accelerator may be gone; the block is freed all the same

    @property
    def idle(self):
        """The number of idle blocks held for reuse."""
        return self.count

    cdef void* take(self, size_t size) noexcept nogil:
        cdef int i
        cdef void* block = NULL
        pthread_mutex_lock(&self.lock)
        for i in range(self.count):
            if self.sizes[i] == size:
                block = self.blocks[i]
                self.count -= 1
                self.blocks[i] = self.blocks[self.count]
                self.sizes[i] = self.sizes[self.count]
                break
        pthread_mutex_unlock(&self.lock)
        return block if block != NULL else aligned_alloc(_PAGE, _page_size(size))

    cdef void release(self, void* block, size_t size) noexcept:
        """A batch's ``block`` is no longer used: kept for the next batch, or freed."""
        if not self.give(block, size):
            self.unregister(block)
            free(block)

    cdef bint give(self, void* block, size_t size) noexcept nogil:
        cdef bint kept = False
        pthread_mutex_lock(&self.lock)
        if self.count < self.capacity:
            self.blocks[self.count] = block
            self.sizes[self.count] = size
            self.count += 1
            kept = True
        pthread_mutex_unlock(&self.lock)
        return kept


# Not tracked by the cyclic garbage collector (it can be in no cycle: its pool
# refers to no block): a collector clearing ``pool`` before ``__dealloc__``
# would leave the block nowhere to go.
@cython.no_gc
cdef class _PooledBlock:
    """``size`` bytes from a pool, exported as a writable byte buffer; given back when freed."""

    cdef void* data
    cdef size_t size
    cdef BufferPool pool
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __getbuffer__(self, Py_buffer* view, int flags):
        self.shape[0] = self.size
        self.strides[0] = 1
        view.buf = self.data
        view.obj = self
        view.len = self.size
        view.readonly = 0
        view.itemsize = 1
        view.format = "B"
        view.ndim = 1
        view.shape = self.shape
        view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL

    # No __releasebuffer__: a view holds nothing to release, and without one
    # numpy keeps the block itself as its array's base, not a memoryview of
    # it (one more object between the array and the block, see pooled_array).

    def __dealloc__(self):
        if self.data != NULL:
            self.pool.release(self.data, self.size)


def pooled_array(BufferPool pool, tuple shape, dtype):
    """An uninitialised C-contiguous array whose memory comes from (and returns to) ``pool``.

    The memory goes back to the pool when the array and every view of it
    (including a torch tensor made by ``torch.frombuffer``) are gone.

    Examples
    --------
    >>> from dataloader._core.buffers import BufferPool, pooled_array
    >>> pooled_array(BufferPool(), (2, 5), "uint8").shape
    (2, 5)
    """
    dtype = np.dtype(dtype)
    cdef Py_ssize_t count = 1
    for side in shape:
        count *= side
    cdef size_t nbytes = max(count * dtype.itemsize, 1)
    cdef _PooledBlock block = _PooledBlock.__new__(_PooledBlock)
    block.size = _page_size(nbytes)
    block.data = pool.take(block.size)
    if block.data == NULL:
        raise MemoryError(f"cannot allocate {nbytes} bytes for a batch of shape {shape}")
    block.pool = pool
    flat = np.frombuffer(block, dtype, count)
    array = flat.reshape(shape)
    # The array holds the flat array, which holds the block: none of them
    # may wait for this thread to be freed (see share_refcount).
    share_refcount(block)
    share_refcount(flat)
    share_refcount(array)
    return array


# Not tracked by the cyclic garbage collector: it can be in no cycle (what it
# holds refers to no lease), and must find ``returned`` whole when freed.
@cython.no_gc
cdef class Lease:
    """The first ``nbytes`` of ``exporter``'s buffer, lent out until the last view of them
    is gone: then ``token`` is appended to ``returned`` and, if given, a byte written to
    ``wake.write_fd`` (``wake`` is kept, and with it its descriptor, until then).

    With ``remove_pages``, the exporter's pages are first given back to the
    system (``MADV_REMOVE``: a shared mapping's file loses them too).

    All of it runs in C, without a line of Python: a lease is freed by a
    garbage collection, anywhere in the consumer's code, and a Ctrl-C that
    lands in Python code run by a collection is printed and lost instead of
    raised (the reason this is not a ``weakref.finalize``).

    Examples
    --------
    >>> import collections
    >>> from dataloader._core.buffers import Lease
    >>> returned = collections.deque()
    >>> view = memoryview(Lease(bytearray(b"abcdef"), 3, returned, "slot 0"))
    >>> bytes(view), list(returned)
    (b'abc', [])
    >>> view.release(); list(returned)
    ['slot 0']
    """

    cdef Py_buffer lent
    cdef bint lending
    cdef Py_ssize_t nbytes
    cdef object returned
    cdef object token
    cdef object wake
    cdef int wake_fd
    cdef bint remove_pages

    def __cinit__(self, exporter, Py_ssize_t nbytes, returned, token, wake=None,
                  bint remove_pages=False):
        try:
            PyObject_GetBuffer(exporter, &self.lent, PyBUF_WRITABLE)
        except BufferError:
            PyObject_GetBuffer(exporter, &self.lent, PyBUF_SIMPLE)
        self.lending = True
        if not 0 <= nbytes <= self.lent.len:
            raise ValueError(f"cannot lend {nbytes} bytes of a buffer of {self.lent.len}")
        self.nbytes = nbytes
        self.returned = returned
        self.token = token
        self.wake = wake
        self.wake_fd = -1 if wake is None else wake.write_fd
        self.remove_pages = remove_pages

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.lent.buf, self.nbytes, self.lent.readonly, flags)

    def __dealloc__(self):
        if not self.lending:
            return  # __cinit__ failed
        if self.remove_pages:
            madvise(self.lent.buf, self.lent.len, MADV_REMOVE)
        PyBuffer_Release(&self.lent)
        if self.returned is None:
            return  # __cinit__ failed
        self.returned.append(self.token)
        if self.wake_fd >= 0:
            # Full pipe: its reader is awake already, or gone.
            write(self.wake_fd, b"!", 1)


class HostMemory:
    """Registration of host buffers with the accelerator (CUDA's ``cudaHostRegister``).

    A buffer that is reused batch after batch (a pooled ``ImageBatch``'s)
    is registered once and stays page-locked until it is freed, instead of
    being copied into pinned memory for every batch. ``register`` returns
    ``False`` when the accelerator offers no registration (then the caller
    copies, as ``tensor.pin_memory()`` does); the owner of the buffer must
    call ``unregister`` before freeing it.

    Examples
    --------
    >>> from dataloader._core.buffers import host_memory
    >>> callable(host_memory.register) and callable(host_memory.unregister)
    True
    """

    def register(self, address: int, nbytes: int) -> bool:
        import torch

        if not torch.cuda.is_available():
            return False
        cudart = torch.cuda.cudart()
        return int(cudart.cudaHostRegister(address, nbytes, 0)) == 0

    def unregister(self, address: int) -> None:
        import torch

        torch.cuda.cudart().cudaHostUnregister(address)


host_memory = HostMemory()
