/* Resampling as Pillow's Image.resize computes it, so that results agree
 * with Pillow's for uint8 images:
 *
 *  - the filter's support is stretched by the downscale factor (antialias),
 *    and each output sample's weights are normalised to sum to one;
 *  - weights are rounded to signed fixed point with DL_PRECISION_BITS
 *    fractional bits, sums start at one half and are clipped to 0..255;
 *  - the horizontal pass runs first, over only the input rows the vertical
 *    pass reads, and its result is rounded to uint8 before the vertical pass;
 *    except when the height shrinks while the width grows: then the vertical
 *    pass runs first, as Pillow 13 does.  (Pillow 13 also runs it first for
 *    some sizes where both sides shrink, by a rule not reproduced here; the
 *    two orders round differently, by at most 1 for bilinear.)
 *  - nearest neighbour walks the source with an accumulated double step from
 *    the first sample's centre, as Pillow's affine scaling does.
 *
 * Channels are independent: alpha is not premultiplied.
 *
 * Two implementations compute the same bytes:
 *  - portable loops: both passes are one loop, dl_filter_rows, whose inner
 *    loop runs along a whole row (the compiler vectorises it); the
 *    horizontal pass feeds it a transposed block (dl_filter_columns);
 *  - on x86-64 CPUs with AVX2, chosen at run time: the vertical pass keeps
 *    32 sums in registers across all taps (dl_filter_rows_avx2), and the
 *    horizontal pass for 3 and 4 channels works in place on pairs of taps of
 *    two rows at a time (dl_filter_columns_avx2), with each 22-bit weight
 *    split into two 16-bit halves so that the sums stay exact.
 * dl_resize_vectorised switches between them, for tests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dl_resize.h"

#define DL_PRECISION_BITS (32 - 8 - 2)

/* Hand-vectorised passes for x86-64 with AVX2 (dl_*_avx2 below), compiled
 * for that target alone and chosen at run time; every other machine, and
 * shapes they do not cover, run the portable loops. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DL_HAVE_AVX2 1
#define DL_AVX2 __attribute__((target("avx2")))
#else
#define DL_HAVE_AVX2 0
#endif

/* The filtering loop is compiled for AVX2 as well and chosen at load time
 * where the compiler and C library support it (GCC ifunc). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define DL_TARGET_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DL_TARGET_CLONES
#endif
#define DL_PI 3.14159265358979323846

static double dl_bilinear(double x)
{
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double dl_bicubic(double x)
{
    const double a = -0.5;
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double dl_sinc(double x)
{
    if (x == 0.0)
        return 1.0;
    x = x * DL_PI;
    return sin(x) / x;
}

static double dl_lanczos(double x)
{
    if (-3.0 <= x && x < 3.0)
        return dl_sinc(x) * dl_sinc(x / 3);
    return 0.0;
}

/* Fills bounds (first input index and count per output) and fixed-point
 * weights (ksize per output); returns ksize, or -1 on allocation failure. */
static int dl_coefficients(int in_size, int out_size, int filter, int antialias,
                           int **bounds_out, int32_t **weights_out)
{
    double (*fn)(double);
    double support, scale, filterscale, *k;
    int ksize, xx, x;
    int *bounds;
    int32_t *weights;

    switch (filter) {
    case DL_FILTER_BICUBIC: fn = dl_bicubic; support = 2.0; break;
    case DL_FILTER_LANCZOS: fn = dl_lanczos; support = 3.0; break;
    default: fn = dl_bilinear; support = 1.0; break;
    }
    filterscale = scale = (double)in_size / out_size;
    if (filterscale < 1.0 || !antialias)
        filterscale = 1.0;
    support = support * filterscale;
    ksize = (int)ceil(support) * 2 + 1;
    bounds = malloc(sizeof(int) * 2 * (size_t)out_size);
    weights = malloc(sizeof(int32_t) * (size_t)ksize * (size_t)out_size);
    k = malloc(sizeof(double) * (size_t)ksize);
    if (bounds == NULL || weights == NULL || k == NULL) {
        free(bounds);
        free(weights);
        free(k);
        return -1;
    }
    for (xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale;
        double ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        int xmax = (int)(center + support + 0.5);
        if (xmin < 0)
            xmin = 0;
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        for (x = 0; x < xmax; x++) {
            double w = fn((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        for (x = 0; x < ksize; x++) {
            double w = x < xmax ? (ww != 0.0 ? k[x] / ww : k[x]) : 0.0;
            weights[xx * ksize + x] = (int32_t)(w < 0 ? -0.5 + w * (1 << DL_PRECISION_BITS)
                                                      : 0.5 + w * (1 << DL_PRECISION_BITS));
        }
        bounds[2 * xx] = xmin;
        bounds[2 * xx + 1] = xmax;
    }
    free(k);
    *bounds_out = bounds;
    *weights_out = weights;
    return ksize;
}

static inline uint8_t dl_clip8(int32_t v)
{
    if (v >= (1 << DL_PRECISION_BITS << 8))
        return 255;
    if (v <= 0)
        return 0;
    return (uint8_t)(v >> DL_PRECISION_BITS);
}

/* Copies a rows x cols block of `channels`-byte pixels into its transpose:
 * pixel (y, x) of src goes to dst + x * dst_stride + y * channels.  Tiled to
 * stay in cache; `channels` is a constant in each inlined copy. */
static inline __attribute__((always_inline)) void
dl_transpose_block(const uint8_t *src, ptrdiff_t src_stride, int rows, int cols, int channels,
                   uint8_t *dst, ptrdiff_t dst_stride)
{
    enum { TILE = 16 };
    int y0, x0, y, x;
    for (y0 = 0; y0 < rows; y0 += TILE)
        for (x0 = 0; x0 < cols; x0 += TILE) {
            int y1 = y0 + TILE < rows ? y0 + TILE : rows;
            int x1 = x0 + TILE < cols ? x0 + TILE : cols;
            for (x = x0; x < x1; x++) {
                uint8_t *out = dst + x * dst_stride + (ptrdiff_t)y0 * channels;
                const uint8_t *in = src + y0 * src_stride + (ptrdiff_t)x * channels;
                for (y = y0; y < y1; y++, out += channels, in += src_stride)
                    memcpy(out, in, (size_t)channels);
            }
        }
}

static void dl_transpose(const uint8_t *src, ptrdiff_t src_stride, int rows, int cols,
                         int channels, uint8_t *dst, ptrdiff_t dst_stride)
{
    switch (channels) {
    case 1: dl_transpose_block(src, src_stride, rows, cols, 1, dst, dst_stride); break;
    case 2: dl_transpose_block(src, src_stride, rows, cols, 2, dst, dst_stride); break;
    case 3: dl_transpose_block(src, src_stride, rows, cols, 3, dst, dst_stride); break;
    default: dl_transpose_block(src, src_stride, rows, cols, 4, dst, dst_stride); break;
    }
}

/* One filtering pass along the first axis: output row yy is the weighted
 * sum of input rows bounds[2yy] .. + bounds[2yy+1].  Every sample of a row
 * shares the row's weight, so the inner loop is a plain vector multiply-add
 * over `row_len` samples into `acc`, in the same integer arithmetic as
 * Pillow's (sums of exact products: the order of additions does not matter).
 * The horizontal pass runs through this function too, on a transposed image
 * (see dl_filter_columns), so that both passes vectorise. */
DL_TARGET_CLONES static void
dl_filter_rows(const uint8_t *src, ptrdiff_t src_stride, ptrdiff_t row_len, uint8_t *dst,
               ptrdiff_t dst_stride, int out_h, int ksize, const int *bounds,
               const int32_t *weights, int32_t *acc)
{
    int yy, y;
    ptrdiff_t i;
    for (yy = 0; yy < out_h; yy++) {
        const int32_t *k = weights + (ptrdiff_t)yy * ksize;
        int ymin = bounds[2 * yy], n = bounds[2 * yy + 1];
        const uint8_t *in = src + (ptrdiff_t)ymin * src_stride;
        uint8_t *out = dst + yy * dst_stride;
        for (i = 0; i < row_len; i++)
            acc[i] = 1 << (DL_PRECISION_BITS - 1);
        /* Two taps per sweep over acc halve its loads and stores. */
        for (y = 0; y + 1 < n; y += 2) {
            const uint8_t *a = in + y * src_stride, *b = a + src_stride;
            int32_t wa = k[y], wb = k[y + 1];
            for (i = 0; i < row_len; i++)
                acc[i] += a[i] * wa + b[i] * wb;
        }
        if (y < n) {
            const uint8_t *a = in + y * src_stride;
            int32_t wa = k[y];
            for (i = 0; i < row_len; i++)
                acc[i] += a[i] * wa;
        }
        for (i = 0; i < row_len; i++)
            out[i] = dl_clip8(acc[i]);
    }
}

/* The horizontal pass computed in place, one output pixel at a time, for
 * very few taps, where transposing would cost more than it saves;
 * `channels` is a constant in each inlined copy so that its loop unrolls. */
static inline __attribute__((always_inline)) void
dl_horizontal_row(const uint8_t *in, uint8_t *out, int out_w, int channels, int ksize,
                  const int *bounds, const int32_t *weights)
{
    int xx, x, c;
    for (xx = 0; xx < out_w; xx++) {
        const int32_t *k = weights + (ptrdiff_t)xx * ksize;
        const uint8_t *p = in + (ptrdiff_t)bounds[2 * xx] * channels;
        int n = bounds[2 * xx + 1];
        int32_t ss[4] = {1 << (DL_PRECISION_BITS - 1), 1 << (DL_PRECISION_BITS - 1),
                         1 << (DL_PRECISION_BITS - 1), 1 << (DL_PRECISION_BITS - 1)};
        for (x = 0; x < n; x++)
            for (c = 0; c < channels; c++)
                ss[c] += p[x * channels + c] * k[x];
        for (c = 0; c < channels; c++)
            out[(ptrdiff_t)xx * channels + c] = dl_clip8(ss[c]);
    }
}

static void dl_filter_columns_direct(const uint8_t *src, ptrdiff_t src_stride, int rows,
                                     int channels, uint8_t *dst, ptrdiff_t dst_stride, int out_w,
                                     int ksize, const int *bounds, const int32_t *weights)
{
    int y;
    for (y = 0; y < rows; y++) {
        const uint8_t *in = src + y * src_stride;
        uint8_t *out = dst + y * dst_stride;
        switch (channels) {
        case 1: dl_horizontal_row(in, out, out_w, 1, ksize, bounds, weights); break;
        case 2: dl_horizontal_row(in, out, out_w, 2, ksize, bounds, weights); break;
        case 3: dl_horizontal_row(in, out, out_w, 3, ksize, bounds, weights); break;
        default: dl_horizontal_row(in, out, out_w, 4, ksize, bounds, weights); break;
        }
    }
}

/* Whether the AVX2 passes run: -1 until the first call decides from the CPU,
 * then 0 or 1 (dl_resize_vectorised may force 0, for tests).  Races on it
 * are benign: every writer stores a value that is correct for this CPU. */
static int dl_vectorised = -1;

static int dl_cpu_has_avx2(void)
{
#if DL_HAVE_AVX2
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
#else
    return 0;
#endif
}

int dl_resize_vectorised(int request)
{
    int v;
    if (request >= 0) {
        v = request ? dl_cpu_has_avx2() : 0;
        __atomic_store_n(&dl_vectorised, v, __ATOMIC_RELAXED);
        return v;
    }
    v = __atomic_load_n(&dl_vectorised, __ATOMIC_RELAXED);
    if (v < 0) {
        v = dl_cpu_has_avx2();
        __atomic_store_n(&dl_vectorised, v, __ATOMIC_RELAXED);
    }
    return v;
}

#if DL_HAVE_AVX2
/* The AVX2 passes compute exactly what the portable ones do, so both give
 * the same bytes: the vertical pass the same 32-bit products (vpmulld)
 * summed in 32-bit lanes, the horizontal one the same sums from 16-bit
 * halves of the weights (see DL_SPLIT_BITS). */

/* Eight samples at p, widened to 32 bits and multiplied by the weight w. */
DL_AVX2 static inline __m256i dl_mul8_avx2(const uint8_t *p, __m256i w)
{
    return _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)), w);
}

/* Four vectors of eight sums to 32 bytes, shifted and clipped as dl_clip8
 * does: the saturating packs clip below 0 and above 255. */
DL_AVX2 static inline __m256i dl_pack32_avx2(__m256i a0, __m256i a1, __m256i a2, __m256i a3)
{
    __m256i lo = _mm256_packs_epi32(_mm256_srai_epi32(a0, DL_PRECISION_BITS),
                                    _mm256_srai_epi32(a1, DL_PRECISION_BITS));
    __m256i hi = _mm256_packs_epi32(_mm256_srai_epi32(a2, DL_PRECISION_BITS),
                                    _mm256_srai_epi32(a3, DL_PRECISION_BITS));
    /* The packs work within 128-bit lanes: restore the order of the dwords. */
    return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(lo, hi),
                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* dl_filter_rows for row_len >= 32: 32 samples at a time with their sums in
 * registers across all taps; the last block overlaps the one before it
 * rather than running a scalar tail. */
DL_AVX2 static void dl_filter_rows_avx2(const uint8_t *src, ptrdiff_t src_stride,
                                        ptrdiff_t row_len, uint8_t *dst, ptrdiff_t dst_stride,
                                        int out_h, int ksize, const int *bounds,
                                        const int32_t *weights)
{
    const __m256i half = _mm256_set1_epi32(1 << (DL_PRECISION_BITS - 1));
    for (int yy = 0; yy < out_h; yy++) {
        const int32_t *k = weights + (ptrdiff_t)yy * ksize;
        const uint8_t *in = src + (ptrdiff_t)bounds[2 * yy] * src_stride;
        uint8_t *out = dst + yy * dst_stride;
        int n = bounds[2 * yy + 1];
        for (ptrdiff_t i = 0;; i += 32) {
            __m256i a0 = half, a1 = half, a2 = half, a3 = half;
            const uint8_t *p;
            if (i + 32 > row_len)
                i = row_len - 32;
            p = in + i;
            for (int y = 0; y < n; y++, p += src_stride) {
                __m256i w = _mm256_set1_epi32(k[y]);
                a0 = _mm256_add_epi32(a0, dl_mul8_avx2(p, w));
                a1 = _mm256_add_epi32(a1, dl_mul8_avx2(p + 8, w));
                a2 = _mm256_add_epi32(a2, dl_mul8_avx2(p + 16, w));
                a3 = _mm256_add_epi32(a3, dl_mul8_avx2(p + 24, w));
            }
            _mm256_storeu_si256((__m256i *)(out + i), dl_pack32_avx2(a0, a1, a2, a3));
            if (i + 32 >= row_len)
                break;
        }
    }
}

/* The horizontal pass for 3 or 4 channels works on 16-bit lanes, two rows
 * at a time (row a in the low 128-bit lane, row b in the high one):
 * vpmaddwd multiplies a pair of taps by their weights and adds the two
 * products, for every channel of both rows in one instruction.  A 22-bit
 * weight does not fit 16 bits, so each is split as w = hi * 2^15 + lo with
 * 0 <= lo < 2^15: the sums of products with hi and with lo are kept apart
 * and joined as (hi_sum << 15) + lo_sum, which is the portable loop's 32-bit
 * sum exactly (all of it is arithmetic modulo 2^32). */
#define DL_SPLIT_BITS 15

/* The weights of one pair of taps, lo and hi parts, each as 16 lanes
 * [w0 w1] x 4 repeated in both 128-bit lanes. */
typedef struct {
    __m256i lo, hi;
} dl_pair_weights_t;

/* 16 bytes of row a and of row b at the same offset. */
DL_AVX2 static inline __m256i dl_load_rows_avx2(const uint8_t *a, const uint8_t *b)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                   _mm_loadu_si128((const __m128i *)b), 1);
}

DL_AVX2 static inline __m256i dl_madd_pair_avx2(__m256i pixels, const dl_pair_weights_t *w,
                                                __m256i *hi)
{
    *hi = _mm256_add_epi32(*hi, _mm256_madd_epi16(pixels, _mm256_load_si256(&w->hi)));
    return _mm256_madd_epi16(pixels, _mm256_load_si256(&w->lo));
}

/* The 32-bit sums of one output pixel whose 2 * pairs taps start at offset
 * p of rows a and b: one channel per 32-bit lane, row a's in the low 128
 * bits, rounding term included, before the shift.  Each load covers 4 taps
 * (two pairs); m01 and m23 pick pixels 0, 1 and 2, 3 of it as 16-bit
 * values, each channel of the two pixels side by side. */
DL_AVX2 static inline __attribute__((always_inline)) __m256i
dl_horizontal_pixel_avx2(const uint8_t *a, const uint8_t *b, int channels, int pairs,
                         const dl_pair_weights_t *w, __m256i m01, __m256i m23)
{
    __m256i lo = _mm256_set1_epi32(1 << (DL_PRECISION_BITS - 1)), hi = _mm256_setzero_si256();
    int q = 0;
    for (; q + 2 <= pairs; q += 2) {
        __m256i v = dl_load_rows_avx2(a + q * 2 * channels, b + q * 2 * channels);
        lo = _mm256_add_epi32(lo, dl_madd_pair_avx2(_mm256_shuffle_epi8(v, m01), w + q, &hi));
        lo = _mm256_add_epi32(lo, dl_madd_pair_avx2(_mm256_shuffle_epi8(v, m23), w + q + 1, &hi));
    }
    if (q < pairs) {
        __m256i v = dl_load_rows_avx2(a + q * 2 * channels, b + q * 2 * channels);
        lo = _mm256_add_epi32(lo, dl_madd_pair_avx2(_mm256_shuffle_epi8(v, m01), w + q, &hi));
    }
    return _mm256_add_epi32(_mm256_slli_epi32(hi, DL_SPLIT_BITS), lo);
}

/* Two rows (b may equal a): four output pixels at a time share the shift
 * and the packing. */
DL_AVX2 static inline __attribute__((always_inline)) void
dl_horizontal_row_avx2(const uint8_t *in_a, const uint8_t *in_b, uint8_t *out_a, uint8_t *out_b,
                       int out_w, int channels, int pairs, const int *start,
                       const dl_pair_weights_t *w)
{
    const __m256i m01 = channels == 3
        ? _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
                           0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1)
        : _mm256_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1,
                           0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1);
    const __m256i m23 = channels == 3
        ? _mm256_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1,
                           6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1)
        : _mm256_setr_epi8(8, -1, 12, -1, 9, -1, 13, -1, 10, -1, 14, -1, 11, -1, 15, -1,
                           8, -1, 12, -1, 9, -1, 13, -1, 10, -1, 14, -1, 11, -1, 15, -1);
    /* After the packs below each lane holds one row's pixels in the order
     * 0, 2, 1, 3 (4 bytes each): put them in order, 3 bytes each for 3
     * channels. */
    const __m256i squeeze = channels == 3
        ? _mm256_setr_epi8(0, 1, 2, 8, 9, 10, 4, 5, 6, 12, 13, 14, -1, -1, -1, -1,
                           0, 1, 2, 8, 9, 10, 4, 5, 6, 12, 13, 14, -1, -1, -1, -1)
        : _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15,
                           0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
    int xx = 0;
    for (; xx + 4 <= out_w; xx += 4) {
        __m256i s[4], packed;
        for (int i = 0; i < 4; i++) {
            ptrdiff_t at = (ptrdiff_t)start[xx + i] * channels;
            s[i] = _mm256_srai_epi32(
                dl_horizontal_pixel_avx2(in_a + at, in_b + at, channels, pairs,
                                         w + (ptrdiff_t)(xx + i) * pairs, m01, m23),
                DL_PRECISION_BITS);
        }
        /* Row a's pixels in lane 0, row b's in lane 1. */
        packed = _mm256_packus_epi16(_mm256_packs_epi32(s[0], s[2]),
                                     _mm256_packs_epi32(s[1], s[3]));
        packed = _mm256_shuffle_epi8(packed, squeeze);
        if (channels == 4) {
            _mm_storeu_si128((__m128i *)(out_a + (ptrdiff_t)xx * 4),
                             _mm256_castsi256_si128(packed));
            _mm_storeu_si128((__m128i *)(out_b + (ptrdiff_t)xx * 4),
                             _mm256_extracti128_si256(packed, 1));
        } else {
            __m128i pa = _mm256_castsi256_si128(packed), pb = _mm256_extracti128_si256(packed, 1);
            int32_t ta = _mm_extract_epi32(pa, 2), tb = _mm_extract_epi32(pb, 2);
            _mm_storel_epi64((__m128i *)(out_a + (ptrdiff_t)xx * 3), pa);
            memcpy(out_a + (ptrdiff_t)xx * 3 + 8, &ta, 4);
            _mm_storel_epi64((__m128i *)(out_b + (ptrdiff_t)xx * 3), pb);
            memcpy(out_b + (ptrdiff_t)xx * 3 + 8, &tb, 4);
        }
    }
    for (; xx < out_w; xx++) {
        ptrdiff_t at = (ptrdiff_t)start[xx] * channels;
        __m256i v = _mm256_srai_epi32(
            dl_horizontal_pixel_avx2(in_a + at, in_b + at, channels, pairs,
                                     w + (ptrdiff_t)xx * pairs, m01, m23),
            DL_PRECISION_BITS);
        int32_t bytes_a, bytes_b;
        v = _mm256_packus_epi16(_mm256_packs_epi32(v, v), v);
        bytes_a = _mm256_extract_epi32(v, 0);
        bytes_b = _mm256_extract_epi32(v, 4);
        memcpy(out_a + (ptrdiff_t)xx * channels, &bytes_a, (size_t)channels);
        memcpy(out_b + (ptrdiff_t)xx * channels, &bytes_b, (size_t)channels);
    }
}

/* Rows of the horizontal pass, two at a time; the common channel and pair
 * counts get copies of the row loop with those constant, so that its loops
 * unroll. */
DL_AVX2 static void dl_horizontal_rows_avx2(const uint8_t *src, ptrdiff_t src_stride, int rows,
                                            int channels, uint8_t *dst, ptrdiff_t dst_stride,
                                            int out_w, int pairs, const int *start,
                                            const dl_pair_weights_t *w)
{
#define DL_ROWS(c, p)                                                                       \
    for (int y = 0; y < rows; y += 2) {                                                   \
        int b = y + 1 < rows ? y + 1 : y;                                                 \
        dl_horizontal_row_avx2(src + y * src_stride, src + b * src_stride,                \
                               dst + y * dst_stride, dst + b * dst_stride, out_w, c, p, start, \
                               w);                                                          \
    }                                                                                     \
    return
    switch (channels * 8 + (pairs <= 4 ? pairs : 0)) {
    case 3 * 8 + 1: DL_ROWS(3, 1);
    case 3 * 8 + 2: DL_ROWS(3, 2);
    case 3 * 8 + 3: DL_ROWS(3, 3);
    case 3 * 8 + 4: DL_ROWS(3, 4);
    case 3 * 8: DL_ROWS(3, pairs);
    case 4 * 8 + 1: DL_ROWS(4, 1);
    case 4 * 8 + 2: DL_ROWS(4, 2);
    case 4 * 8 + 3: DL_ROWS(4, 3);
    case 4 * 8 + 4: DL_ROWS(4, 4);
    default: DL_ROWS(4, pairs);
    }
#undef DL_ROWS
}

/* The horizontal pass for 3 or 4 channels, where in_w >= max(2 * pairs, 4).
 * Each output pixel reads 2 * pairs input pixels, its window moved left
 * where needed to end inside the row (zero weights pad it).  Each 16-byte
 * load serves 2 pairs, or the last 1, so it reads up to 10 bytes past the
 * pixels it uses: past the end of a row these are the next row's, and the
 * last row is read from a padded copy.  Returns 0, or -1 when memory runs
 * out. */
static int dl_filter_columns_avx2(const uint8_t *src, ptrdiff_t src_stride, int rows, int in_w,
                                  int channels, uint8_t *dst, ptrdiff_t dst_stride, int out_w,
                                  int pairs, const int *bounds, const int32_t *weights,
                                  int ksize)
{
    int taps = 2 * pairs;
    dl_pair_weights_t *w = aligned_alloc(32, sizeof(dl_pair_weights_t) * (size_t)pairs *
                                                 (size_t)out_w);
    int *start = malloc(sizeof(int) * (size_t)out_w);
    uint8_t *last = malloc((size_t)in_w * channels + 16);
    int status = -1;
    if (w != NULL && start != NULL && last != NULL) {
        for (int xx = 0; xx < out_w; xx++) {
            int xmin = bounds[2 * xx], n = bounds[2 * xx + 1];
            int s = xmin < in_w - taps ? xmin : in_w - taps;
            start[xx] = s;
            for (int t = 0; t < taps; t++) {
                int j = t - (xmin - s);
                int32_t k = j >= 0 && j < n ? weights[(ptrdiff_t)xx * ksize + j] : 0;
                int16_t *lo = (int16_t *)&w[(ptrdiff_t)xx * pairs + t / 2].lo;
                int16_t *hi = (int16_t *)&w[(ptrdiff_t)xx * pairs + t / 2].hi;
                /* Tap t is the first or second of each [w0 w1] of its pair. */
                for (int i = t % 2; i < 16; i += 2) {
                    lo[i] = (int16_t)(k & ((1 << DL_SPLIT_BITS) - 1));
                    hi[i] = (int16_t)(k >> DL_SPLIT_BITS);
                }
            }
        }
        if (rows > 1)
            dl_horizontal_rows_avx2(src, src_stride, rows - 1, channels, dst, dst_stride, out_w,
                                    pairs, start, w);
        memcpy(last, src + (ptrdiff_t)(rows - 1) * src_stride, (size_t)in_w * channels);
        memset(last + (size_t)in_w * channels, 0, 16);
        dl_horizontal_rows_avx2(last, 0, 1, channels, dst + (ptrdiff_t)(rows - 1) * dst_stride,
                                dst_stride, out_w, pairs, start, w);
        status = 0;
    }
    free(w);
    free(start);
    free(last);
    return status;
}
#endif

/* One pass along the first axis, vectorised where the CPU allows. */
static int dl_filter_rows_any(const uint8_t *src, ptrdiff_t src_stride, ptrdiff_t row_len,
                              uint8_t *dst, ptrdiff_t dst_stride, int out_h, int ksize,
                              const int *bounds, const int32_t *weights)
{
    int32_t *acc;
#if DL_HAVE_AVX2
    if (row_len >= 32 && dl_resize_vectorised(-1)) {
        dl_filter_rows_avx2(src, src_stride, row_len, dst, dst_stride, out_h, ksize, bounds,
                            weights);
        return 0;
    }
#endif
    acc = malloc(sizeof(int32_t) * (size_t)row_len);
    if (acc == NULL)
        return -1;
    dl_filter_rows(src, src_stride, row_len, dst, dst_stride, out_h, ksize, bounds, weights, acc);
    free(acc);
    return 0;
}

/* The horizontal pass: transpose the rows x in_w block, filter along its
 * first axis with dl_filter_rows, transpose the rows x out_w result back
 * (directly, without transposing, for the 2-tap bilinear upscale). */
static int dl_filter_columns(const uint8_t *src, ptrdiff_t src_stride, int rows, int in_w,
                             int channels, uint8_t *dst, ptrdiff_t dst_stride, int out_w,
                             int ksize, const int *bounds, const int32_t *weights)
{
    ptrdiff_t line = (ptrdiff_t)rows * channels;
    uint8_t *t_in, *t_out;
    int status = -1;
#if DL_HAVE_AVX2
    if ((channels == 3 || channels == 4) && dl_resize_vectorised(-1)) {
        /* Pairs of taps: enough for the widest window, not the padded ksize.
         * The high halves of the weights must fit 16 bits, which holds for
         * weights below 256 in magnitude: normalised weights are near 1. */
        int n = 1, xx, fits = 1;
        for (xx = 0; xx < out_w; xx++)
            n = bounds[2 * xx + 1] > n ? bounds[2 * xx + 1] : n;
        for (xx = 0; xx < out_w * ksize; xx++)
            fits &= weights[xx] >> DL_SPLIT_BITS >= INT16_MIN &&
                    weights[xx] >> DL_SPLIT_BITS <= INT16_MAX;
        if (fits && in_w >= 4 && in_w >= n + n % 2)
            return dl_filter_columns_avx2(src, src_stride, rows, in_w, channels, dst, dst_stride,
                                          out_w, (n + 1) / 2, bounds, weights, ksize);
    }
#endif
    if (ksize <= 3) {
        dl_filter_columns_direct(src, src_stride, rows, channels, dst, dst_stride, out_w, ksize,
                                 bounds, weights);
        return 0;
    }
    t_in = malloc((size_t)in_w * line);
    t_out = malloc((size_t)out_w * line);
    if (t_in != NULL && t_out != NULL) {
        dl_transpose(src, src_stride, rows, in_w, channels, t_in, line);
        status = dl_filter_rows_any(t_in, line, line, t_out, line, out_w, ksize, bounds, weights);
        if (status == 0)
            dl_transpose(t_out, line, out_w, rows, channels, dst, dst_stride);
    }
    free(t_in);
    free(t_out);
    return status;
}

static int dl_resize_nearest(const uint8_t *src, ptrdiff_t src_stride, int in_h, int in_w,
                             int channels, uint8_t *dst, ptrdiff_t dst_stride, int out_h,
                             int out_w)
{
    double step_x = (double)in_w / out_w, step_y = (double)in_h / out_h;
    double xo = step_x * 0.5, yo = step_y * 0.5;
    int x, y, c;
    int *xin = malloc(sizeof(int) * (size_t)out_w);
    if (xin == NULL)
        return -1;
    for (x = 0; x < out_w; x++) {
        int xi = xo < 0.0 ? -1 : (int)xo;
        xin[x] = xi < 0 ? 0 : (xi >= in_w ? in_w - 1 : xi);
        xo += step_x;
    }
    for (y = 0; y < out_h; y++) {
        int yi = yo < 0.0 ? -1 : (int)yo;
        const uint8_t *in;
        uint8_t *out = dst + y * dst_stride;
        yi = yi < 0 ? 0 : (yi >= in_h ? in_h - 1 : yi);
        in = src + yi * src_stride;
        for (x = 0; x < out_w; x++)
            for (c = 0; c < channels; c++)
                out[x * channels + c] = in[xin[x] * channels + c];
        yo += step_y;
    }
    free(xin);
    return 0;
}

int dl_resize(const uint8_t *src, ptrdiff_t src_stride, int in_h, int in_w, int channels,
              uint8_t *dst, ptrdiff_t dst_stride, int out_h, int out_w, int filter,
              int antialias)
{
    int *hb = NULL, *vb = NULL;
    int32_t *hw = NULL, *vw = NULL;
    uint8_t *tmp = NULL;
    int hk = 0, vk = 0, status = -1, y, first, last;
    int need_h = out_w != in_w, need_v = out_h != in_h;

    if (filter == DL_FILTER_NEAREST)
        return dl_resize_nearest(src, src_stride, in_h, in_w, channels, dst, dst_stride, out_h,
                                 out_w);
    if (!need_h && !need_v) {
        for (y = 0; y < out_h; y++)
            memcpy(dst + y * dst_stride, src + y * src_stride, (size_t)out_w * channels);
        return 0;
    }
    if (need_h && (hk = dl_coefficients(in_w, out_w, filter, antialias, &hb, &hw)) < 0)
        goto done;
    if (!need_v) {
        status = dl_filter_columns(src, src_stride, in_h, in_w, channels, dst, dst_stride, out_w,
                                   hk, hb, hw);
        goto done;
    }
    if ((vk = dl_coefficients(in_h, out_h, filter, antialias, &vb, &vw)) < 0)
        goto done;
    if (!need_h) {
        status = dl_filter_rows_any(src, src_stride, (ptrdiff_t)out_w * channels, dst, dst_stride,
                                    out_h, vk, vb, vw);
        goto done;
    }
    if (out_h < in_h && out_w > in_w) {
        tmp = malloc((size_t)out_h * in_w * channels);
        if (tmp == NULL)
            goto done;
        if (dl_filter_rows_any(src, src_stride, (ptrdiff_t)in_w * channels, tmp,
                               (ptrdiff_t)in_w * channels, out_h, vk, vb, vw) != 0)
            goto done;
        status = dl_filter_columns(tmp, (ptrdiff_t)in_w * channels, out_h, in_w, channels, dst,
                                   dst_stride, out_w, hk, hb, hw);
        goto done;
    }
    /* Only rows first..last-1 of the input are read by the vertical pass. */
    first = vb[0];
    last = vb[2 * out_h - 2] + vb[2 * out_h - 1];
    for (y = 0; y < out_h; y++)
        vb[2 * y] -= first;
    tmp = malloc((size_t)(last - first) * out_w * channels);
    if (tmp == NULL)
        goto done;
    if (dl_filter_columns(src + first * src_stride, src_stride, last - first, in_w, channels, tmp,
                          (ptrdiff_t)out_w * channels, out_w, hk, hb, hw) != 0)
        goto done;
    status = dl_filter_rows_any(tmp, (ptrdiff_t)out_w * channels, (ptrdiff_t)out_w * channels, dst,
                                dst_stride, out_h, vk, vb, vw);
done:
    free(hb);
    free(hw);
    free(vb);
    free(vw);
    free(tmp);
    return status;
}
