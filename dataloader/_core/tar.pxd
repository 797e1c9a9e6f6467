# The streaming tar member reader (src/dl_tar.h), used by tar.pyx.
from dataloader._core._typedefs cimport int64_t


cdef extern from "dl_tar.h" nogil:
    int DL_TAR_BLOCK
    int DL_TAR_MAX_META
    int DL_TAR_MEMBER
    int DL_TAR_END
    int DL_TAR_ERROR
    int DL_TAR_AGAIN
    int DL_TAR_IO
    int DL_TAR_NOMEM
    ctypedef struct dl_tar_t:
        int64_t max_member
        int64_t max_meta
        char* name
        size_t name_len
        int64_t size
        int64_t header_offset
        int64_t start
        int64_t offset
        int64_t error_offset
        int errno_value
        char reason[192]
    int dl_tar_init(dl_tar_t* tar, int fd, int64_t offset, size_t block)
    void dl_tar_free(dl_tar_t* tar)
    int dl_tar_next(dl_tar_t* tar, int may_read)
    int64_t dl_tar_remaining(const dl_tar_t* tar)
    int64_t dl_tar_buffered(const dl_tar_t* tar)
    int dl_tar_data(dl_tar_t* tar, unsigned char* dst)
