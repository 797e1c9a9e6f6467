/* Separable resampling of uint8 HWC images with Pillow's algorithm (see
 * dl_resize.c); no Python. */
#ifndef DL_RESIZE_H
#define DL_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#include "dl_tables.h"

/* `filter` is a dl_filter_t (DL_FILTERS in dl_tables.h). */

/* Returns 0, or -1 when scratch memory could not be allocated. */
int dl_resize(const uint8_t *src, ptrdiff_t src_stride, int in_h, int in_w, int channels,
              uint8_t *dst, ptrdiff_t dst_stride, int out_h, int out_w, int filter,
              int antialias);

#endif
