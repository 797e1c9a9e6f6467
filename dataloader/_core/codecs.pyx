"""Native image decoders: JPEG (libjpeg-turbo), PNG (libpng), WebP (libwebp).

The C side (``src/dl_codecs.c`` and one file per codec) reads headers and
decodes into a caller-given destination whose rows may be further apart than
one image row, so that an image can be decoded straight into its slot of a
batch buffer.  This module only converts statuses into exceptions; argument
checks live in ``dataloader.kernels``.
"""
from libc.stddef cimport ptrdiff_t

from dataloader._core._typedefs cimport uint8_t


cdef extern from "src/dl_codecs.h" nogil:
    int DL_MSG_LEN
    int DL_OK
    int DL_ERR_CORRUPT
    int DL_ERR_NOMEM
    int DL_ERR_MISMATCH
    ctypedef struct dl_info_t:
        int format
        int height
        int width
        int channels
    int dl_sniff(const uint8_t* data, size_t size)
    int dl_image_info(const uint8_t* data, size_t size, dl_info_t* info, char* msg)
    void dl_jpeg_scaled_size(int height, int width, int scale_denom, int* out_h, int* out_w)
    int dl_decode(const uint8_t* data, size_t size, int scale_denom, int height, int width,
                  int channels, uint8_t* dst, ptrdiff_t row_stride, char* msg)


# Indexed by dl_format_t.
FORMATS = (None, "JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")
NATIVE_FORMATS = frozenset({"JPEG", "PNG", "WEBP"})


cdef int _raise(int status, const char* msg) except -1:
    """The one place where a codec status becomes an exception."""
    text = msg.decode("utf-8", "replace")
    if status == DL_ERR_NOMEM:
        raise MemoryError(text)
    raise ValueError(f"cannot decode image: {text}")


def sniff(const uint8_t[::1] data):
    """Return the format name read from the leading bytes, or None."""
    if data.shape[0] == 0:
        return None
    return FORMATS[dl_sniff(&data[0], data.shape[0])]


def header_info(const uint8_t[::1] data  # IN
                ):
    """Return ``(format, height, width, channels)`` read from a native header."""
    cdef dl_info_t info
    cdef char msg[256]
    cdef int status
    msg[0] = 0
    if data.shape[0] == 0:
        raise ValueError("cannot decode image: the data is empty (0 bytes)")
    with nogil:
        status = dl_image_info(&data[0], data.shape[0], &info, msg)
    if status != DL_OK:
        _raise(status, msg)
    return FORMATS[info.format], info.height, info.width, info.channels


def jpeg_scaled_size(int height, int width, int scale_denom):
    """Size ``(height, width)`` of a JPEG decoded at ``1 / scale_denom``."""
    cdef int h, w
    dl_jpeg_scaled_size(height, width, scale_denom, &h, &w)
    return h, w


def decode_into(const uint8_t[::1] data,  # IN
                uint8_t[:, :, :] out,      # OUT: rows may be strided, pixels packed
                int scale_denom=1):
    """Decode ``data`` into ``out`` (height, width, channels), GIL released."""
    cdef char msg[256]
    cdef int status
    cdef const uint8_t* src = &data[0]
    cdef size_t size = data.shape[0]
    cdef int height = out.shape[0], width = out.shape[1], channels = out.shape[2]
    cdef ptrdiff_t row_stride = out.strides[0]
    if out.strides[2] != 1 or out.strides[1] != channels:
        raise ValueError("decode_into: the pixels of each row of out must be contiguous")
    msg[0] = 0
    with nogil:
        status = dl_decode(src, size, scale_denom, height, width, channels, &out[0, 0, 0],
                           row_stride, msg)
    if status != DL_OK:
        _raise(status, msg)
