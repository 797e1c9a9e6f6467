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

/* The AVX2 horizontal pass splits each weight as hi * 2^15 + lo, both
 * halves in 16 bits (dl_resize_avx2.c); dl_resize.c uses it only when every
 * hi fits. */
#define DL_SPLIT_BITS 15

#if DL_HAVE_AVX2
/* The vertical pass for row_len >= 32 (dl_filter_rows' contract), with
 * weights of `bits` fractional bits. */
void dl_filter_rows_avx2(const uint8_t *src, ptrdiff_t src_stride, ptrdiff_t row_len,
                         uint8_t *dst, ptrdiff_t dst_stride, int out_h, int ksize,
                         const int *bounds, const int32_t *weights, int bits);

/* The horizontal pass's weights: ksize per output, `bits` fractional bits,
 * read in `pairs` pairs of taps; `split` unless every weight fits 16 bits. */
typedef struct {
    const int32_t *weights;
    int ksize, pairs, bits, split;
} dl_avx2_weights_t;

/* The horizontal pass for 3 or 4 channels on pairs of taps, where
 * in_w >= max(2 * pairs, 4). Returns 0, or -1 when memory runs out. */
int dl_filter_columns_avx2(const uint8_t *src, ptrdiff_t src_stride, int rows, int in_w,
                           int channels, uint8_t *dst, ptrdiff_t dst_stride, int out_w,
                           const int *bounds, const dl_avx2_weights_t *k);
#endif

#endif
