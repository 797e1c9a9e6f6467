"""Geometry and value kernels on HWC (or CHW) images.

Every ``*_into`` function takes typed memoryviews, states which argument it
reads (``# IN``) and writes (``# OUT``), releases the GIL once and calls a
C kernel of ``src/dl_ops.c`` (the same kernels the native transform chains
of ``pipeline.pyx`` run).  Shapes, dtypes and argument values are checked by
``dataloader.kernels`` before the call.
"""
from libc.stddef cimport ptrdiff_t

from dataloader._core._tables cimport DL_PAD_COUNT, dl_pad_mode_name
from dataloader._core._typedefs cimport float32_t, intp_t, uint8_t
from dataloader._core.codecs cimport dl_convert_rows
from dataloader._core.geometry cimport dl_affine, dl_rotation_matrix, dl_warp_t


ctypedef fused sample_t:
    uint8_t
    float32_t

# Padding modes, as torchvision's ``Pad`` names them, in the order of their
# codes (DL_PAD_MODES of src/dl_tables.h).
PAD_MODES = tuple([dl_pad_mode_name(mode).decode() for mode in range(DL_PAD_COUNT)])


cdef inline dl_image_t _image(const sample_t[:, :, ::1] view) noexcept nogil:
    """The C description of a (rows, columns, channels) memoryview."""
    cdef dl_image_t image
    image.data = <uint8_t*> &view[0, 0, 0]
    image.row_stride = view.strides[0]
    image.height = view.shape[0]
    image.width = view.shape[1]
    image.channels = view.shape[2]
    image.sample_size = sizeof(sample_t)
    return image


cdef inline bint _empty(const sample_t[:, :, ::1] view) noexcept nogil:
    return view.shape[0] == 0 or view.shape[1] == 0 or view.shape[2] == 0


cdef inline bint _describe(const sample_t[:, :, ::1] src, const sample_t[:, :, ::1] out,
                           dl_image_t* source, dl_image_t* target) noexcept nogil:
    """Describe ``src`` and ``out`` to C; ``False`` (nothing to write) when ``out`` is empty."""
    if _empty(out):
        return False
    source[0] = _image(src)
    target[0] = _image(out)
    return True


def crop_into(const sample_t[:, :, ::1] src,  # IN
              sample_t[:, :, ::1] out,        # OUT
              intp_t top, intp_t left):
    """Copy the window of ``src`` at (top, left) with ``out``'s size into ``out``."""
    cdef dl_image_t window, target
    if _empty(out):
        return
    window = _image(src[top:top + out.shape[0], left:left + out.shape[1], :])
    target = _image(out)
    with nogil:
        dl_copy(&window, &target)


def pad_into(const sample_t[:, :, ::1] src,  # IN
             sample_t[:, :, ::1] out,        # OUT
             intp_t top, intp_t left, int mode, fill):
    """Place ``src`` at (top, left) in ``out`` and fill the border by ``mode``."""
    cdef sample_t pixel[4]
    cdef dl_image_t source, target
    cdef int status, k
    if not _describe(src, out, &source, &target):
        return
    for k in range(src.shape[2]):
        pixel[k] = <sample_t> <double> fill[k]
    with nogil:
        status = dl_pad(&source, &target, top, left, mode, <uint8_t*> pixel)
    if status != 0:
        raise MemoryError("pad: cannot allocate scratch memory")


def flip_into(const sample_t[:, :, ::1] src,  # IN
              sample_t[:, :, ::1] out,        # OUT
              bint horizontal):
    """Mirror ``src`` left-right (``horizontal``) or top-bottom into ``out``."""
    cdef dl_image_t source, target
    if _describe(src, out, &source, &target):
        with nogil:
            dl_flip(&source, &target, horizontal)


def rotate90_into(const sample_t[:, :, ::1] src,  # IN
                  sample_t[:, :, ::1] out,        # OUT
                  int k):
    """Rotate ``src`` by ``k`` (1, 2 or 3) counter-clockwise quarter turns into ``out``."""
    cdef dl_image_t source, target
    if _describe(src, out, &source, &target):
        with nogil:
            dl_rotate90(&source, &target, k)


MAX_BOX_RADIUS = DL_MAX_BOX_RADIUS


def box_blur_into(const uint8_t[:, :, ::1] src,  # IN
                  uint8_t[:, :, ::1] out,        # OUT: src's shape, not overlapping it
                  float xradius, float yradius, int passes, bint gaussian):
    """``passes`` box blurs of Pillow's ``BoxBlur``, or with ``gaussian`` those of its
    ``GaussianBlur`` of standard deviations ``xradius`` and ``yradius``."""
    cdef dl_image_t source, target
    cdef int status
    if gaussian:
        xradius = dl_gaussian_box_radius(xradius, passes)
        yradius = dl_gaussian_box_radius(yradius, passes)
    if not _describe(src, out, &source, &target):
        return
    with nogil:
        status = dl_box_blur(&source, &target, xradius, yradius, passes)
    if status != 0:
        raise MemoryError("box blur: cannot allocate scratch memory")


def hwc_to_chw_into(const sample_t[:, :, ::1] src,  # IN: (H, W, C)
                    sample_t[:, :, ::1] out):       # OUT: (C, H, W)
    """Transpose an HWC image into CHW."""
    cdef dl_image_t source
    if _empty(out):
        return
    source = _image(src)
    with nogil:
        dl_hwc_to_chw(&source, <uint8_t*> &out[0, 0, 0])


def chw_to_hwc_into(const sample_t[:, :, ::1] src,  # IN: (C, H, W)
                    sample_t[:, :, ::1] out):       # OUT: (H, W, C)
    """Transpose a CHW image into HWC."""
    cdef dl_image_t target
    if _empty(out):
        return
    target = _image(out)
    with nogil:
        dl_chw_to_hwc(<const uint8_t*> &src[0, 0, 0], &target)


def to_float_into(const uint8_t[::1] src,  # IN: flat samples
                  float32_t[::1] out):     # OUT: flat samples
    """Write ``src / 255`` as float32 into ``out``."""
    if src.shape[0] == 0:
        return
    with nogil:
        dl_to_float(&src[0], &out[0], src.shape[0])


def normalize_into(const sample_t[::1] src,  # IN: flat samples
                   float32_t[::1] out,       # OUT: flat samples
                   intp_t channels, intp_t plane,
                   const float32_t[::1] mean, const float32_t[::1] std):
    """Write ``(src - mean[c]) / std[c]`` (uint8 input first divided by 255).

    ``plane`` is 0 for interleaved channels, else the samples per channel plane.
    """
    if src.shape[0] == 0:
        return
    with nogil:
        dl_normalize(&src[0], sample_t is uint8_t, &out[0], src.shape[0], channels, plane,
                     &mean[0], &std[0])


def convert_into(const uint8_t[:, :, ::1] src,  # IN
                 uint8_t[:, :, ::1] out):       # OUT
    """Convert between 1, 2, 3 and 4 channels as Pillow's ``Image.convert``."""
    cdef intp_t h = src.shape[0], w = src.shape[1]
    cdef int sc = src.shape[2], dc = out.shape[2]
    with nogil:
        dl_convert_rows(&src[0, 0, 0], w * sc, sc, &out[0, 0, 0], w * dc, dc, h, w)


def affine_into(const uint8_t[:, :, ::1] src,  # IN
                uint8_t[:, :, ::1] out,        # OUT
                matrix, int filter, fill):
    """Warp ``src`` into ``out`` by Pillow's inverse ``matrix`` (6 numbers), ``fill`` per channel."""
    cdef dl_image_t source, target
    cdef dl_warp_t warp
    cdef int status = 0
    for k in range(6):
        warp.matrix[k] = matrix[k]
    for k in range(4):
        warp.fill[k] = fill[k] if k < len(fill) else 0
    warp.filter = filter
    warp.out_h, warp.out_w = out.shape[0], out.shape[1]
    warp.top = warp.left = 0
    if not _describe(src, out, &source, &target):
        return
    with nogil:
        status = dl_affine(&source, &target, &warp)
    if status != 0:
        raise ValueError("affine takes uint8 images of 1, 3 or 4 channels, nearest or bilinear")


def rotation_matrix(double angle, double center_x, double center_y, bint expand, int height,
                    int width):
    """Pillow's ``Image.rotate`` matrix and output ``(height, width)``."""
    cdef double m[6]
    cdef int out_h, out_w
    dl_rotation_matrix(angle, center_x, center_y, expand, height, width, m, &out_h, &out_w)
    return tuple(m[k] for k in range(6)), (out_h, out_w)
