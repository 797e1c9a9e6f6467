/* Channel conversions with Pillow's Image.convert semantics: L from RGB is
 * the ITU-R 601-2 luma in 16-bit fixed point, alpha is 255 when added and
 * dropped when removed. */
#include <string.h>

#include "dl_clones.h"
#include "dl_codecs.h"
#include "dl_internal.h"

/* The pixels of one row; sc and dc are constants in each inlined copy, so
 * that the branches on them leave the loop (which the compiler may then
 * vectorise). */
static inline __attribute__((always_inline)) void
dl_convert_pixels(const uint8_t *s, int sc, uint8_t *d, int dc, ptrdiff_t width)
{
    ptrdiff_t x;
    for (x = 0; x < width; x++, s += sc, d += dc) {
        uint8_t l, a;
        if (sc <= 2) {
            l = s[0];
            a = sc == 2 ? s[1] : 255;
        } else {
            a = sc == 4 ? s[3] : 255;
            if (dc >= 3) {
                d[0] = s[0];
                d[1] = s[1];
                d[2] = s[2];
                if (dc == 4)
                    d[3] = a;
                continue;
            }
            l = dl_luma(s);
        }
        if (dc <= 2) {
            d[0] = l;
            if (dc == 2)
                d[1] = a;
        } else {
            d[0] = d[1] = d[2] = l;
            if (dc == 4)
                d[3] = a;
        }
    }
}

/* RGB to RGBA four pixels at a time on little-endian CPUs: three 32-bit
 * loads hold their 12 bytes, and each output pixel is two of them shifted
 * together with the alpha byte set (the compiler does not vectorise the
 * 3-to-4 byte pattern of dl_convert_pixels). Returns the pixels done. */
static ptrdiff_t dl_rgb_to_rgba_words(const uint8_t *s, uint8_t *d, ptrdiff_t width)
{
    ptrdiff_t x = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint32_t alpha = 0xFF000000u; /* byte 3 of each pixel */
    for (; x + 4 <= width; x += 4, s += 12, d += 16) {
        uint32_t w[3], out[4];
        memcpy(w, s, sizeof(w));
        out[0] = w[0] | alpha;
        out[1] = w[0] >> 24 | w[1] << 8 | alpha;
        out[2] = w[1] >> 16 | w[2] << 16 | alpha;
        out[3] = w[2] >> 8 | alpha;
        memcpy(d, out, sizeof(out));
    }
#endif
    return x;
}

/* Luma (and alpha) of RGB or RGBA pixels with AVX2, chosen at run time:
 * the compiler's own vectorisation of dl_luma's stride-3 loads runs at
 * about 1.6 cycles a pixel; these loops at under half that.  Each 128-bit
 * lane takes 4 pixels; vpshufb spreads their samples into 16-bit pairs
 * (r, g) and (b, g), and vpmaddwd weighs each pair: 19595 r + 22086 g and
 * 7471 b + 16384 g, which add up to dl_luma's sum (38470 does not fit a
 * signed 16-bit weight, its two parts do), so the bytes are dl_luma's. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DL_CONVERT_AVX2 1

#define DL_AVX2 __attribute__((target("avx2")))

/* The luma of 8 pixels (4 per lane, `sc` bytes each, lane 1 `4 * sc` bytes
 * after lane 0) as eight 32-bit values, and their alpha bytes (255 for RGB)
 * in `alpha`. At most 16 bytes are read from each lane's start. */
DL_AVX2 static inline __m256i dl_luma8_avx2(const uint8_t *s, int sc, __m256i *alpha)
{
    const __m256i rg = sc == 3
        ? _mm256_setr_epi8(0, -1, 1, -1, 3, -1, 4, -1, 6, -1, 7, -1, 9, -1, 10, -1,
                           0, -1, 1, -1, 3, -1, 4, -1, 6, -1, 7, -1, 9, -1, 10, -1)
        : _mm256_setr_epi8(0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13, -1,
                           0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13, -1);
    const __m256i bg = sc == 3
        ? _mm256_setr_epi8(2, -1, 1, -1, 5, -1, 4, -1, 8, -1, 7, -1, 11, -1, 10, -1,
                           2, -1, 1, -1, 5, -1, 4, -1, 8, -1, 7, -1, 11, -1, 10, -1)
        : _mm256_setr_epi8(2, -1, 1, -1, 6, -1, 5, -1, 10, -1, 9, -1, 14, -1, 13, -1,
                           2, -1, 1, -1, 6, -1, 5, -1, 10, -1, 9, -1, 14, -1, 13, -1);
    const __m256i a = _mm256_setr_epi8(3, -1, -1, -1, 7, -1, -1, -1, 11, -1, -1, -1, 15, -1, -1,
                                       -1, 3, -1, -1, -1, 7, -1, -1, -1, 11, -1, -1, -1, 15, -1,
                                       -1, -1);
    __m256i v = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)s)),
        _mm_loadu_si128((const __m128i *)(s + 4 * sc)), 1);
    __m256i sum = _mm256_add_epi32(
        _mm256_madd_epi16(_mm256_shuffle_epi8(v, rg), _mm256_set1_epi32(22086 << 16 | 19595)),
        _mm256_madd_epi16(_mm256_shuffle_epi8(v, bg), _mm256_set1_epi32(16384 << 16 | 7471)));
    *alpha = sc == 4 ? _mm256_shuffle_epi8(v, a) : _mm256_set1_epi32(255);
    return _mm256_srli_epi32(_mm256_add_epi32(sum, _mm256_set1_epi32(0x8000)), 16);
}

/* RGB or RGBA (sc 3 or 4) to L or LA (dc 1 or 2), 16 pixels at a time while
 * the loads stay inside the row (the last lane reads 4 bytes past its
 * pixels for RGB). Returns the pixels done. */
DL_AVX2 static ptrdiff_t dl_luma_rows_avx2(const uint8_t *s, int sc, uint8_t *d, int dc,
                                           ptrdiff_t width)
{
    ptrdiff_t x = 0;
    for (; x + 16 + (sc == 3 ? 2 : 0) <= width; x += 16, s += 16 * sc, d += 16 * dc) {
        __m256i a0, a1, l0 = dl_luma8_avx2(s, sc, &a0), l1 = dl_luma8_avx2(s + 8 * sc, sc, &a1);
        if (dc == 2) {
            /* [L A 0 0] in each 32 bits, packed to [L A] words: 16 pixels,
             * lanes in the order l0 lane 0, l1 lane 0, l0 lane 1, l1 lane 1. */
            __m256i w = _mm256_packus_epi32(_mm256_or_si256(l0, _mm256_slli_epi32(a0, 8)),
                                            _mm256_or_si256(l1, _mm256_slli_epi32(a1, 8)));
            _mm256_storeu_si256((__m256i *)d, _mm256_permute4x64_epi64(w, 0xD8));
        } else {
            /* Bytes 0-3 of each 32-bit group: l0's lanes then l1's. */
            __m256i w = _mm256_packus_epi16(_mm256_packus_epi32(l0, l1), _mm256_setzero_si256());
            w = _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 3, 6, 7));
            _mm_storeu_si128((__m128i *)d, _mm256_castsi256_si128(w));
        }
    }
    return x;
}

int dl_has_avx2(void)
{
    /* -1 until the first call asks the CPU; racing writers store the same value. */
    static int has = -1;
    int v = __atomic_load_n(&has, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") != 0;
        __atomic_store_n(&has, v, __ATOMIC_RELAXED);
    }
    return v;
}
#else
#define DL_CONVERT_AVX2 0
#endif

/* Compiled for AVX2 too: the luma of RGB pixels then runs on 256-bit
 * vectors (about twice as fast as on the baseline's). */
DL_AVX2_CLONES static void dl_convert_row(const uint8_t *s, int sc, uint8_t *d, int dc,
                                          ptrdiff_t width)
{
    if (sc == dc) {
        memcpy(d, s, (size_t)(width * sc));
        return;
    }
#if DL_CONVERT_AVX2
    if (sc >= 3 && dc <= 2 && dl_has_avx2()) {
        ptrdiff_t done = dl_luma_rows_avx2(s, sc, d, dc, width);
        s += done * sc;
        d += done * dc;
        width -= done;
    }
#endif
    if (sc == 3 && dc == 4) {
        ptrdiff_t done = dl_rgb_to_rgba_words(s, d, width);
        s += done * 3;
        d += done * 4;
        width -= done;
    }
    switch (sc * 8 + dc) {
#define DL_PAIR(from, to) \
    case from * 8 + to: dl_convert_pixels(s, from, d, to, width); return;
    DL_PAIR(1, 2) DL_PAIR(1, 3) DL_PAIR(1, 4) DL_PAIR(2, 1) DL_PAIR(2, 3) DL_PAIR(2, 4)
    DL_PAIR(3, 1) DL_PAIR(3, 2) DL_PAIR(3, 4) DL_PAIR(4, 1) DL_PAIR(4, 2) DL_PAIR(4, 3)
#undef DL_PAIR
    }
}

void dl_convert_rows(const uint8_t *src, ptrdiff_t src_stride, int src_channels,
                     uint8_t *dst, ptrdiff_t dst_stride, int dst_channels,
                     ptrdiff_t height, ptrdiff_t width)
{
    ptrdiff_t y;
    for (y = 0; y < height; y++)
        dl_convert_row(src + y * src_stride, src_channels, dst + y * dst_stride,
                       dst_channels, width);
}
