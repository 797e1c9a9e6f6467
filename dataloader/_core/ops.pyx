"""Geometry and value kernels on HWC (or CHW) images.

Every ``*_into`` function takes C-contiguous typed memoryviews, states which
argument it reads (``# IN``) and writes (``# OUT``), releases the GIL once
and calls a ``noexcept nogil`` kernel that returns a status.  Shapes, dtypes
and argument values are checked by ``dataloader.kernels`` before the call.
"""
from libc.stddef cimport ptrdiff_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from dataloader._core._typedefs cimport float32_t, intp_t, uint8_t


cdef extern from "src/dl_codecs.h" nogil:
    void dl_convert_rows(const uint8_t* src, ptrdiff_t src_stride, int src_channels,
                         uint8_t* dst, ptrdiff_t dst_stride, int dst_channels,
                         ptrdiff_t height, ptrdiff_t width)


ctypedef fused sample_t:
    uint8_t
    float32_t

# Padding modes, as torchvision's ``Pad`` names them.
PAD_MODES = ("constant", "edge", "reflect", "symmetric")

cdef enum:
    OK = 0
    NO_MEMORY = 1


cdef int _check(int status) except -1:
    """The one place where a kernel status becomes an exception."""
    if status == NO_MEMORY:
        raise MemoryError("cannot allocate scratch memory")
    return 0


# --- crop -----------------------------------------------------------------

cdef int _crop(const sample_t[:, :, ::1] src, sample_t[:, :, ::1] out,
               intp_t top, intp_t left) noexcept nogil:
    cdef intp_t y
    cdef size_t row = out.shape[1] * out.shape[2] * sizeof(sample_t)
    for y in range(out.shape[0]):
        memcpy(&out[y, 0, 0], &src[top + y, left, 0], row)
    return OK


def crop_into(const sample_t[:, :, ::1] src,  # IN
              sample_t[:, :, ::1] out,        # OUT
              intp_t top, intp_t left):
    """Copy the window of ``src`` at (top, left) with ``out``'s size into ``out``."""
    cdef int status
    with nogil:
        status = _crop(src, out, top, left)
    _check(status)


# --- pad ------------------------------------------------------------------

cdef inline intp_t _source_index(intp_t i, intp_t n, int mode) noexcept nogil:
    """Source index of padded position ``i`` (relative to the image), -1 for fill."""
    cdef intp_t period
    if 0 <= i < n:
        return i
    if mode == 0:
        return -1
    if mode == 1 or n == 1:
        return 0 if i < 0 else n - 1
    if mode == 2:           # reflect: the edge sample is not repeated
        period = 2 * (n - 1)
        i = i % period
        if i < 0:
            i += period
        return period - i if i >= n else i
    period = 2 * n          # symmetric: the edge sample is repeated
    i = i % period
    if i < 0:
        i += period
    return period - 1 - i if i >= n else i


cdef int _pad(const sample_t[:, :, ::1] src, sample_t[:, :, ::1] out, intp_t top,
              intp_t left, int mode, const double* fill) noexcept nogil:
    cdef intp_t h = src.shape[0], w = src.shape[1], c = src.shape[2]
    cdef intp_t x, y, k, sy, sx
    cdef intp_t* columns = <intp_t*> malloc(out.shape[1] * sizeof(intp_t))
    if columns == NULL:
        return NO_MEMORY
    for x in range(out.shape[1]):
        columns[x] = _source_index(x - left, w, mode)
    for y in range(out.shape[0]):
        sy = _source_index(y - top, h, mode)
        for x in range(out.shape[1]):
            sx = columns[x]
            if sy < 0 or sx < 0:
                for k in range(c):
                    out[y, x, k] = <sample_t> fill[k]
            else:
                for k in range(c):
                    out[y, x, k] = src[sy, sx, k]
    free(columns)
    return OK


def pad_into(const sample_t[:, :, ::1] src,  # IN
             sample_t[:, :, ::1] out,        # OUT
             intp_t top, intp_t left, int mode, fill):
    """Place ``src`` at (top, left) in ``out`` and fill the border by ``mode``."""
    cdef double values[4]
    cdef int status, k
    for k in range(src.shape[2]):
        values[k] = fill[k]
    with nogil:
        status = _pad(src, out, top, left, mode, values)
    _check(status)


# --- flips and rotations --------------------------------------------------

cdef int _flip(const sample_t[:, :, ::1] src, sample_t[:, :, ::1] out,
               bint horizontal) noexcept nogil:
    cdef intp_t h = src.shape[0], w = src.shape[1], c = src.shape[2]
    cdef intp_t x, y, k
    for y in range(h):
        if not horizontal:
            memcpy(&out[h - 1 - y, 0, 0], &src[y, 0, 0], w * c * sizeof(sample_t))
            continue
        for x in range(w):
            for k in range(c):
                out[y, w - 1 - x, k] = src[y, x, k]
    return OK


def flip_into(const sample_t[:, :, ::1] src,  # IN
              sample_t[:, :, ::1] out,        # OUT
              bint horizontal):
    """Mirror ``src`` left-right (``horizontal``) or top-bottom into ``out``."""
    cdef int status
    with nogil:
        status = _flip(src, out, horizontal)
    _check(status)


cdef int _rotate90(const sample_t[:, :, ::1] src, sample_t[:, :, ::1] out,
                   int k) noexcept nogil:
    cdef intp_t h = src.shape[0], w = src.shape[1], c = src.shape[2]
    cdef intp_t x, y, j
    for y in range(h):
        for x in range(w):
            for j in range(c):
                # Counter-clockwise quarter turns, as numpy.rot90.
                if k == 1:
                    out[w - 1 - x, y, j] = src[y, x, j]
                elif k == 2:
                    out[h - 1 - y, w - 1 - x, j] = src[y, x, j]
                else:
                    out[x, h - 1 - y, j] = src[y, x, j]
    return OK


def rotate90_into(const sample_t[:, :, ::1] src,  # IN
                  sample_t[:, :, ::1] out,        # OUT
                  int k):
    """Rotate ``src`` by ``k`` (1, 2 or 3) counter-clockwise quarter turns into ``out``."""
    cdef int status
    with nogil:
        status = _rotate90(src, out, k)
    _check(status)


# --- layouts --------------------------------------------------------------

cdef int _hwc_to_chw(const sample_t[:, :, ::1] src, sample_t[:, :, ::1] out) noexcept nogil:
    cdef intp_t x, y, k
    for k in range(src.shape[2]):
        for y in range(src.shape[0]):
            for x in range(src.shape[1]):
                out[k, y, x] = src[y, x, k]
    return OK


cdef int _chw_to_hwc(const sample_t[:, :, ::1] src, sample_t[:, :, ::1] out) noexcept nogil:
    cdef intp_t x, y, k
    for y in range(src.shape[1]):
        for x in range(src.shape[2]):
            for k in range(src.shape[0]):
                out[y, x, k] = src[k, y, x]
    return OK


def hwc_to_chw_into(const sample_t[:, :, ::1] src,  # IN: (H, W, C)
                    sample_t[:, :, ::1] out):       # OUT: (C, H, W)
    """Transpose an HWC image into CHW."""
    cdef int status
    with nogil:
        status = _hwc_to_chw(src, out)
    _check(status)


def chw_to_hwc_into(const sample_t[:, :, ::1] src,  # IN: (C, H, W)
                    sample_t[:, :, ::1] out):       # OUT: (H, W, C)
    """Transpose a CHW image into HWC."""
    cdef int status
    with nogil:
        status = _chw_to_hwc(src, out)
    _check(status)


# --- values ---------------------------------------------------------------

cdef int _to_float(const uint8_t* src, float32_t* out, intp_t n) noexcept nogil:
    cdef intp_t i
    for i in range(n):
        # A float32 division, as torchvision's ``to_tensor`` computes it.
        out[i] = <float32_t> src[i] / <float32_t> 255.0
    return OK


def to_float_into(const uint8_t[::1] src,  # IN: flat samples
                  float32_t[::1] out):     # OUT: flat samples
    """Write ``src / 255`` as float32 into ``out``."""
    cdef int status
    with nogil:
        status = _to_float(&src[0], &out[0], src.shape[0])
    _check(status)


cdef inline float32_t _sample(const sample_t* src, intp_t i) noexcept nogil:
    if sample_t is uint8_t:
        return <float32_t> src[i] / <float32_t> 255.0
    else:
        return src[i]


cdef int _normalize(const sample_t* src, float32_t* out, intp_t n, intp_t channels,
                    intp_t plane, const float32_t* mean, const float32_t* std) noexcept nogil:
    """Channels interleaved when ``plane`` is 0 (HWC, NHWC), else planes of
    ``plane`` samples cycling through the channels (CHW, NCHW)."""
    cdef intp_t i, k, p, base
    # Subtract, then divide: two float32 roundings, as torchvision's
    # ``Normalize`` (a reciprocal multiply would round differently).
    if plane == 0:
        for p in range(n // channels):
            base = p * channels
            for k in range(channels):
                out[base + k] = (_sample(src, base + k) - mean[k]) / std[k]
    else:
        for p in range(n // plane):
            base = p * plane
            k = p % channels
            for i in range(plane):
                out[base + i] = (_sample(src, base + i) - mean[k]) / std[k]
    return OK


def normalize_into(const sample_t[::1] src,  # IN: flat samples
                   float32_t[::1] out,       # OUT: flat samples
                   intp_t channels, intp_t plane,
                   const float32_t[::1] mean, const float32_t[::1] std):
    """Write ``(src - mean[c]) / std[c]`` (uint8 input first divided by 255).

    ``plane`` is 0 for interleaved channels, else the samples per channel plane.
    """
    cdef int status
    with nogil:
        status = _normalize(&src[0], &out[0], src.shape[0], channels, plane, &mean[0], &std[0])
    _check(status)


def convert_into(const uint8_t[:, :, ::1] src,  # IN
                 uint8_t[:, :, ::1] out):       # OUT
    """Convert between 1, 2, 3 and 4 channels as Pillow's ``Image.convert``."""
    cdef intp_t h = src.shape[0], w = src.shape[1]
    cdef int sc = src.shape[2], dc = out.shape[2]
    with nogil:
        dl_convert_rows(&src[0, 0, 0], w * sc, sc, &out[0, 0, 0], w * dc, dc, h, w)
