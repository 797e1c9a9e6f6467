"""Whole-file reads without the interpreter: open, fstat, then read into bytes.

``read_file`` learns a file's size first, refuses it when it exceeds
``max_bytes`` (before reading anything), allocates the ``bytes`` object of
exactly that size and reads into it with the interpreter released, so pool
threads read files in parallel. ``errno`` becomes the matching ``OSError``
subclass (``FileNotFoundError``, ``PermissionError``, ``IsADirectoryError``)
naming the path.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.errno cimport EINTR, EISDIR, EINVAL, errno
from posix.fcntl cimport O_CLOEXEC, O_NONBLOCK, O_RDONLY, open as c_open
from posix.stat cimport S_ISDIR, S_ISREG, fstat, struct_stat
from posix.unistd cimport close, pread

import os


cdef int dl_open_sized(const char* path, int* fd, Py_ssize_t* size) noexcept nogil:
    """Open ``path`` for reading and report its size; 0 or an errno (``fd`` closed then)."""
    cdef struct_stat info
    cdef int error
    # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
    # below); regular files ignore the flag.
    fd[0] = c_open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    if fd[0] < 0:
        return errno
    if fstat(fd[0], &info) != 0:
        error = errno
    elif S_ISDIR(info.st_mode):
        error = EISDIR
    elif not S_ISREG(info.st_mode):
        error = EINVAL  # a pipe or a device has no size to read up to
    else:
        size[0] = info.st_size
        return 0
    close(fd[0])
    fd[0] = -1
    return error


cdef int dl_read_exact(int fd, char* out, Py_ssize_t size, Py_ssize_t* done) noexcept nogil:
    """Read up to ``size`` bytes from offset 0 into ``out``; 0 or an errno.

    ``done`` is the number of bytes read: less than ``size`` only when the
    file was shortened meanwhile.
    """
    cdef Py_ssize_t got
    done[0] = 0
    while done[0] < size:
        got = pread(fd, out + done[0], <size_t> (size - done[0]), done[0])
        if got < 0:
            if errno == EINTR:
                continue
            return errno
        if got == 0:
            break
        done[0] += got
    return 0


cdef _raise_errno(int error, path):
    raise OSError(error, os.strerror(error), path)


def read_file(path, Py_ssize_t max_bytes=-1):
    """Return the bytes of the file at ``path``.

    Parameters
    ----------
    path : str or os.PathLike
    max_bytes : int
        Largest size accepted; a larger file raises ``ValueError`` before it
        is read. Negative means no limit.
    """
    cdef bytes encoded = os.fsencode(path)
    cdef const char* c_path = encoded
    cdef int fd = -1
    cdef int error
    cdef Py_ssize_t size = 0
    cdef Py_ssize_t done = 0
    cdef char* out
    with nogil:
        error = dl_open_sized(c_path, &fd, &size)
    if error:
        _raise_errno(error, os.fsdecode(path))
    try:
        if 0 <= max_bytes < size:
            raise ValueError(
                f"{os.fsdecode(path)!r} is {size} bytes, more than max_bytes={max_bytes}"
            )
        # The object is private to this call until returned: writing into
        # it without the interpreter is safe.
        data = PyBytes_FromStringAndSize(NULL, size)
        out = PyBytes_AS_STRING(data)
        with nogil:
            error = dl_read_exact(fd, out, size, &done)
        if error:
            _raise_errno(error, os.fsdecode(path))
    finally:
        close(fd)
    return data if done == size else data[:done]
