# src/dl_resize.h: Pillow's resampling of uint8 HWC images.
from libc.stddef cimport ptrdiff_t

from dataloader._core._typedefs cimport uint8_t


cdef extern from "dl_resize.h" nogil:
    int dl_resize(const uint8_t* src, ptrdiff_t src_stride, int in_h, int in_w, int channels,
                  uint8_t* dst, ptrdiff_t dst_stride, int out_h, int out_w, int filter,
                  int antialias, int fast)
    int dl_resize_vectorised(int request)
    int dl_resize_vnni(int request)
