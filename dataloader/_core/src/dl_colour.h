/* Colour and filter kernels on uint8 HWC images, with no Python: the
 * photometric ops of torchvision's Pillow backend, one function each, with
 * explicit parameters, so that a chain op (dl_colour_chain.c) or an
 * augmentation policy calls them one by one.
 *
 * Every kernel reads `src` and writes `dst` of the same height and width
 * (uint8, sample_size 1; rows may be strided). Channels: 1 (L) or 3 (RGB)
 * are colour; a 2nd channel (LA) or a 4th (RGBA) is alpha, which every
 * colour kernel copies unchanged (as Pillow's ImageEnhance keeps it) and
 * the blur filters as any channel (as torchvision's does). The
 * per-sample kernels may run in place (dst->data == src->data); the
 * neighbourhood filters (sharpness, blur) need separate buffers. Those
 * that allocate return 0, or -1 when memory could not be allocated (and
 * free it on every path); the others cannot fail.
 *
 * The reference of each kernel, which the tests compare against:
 *   brightness, contrast, saturation, sharpness: ImageEnhance.Brightness,
 *     Contrast, Color, Sharpness(image).enhance(factor), rounding as
 *     Image.blend does (float32, truncated, clipped);
 *   hue: torchvision's adjust_hue on a PIL image (Pillow's HSV conversion
 *     in uint8, the hue channel shifted by uint8(hue_factor * 255));
 *   grayscale: Image.convert("L") (ITU-R 601-2 luma, 16-bit fixed point);
 *   posterize, solarize, autocontrast, equalize, invert: ImageOps.*;
 *   gaussian blur: torchvision's GaussianBlur on a PIL image, which runs its
 *     tensor kernel (float32 separable Gaussian, reflected borders, rounded
 *     half to even), not Pillow's box-approximated ImageFilter.GaussianBlur. */
#ifndef DL_COLOUR_H
#define DL_COLOUR_H

#include "dl_ops.h"

/* The colour channels of an image of `channels` channels: 1 or 3. */
static inline int dl_colour_channels(int channels) { return channels >= 3 ? 3 : 1; }

/* Image.blend(degenerate, image, factor) per sample (factor finite): Pillow's float32
 * interpolation, truncated, clipped to 0..255 when extrapolating. */
static inline uint8_t dl_blend(int degenerate, int sample, float factor)
{
    float value = (float)degenerate + factor * (float)(sample - degenerate);
    if (factor >= 0.0f && factor <= 1.0f) return (uint8_t)value;
    return value <= 0.0f ? 0 : value >= 255.0f ? 255 : (uint8_t)value;
}

/* ImageEnhance.Brightness: blend with black. */
void dl_adjust_brightness(const dl_image_t *src, const dl_image_t *dst, double factor);

/* ImageEnhance.Contrast: blend with the gray level of the luma's mean,
 * rounded half up. */
void dl_adjust_contrast(const dl_image_t *src, const dl_image_t *dst, double factor);

/* ImageEnhance.Color: blend each pixel with its luma (gray images unchanged). */
void dl_adjust_saturation(const dl_image_t *src, const dl_image_t *dst, double factor);

/* torchvision's adjust_hue, hue_factor in [-0.5, 0.5] (gray images unchanged). */
void dl_adjust_hue(const dl_image_t *src, const dl_image_t *dst, double hue_factor);

/* ImageEnhance.Sharpness: blend with ImageFilter.SMOOTH's 3x3 average (the
 * border pixels kept); dst must not overlap src. 0, or -1 without memory. */
int dl_adjust_sharpness(const dl_image_t *src, const dl_image_t *dst, double factor);

/* Luma (Image.convert("L")) into dst->channels: 1 (gray), 3 (gray RGB), or
 * src's own count when it has alpha (gray with the alpha kept). */
void dl_grayscale(const dl_image_t *src, const dl_image_t *dst);

/* ImageOps.posterize: keep the `bits` (0..8) high bits of each sample. */
void dl_posterize(const dl_image_t *src, const dl_image_t *dst, int bits);

/* ImageOps.solarize: samples >= threshold become 255 - sample. */
void dl_solarize(const dl_image_t *src, const dl_image_t *dst, double threshold);

/* ImageOps.autocontrast (cutoff 0): each channel stretched to 0..255. */
void dl_autocontrast(const dl_image_t *src, const dl_image_t *dst);

/* ImageOps.equalize: each channel's histogram equalised. */
void dl_equalize(const dl_image_t *src, const dl_image_t *dst);

/* ImageOps.invert: 255 - sample. */
void dl_invert(const dl_image_t *src, const dl_image_t *dst);

/* torchvision's Gaussian blur: a kernel_width x kernel_height kernel (odd,
 * positive) of standard deviations sigma_x, sigma_y (> 0); borders
 * reflected (as torch's "reflect" pad; a kernel wider than the image keeps
 * reflecting). dst must not overlap src. 0, or -1 without memory. */
int dl_gaussian_blur(const dl_image_t *src, const dl_image_t *dst, int kernel_width,
                     int kernel_height, double sigma_x, double sigma_y);

#endif
