# src/dl_codecs.h: sniffing, headers, decoding, pixel conversions, and the
# statuses every native call returns; cimported by every module that calls
# into it. `raise_status` is the one place a status becomes an exception.
from libc.stddef cimport ptrdiff_t

from dataloader._core._typedefs cimport uint8_t


cdef extern from "dl_codecs.h" nogil:
    int DL_MSG_LEN
    int DL_OK
    int DL_ERR_CORRUPT
    int DL_ERR_NOMEM
    int DL_ERR_MISMATCH
    int DL_ERR_ARGUMENT
    int DL_NEEDS_FALLBACK
    ctypedef struct dl_info_t:
        int format
        int height
        int width
        int channels
        int whole_image_to_convert
        double coefficient_bytes
    int dl_sniff(const uint8_t* data, size_t size)
    int dl_image_info(const uint8_t* data, size_t size, dl_info_t* info, char* msg)
    void dl_jpeg_scaled_size(int height, int width, int scale, int* out_h, int* out_w)
    int dl_jpeg_scale_for(int height, int width, int min_h, int min_w)
    double dl_decode_work(const dl_info_t* info, int channels)
    int dl_check_limits(int height, int width, int channels, int max_width, int max_height,
                        double max_bytes, double work_bytes, char* msg)
    int dl_decode(const uint8_t* data, size_t size, int scale, int height, int width,
                  int channels, uint8_t* dst, ptrdiff_t row_stride, char* msg)
    void dl_convert_rows(const uint8_t* src, ptrdiff_t src_stride, int src_channels,
                         uint8_t* dst, ptrdiff_t dst_stride, int dst_channels,
                         ptrdiff_t height, ptrdiff_t width)


cdef inline int raise_status(int status, const char* msg, str op=None) except -1:
    """Raise the exception of a failed native call: ``MemoryError`` when out of
    memory, else ``ValueError`` with the C message, which a decoding failure
    prefixes with "cannot decode image" (and ``op``, the transform that decoded)."""
    text = msg.decode("utf-8", "replace")
    if status == DL_ERR_NOMEM:
        raise MemoryError(text)
    if status == DL_ERR_ARGUMENT:
        raise ValueError(text)
    raise ValueError(f"{op}: cannot decode image: {text}" if op else
                     f"cannot decode image: {text}")
