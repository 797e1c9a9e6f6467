# src/dl_ops.h: the image rule, the fill rule and the pixel kernels
# (src/dl_ops.c), shared by ops.pyx, rules.pyx and pipeline.pyx.
from libc.stddef cimport ptrdiff_t

from dataloader._core._typedefs cimport uint8_t


cdef extern from "dl_ops.h" nogil:
    ctypedef struct dl_image_t:
        uint8_t* data
        ptrdiff_t row_stride
        int height, width, channels
        int sample_size
    int DL_MAX_SIDE
    int DL_MAX_CHANNELS
    int DL_MAX_BYTES
    const char* DL_IMAGE_RULE
    const char* DL_FILL_RULE
    bint dl_is_image_shape(ptrdiff_t height, ptrdiff_t width, ptrdiff_t channels)
    bint dl_is_fill_value(double value, int sample_size)
    dl_image_t dl_crop_view(dl_image_t image, int top, int left, int height, int width)
    void dl_copy(const dl_image_t* src, const dl_image_t* dst)
    void dl_flip(const dl_image_t* src, const dl_image_t* dst, int horizontal)
    void dl_rotate90(const dl_image_t* src, const dl_image_t* dst, int k)
    int dl_pad(const dl_image_t* src, const dl_image_t* dst, ptrdiff_t top, ptrdiff_t left,
               int mode, const uint8_t* fill)
    int DL_MAX_BOX_RADIUS
    int dl_box_blur(const dl_image_t* src, const dl_image_t* dst, float xradius, float yradius,
                    int passes)
    float dl_gaussian_box_radius(float radius, int passes)
    void dl_hwc_to_chw(const dl_image_t* src, uint8_t* dst)
    void dl_chw_to_hwc(const uint8_t* src, const dl_image_t* dst)
    void dl_to_float(const uint8_t* src, float* dst, ptrdiff_t n)
    void dl_normalize(const void* src, int src_is_uint8, float* dst, ptrdiff_t n, int channels,
                      ptrdiff_t plane, const float* mean, const float* std)
    void dl_normalize_to_chw(const dl_image_t* src, float* dst, const float* mean,
                             const float* std)
