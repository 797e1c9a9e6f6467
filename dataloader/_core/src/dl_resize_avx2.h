/* Private to the resampling code: what dl_resize.c and its AVX2 passes
 * (dl_resize_avx2.c) share. No extension module sees it. */
#ifndef DL_RESIZE_AVX2_H
#define DL_RESIZE_AVX2_H

#include <stddef.h>
#include <stdint.h>

/* Pillow's fixed point: weights of 22 bits, sums of 32. */
#define DL_PRECISION_BITS (32 - 8 - 2)

/* Hand-vectorised passes for x86-64 with AVX2, chosen at run time; every
 * other machine, and shapes they do not cover, run the portable loops. */
#if defined(__GNUC__) && defined(__x86_64__)
#define DL_HAVE_AVX2 1
#else
#define DL_HAVE_AVX2 0
#endif

/* The AVX2 passes split a weight that does not fit 16 bits as
 * hi * 2^15 + lo, both halves in 16 bits (dl_resize_avx2.c). */
#define DL_SPLIT_BITS 15

/* Whether the high half (w >> DL_SPLIT_BITS) of each of `count` weights
 * fits 16 bits (always for normalised weights, which are near 1). */
int dl_halves_fit(const int32_t *weights, size_t count);

/* How a pass reads its weights: per output, `units` groups of `taps` taps
 * (pairs with AVX2, and with VNNI for windows of 2 taps; quads with VNNI) of `words` 32-bit words each, of a
 * `kind` (AVX2: 0 whole, 1 split; VNNI: 2 or 3 digits), the weights shifted
 * right by `drop` bits (dl_whole_drop). */
typedef struct {
    int vnni, taps, units, kind, words, drop;
} dl_resize_plan_t;

/* The weights of `outputs` outputs (ksize each, `bits` fractional bits) as
 * the vectorised passes read them, and how (*plan): an array to free, or
 * NULL with *status 1 when they do not suit the vectorised passes (or, with
 * `start`, the rows of in_size pixels are shorter than a window), -1 when
 * memory runs out.  With `start`, the horizontal pass's: start[xx], where
 * output xx's window begins, is moved left where needed to end inside the
 * row (zero weights pad it). */
uint32_t *dl_planned_words(int outputs, int ksize, const int *bounds, const int32_t *weights,
                           int bits, int in_size, int *start, dl_resize_plan_t *plan, int *status);

#if DL_HAVE_AVX2
/* The vertical pass for row_len >= 32 (dl_filter_rows' contract), with
 * weights of `bits` fractional bits.  Returns 0, -1 when memory runs out,
 * or 1 when it cannot take these weights (then the portable loop runs). */
int dl_filter_rows_avx2(const uint8_t *src, ptrdiff_t src_stride, ptrdiff_t row_len,
                        uint8_t *dst, ptrdiff_t dst_stride, int out_h, int ksize,
                        const int *bounds, const int32_t *weights, int bits);

/* The horizontal pass for 3 or 4 channels on pairs of taps (dl_filter_columns'
 * contract).  Returns 0, -1 when memory runs out, or 1 when it cannot take
 * this shape or these weights (then the portable loops run). */
int dl_filter_columns_avx2(const uint8_t *src, ptrdiff_t src_stride, int rows, int in_w,
                           int channels, uint8_t *dst, ptrdiff_t dst_stride, int out_w,
                           int ksize, const int *bounds, const int32_t *weights, int bits);
#endif

#endif
