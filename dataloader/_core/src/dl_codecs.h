/* Image codecs and pixel conversions with no Python: JPEG (libjpeg-turbo), PNG
 * (libpng) and WebP (libwebp), decoding into a caller-given destination with
 * its own row stride.  Every function returns a dl_status_t; on failure a
 * message is written into the caller's `msg` buffer (DL_MSG_LEN bytes). */
#ifndef DL_CODECS_H
#define DL_CODECS_H

#include <stddef.h>
#include <stdint.h>

#include "dl_tables.h"

#define DL_MSG_LEN 256

typedef enum {
    DL_OK = 0,
    DL_ERR_CORRUPT = 1,      /* invalid, truncated or unsupported data */
    DL_ERR_NOMEM = 2,        /* scratch memory could not be allocated */
    DL_ERR_MISMATCH = 3,     /* destination does not match the header */
    DL_ERR_ARGUMENT = 10,    /* a transform cannot apply to what it got (msg names the op) */
    DL_NEEDS_FALLBACK = 11,  /* a format without a native decoder: decode it elsewhere */
    DL_ERR_OS = 12           /* a file could not be read (errno kept by the caller) */
} dl_status_t;

/* Formats (dl_format_t): DL_FORMATS in dl_tables.h. */

typedef struct {
    int format;     /* dl_format_t */
    int height;
    int width;
    int channels;   /* channels of the native decoded output: 1, 2, 3 or 4 */
    /* What the decoder holds besides its output (dl_decode_work): a whole
     * image of the native channels to convert from (WebP; Adam7 PNG), and a
     * JPEG's whole-image DCT coefficients (progressive or multi-scan). */
    int whole_image_to_convert;
    double coefficient_bytes;
} dl_info_t;

int dl_sniff(const uint8_t *data, size_t size);

/* Reads the header only; formats without a native decoder report
 * DL_ERR_CORRUPT with info->format set (the caller may fall back). A JPEG's
 * header stays read in the thread's decompressor for a decode of the same
 * bytes that follows on this thread (dl_jpeg.c). */
int dl_image_info(const uint8_t *data, size_t size, dl_info_t *info, char *msg);

/* JPEG DCT scales are in eighths: `scale` in 1..8 decodes at scale/8, each
 * side rounded up, as libjpeg does. */
void dl_jpeg_scaled_size(int height, int width, int scale, int *out_h, int *out_w);

/* The smallest JPEG DCT scale (1..8) whose output of a height x width image
 * still covers min_h x min_w; 8 (full size) when none smaller does. */
int dl_jpeg_scale_for(int height, int width, int min_h, int min_w);

/* Bytes the decoder of an image with this header allocates besides its
 * output, decoding it into `channels`: counted in the decode limit. */
double dl_decode_work(const dl_info_t *info, int channels);

/* The decode limits, checked from the header before any pixel memory is
 * allocated: a status (DL_ERR_ARGUMENT with `msg` saying which limit a
 * height x width x channels image breaks, its output and `work_bytes` of
 * the decoder's memory counted against max_bytes), or DL_OK. */
int dl_check_limits(int height, int width, int channels, int max_width, int max_height,
                    double max_bytes, double work_bytes, char *msg);

/* Decodes into dst (height x width x channels rows, `row_stride` bytes
 * apart).  The header is read again (a JPEG's only when dl_image_info did
 * not just read it on this thread) and must give exactly height x width
 * (after JPEG scaling by scale/8; other formats take scale 8); channels may
 * differ from the native count and is converted as Pillow's Image.convert
 * does. */
int dl_decode(const uint8_t *data, size_t size, int scale, int height, int width,
              int channels, uint8_t *dst, ptrdiff_t row_stride, char *msg);

/* The ITU-R 601-2 luma of an RGB pixel as Pillow's convert("L") computes
 * it, in 16-bit fixed point. */
static inline uint8_t dl_luma(const uint8_t *p)
{
    return (uint8_t)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
}

/* Converts rows between 1 (L), 2 (LA), 3 (RGB) and 4 (RGBA) channels as
 * Pillow's Image.convert does; src and dst must not overlap. */
void dl_convert_rows(const uint8_t *src, ptrdiff_t src_stride, int src_channels,
                     uint8_t *dst, ptrdiff_t dst_stride, int dst_channels,
                     ptrdiff_t height, ptrdiff_t width);

#endif
