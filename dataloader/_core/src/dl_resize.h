/* Separable resampling of uint8 HWC images with Pillow's algorithm (see
 * dl_resize.c); no Python. */
#ifndef DL_RESIZE_H
#define DL_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#include "dl_tables.h"

/* `filter` is a dl_filter_t (DL_FILTERS in dl_tables.h). */

/* Returns 0, or -1 when scratch memory could not be allocated.  `fast`
 * rounds bilinear's weights as Pillow-SIMD does (results within 1 of
 * Pillow's); otherwise, and for the other filters, the results are
 * Pillow's. */
int dl_resize(const uint8_t *src, ptrdiff_t src_stride, int in_h, int in_w, int channels,
              uint8_t *dst, ptrdiff_t dst_stride, int out_h, int out_w, int filter,
              int antialias, int fast);

/* Whether dl_resize runs its vectorised (AVX2) passes, which give the same
 * bytes as the portable ones: request 0 forces the portable passes, 1 uses
 * the vectorised ones where the CPU has them, -1 only asks.  Returns 1 when
 * the vectorised passes are in use.  For tests and benchmarks. */
int dl_resize_vectorised(int request);

/* Whether those passes multiply bytes with AVX-512 VNNI (vpdpbusd, on
 * quads of taps and base-256 digits of the weights; the same sums): 0
 * forces AVX2 alone, 1 restores VNNI where the CPU has it, -1 only asks.
 * Returns 1 when the VNNI copies run (with the vectorised passes).  For
 * tests. */
int dl_resize_vnni(int request);

#endif
