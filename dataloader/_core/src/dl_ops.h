/* Pixel kernels on packed images, with no Python.
 *
 * An image is `height` rows of `width * channels` samples, rows `row_stride`
 * bytes apart (so a crop is a pointer and a stride, not a copy); a sample
 * is `sample_size` bytes: 1 for uint8, 4 for float32. The data-movement
 * kernels (flip, rotate, pad, transposes) move samples as opaque bytes;
 * the value kernels say which sample types they read and write. */
#ifndef DL_OPS_H
#define DL_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "dl_tables.h"

typedef struct {
    uint8_t *data;
    ptrdiff_t row_stride;   /* bytes between rows */
    int height, width, channels;
    int sample_size;        /* bytes per sample */
} dl_image_t;

/* The rule every image follows, declared once: height and width of 1 to
 * DL_MAX_SIDE pixels (also the decoders' default limit, and small enough that
 * sizes and byte offsets never overflow an int), 1 to DL_MAX_CHANNELS
 * channels. DL_MAX_BYTES bounds the decoded samples of one image. Python
 * reads these through dataloader._core.image. */
#define DL_MAX_SIDE 16384
#define DL_MAX_CHANNELS 4
#define DL_MAX_BYTES (256 * 1024 * 1024)
#define DL_STRINGIFY(x) #x
#define DL_TEXT(x) DL_STRINGIFY(x)
#define DL_IMAGE_RULE "an image has height and width of 1 to " DL_TEXT(DL_MAX_SIDE) \
    " pixels and 1 to " DL_TEXT(DL_MAX_CHANNELS) " channels"

/* Whether (height, width, channels) follows the rule. */
static inline int dl_is_image_shape(ptrdiff_t height, ptrdiff_t width, ptrdiff_t channels)
{
    return height >= 1 && height <= DL_MAX_SIDE && width >= 1 && width <= DL_MAX_SIDE &&
           channels >= 1 && channels <= DL_MAX_CHANNELS;
}

/* Whether `value` is a sample of `sample_size` bytes exactly: an integer 0..255
 * for uint8, a finite number in float32's range for float32. */
int dl_is_fill_value(double value, int sample_size);
#define DL_FILL_RULE "fill must be integers in 0..255 for uint8 images and finite numbers " \
                     "within float32's range for float32 images"

/* Pad modes (dl_pad_mode_t): DL_PAD_MODES in dl_tables.h. */

/* The window of `image` at (top, left) of height x width: a view, no copy. */
dl_image_t dl_crop_view(dl_image_t image, int top, int left, int height, int width);

/* Copy `src` into `dst` of the same size (rows may be strided differently). */
void dl_copy(const dl_image_t *src, const dl_image_t *dst);

void dl_flip(const dl_image_t *src, const dl_image_t *dst, int horizontal);

/* `k` (1, 2 or 3) counter-clockwise quarter turns, as numpy.rot90. */
void dl_rotate90(const dl_image_t *src, const dl_image_t *dst, int k);

/* Place `src` at (top, left) of `dst` (either may be negative or past the
 * edge) and fill the rest by `mode`; `fill` holds one pixel of samples
 * (channels * sample_size bytes) for DL_PAD_CONSTANT. Returns 0, or -1 when
 * scratch memory could not be allocated. */
int dl_pad(const dl_image_t *src, const dl_image_t *dst, ptrdiff_t top, ptrdiff_t left,
           int mode, const uint8_t *fill);

/* Pillow's box blur (ImageFilter.BoxBlur, and GaussianBlur through
 * dl_gaussian_box_radius; dl_blur.c): `passes` boxes of xradius along the
 * rows, then `passes` of yradius along the columns, radii >= 0 and at most
 * DL_MAX_BOX_RADIUS, passes >= 1, uint8 images of the same shape that do
 * not overlap. Returns 0, or -1 when scratch memory could not be
 * allocated. */
#define DL_MAX_BOX_RADIUS 1000000
int dl_box_blur(const dl_image_t *src, const dl_image_t *dst, float xradius, float yradius,
                int passes);

/* The box radius whose `passes` boxes stand for a Gaussian of standard
 * deviation `radius`, as Pillow's GaussianBlur computes it. */
float dl_gaussian_box_radius(float radius, int passes);

/* (H, W, C) -> (C, H, W) and back, both packed; `dst` must not overlap `src`. */
void dl_hwc_to_chw(const dl_image_t *src, uint8_t *dst);
void dl_chw_to_hwc(const uint8_t *src, const dl_image_t *dst);

/* Flat samples: dst[i] = src[i] / 255 (float32). */
void dl_to_float(const uint8_t *src, float *dst, ptrdiff_t n);

/* dst[i] = (x[i] - mean[c]) / std[c], subtract then divide (torchvision's
 * Normalize), where x is src as float32, uint8 samples first divided by 255.
 * Channels are interleaved when `plane` is 0 (HWC), else planes of `plane`
 * samples cycle through the channels (CHW). */
void dl_normalize(const void *src, int src_is_uint8, float *dst, ptrdiff_t n, int channels,
                  ptrdiff_t plane, const float *mean, const float *std);

/* The same from an HWC image (uint8 or float32) straight into packed CHW
 * float32: normalisation and transposition in one pass. */
void dl_normalize_to_chw(const dl_image_t *src, float *dst, const float *mean, const float *std);

#endif
