"""Native image decoders: JPEG (libjpeg-turbo), PNG (libpng), WebP (libwebp).

The C side (``src/dl_codecs.c`` and one file per codec) reads headers and
decodes into a caller-given destination whose rows may be further apart than
one image row, so that an image can be decoded straight into its slot of a
batch buffer.  This module only converts statuses into exceptions
(``raise_status`` of ``codecs.pxd``); argument checks live in
``dataloader.kernels``.
"""
cimport numpy as cnp
from libc.stddef cimport ptrdiff_t

from dataloader._core._tables cimport (
    DL_FMT_COUNT, DL_MODE_COUNT, dl_format_is_native, dl_format_name, dl_mode_channels,
    dl_mode_name,
)
from dataloader._core._typedefs cimport uint8_t

cnp.import_array()

cdef tuple _formats():
    names = []
    for code in range(DL_FMT_COUNT):
        name = dl_format_name(code).decode()
        names.append(name or None)
    return tuple(names)


# Format names, indexed by the format codes of src/dl_tables.h (None: unknown).
FORMATS = _formats()
NATIVE_FORMATS = frozenset(FORMATS[code] for code in range(DL_FMT_COUNT)
                           if dl_format_is_native(code))
# Channels of each pixel mode a decode or a conversion produces ("L": 1, ... "RGBA": 4).
MODES = {dl_mode_name(i).decode(): dl_mode_channels(i) for i in range(DL_MODE_COUNT)}


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
        raise_status(status, msg)
    return FORMATS[info.format], info.height, info.width, info.channels


def decode_work(const uint8_t[::1] data,  # IN
                int channels):
    """Bytes the native decoder of ``data`` allocates besides its output, decoding it
    into ``channels`` (``dl_decode_work``): counted in the decode limit."""
    cdef dl_info_t info
    cdef char msg[256]
    cdef int status
    msg[0] = 0
    if data.shape[0] == 0:
        raise ValueError("cannot decode image: the data is empty (0 bytes)")
    with nogil:
        status = dl_image_info(&data[0], data.shape[0], &info, msg)
    if status != DL_OK:
        raise_status(status, msg)
    return dl_decode_work(&info, channels or info.channels)


def jpeg_scaled_size(int height, int width, int scale):
    """Size ``(height, width)`` of a JPEG decoded at ``scale / 8`` (1 to 8)."""
    cdef int h, w
    dl_jpeg_scaled_size(height, width, scale, &h, &w)
    return h, w


def jpeg_scale_for(int height, int width, int min_height, int min_width):
    """The smallest DCT scale, in eighths (1 to 8), at which a JPEG of ``height``
    x ``width`` still decodes to at least ``min_height`` x ``min_width`` (the
    fused chains' rule, ``dl_jpeg_scale_for``)."""
    return dl_jpeg_scale_for(height, width, min_height, min_width)


def check_limits(int height, int width, int channels, int max_width, int max_height,
                 double max_bytes, double work_bytes=0.0):
    """Raise ``ValueError`` when an image of this size, decoded with ``work_bytes``
    of the decoder's memory besides its output, breaks a decode limit (the same
    check and message as a ``Decode`` transform's)."""
    cdef char msg[256]
    msg[0] = 0
    if dl_check_limits(height, width, channels, max_width, max_height, max_bytes, work_bytes,
                       msg) != DL_OK:
        raise_status(DL_ERR_ARGUMENT, msg)


def decode_into(const uint8_t[::1] data,  # IN
                uint8_t[:, :, :] out,      # OUT: rows may be strided, pixels packed
                int scale=8):
    """Decode ``data`` into ``out`` (height, width, channels), GIL released; a
    JPEG at ``scale / 8`` of its size."""
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
        status = dl_decode(src, size, scale, height, width, channels, &out[0, 0, 0],
                           row_stride, msg)
    if status != DL_OK:
        raise_status(status, msg)


def decode_new(const uint8_t[::1] data,  # IN
               int channels, int max_width, int max_height, double max_bytes):
    """Decode ``data`` into a new (height, width, channels) uint8 array, or return
    None when its format has no native decoder; ``channels`` 0 keeps the image's
    own. The header's size is checked against the limits (``dl_check_limits``)
    before the array is allocated; with limits of at most ``MAX_SIDE`` (the
    caller's checks) the image obeys the image rule, as a native header gives
    sides of at least 1.

    ``kernels.decode``'s common case in one call: the per-image cost around the
    codec is a few microseconds, a share of a small image's decode worth saving.
    """
    cdef dl_info_t info
    cdef char msg[256]
    cdef int status
    cdef size_t size = data.shape[0]
    msg[0] = 0
    if size == 0:
        raise ValueError("cannot decode image: the data is empty (0 bytes)")
    cdef const uint8_t* src = &data[0]
    if not dl_format_is_native(dl_sniff(src, size)):
        return None
    with nogil:
        status = dl_image_info(src, size, &info, msg)
    if status != DL_OK:
        raise_status(status, msg)
    if channels == 0:
        channels = info.channels
    if dl_check_limits(info.height, info.width, channels, max_width, max_height, max_bytes,
                       dl_decode_work(&info, channels), msg) != DL_OK:
        raise_status(DL_ERR_ARGUMENT, msg)
    cdef cnp.npy_intp dims[3]
    dims[0] = info.height
    dims[1] = info.width
    dims[2] = channels
    cdef cnp.ndarray out = cnp.PyArray_EMPTY(3, dims, cnp.NPY_UINT8, 0)
    cdef uint8_t* dst = <uint8_t*> cnp.PyArray_DATA(out)
    with nogil:
        status = dl_decode(src, size, 8, info.height, info.width, channels, dst,
                           <ptrdiff_t> info.width * channels, msg)
    if status != DL_OK:
        raise_status(status, msg)
    return out
