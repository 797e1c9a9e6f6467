/* The loops of the vectorised horizontal resize pass, included three times
 * by dl_resize_avx2.c: for AVX2 (pairs of taps), and for AVX2 with AVX-512
 * VNNI on quads of taps and on pairs of them, with
 *
 *  - DL_K(name): the name of this copy's function (a suffix per copy);
 *  - DL_KTARGET: its target attribute;
 *  - the pass's multiply-adds, DL_K(dl_horizontal_pixel), and what its
 *    loops need to know of them (DL_UNIT_WORDS, DL_KINDS, DL_MASK; see
 *    DL_K(dl_horizontal_row)), or DL_PAIRS for those of the copies on
 *    pairs of taps (AVX2's, and VNNI's for windows of 2 taps).
 *
 * It undefines them all at its end.
 *
 * Everything else they use (loads, packs, stores) is in dl_resize_avx2.c,
 * shared by the copies.  All compute the same integer sums, so they give
 * the same bytes, and those of the portable loops. */

#ifdef DL_PAIRS /* weights as dl_pair_words writes them: one word whole, two split */
#define DL_UNIT_WORDS(split) ((split) + 1)
#define DL_KINDS 0, 1
#define DL_MASK(channels, i) dl_pair_mask_avx2(channels, i)
#endif

/* The horizontal pass's loops over rows and output pixels, around this
 * copy's DL_K(dl_horizontal_pixel), which reads `units` groups of taps per
 * output pixel (pairs with AVX2, quads with VNNI), with weights of a `kind`
 * (one of DL_KINDS) in DL_UNIT_WORDS(kind) 32-bit words per group, and
 * DL_MASK's shuffles.
 *
 * Four rows (some may be the same row): four output pixels at a time share
 * the packing, pixels 0 and 2 packed before 1 and 3 are summed, so that
 * fewer sums wait in registers. */
DL_KTARGET static inline __attribute__((always_inline)) void
DL_K(dl_horizontal_row)(const uint8_t *const *in, uint8_t *const *out, int out_w, int channels,
                        int units, int kind, const int *start, const uint32_t *w, int bits)
{
    const __m256i half = _mm256_set1_epi32(1 << bits >> 1);
    const __m128i shift = _mm_cvtsi32_si128(bits);
    const __m256i mask[2] = {DL_MASK(channels, 0), DL_MASK(channels, 1)};
    const ptrdiff_t words = (ptrdiff_t)units * DL_UNIT_WORDS(kind);
    int xx = 0;
    for (; xx + 4 <= out_w; xx += 4) {
        __m256i ab[2], cd[2]; /* rows 0, 1 and 2, 3: pixels 0 and 2, then 1 and 3 */
        for (int i = 0; i < 2; i++) {
            __m256i s[2], t[2];
            for (int j = 0; j < 2; j++) {
                int x = xx + i + 2 * j;
                s[j] = DL_K(dl_horizontal_pixel)(in, (ptrdiff_t)start[x] * channels, channels,
                                                 units, kind, w + x * words, mask, half, &t[j]);
            }
            ab[i] = _mm256_packs_epi32(_mm256_sra_epi32(s[0], shift),
                                       _mm256_sra_epi32(s[1], shift));
            cd[i] = _mm256_packs_epi32(_mm256_sra_epi32(t[0], shift),
                                       _mm256_sra_epi32(t[1], shift));
        }
        dl_store4_avx2(ab, out[0], out[1], xx, channels);
        dl_store4_avx2(cd, out[2], out[3], xx, channels);
    }
    for (; xx < out_w; xx++) {
        __m256i t, s = DL_K(dl_horizontal_pixel)(in, (ptrdiff_t)start[xx] * channels, channels,
                                                 units, kind, w + xx * words, mask, half, &t);
        dl_store1_avx2(_mm256_sra_epi32(s, shift), out[0], out[1], xx, channels);
        dl_store1_avx2(_mm256_sra_epi32(t, shift), out[2], out[3], xx, channels);
    }
}

/* Rows of the horizontal pass, four at a time; the common channel and unit
 * counts and both kinds of weights get copies of the row loop with those
 * constant, so that its loops unroll. */
DL_KTARGET static void DL_K(dl_horizontal_rows)(const uint8_t *src, ptrdiff_t src_stride,
                                                int rows, int channels, uint8_t *dst,
                                                ptrdiff_t dst_stride, int out_w,
                                                const int *start, const uint32_t *w,
                                                int units, int kind, int bits)
{
    const int kinds[2] = {DL_KINDS};
#define DL_ROWS(c, p)                                                                       \
    for (int y = 0; y < rows; y += 4) {                                                   \
        const uint8_t *in[4];                                                             \
        uint8_t *out[4];                                                                  \
        for (int r = 0; r < 4; r++) { /* past the last row: the last row again */         \
            int at = y + r < rows ? y + r : rows - 1;                                     \
            in[r] = src + at * src_stride;                                                \
            out[r] = dst + at * dst_stride;                                               \
        }                                                                                 \
        if (kind == kinds[0])                                                             \
            DL_K(dl_horizontal_row)(in, out, out_w, c, p, kinds[0], start, w, bits);      \
        else                                                                              \
            DL_K(dl_horizontal_row)(in, out, out_w, c, p, kinds[1], start, w, bits);      \
    }                                                                                     \
    return
    switch (channels * 8 + (units <= 4 ? units : 0)) {
    case 3 * 8 + 1: DL_ROWS(3, 1);
    case 3 * 8 + 2: DL_ROWS(3, 2);
    case 3 * 8 + 3: DL_ROWS(3, 3);
    case 3 * 8 + 4: DL_ROWS(3, 4);
    case 3 * 8: DL_ROWS(3, units);
    case 4 * 8 + 1: DL_ROWS(4, 1);
    case 4 * 8 + 2: DL_ROWS(4, 2);
    case 4 * 8 + 3: DL_ROWS(4, 3);
    case 4 * 8 + 4: DL_ROWS(4, 4);
    default: DL_ROWS(4, units);
    }
#undef DL_ROWS
}

#undef DL_K
#undef DL_KTARGET
#undef DL_UNIT_WORDS
#undef DL_KINDS
#undef DL_MASK
#undef DL_PAIRS
