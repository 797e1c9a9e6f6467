# src/dl_colour.h: the colour and filter kernels on uint8 HWC images (each
# with its reference in the header), which the chain ops of
# src/dl_colour_chain.c run and augmentation policies call one by one.
from dataloader._core._typedefs cimport uint8_t
from dataloader._core.ops cimport dl_image_t


cdef extern from "dl_colour.h" nogil:
    int dl_colour_channels(int channels)
    uint8_t dl_blend(int degenerate, int sample, float factor)
    void dl_adjust_brightness(const dl_image_t* src, const dl_image_t* dst, double factor)
    void dl_adjust_contrast(const dl_image_t* src, const dl_image_t* dst, double factor)
    void dl_adjust_saturation(const dl_image_t* src, const dl_image_t* dst, double factor)
    void dl_adjust_hue(const dl_image_t* src, const dl_image_t* dst, double hue_factor)
    int dl_adjust_sharpness(const dl_image_t* src, const dl_image_t* dst, double factor)
    void dl_grayscale(const dl_image_t* src, const dl_image_t* dst)
    void dl_posterize(const dl_image_t* src, const dl_image_t* dst, int bits)
    void dl_solarize(const dl_image_t* src, const dl_image_t* dst, double threshold)
    void dl_autocontrast(const dl_image_t* src, const dl_image_t* dst)
    void dl_equalize(const dl_image_t* src, const dl_image_t* dst)
    void dl_invert(const dl_image_t* src, const dl_image_t* dst)
    int dl_gaussian_blur(const dl_image_t* src, const dl_image_t* dst, int kernel_width,
                         int kernel_height, double sigma_x, double sigma_y)
