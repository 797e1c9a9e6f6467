"""Tar shards read natively: members and webdataset's samples from a file descriptor.

``TarReader(fd, url, offset)`` parses the stream of ``fd`` from its current
position (shard offset ``offset``, a header boundary) with ``src/dl_tar.c``,
within ``max_member`` (the largest member, ``None``: unbounded) and
``max_meta`` (the headers before one member) bytes:
large reads into one buffer, and members larger than it read straight into
their ``bytes``, without the GIL. Headers already buffered are parsed
without releasing it (``may_read = 0``), so that small members cost no
thread switch. The formats, the grouping of members into samples and every
error (type, message and offset) are those of ``dataloader.sources._tar``,
the parser of remote streams; the tests compare the two on corrupted shards.

A reader is used by one thread at a time (as an iterator is); a second
thread calling it at once gets a ``RuntimeError``, never a corrupt state.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr, memcmp, memcpy

cdef extern from "<string.h>" nogil:
    void* memrchr(const void* s, int c, size_t n)

from dataloader._core._sync cimport (
    pthread_mutex_destroy, pthread_mutex_init, pthread_mutex_t, pthread_mutex_unlock,
)
from dataloader._core._typedefs cimport int64_t

import os
import re

from dataloader._errors import ShardError

cdef extern from "<pthread.h>" nogil:
    int pthread_mutex_trylock(pthread_mutex_t* mutex)

# One read: large enough that syscalls cost nothing, small enough to stay in cache.
BLOCK_BYTES = 256 * 1024
# The largest pax or long-name header (src/dl_tar.h): ``ShardLimits.max_header_bytes``'s
# default and ceiling, for both parsers.
MAX_META = DL_TAR_MAX_META

# Members larger than this are checked against the file's size before memory is allocated.
cdef int64_t CHECKED_BYTES = 16 << 20
# webdataset's naming rules, declared here for both parsers (``dataloader.sources._tar``
# parses remote streams with them): a ``__meta__`` member belongs to no sample; the key
# is everything up to the first dot of the basename (directories included), the
# extension everything after it.
META_NAME = re.compile(r"__[^/]*__($|/)")
_KEY_EXTENSION = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")


def split_name(name):
    """A member name's ``(key, extension)`` by webdataset's rule, or ``(None, None)``.

    Examples
    --------
    >>> from dataloader.sources._tar import split_name
    >>> split_name("train/000123.seg.png")
    ('train/000123', 'seg.png')
    >>> split_name("README")
    (None, None)
    """
    match = _KEY_EXTENSION.match(name)
    if match is None:
        return None, None
    return match.group(1), match.group(2)


# Extensions remembered by their raw bytes, so that a shard's few extensions are
# decoded once per reader rather than once per member.
# Keys up to KEY_BYTES long are remembered by their raw bytes: a sample's members after
# the first compare bytes rather than decode their key.
cdef enum:
    EXTENSIONS = 8
    EXTENSION_BYTES = 32
    KEY_BYTES = 256
# key_len when no key is remembered.
cdef size_t NO_KEY = <size_t> -1


cdef class TarReader:
    """The members of a tar stream read from a file descriptor, and their samples."""

    cdef dl_tar_t state
    cdef bint ready
    cdef pthread_mutex_t busy
    cdef str url
    # The sample being assembled; ``ahead``: the member read last starts the next one.
    cdef dict sample
    cdef object sample_key
    cdef int64_t sample_start
    cdef bint ahead
    # The member read last (no tuple per member: samples are what is returned): its
    # data, first header, key and lowercased extension; ``name`` is set only when the
    # key came from ``split_name``.
    cdef bytes data
    cdef int64_t member_start
    cdef object key, extension
    cdef str member_name
    # ``key`` as raw bytes, or key_len NO_KEY.
    cdef char key_raw[KEY_BYTES]
    cdef size_t key_len
    # extension_raw[i] (extension_len[i] bytes) decodes to extension_str[i].
    cdef char extension_raw[EXTENSIONS][EXTENSION_BYTES]
    cdef size_t extension_len[EXTENSIONS]
    cdef list extension_str
    cdef int extensions

    def __cinit__(self, int fd, str url not None, int64_t offset=0,
                  Py_ssize_t block=BLOCK_BYTES, *, object max_member=None,
                  int64_t max_meta=DL_TAR_MAX_META):
        if fd < 0 or offset < 0 or block <= 0:
            raise ValueError(f"fd, offset and block should be non-negative, got {fd}, "
                             f"{offset}, {block}")
        if max_member is not None and max_member < 0:
            raise ValueError(f"max_member should be non-negative or None, got {max_member}")
        if not DL_TAR_BLOCK <= max_meta <= DL_TAR_MAX_META:
            raise ValueError(f"max_meta should be from {DL_TAR_BLOCK} to {DL_TAR_MAX_META}, "
                             f"got {max_meta}")
        if dl_tar_init(&self.state, fd, offset, <size_t> block) != 0:
            raise MemoryError()
        self.state.max_member = -1 if max_member is None else <int64_t> max_member
        self.state.max_meta = max_meta
        pthread_mutex_init(&self.busy, NULL)
        self.ready = True
        self.url = url
        self.key_len = NO_KEY
        self.extension_str = []

    def __dealloc__(self):
        if self.ready:
            dl_tar_free(&self.state)
            pthread_mutex_destroy(&self.busy)

    @property
    def offset(self):
        """The shard offset the reader has consumed up to."""
        return self.state.offset

    def next_member(self):
        """``(name, data, start)`` of the next regular member (``start``: its first header), or ``None``."""
        self._enter()
        try:
            return self._member()
        finally:
            pthread_mutex_unlock(&self.busy)

    def next_sample(self):
        """``(sample, start, resume)`` of the next sample (see ``group_samples``), or ``None``."""
        self._enter()
        try:
            return self._sample()
        finally:
            pthread_mutex_unlock(&self.busy)

    def __iter__(self):
        return self

    def __next__(self):
        """The next sample, as ``next_sample``; ``StopIteration`` at the end."""
        self._enter()
        try:
            found = self._sample()
        finally:
            pthread_mutex_unlock(&self.busy)
        if found is None:
            raise StopIteration
        return found

    cdef int _enter(self) except -1:
        if pthread_mutex_trylock(&self.busy) != 0:
            raise RuntimeError(f"{self.url}: a TarReader is read by one thread at a time")
        return 0

    cdef object _sample(self):
        cdef dict sample
        cdef int64_t offset
        while True:
            if self.ahead:
                # Its data, offset, key and extension are still the member read last.
                self.ahead = False
            elif not self._read_member():
                sample, self.sample = self.sample, None
                if sample is not None and len(sample) > 2:
                    return sample, self.sample_start, None
                return None
            elif not self._key_extension():
                self.member_name = self.name
                if self.member_name[:2] == "__" and META_NAME.match(self.member_name):
                    continue
                key, extension = split_name(self.member_name)
                if key is None:
                    continue
                self.key, self.extension = key, extension.lower()
                self.key_len = NO_KEY
            offset = self.member_start
            sample = self.sample
            if sample is None or (self.key is not self.sample_key
                                  and self.key != self.sample_key):
                if sample is not None and len(sample) > 2:
                    # The member starts the next sample, assembled on the next call.
                    self.sample, self.ahead = None, True
                    return sample, self.sample_start, offset
                sample = {"__key__": self.key, "__url__": self.url}
                self.sample, self.sample_key, self.sample_start = sample, self.key, offset
            if self.extension in sample:
                name = self.name if self.member_name is None else self.member_name
                raise self._error(offset, f"duplicate member {name!r} in sample {self.key!r}")
            sample[self.extension] = self.data

    cdef bint _key_extension(self) except -1:
        """Set ``key`` and ``extension`` of the member read last from its bytes; False
        when the name needs ``split_name`` (a ``__meta__`` name, a newline, no dot)."""
        cdef const char* name = self.state.name
        cdef size_t length = self.state.name_len, base, dot, n, i
        cdef const char* found
        cdef char* lowered
        cdef char c
        cdef int slot
        self.member_name = None
        if (length >= 2 and name[0] == b"_" and name[1] == b"_") \
                or memchr(name, b"\n", length) != NULL:
            return False
        found = <const char*> memrchr(name, b"/", length)
        base = 0 if found == NULL else <size_t> (found - name) + 1
        found = <const char*> memchr(name + base, b".", length - base)
        if found == NULL or found == name + base:
            return False
        dot = <size_t> (found - name)
        if dot != self.key_len or memcmp(name, self.key_raw, dot) != 0:
            self.key = PyUnicode_DecodeUTF8(name, dot, "surrogateescape")
            self.key_len = dot if dot <= KEY_BYTES else NO_KEY
            if dot <= KEY_BYTES:
                memcpy(self.key_raw, name, dot)
        name, n = name + dot + 1, length - dot - 1
        for slot in range(self.extensions):
            if self.extension_len[slot] == n and memcmp(self.extension_raw[slot], name, n) == 0:
                self.extension = self.extension_str[slot]
                return True
        if n >= EXTENSION_BYTES:
            self.extension = PyUnicode_DecodeUTF8(name, n, "surrogateescape").lower()
            return True
        for i in range(n):
            if <unsigned char> name[i] > 127:
                self.extension = PyUnicode_DecodeUTF8(name, n, "surrogateescape").lower()
                return True
        # A new ASCII extension: lowered in place in its slot (the oldest when all are taken).
        slot = self.extensions if self.extensions < EXTENSIONS else 0
        lowered = self.extension_raw[slot]
        for i in range(n):
            c = name[i]
            lowered[i] = c + 32 if b"A" <= c <= b"Z" else c
        self.extension = PyUnicode_DecodeUTF8(lowered, n, NULL)
        memcpy(lowered, name, n)
        self.extension_len[slot] = n
        if slot == self.extensions:
            self.extension_str.append(self.extension)
            self.extensions += 1
        else:
            self.extension_str[slot] = self.extension
        return True

    cdef object _member(self):
        if not self._read_member():
            return None
        return self.name, self.data, self.member_start

    @property
    def name(self):
        """The name of the member read last."""
        return PyUnicode_DecodeUTF8(self.state.name, self.state.name_len, "surrogateescape")

    cdef bint _read_member(self) except -1:
        """Read the next member into ``name``, ``data`` and ``member_start``; False at the end."""
        cdef int status = dl_tar_next(&self.state, 0)
        cdef int64_t size, remaining
        cdef bytes data
        cdef unsigned char* out
        if status == DL_TAR_AGAIN:
            with nogil:
                status = dl_tar_next(&self.state, 1)
        if status == DL_TAR_END:
            return False
        if status != DL_TAR_MEMBER:
            self._raise(status)
        self.member_start = self.state.start
        size = self.state.size
        if size - dl_tar_buffered(&self.state) > CHECKED_BYTES:
            remaining = dl_tar_remaining(&self.state)
            if 0 <= remaining < size:
                # Known to be cut short (a corrupt size, say): no memory is allocated for it.
                raise self._error(self.state.header_offset,
                                  f"truncated: {remaining} of {size} bytes")
        try:
            data = PyBytes_FromStringAndSize(NULL, size)
        except MemoryError:
            data = None  # raised below, outside this block: the shard's doing, not a bug
        if data is None:
            raise self._error(self.state.header_offset, f"a member of {size} bytes: out of memory")
        out = <unsigned char*> PyBytes_AS_STRING(data)
        if dl_tar_buffered(&self.state) == size:
            status = dl_tar_data(&self.state, out)
        else:
            with nogil:
                status = dl_tar_data(&self.state, out)
        if status != 0:
            self._raise(status)
        self.data = data
        return True

    cdef int _raise(self, int status) except -1:
        if status == DL_TAR_ERROR:
            raise self._error(self.state.error_offset,
                              self.state.reason.decode("utf-8", "replace"))
        if status == DL_TAR_IO:
            errno = self.state.errno_value
            raise OSError(errno, os.strerror(errno), self.url)
        # DL_TAR_NOMEM: the buffer could not grow for the headers (within max_meta).
        raise self._error(self.state.offset, "headers: out of memory")

    cdef object _error(self, int64_t offset, str reason):
        return ShardError(self.url, offset, reason)
