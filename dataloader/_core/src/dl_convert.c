/* Channel conversions with Pillow's Image.convert semantics: L from RGB is
 * the ITU-R 601-2 luma in 16-bit fixed point, alpha is 255 when added and
 * dropped when removed. */
#include <string.h>

#include "dl_clones.h"
#include "dl_codecs.h"

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

/* Compiled for AVX2 too: the luma of RGB pixels then runs on 256-bit
 * vectors (about twice as fast as on the baseline's). */
DL_AVX2_CLONES static void dl_convert_row(const uint8_t *s, int sc, uint8_t *d, int dc,
                                          ptrdiff_t width)
{
    if (sc == dc) {
        memcpy(d, s, (size_t)(width * sc));
        return;
    }
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
