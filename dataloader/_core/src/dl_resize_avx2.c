/* The AVX2 passes of dl_resize.c, compiled for that target alone (a
 * function attribute, so the file builds on any x86-64) and chosen at run
 * time by dl_resize.c through dl_resize_vectorised, which is here too; see
 * dl_resize_avx2.h. */
#include <stdlib.h>
#include <string.h>

#include "dl_resize.h"
#include "dl_resize_avx2.h"

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
#include <immintrin.h>

#define DL_AVX2 __attribute__((target("avx2")))

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
DL_AVX2 static inline __m256i dl_pack32_avx2(__m256i a0, __m256i a1, __m256i a2, __m256i a3,
                                             __m128i bits)
{
    __m256i lo = _mm256_packs_epi32(_mm256_sra_epi32(a0, bits), _mm256_sra_epi32(a1, bits));
    __m256i hi = _mm256_packs_epi32(_mm256_sra_epi32(a2, bits), _mm256_sra_epi32(a3, bits));
    /* The packs work within 128-bit lanes: restore the order of the dwords. */
    return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(lo, hi),
                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* dl_filter_rows for row_len >= 32: 32 samples at a time with their sums in
 * registers across all taps; the last block overlaps the one before it
 * rather than running a scalar tail. */
DL_AVX2 void dl_filter_rows_avx2(const uint8_t *src, ptrdiff_t src_stride,
                                 ptrdiff_t row_len, uint8_t *dst, ptrdiff_t dst_stride,
                                 int out_h, int ksize, const int *bounds,
                                 const int32_t *weights, int bits)
{
    const __m256i half = _mm256_set1_epi32(1 << bits >> 1);
    const __m128i shift = _mm_cvtsi32_si128(bits);
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
            _mm256_storeu_si256((__m256i *)(out + i), dl_pack32_avx2(a0, a1, a2, a3, shift));
            if (i + 32 >= row_len)
                break;
        }
    }
}

/* The horizontal pass for 3 or 4 channels works on 16-bit lanes, two rows
 * to a register (row a in the low 128-bit lane, row b in the high one), two
 * registers at a time:
 * vpmaddwd multiplies a pair of taps by their weights and adds the two
 * products, for every channel of both rows in one instruction.  A 22-bit
 * weight does not fit 16 bits, so each is split as w = hi * 2^15 + lo with
 * 0 <= lo < 2^15: the sums of products with hi and with lo are kept apart
 * and joined as (hi_sum << 15) + lo_sum, which is the portable loop's 32-bit
 * sum exactly (all of it is arithmetic modulo 2^32); DL_SPLIT_BITS is 15.
 * Weights that fit 16 bits (fast mode's, see dl_resize.c) are not split:
 * one vpmaddwd per pair of taps then gives the sum. */

/* The weights of one pair of taps as [w0 w1] in 32 bits, broadcast to
 * every lane when used: one word a pair when whole, two (lo, hi) when
 * split.  Kept that compact, the weights of wide windows (strong shrinks:
 * hundreds of taps per output) stay in the L1 cache instead of streaming
 * from L2 as vectors of 32 bytes a pair would. */
DL_AVX2 static inline __m256i dl_broadcast_avx2(const uint32_t *w)
{
    return _mm256_set1_epi32((int)*w);
}

/* 16 bytes of row a and of row b at the same offset. */
DL_AVX2 static inline __m256i dl_load_rows_avx2(const uint8_t *a, const uint8_t *b)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                   _mm_loadu_si128((const __m128i *)b), 1);
}

/* One pair of split weights (w[0] lo, w[1] hi). */
DL_AVX2 static inline __m256i dl_madd_pair_avx2(__m256i pixels, const uint32_t *w, __m256i *hi)
{
    *hi = _mm256_add_epi32(*hi, _mm256_madd_epi16(pixels, dl_broadcast_avx2(w + 1)));
    return _mm256_madd_epi16(pixels, dl_broadcast_avx2(w));
}

/* The 32-bit sums of one output pixel whose 2 * pairs taps start at offset
 * p of rows a, b (returned) and c, d (in *cd): one channel per 32-bit lane,
 * row a's (c's) in the low 128 bits, rounding term `half` included, before
 * the shift; with `split` (a constant in each inlined copy) the weights are
 * split in two halves.  Each load covers 4 taps (two pairs); m01 and m23
 * pick pixels 0, 1 and 2, 3 of it as 16-bit values, each channel of the two
 * pixels side by side.  Four rows share each broadcast weight and keep two
 * independent chains of sums. */
DL_AVX2 static inline __attribute__((always_inline)) __m256i
dl_horizontal_pixel_avx2(const uint8_t *const *rows, ptrdiff_t at, int channels, int pairs,
                         int split, const uint32_t *w, __m256i m01, __m256i m23, __m256i half,
                         __m256i *cd)
{
    const uint8_t *a = rows[0] + at, *b = rows[1] + at, *c = rows[2] + at, *d = rows[3] + at;
    __m256i lo = half, hi = _mm256_setzero_si256();
    __m256i lo2 = half, hi2 = _mm256_setzero_si256();
    int q = 0;
#define DL_TAPS(mask, weight)                                                                 \
    do {                                                                                      \
        if (split) {                                                                          \
            lo = _mm256_add_epi32(lo, dl_madd_pair_avx2(_mm256_shuffle_epi8(v, mask),        \
                                                        w + 2 * (weight), &hi));              \
            lo2 = _mm256_add_epi32(lo2, dl_madd_pair_avx2(_mm256_shuffle_epi8(v2, mask),     \
                                                          w + 2 * (weight), &hi2));           \
        } else {                                                                              \
            __m256i k = dl_broadcast_avx2(w + (weight));                                      \
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_shuffle_epi8(v, mask), k));   \
            lo2 = _mm256_add_epi32(lo2, _mm256_madd_epi16(_mm256_shuffle_epi8(v2, mask), k)); \
        }                                                                                     \
    } while (0)
    for (; q + 2 <= pairs; q += 2) {
        __m256i v = dl_load_rows_avx2(a + q * 2 * channels, b + q * 2 * channels);
        __m256i v2 = dl_load_rows_avx2(c + q * 2 * channels, d + q * 2 * channels);
        DL_TAPS(m01, q);
        DL_TAPS(m23, q + 1);
    }
    if (q < pairs) {
        __m256i v = dl_load_rows_avx2(a + q * 2 * channels, b + q * 2 * channels);
        __m256i v2 = dl_load_rows_avx2(c + q * 2 * channels, d + q * 2 * channels);
        DL_TAPS(m01, q);
    }
#undef DL_TAPS
    if (!split) {
        *cd = lo2;
        return lo;
    }
    *cd = _mm256_add_epi32(_mm256_slli_epi32(hi2, DL_SPLIT_BITS), lo2);
    return _mm256_add_epi32(_mm256_slli_epi32(hi, DL_SPLIT_BITS), lo);
}

/* Output pixels xx .. xx + 3 of rows a and b from their shifted sums s[0..3]
 * (row a's in lane 0, row b's in lane 1). */
DL_AVX2 static inline __attribute__((always_inline)) void
dl_store4_avx2(const __m256i *s, uint8_t *out_a, uint8_t *out_b, int xx, int channels)
{
    /* After the packs each lane holds one row's pixels in the order 0, 2,
     * 1, 3 (4 bytes each): put them in order, 3 bytes each for 3 channels. */
    const __m256i squeeze = channels == 3
        ? _mm256_setr_epi8(0, 1, 2, 8, 9, 10, 4, 5, 6, 12, 13, 14, -1, -1, -1, -1,
                           0, 1, 2, 8, 9, 10, 4, 5, 6, 12, 13, 14, -1, -1, -1, -1)
        : _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15,
                           0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
    __m256i packed = _mm256_packus_epi16(_mm256_packs_epi32(s[0], s[2]),
                                         _mm256_packs_epi32(s[1], s[3]));
    packed = _mm256_shuffle_epi8(packed, squeeze);
    if (channels == 4) {
        _mm_storeu_si128((__m128i *)(out_a + (ptrdiff_t)xx * 4), _mm256_castsi256_si128(packed));
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

/* One output pixel of rows a and b from its shifted sums v. */
DL_AVX2 static inline __attribute__((always_inline)) void
dl_store1_avx2(__m256i v, uint8_t *out_a, uint8_t *out_b, int xx, int channels)
{
    int32_t bytes_a, bytes_b;
    v = _mm256_packus_epi16(_mm256_packs_epi32(v, v), v);
    bytes_a = _mm256_extract_epi32(v, 0);
    bytes_b = _mm256_extract_epi32(v, 4);
    memcpy(out_a + (ptrdiff_t)xx * channels, &bytes_a, (size_t)channels);
    memcpy(out_b + (ptrdiff_t)xx * channels, &bytes_b, (size_t)channels);
}

/* Four rows (some may be the same row): four output pixels at a time share
 * the shift and the packing. */
DL_AVX2 static inline __attribute__((always_inline)) void
dl_horizontal_row_avx2(const uint8_t *const *in, uint8_t *const *out, int out_w, int channels,
                       int pairs, int split, const int *start, const uint32_t *w, int bits)
{
    const __m256i half = _mm256_set1_epi32(1 << bits >> 1);
    const __m128i shift = _mm_cvtsi32_si128(bits);
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
    int xx = 0;
    for (; xx + 4 <= out_w; xx += 4) {
        __m256i s[4], t[4];
        for (int i = 0; i < 4; i++) {
            s[i] = dl_horizontal_pixel_avx2(in, (ptrdiff_t)start[xx + i] * channels, channels,
                                            pairs, split,
                                            w + (ptrdiff_t)(xx + i) * pairs * (split + 1), m01,
                                            m23, half, &t[i]);
            s[i] = _mm256_sra_epi32(s[i], shift);
            t[i] = _mm256_sra_epi32(t[i], shift);
        }
        dl_store4_avx2(s, out[0], out[1], xx, channels);
        dl_store4_avx2(t, out[2], out[3], xx, channels);
    }
    for (; xx < out_w; xx++) {
        __m256i t, s = dl_horizontal_pixel_avx2(in, (ptrdiff_t)start[xx] * channels, channels,
                                                pairs, split,
                                                w + (ptrdiff_t)xx * pairs * (split + 1), m01,
                                                m23, half, &t);
        dl_store1_avx2(_mm256_sra_epi32(s, shift), out[0], out[1], xx, channels);
        dl_store1_avx2(_mm256_sra_epi32(t, shift), out[2], out[3], xx, channels);
    }
}

/* Rows of the horizontal pass, four at a time; the common channel and pair
 * counts, split or whole weights, get copies of the row loop with those
 * constant, so that its loops unroll. */
DL_AVX2 static void dl_horizontal_rows_avx2(const uint8_t *src, ptrdiff_t src_stride, int rows,
                                            int channels, uint8_t *dst, ptrdiff_t dst_stride,
                                            int out_w, const int *start,
                                            const uint32_t *w, const dl_avx2_weights_t *k)
{
    int pairs = k->pairs;
#define DL_ROWS(c, p)                                                                       \
    for (int y = 0; y < rows; y += 4) {                                                   \
        const uint8_t *in[4];                                                             \
        uint8_t *out[4];                                                                  \
        for (int r = 0; r < 4; r++) { /* past the last row: the last row again */         \
            int at = y + r < rows ? y + r : rows - 1;                                     \
            in[r] = src + at * src_stride;                                                \
            out[r] = dst + at * dst_stride;                                               \
        }                                                                                 \
        if (k->split)                                                                     \
            dl_horizontal_row_avx2(in, out, out_w, c, p, 1, start, w, k->bits);           \
        else                                                                              \
            dl_horizontal_row_avx2(in, out, out_w, c, p, 0, start, w, k->bits);           \
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
int dl_filter_columns_avx2(const uint8_t *src, ptrdiff_t src_stride, int rows, int in_w,
                           int channels, uint8_t *dst, ptrdiff_t dst_stride, int out_w,
                           const int *bounds, const dl_avx2_weights_t *k)
{
    int pairs = k->pairs, ksize = k->ksize, taps = 2 * pairs;
    const int32_t *weights = k->weights;
    const int words = k->split ? 2 : 1; /* per pair of taps: lo (and hi) */
    uint32_t *w = malloc(sizeof(uint32_t) * (size_t)words * (size_t)pairs * (size_t)out_w);
    int *start = malloc(sizeof(int) * (size_t)out_w);
    uint8_t *last = malloc((size_t)in_w * channels + 16);
    int status = -1;
    if (w != NULL && start != NULL && last != NULL) {
        for (int xx = 0; xx < out_w; xx++) {
            int xmin = bounds[2 * xx], n = bounds[2 * xx + 1];
            int s = xmin < in_w - taps ? xmin : in_w - taps;
            start[xx] = s;
            for (int q = 0; q < pairs; q++) {
                uint32_t lo = 0, hi = 0;
                uint32_t *at = w + ((ptrdiff_t)xx * pairs + q) * words;
                /* Tap 2q in the low 16 bits of each [w0 w1], tap 2q + 1 in the high. */
                for (int t = 2 * q; t < 2 * q + 2; t++) {
                    int j = t - (xmin - s), shift = 16 * (t % 2);
                    int32_t v = j >= 0 && j < n ? weights[(ptrdiff_t)xx * ksize + j] : 0;
                    if (!k->split) { /* whole: v fits 16 bits */
                        lo |= (uint32_t)(uint16_t)v << shift;
                        continue;
                    }
                    lo |= (uint32_t)(uint16_t)(v & ((1 << DL_SPLIT_BITS) - 1)) << shift;
                    hi |= (uint32_t)(uint16_t)(v >> DL_SPLIT_BITS) << shift;
                }
                at[0] = lo;
                if (k->split)
                    at[1] = hi;
            }
        }
        if (rows > 1)
            dl_horizontal_rows_avx2(src, src_stride, rows - 1, channels, dst, dst_stride, out_w,
                                    start, w, k);
        memcpy(last, src + (ptrdiff_t)(rows - 1) * src_stride, (size_t)in_w * channels);
        memset(last + (size_t)in_w * channels, 0, 16);
        dl_horizontal_rows_avx2(last, 0, 1, channels, dst + (ptrdiff_t)(rows - 1) * dst_stride,
                                dst_stride, out_w, start, w, k);
        status = 0;
    }
    free(w);
    free(start);
    free(last);
    return status;
}
#endif
