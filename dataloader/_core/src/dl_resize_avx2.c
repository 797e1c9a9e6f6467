/* The AVX2 passes of dl_resize.c, compiled for that target alone (a
 * function attribute, so the file builds on any x86-64) and chosen at run
 * time by dl_resize.c through dl_resize_vectorised, which is here too, as is
 * the choice of their AVX-512 VNNI copies (dl_resize_vnni); see
 * dl_resize_avx2.h. */
#include <stdlib.h>
#include <string.h>

#include "dl_resize.h"
#include "dl_resize_avx2.h"

/* Whether the AVX2 passes run, and whether their VNNI copies do: -1
 * until the first call decides from the CPU, then 0 or 1 (a request may
 * force 0, for tests).  Races on them are benign: every writer stores a
 * value that is correct for this CPU. */
static int dl_vectorised = -1, dl_vnni = -1;

static int dl_cpu_has_avx2(void)
{
#if DL_HAVE_AVX2
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
#else
    return 0;
#endif
}

static int dl_cpu_has_vnni(void)
{
#if DL_HAVE_AVX2
    __builtin_cpu_init();
    return dl_cpu_has_avx2() && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
#else
    return 0;
#endif
}

/* *state after a request (-1: none; 0: off; 1: on where the CPU has it). */
static int dl_feature(int *state, int request, int (*cpu_has)(void))
{
    int v;
    if (request >= 0) {
        v = request ? cpu_has() : 0;
        __atomic_store_n(state, v, __ATOMIC_RELAXED);
        return v;
    }
    v = __atomic_load_n(state, __ATOMIC_RELAXED);
    if (v < 0) {
        v = cpu_has();
        __atomic_store_n(state, v, __ATOMIC_RELAXED);
    }
    return v;
}

int dl_resize_vectorised(int request)
{
    return dl_feature(&dl_vectorised, request, dl_cpu_has_avx2);
}

int dl_resize_vnni(int request)
{
    return dl_feature(&dl_vnni, request, dl_cpu_has_vnni);
}

#if DL_HAVE_AVX2
#include <immintrin.h>

#define DL_AVX2 __attribute__((target("avx2")))

/* The vectorised passes compute exactly what the portable ones do, so all
 * give the same bytes: the same 32-bit sums of products, arithmetic modulo
 * 2^32.  With AVX2, the vertical pass multiplies Pillow's 32-bit weights
 * (vpmulld); the horizontal one multiplies pairs of taps by 16-bit weights
 * (vpmaddwd), whole when they fit 16 bits, else split as w = hi * 2^15 + lo
 * with 0 <= lo < 2^15, the sums of products with hi and with lo kept apart
 * and joined as (hi_sum << 15) + lo_sum.  With VNNI, both multiply quads of
 * taps as bytes by base-256 digits of the weights (dl_quads_vnni). */

/* Four vectors of eight sums to 32 bytes, shifted and clipped as dl_clip8
 * does (the saturating packs clip below 0 and above 255): in order when the
 * sums are in the order of dl_vertical_quad's unpacks (samples 0-3 and
 * 16-19, 4-7 and 20-23, ...); sums of samples 0-7, 8-15, ... come out with
 * their 4-byte groups in the order 0, 2, 4, 6, 1, 3, 5, 7. */
DL_AVX2 static inline __m256i dl_pack_rows_avx2(const __m256i *s, __m128i bits)
{
    __m256i lo = _mm256_packs_epi32(_mm256_sra_epi32(s[0], bits), _mm256_sra_epi32(s[1], bits));
    __m256i hi = _mm256_packs_epi32(_mm256_sra_epi32(s[2], bits), _mm256_sra_epi32(s[3], bits));
    return _mm256_packus_epi16(lo, hi);
}

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

/* The shuffle that picks pixels 0, 1 (`second`: 2, 3) of a 16-byte load as
 * 16-bit values, each channel of the two pixels side by side. */
DL_AVX2 static inline __m256i dl_pair_mask_avx2(int channels, int second)
{
    int o = second ? 2 * channels : 0;
    if (channels == 3)
        return _mm256_setr_epi8(o, -1, o + 3, -1, o + 1, -1, o + 4, -1, o + 2, -1, o + 5, -1,
                                -1, -1, -1, -1, o, -1, o + 3, -1, o + 1, -1, o + 4, -1, o + 2,
                                -1, o + 5, -1, -1, -1, -1, -1);
    return _mm256_setr_epi8(o, -1, o + 4, -1, o + 1, -1, o + 5, -1, o + 2, -1, o + 6, -1, o + 3,
                            -1, o + 7, -1, o, -1, o + 4, -1, o + 1, -1, o + 5, -1, o + 2, -1,
                            o + 6, -1, o + 3, -1, o + 7, -1);
}

/* Output pixels xx .. xx + 3 of rows a and b from their shifted sums,
 * packed to 16 bits: s[0] pixels 0 and 2, s[1] pixels 1 and 3 (row a's in
 * lane 0, row b's in lane 1). */
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
    __m256i packed = _mm256_packus_epi16(s[0], s[1]);
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

/* The vertical pass with AVX2 multiplies Pillow's 32-bit weights as they
 * are (vpmulld): eight samples at p, widened to 32 bits, times the weight w. */
DL_AVX2 static inline __m256i dl_mul8_avx2(const uint8_t *p, __m256i w)
{
    return _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)), w);
}

/* dl_filter_rows for row_len >= 32: 32 samples at a time with their sums in
 * registers across all taps; the last block overlaps the one before it
 * rather than running a scalar tail.  (Pairs of rows with 16-bit weights,
 * split or not, cost as much or more here: the pass is bound by its loads
 * and stores.) */
DL_AVX2 static void dl_vertical_avx2(const uint8_t *src, ptrdiff_t src_stride,
                                     ptrdiff_t row_len, uint8_t *dst, ptrdiff_t dst_stride,
                                     int out_h, int ksize, const int *bounds,
                                     const int32_t *weights, int bits)
{
    const __m256i half = _mm256_set1_epi32(1 << bits >> 1);
    const __m128i shift = _mm_cvtsi32_si128(bits);
    for (int yy = 0; yy < out_h; yy++) {
        const int32_t *k = weights + (ptrdiff_t)yy * ksize;
        const uint8_t *in = src + (ptrdiff_t)bounds[2 * yy] * src_stride;
        int n = bounds[2 * yy + 1];
        for (ptrdiff_t i = 0;; i += 32) {
            __m256i a[4] = {half, half, half, half};
            const uint8_t *p;
            if (i + 32 > row_len)
                i = row_len - 32;
            p = in + i;
            for (int y = 0; y < n; y++, p += src_stride) {
                __m256i w = _mm256_set1_epi32(k[y]);
                for (int j = 0; j < 4; j++)
                    a[j] = _mm256_add_epi32(a[j], dl_mul8_avx2(p + 8 * j, w));
            }
            /* The packs work within 128-bit lanes: restore the order of the dwords. */
            _mm256_storeu_si256((__m256i *)(dst + yy * dst_stride + i),
                                _mm256_permutevar8x32_epi32(
                                    dl_pack_rows_avx2(a, shift),
                                    _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
            if (i + 32 >= row_len)
                break;
        }
    }
}

/* The horizontal pass with AVX2: pairs of taps, vpmaddwd.  One pair's
 * products, p of rows in[0], in[1] and p2 of in[2], in[3], into the sums acc
 * (see dl_horizontal_pixel_avx2). */
DL_AVX2 static inline __attribute__((always_inline)) void
dl_pair_avx2(__m256i p, __m256i p2, const uint32_t *k, int split, __m256i *acc)
{
    acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(p, dl_broadcast_avx2(k)));
    acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(p2, dl_broadcast_avx2(k)));
    if (split) {
        acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(p, dl_broadcast_avx2(k + 1)));
        acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(p2, dl_broadcast_avx2(k + 1)));
    }
}

/* The 32-bit sums of one output pixel whose 2 * pairs taps start at offset
 * `at` of rows in[0], in[1] (returned) and in[2], in[3] (in *cd): one
 * channel per 32-bit lane, row in[0]'s (in[2]'s) in the low 128 bits,
 * rounding term `half` included, before the shift; with `split` (a
 * constant in each inlined copy) the weights are split in two halves.  Each
 * load covers 4 taps (two pairs); mask[0] and mask[1] pick pixels 0, 1 and
 * 2, 3 of it.  Four rows share each broadcast weight. */
DL_AVX2 static inline __attribute__((always_inline)) __m256i
dl_horizontal_pixel_avx2(const uint8_t *const *in, ptrdiff_t at, int channels, int pairs,
                         int split, const uint32_t *w, const __m256i *mask, __m256i half,
                         __m256i *cd)
{
    /* acc: rows in[0], in[1] and in[2], in[3], then their hi halves' sums */
    __m256i acc[4] = {half, half, _mm256_setzero_si256(), _mm256_setzero_si256()};
    int q = 0, words = split + 1;
    for (; q + 2 <= pairs; q += 2) { /* whole loads, then the last pair: no branch */
        ptrdiff_t x = at + (ptrdiff_t)q * 2 * channels;
        __m256i v = dl_load_rows_avx2(in[0] + x, in[1] + x);
        __m256i v2 = dl_load_rows_avx2(in[2] + x, in[3] + x);
        dl_pair_avx2(_mm256_shuffle_epi8(v, mask[0]), _mm256_shuffle_epi8(v2, mask[0]),
                     w + q * words, split, acc);
        dl_pair_avx2(_mm256_shuffle_epi8(v, mask[1]), _mm256_shuffle_epi8(v2, mask[1]),
                     w + (q + 1) * words, split, acc);
    }
    if (q < pairs) {
        ptrdiff_t x = at + (ptrdiff_t)q * 2 * channels;
        __m256i v = dl_load_rows_avx2(in[0] + x, in[1] + x);
        __m256i v2 = dl_load_rows_avx2(in[2] + x, in[3] + x);
        dl_pair_avx2(_mm256_shuffle_epi8(v, mask[0]), _mm256_shuffle_epi8(v2, mask[0]),
                     w + q * words, split, acc);
    }
    *cd = _mm256_add_epi32(_mm256_slli_epi32(acc[3], DL_SPLIT_BITS), acc[1]);
    return _mm256_add_epi32(_mm256_slli_epi32(acc[2], DL_SPLIT_BITS), acc[0]);
}

#define DL_K(name) name##_avx2
#define DL_KTARGET DL_AVX2
#define DL_PAIRS
#include "dl_resize_avx2_passes.h"

/* With AVX-512 VNNI (on 256-bit vectors).  The instructions are written out
 * so that the sums stay in their registers: through the intrinsics, GCC 12
 * copies every chain of sums to another register and back at each step of
 * a loop. */
#define DL_VNNI __attribute__((target("avx2,avx512vl,avx512vnni")))

/* acc plus the sums of four products of unsigned bytes (pixels) by signed
 * bytes (weights). */
DL_VNNI static inline __m256i dl_dpbusd(__m256i acc, __m256i pixels, __m256i weights)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(pixels), "v"(weights));
    return acc;
}

/* The horizontal pass with VNNI: quads of taps, vpdpbusd, which multiplies
 * four bytes by four bytes and adds the four products to a 32-bit lane: one
 * channel of four taps.  A weight is written in `digits` signed base-256
 * digits, w = d2 * 65536 + d1 * 256 + d0, each in -128..127 (dl_quad_words),
 * the products of each digit summed apart and joined as
 * (D2 << 16) + (D1 << 8) + D0: the portable loop's 32-bit sum exactly
 * (modulo 2^32, as all of it).  Three multiply-adds serve 4 taps of a
 * channel where split 16-bit weights take four for 2 taps.
 *
 * The shuffle that puts the 4 taps of each channel of a 16-byte load (4
 * pixels) in one 32-bit lane. */
DL_AVX2 static inline __m256i dl_quad_mask_avx2(int channels)
{
    if (channels == 3)
        return _mm256_setr_epi8(0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11, -1, -1, -1, -1, 0, 3, 6, 9,
                                1, 4, 7, 10, 2, 5, 8, 11, -1, -1, -1, -1);
    return _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1,
                            5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

/* Quad q of an output pixel's window into one chain of sums per digit: ab
 * for rows in[0], in[1], cd for in[2], in[3]. */
DL_VNNI static inline __attribute__((always_inline)) void
dl_quad_step(const uint8_t *const *in, ptrdiff_t at, int channels, int q, int digits,
             const uint32_t *w, __m256i mask, __m256i *ab, __m256i *cd)
{
    ptrdiff_t x = at + (ptrdiff_t)q * 4 * channels;
    __m256i p = _mm256_shuffle_epi8(dl_load_rows_avx2(in[0] + x, in[1] + x), mask);
    __m256i p2 = _mm256_shuffle_epi8(dl_load_rows_avx2(in[2] + x, in[3] + x), mask);
    for (int d = 0; d < digits; d++) {
        __m256i k = dl_broadcast_avx2(w + q * digits + d);
        ab[d] = dl_dpbusd(ab[d], p, k);
        cd[d] = dl_dpbusd(cd[d], p2, k);
    }
}

/* The sums of the digits d[0..2] joined (the rounding term is in d[0]). */
DL_AVX2 static inline __m256i dl_join_digits_avx2(const __m256i *d)
{
    return _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(d[2], 16), d[0]),
                            _mm256_slli_epi32(d[1], 8));
}

/* dl_horizontal_pixel_avx2's sums from `quads` quads of taps; mask[0] is
 * dl_quad_mask_avx2's.  In `chains` chains of sums (quads q, q + chains, ...
 * in chain q % chains), joined at the end: two for wide windows, so that a
 * quad need not wait for the sum of the one before (vpdpbusd takes 5
 * cycles); one for narrow ones, where the next output pixels' sums fill the
 * wait. */
DL_VNNI static inline __attribute__((always_inline)) __m256i
dl_quads_vnni(const uint8_t *const *in, ptrdiff_t at, int channels, int quads, int chains,
              int digits, const uint32_t *w, __m256i mask, __m256i half, __m256i *cd)
{
    __m256i ab[2][3], cd2[2][3];
    int q = 0;
    for (int c = 0; c < 6; c++)
        ab[c / 3][c % 3] = cd2[c / 3][c % 3] = c % 3 || c / 3 ? _mm256_setzero_si256() : half;
    for (; q + chains <= quads; q += chains)
        for (int c = 0; c < chains; c++)
            dl_quad_step(in, at, channels, q + c, digits, w, mask, ab[c], cd2[c]);
    if (q < quads)
        dl_quad_step(in, at, channels, q, digits, w, mask, ab[0], cd2[0]);
    for (int d = 0; chains > 1 && d < 3; d++) {
        ab[0][d] = _mm256_add_epi32(ab[0][d], ab[1][d]);
        cd2[0][d] = _mm256_add_epi32(cd2[0][d], cd2[1][d]);
    }
    *cd = dl_join_digits_avx2(cd2[0]);
    return dl_join_digits_avx2(ab[0]);
}

/* The pixel's sums through dl_quads_vnni: narrow windows (up to 4 quads)
 * are the constant counts of the loops' copies. */
DL_VNNI static inline __attribute__((always_inline)) __m256i
dl_horizontal_pixel_vnni(const uint8_t *const *in, ptrdiff_t at, int channels, int quads,
                         int digits, const uint32_t *w, const __m256i *mask, __m256i half,
                         __m256i *cd)
{
    if (quads > 4)
        return dl_quads_vnni(in, at, channels, quads, 2, digits, w, mask[0], half, cd);
    return dl_quads_vnni(in, at, channels, quads, 1, digits, w, mask[0], half, cd);
}

/* The vertical pass with VNNI: quads of rows, their bytes interleaved so
 * that each 32-bit lane holds one sample of the four rows (p[0]: samples
 * 0-3 and 16-19, p[1]: 4-7 and 20-23, ..., as dl_pack_rows_avx2 reads
 * them), for 32 samples at a; `count` rows (the others zero) of weights k,
 * `digits` words, into acc[j][digit]. */
DL_VNNI static inline __attribute__((always_inline)) void
dl_vertical_quad(const uint8_t *a, ptrdiff_t stride, int count, const uint32_t *k, int digits,
                 __m256i (*acc)[3])
{
    __m256i r[4], p[4];
    for (int i = 0; i < 4; i++)
        r[i] = i < count ? _mm256_loadu_si256((const __m256i *)(a + i * stride))
                         : _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i ab = h ? _mm256_unpackhi_epi8(r[0], r[1]) : _mm256_unpacklo_epi8(r[0], r[1]);
        __m256i cd = h ? _mm256_unpackhi_epi8(r[2], r[3]) : _mm256_unpacklo_epi8(r[2], r[3]);
        p[2 * h] = _mm256_unpacklo_epi16(ab, cd);
        p[2 * h + 1] = _mm256_unpackhi_epi16(ab, cd);
    }
    for (int d = 0; d < digits; d++) {
        __m256i kd = _mm256_set1_epi32((int)k[d]);
        for (int j = 0; j < 4; j++)
            acc[j][d] = dl_dpbusd(acc[j][d], p[j], kd);
    }
}

/* The vertical pass with VNNI, as dl_vertical_avx2 with quads of taps
 * (`digits` words each, see dl_quad_words) for pairs. */
DL_VNNI static inline __attribute__((always_inline)) void
dl_vertical_vnni_digits(const uint8_t *src, ptrdiff_t src_stride, ptrdiff_t row_len,
                        uint8_t *dst, ptrdiff_t dst_stride, int out_h, const int *bounds,
                        const uint32_t *w, int quads, int digits, int bits)
{
    const __m256i half = _mm256_set1_epi32(1 << bits >> 1);
    const __m128i shift = _mm_cvtsi32_si128(bits);
    for (int yy = 0; yy < out_h; yy++) {
        const uint32_t *k = w + (ptrdiff_t)yy * quads * digits;
        const uint8_t *in = src + (ptrdiff_t)bounds[2 * yy] * src_stride;
        int n = bounds[2 * yy + 1];
        for (ptrdiff_t i = 0;; i += 32) {
            __m256i acc[4][3], s[4]; /* acc[j][d]: digit d of samples p[j] */
            int y = 0;
            for (int c = 0; c < 12; c++)
                acc[c / 3][c % 3] = c % 3 ? _mm256_setzero_si256() : half;
            if (i + 32 > row_len)
                i = row_len - 32;
            for (; y + 4 <= n; y += 4) /* whole quads, then the rest: no branch in the loop */
                dl_vertical_quad(in + y * src_stride + i, src_stride, 4, k + y / 4 * digits,
                                 digits, acc);
            if (y < n)
                dl_vertical_quad(in + y * src_stride + i, src_stride, n - y, k + y / 4 * digits,
                                 digits, acc);
            for (int j = 0; j < 4; j++)
                s[j] = dl_join_digits_avx2(acc[j]);
            _mm256_storeu_si256((__m256i *)(dst + yy * dst_stride + i),
                                dl_pack_rows_avx2(s, shift));
            if (i + 32 >= row_len)
                break;
        }
    }
}

/* acc plus the sums of two products of signed 16-bit values. */
DL_VNNI static inline __m256i dl_dpwssd(__m256i acc, __m256i samples, __m256i weights)
{
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(samples), "v"(weights));
    return acc;
}

/* The vertical pass with VNNI for windows of at most DL_PAIR_ROWS rows:
 * pairs of rows, each 32-bit lane one sample of both as 16-bit values,
 * times their weights split as w = hi * 2^15 + lo (vpdpwssd multiplies and
 * adds at once; dl_halves_fit: hi fits 16 bits), the sums joined as
 * (hi_sum << 15) + lo_sum: the portable loop's 32-bit sums.  For 2 or 3
 * taps this takes about a third fewer instructions than vpmulld (12%
 * faster on a 640x400 -> 2560x1600 bilinear upscale); for 5 or 6 it skips
 * the zero weights that pad the last quad of four rows (13% faster on
 * 2560x1600 -> 1920x1200 bicubic), for 4 it is no faster than quads. */
#define DL_PAIR_ROWS 6
DL_VNNI static void dl_vertical_pairs_vnni(const uint8_t *src, ptrdiff_t src_stride,
                                           ptrdiff_t row_len, uint8_t *dst, ptrdiff_t dst_stride,
                                           int out_h, int ksize, const int *bounds,
                                           const int32_t *weights, int bits)
{
    const __m256i half = _mm256_set1_epi32(1 << bits >> 1), zero = _mm256_setzero_si256();
    const __m128i shift = _mm_cvtsi32_si128(bits);
    for (int yy = 0; yy < out_h; yy++) {
        const int32_t *k = weights + (ptrdiff_t)yy * ksize;
        const uint8_t *in = src + (ptrdiff_t)bounds[2 * yy] * src_stride;
        int n = bounds[2 * yy + 1], pairs = (n + 1) / 2;
        __m256i lo[(DL_PAIR_ROWS + 1) / 2], hi[(DL_PAIR_ROWS + 1) / 2];
        for (int q = 0; q < pairs; q++) {
            int32_t t0 = k[2 * q], t1 = 2 * q + 1 < n ? k[2 * q + 1] : 0;
            const int32_t low = (1 << DL_SPLIT_BITS) - 1;
            lo[q] = _mm256_set1_epi32((int)((uint32_t)(t0 & low) | (uint32_t)(t1 & low) << 16));
            hi[q] = _mm256_set1_epi32((int)((uint32_t)(uint16_t)(t0 >> DL_SPLIT_BITS) |
                                            (uint32_t)(uint16_t)(t1 >> DL_SPLIT_BITS) << 16));
        }
        for (ptrdiff_t i = 0;; i += 32) {
            /* l[j], h[j]: the lo and hi sums of samples 0-3 and 16-19 (j = 0),
             * 4-7 and 20-23, ..., as dl_pack_rows_avx2 reads them. */
            __m256i l[4] = {half, half, half, half}, h[4] = {zero, zero, zero, zero}, sums[4];
            if (i + 32 > row_len)
                i = row_len - 32;
            for (int q = 0; q < pairs; q++) {
                const uint8_t *a = in + 2 * q * src_stride + i;
                /* A lone last row is paired with itself, at weight 0. */
                const uint8_t *b = 2 * q + 1 < n ? a + src_stride : a;
                __m256i ra = _mm256_loadu_si256((const __m256i *)a);
                __m256i rb = _mm256_loadu_si256((const __m256i *)b);
                for (int g = 0; g < 2; g++) {
                    __m256i ab = g ? _mm256_unpackhi_epi8(ra, rb) : _mm256_unpacklo_epi8(ra, rb);
                    __m256i w0 = _mm256_unpacklo_epi8(ab, zero), w1 = _mm256_unpackhi_epi8(ab, zero);
                    l[2 * g] = dl_dpwssd(l[2 * g], w0, lo[q]);
                    h[2 * g] = dl_dpwssd(h[2 * g], w0, hi[q]);
                    l[2 * g + 1] = dl_dpwssd(l[2 * g + 1], w1, lo[q]);
                    h[2 * g + 1] = dl_dpwssd(h[2 * g + 1], w1, hi[q]);
                }
            }
            for (int j = 0; j < 4; j++)
                sums[j] = _mm256_add_epi32(_mm256_slli_epi32(h[j], DL_SPLIT_BITS), l[j]);
            _mm256_storeu_si256((__m256i *)(dst + yy * dst_stride + i),
                                dl_pack_rows_avx2(sums, shift));
            if (i + 32 >= row_len)
                break;
        }
    }
}

DL_VNNI static void dl_vertical_vnni(const uint8_t *src, ptrdiff_t src_stride,
                                     ptrdiff_t row_len, uint8_t *dst, ptrdiff_t dst_stride,
                                     int out_h, const int *bounds, const uint32_t *w, int quads,
                                     int digits, int bits)
{
    if (digits == 2)
        dl_vertical_vnni_digits(src, src_stride, row_len, dst, dst_stride, out_h, bounds, w,
                                quads, 2, bits);
    else
        dl_vertical_vnni_digits(src, src_stride, row_len, dst, dst_stride, out_h, bounds, w,
                                quads, 3, bits);
}

#define DL_K(name) name##_vnni
#define DL_KTARGET DL_VNNI
#define DL_UNIT_WORDS(digits) (digits)
#define DL_KINDS 2, 3
#define DL_MASK(channels, i) dl_quad_mask_avx2(channels)
#include "dl_resize_avx2_passes.h"

/* The horizontal pass with VNNI on pairs of taps (windows of 2 taps:
 * upscales), as dl_horizontal_pixel_avx2 with vpdpwssd for its
 * vpmaddwd and add: the weights whole (one word, `split` 0) or split in
 * halves (two), each pair loaded on its own. */
DL_VNNI static inline __attribute__((always_inline)) __m256i
dl_horizontal_pixel_pairs(const uint8_t *const *in, ptrdiff_t at, int channels, int pairs,
                          int split, const uint32_t *w, const __m256i *mask, __m256i half,
                          __m256i *cd)
{
    /* acc: rows in[0], in[1] and in[2], in[3], then their hi halves' sums */
    __m256i acc[4] = {half, half, _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int q = 0; q < pairs; q++, w += split + 1) {
        ptrdiff_t x = at + (ptrdiff_t)q * 2 * channels;
        __m256i p = _mm256_shuffle_epi8(dl_load_rows_avx2(in[0] + x, in[1] + x), mask[0]);
        __m256i p2 = _mm256_shuffle_epi8(dl_load_rows_avx2(in[2] + x, in[3] + x), mask[0]);
        acc[0] = dl_dpwssd(acc[0], p, dl_broadcast_avx2(w));
        acc[1] = dl_dpwssd(acc[1], p2, dl_broadcast_avx2(w));
        if (split) {
            acc[2] = dl_dpwssd(acc[2], p, dl_broadcast_avx2(w + 1));
            acc[3] = dl_dpwssd(acc[3], p2, dl_broadcast_avx2(w + 1));
        }
    }
    *cd = _mm256_add_epi32(_mm256_slli_epi32(acc[3], DL_SPLIT_BITS), acc[1]);
    return _mm256_add_epi32(_mm256_slli_epi32(acc[2], DL_SPLIT_BITS), acc[0]);
}

#define DL_K(name) name##_pairs
#define DL_KTARGET DL_VNNI
#define DL_PAIRS
#include "dl_resize_avx2_passes.h"

/* dl_filter_rows for row_len >= 32 (see dl_vertical_avx2,
 * dl_vertical_pairs_vnni and dl_vertical_vnni).  Returns 0, -1 when memory
 * runs out, or 1 when the weights do not suit it (the portable loop then
 * runs). */
int dl_filter_rows_avx2(const uint8_t *src, ptrdiff_t src_stride, ptrdiff_t row_len,
                        uint8_t *dst, ptrdiff_t dst_stride, int out_h, int ksize,
                        const int *bounds, const int32_t *weights, int bits)
{
    dl_resize_plan_t plan;
    int status = 1, widest = 1;
    uint32_t *w = NULL;
    for (int yy = 0; yy < out_h; yy++)
        widest = bounds[2 * yy + 1] > widest ? bounds[2 * yy + 1] : widest;
    /* Windows of up to 6 rows (upscales, and shrinks by up to about 1.5
     * for bilinear, 1.4 for bicubic) in pairs of rows: there interleaving
     * four rows for VNNI's quads and their zero weights cost more than they
     * save (measured), and vpmulld takes more instructions. */
    if (widest <= DL_PAIR_ROWS && dl_resize_vnni(-1) &&
        dl_halves_fit(weights, (size_t)out_h * (size_t)ksize)) {
        dl_vertical_pairs_vnni(src, src_stride, row_len, dst, dst_stride, out_h, ksize, bounds,
                               weights, bits);
        return 0;
    }
    if (dl_resize_vnni(-1))
        w = dl_planned_words(out_h, ksize, bounds, weights, bits, 0, NULL, &plan, &status);
    if (w == NULL && status == -1)
        return -1;
    if (w == NULL || plan.taps != 4) { /* vpmulld takes any weights */
        free(w);
        dl_vertical_avx2(src, src_stride, row_len, dst, dst_stride, out_h, ksize, bounds,
                         weights, bits);
        return 0;
    }
    dl_vertical_vnni(src, src_stride, row_len, dst, dst_stride, out_h, bounds, w, plan.units,
                     plan.kind, bits - plan.drop);
    free(w);
    return 0;
}

/* The horizontal pass's rows through the plan's copy of the loops. */
static void dl_horizontal_rows(const uint8_t *src, ptrdiff_t src_stride, int rows, int channels,
                               uint8_t *dst, ptrdiff_t dst_stride, int out_w, const int *start,
                               const uint32_t *w, const dl_resize_plan_t *plan, int bits)
{
    if (plan->taps == 4)
        dl_horizontal_rows_vnni(src, src_stride, rows, channels, dst, dst_stride, out_w, start,
                                w, plan->units, plan->kind, bits - plan->drop);
    else if (plan->vnni)
        dl_horizontal_rows_pairs(src, src_stride, rows, channels, dst, dst_stride, out_w, start,
                                 w, plan->units, plan->kind, bits - plan->drop);
    else
        dl_horizontal_rows_avx2(src, src_stride, rows, channels, dst, dst_stride, out_w, start,
                                w, plan->units, plan->kind, bits - plan->drop);
}

/* The horizontal pass for 3 or 4 channels: each output pixel reads the
 * plan's units of taps (enough for the widest window, not the padded
 * ksize), its window moved left where needed to end inside the row (zero
 * weights pad it).  Each 16-byte load serves 4 taps, so it reads up to 10
 * bytes past the pixels it uses: past the end of a row these are the next
 * row's, and the last row is read from a padded copy.  Returns 0, -1 when
 * memory runs out, or 1 when the row is too short for the window or the
 * weights do not suit it (the portable loops then run). */
int dl_filter_columns_avx2(const uint8_t *src, ptrdiff_t src_stride, int rows, int in_w,
                           int channels, uint8_t *dst, ptrdiff_t dst_stride, int out_w,
                           int ksize, const int *bounds, const int32_t *weights, int bits)
{
    dl_resize_plan_t plan;
    int status;
    int *start = malloc(sizeof(int) * (size_t)out_w);
    uint8_t *last = malloc((size_t)in_w * channels + 16);
    uint32_t *w = start == NULL || last == NULL
                      ? NULL
                      : dl_planned_words(out_w, ksize, bounds, weights, bits, in_w, start, &plan,
                                         &status);
    if (w != NULL) {
        if (rows > 1)
            dl_horizontal_rows(src, src_stride, rows - 1, channels, dst, dst_stride, out_w,
                               start, w, &plan, bits);
        memcpy(last, src + (ptrdiff_t)(rows - 1) * src_stride, (size_t)in_w * channels);
        memset(last + (size_t)in_w * channels, 0, 16);
        dl_horizontal_rows(last, 0, 1, channels, dst + (ptrdiff_t)(rows - 1) * dst_stride,
                           dst_stride, out_w, start, w, &plan, bits);
    } else if (start == NULL || last == NULL) {
        status = -1;
    }
    free(w);
    free(start);
    free(last);
    return status;
}
#endif
