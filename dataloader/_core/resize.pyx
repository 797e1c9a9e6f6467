"""Resampling kernel: Pillow's separable convolution in fixed point.

The arithmetic is in ``src/dl_resize.c`` (plain C, so that the per-channel
loops specialise on a constant channel count); this wrapper states the
contract and releases the GIL.
"""
from libc.stddef cimport ptrdiff_t

from dataloader._core._tables cimport DL_FILTER_COUNT, dl_filter_name
from dataloader._core._typedefs cimport uint8_t


# Filter names in the order of their codes (DL_FILTERS of src/dl_tables.h).
FILTERS = tuple([dl_filter_name(code).decode() for code in range(DL_FILTER_COUNT)])


def resize_into(const uint8_t[:, :, ::1] src,  # IN
                uint8_t[:, :, ::1] out,        # OUT
                int filter, bint antialias, bint fast=False):
    """Resample ``src`` into ``out`` (same channel count), GIL released.

    ``fast`` rounds bilinear's horizontal weights as Pillow-SIMD does
    (results within 1 of Pillow's); otherwise, and for the other filters,
    the results are Pillow's.
    """
    cdef int status
    cdef int in_h = src.shape[0], in_w = src.shape[1], channels = src.shape[2]
    cdef int out_h = out.shape[0], out_w = out.shape[1]
    if out.shape[2] != channels:
        raise ValueError("resize_into: src and out must have the same number of channels")
    if not 0 <= filter < DL_FILTER_COUNT:
        raise ValueError(f"resize_into: unknown filter {filter}")
    with nogil:
        status = dl_resize(&src[0, 0, 0], in_w * channels, in_h, in_w, channels,
                           &out[0, 0, 0], out_w * channels, out_h, out_w, filter, antialias,
                           fast)
    if status != 0:
        raise MemoryError("resize: cannot allocate scratch memory")


def vectorised(request=None):
    """Whether the vectorised (AVX2) passes run: True, or False for the portable loops.

    ``request`` False forces the portable loops and True restores the
    vectorised ones where the CPU has them; both give the same bytes, which
    the tests check by running each.  Process-wide; not for use while other
    threads resize.
    """
    return bool(dl_resize_vectorised(-1 if request is None else (1 if request else 0)))


def vnni(request=None):
    """Whether the vectorised passes multiply with AVX-512 VNNI: True, or False for AVX2 alone.

    ``request`` False forces the AVX2 instructions alone and True restores
    VNNI where the CPU has it; all give the same bytes, which the tests
    check by running each.  Process-wide; not for use while other threads
    resize.
    """
    return bool(dl_resize_vnni(-1 if request is None else (1 if request else 0)))
