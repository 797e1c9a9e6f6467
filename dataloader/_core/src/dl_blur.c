/* Box blurs as Pillow's ImageFilter.BoxBlur and ImageFilter.GaussianBlur
 * compute them (BoxBlur.c of libImaging), so that results are Pillow's bytes:
 *
 *  - a box of radius r + f (r whole, 0 <= f < 1) gives each output the sum
 *    of the 2r + 1 inputs around it, weighted ww, plus the two next ones
 *    weighted fw, in 24-bit fixed point: ww = floor(2^24 / (2 (r + f) + 1))
 *    computed in float, fw = (2^24 - (2r + 1) ww) / 2; the sum is rounded
 *    (plus 2^23, shifted right by 24);
 *  - inputs past an edge are the edge sample (Pillow's accumulator starts
 *    from that rule, so the two agree at every size, radii past the image
 *    included);
 *  - `passes` boxes along the rows, each rounded to uint8, then `passes`
 *    along the columns; a zero radius skips its direction;
 *  - the Gaussian of Pillow's GaussianBlur is three boxes (its default
 *    passes) of the radius dl_gaussian_box_radius derives from sigma, in
 *    float arithmetic as Pillow's.
 *
 * Every pass is one loop, dl_box_pass, along the first axis of a block of
 * rows: all samples of a row move together, so the inner loop runs along
 * the row and vectorises (DL_AVX2_CLONES).  The vertical passes run on
 * strips of columns, so that a strip's rows stay in cache between passes;
 * the horizontal ones on blocks of rows transposed into columns. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dl_clones.h"
#include "dl_internal.h"
#include "dl_ops.h"

/* The fixed-point box of a radius (Pillow's ImagingHorizontalBoxBlur). */
typedef struct {
    int radius; /* the whole part r */
    uint32_t ww, fw;
} dl_box_t;

static dl_box_t dl_box(float radius)
{
    dl_box_t box;
    box.radius = (int)radius;
    box.ww = (uint32_t)((float)(1 << 24) / (radius * 2 + 1));
    box.fw = ((1u << 24) - (uint32_t)(box.radius * 2 + 1) * box.ww) / 2;
    return box;
}

float dl_gaussian_box_radius(float radius, int passes)
{
    /* Pillow's _gaussian_blur_radius, operation for operation: the box
     * length L = sqrt(12 sigma^2 / passes + 1), its whole radius l and the
     * fractional part a that matches the variance (Gwosdek et al., 2011). */
    float sigma2 = radius * radius / passes;
    float length = (float)sqrt(12.0 * sigma2 + 1.0);
    float whole = (float)floor((length - 1.0) / 2.0);
    float part = (2 * whole + 1) * (whole * (whole + 1) - 3 * sigma2);
    part /= 6 * (sigma2 - (whole + 1) * (whole + 1));
    return whole + part;
}

/* Row i of n rows at `src`, `stride` bytes apart, clamped to the edges. */
static inline const uint8_t *dl_clamped_row(const uint8_t *src, ptrdiff_t stride, ptrdiff_t i,
                                            ptrdiff_t n)
{
    return src + (i < 0 ? 0 : i >= n ? n - 1 : i) * stride;
}

/* One box along the first axis: output row y of the n rows at dst is the
 * box around input row y, for `len` samples per row.  acc holds, for each
 * sample, the sum of the 2r + 1 inputs of the box (edge rows repeated), in
 * uint32 as Pillow's (it never exceeds 255 (2r + 1)).  src and dst must not
 * overlap: row y is read again after output row y is written. */
DL_AVX2_CLONES static void dl_box_pass(const uint8_t *src, ptrdiff_t src_stride, uint8_t *dst,
                                       ptrdiff_t dst_stride, ptrdiff_t n, ptrdiff_t len,
                                       const dl_box_t *box, uint32_t *acc)
{
    const ptrdiff_t r = box->radius;
    const uint32_t ww = box->ww, fw = box->fw, half = 1u << 23;
    /* The box before row 0: rows -r-1 .. r-1, which Pillow counts as
     * r + 1 copies of row 0, rows 0 .. edge - 2 and the rest copies of the
     * last row, edge being min(r + 1, n). */
    const ptrdiff_t edge = r + 1 < n ? r + 1 : n;
    const uint8_t *first = src, *last = src + (n - 1) * src_stride;
    ptrdiff_t y, i;
    for (i = 0; i < len; i++)
        acc[i] = first[i] * (uint32_t)(r + 1) + last[i] * (uint32_t)(r - edge + 1);
    for (y = 0; y < edge - 1; y++) {
        const uint8_t *row = src + y * src_stride;
        for (i = 0; i < len; i++)
            acc[i] += row[i];
    }
    for (y = 0; y < n; y++) {
        const uint8_t *add = dl_clamped_row(src, src_stride, y + r, n);
        const uint8_t *sub = dl_clamped_row(src, src_stride, y - r - 1, n);
        const uint8_t *far = dl_clamped_row(src, src_stride, y + r + 1, n);
        uint8_t *out = dst + y * dst_stride;
        for (i = 0; i < len; i++) {
            uint32_t sum = acc[i] + add[i] - sub[i];
            acc[i] = sum;
            out[i] = (uint8_t)((sum * ww + (uint32_t)(sub[i] + far[i]) * fw + half) >> 24);
        }
    }
}

/* `passes` boxes along the first axis of the n rows at src into dst, through
 * the buffers a and b (n rows of len samples each, `len` bytes apart): the
 * passes alternate between them, the first reading src and the last
 * writing dst.  dst may be src only when passes > 1. */
static void dl_box_passes(const uint8_t *src, ptrdiff_t src_stride, uint8_t *dst,
                          ptrdiff_t dst_stride, ptrdiff_t n, ptrdiff_t len, const dl_box_t *box,
                          int passes, uint8_t *a, uint8_t *b, uint32_t *acc)
{
    const uint8_t *in = src;
    ptrdiff_t in_stride = src_stride;
    for (int p = 0; p < passes; p++) {
        uint8_t *out = p == passes - 1 ? dst : p % 2 ? b : a;
        ptrdiff_t out_stride = p == passes - 1 ? dst_stride : len;
        dl_box_pass(in, in_stride, out, out_stride, n, len, box, acc);
        in = out;
        in_stride = out_stride;
    }
}

int dl_box_blur(const dl_image_t *src, const dl_image_t *dst, float xradius, float yradius,
                int passes)
{
    /* Rows per horizontal block and samples per vertical strip: the
     * buffers of a block or strip then stay in the L2 cache. */
    enum { BLOCK = 32, STRIP = 256 };
    const ptrdiff_t h = src->height, w = src->width, c = src->channels;
    const ptrdiff_t line = w * c;
    const dl_box_t xbox = dl_box(xradius), ybox = dl_box(yradius);
    /* Three buffers of the larger of a block (w rows of BLOCK * c) and a
     * strip (h rows of STRIP), and the sums of one row of either. */
    const ptrdiff_t most = w * BLOCK * c > h * STRIP ? w * BLOCK * c : h * STRIP;
    const ptrdiff_t block = (most + 63) / 64 * 64; /* keeps acc aligned */
    uint8_t *buffers = malloc((size_t)(3 * block) + sizeof(uint32_t) * (BLOCK * 4 + STRIP));
    uint8_t *t = buffers, *a = buffers + block, *b = buffers + 2 * block;
    uint32_t *acc = (uint32_t *)(buffers + 3 * block);
    const uint8_t *vertical_in = src->data;
    ptrdiff_t vertical_stride = src->row_stride, y0, x0;
    if (buffers == NULL)
        return -1;
    if (xradius != 0) {
        /* Each block of rows, transposed: row x of t holds column x of the
         * block, so the box runs along t's first axis; the last pass's
         * result is transposed back into dst. */
        for (y0 = 0; y0 < h; y0 += BLOCK) {
            ptrdiff_t rows = h - y0 < BLOCK ? h - y0 : BLOCK, len = rows * c;
            /* t is read by the first pass only: the last one may write it. */
            uint8_t *result = passes == 1 ? a : t;
            dl_transpose(src->data + y0 * src->row_stride, src->row_stride, (int)rows, (int)w,
                         (int)c, t, len);
            dl_box_passes(t, len, result, len, w, len, &xbox, passes, a, b, acc);
            dl_transpose(result, len, (int)w, (int)rows, (int)c,
                         dst->data + y0 * dst->row_stride, dst->row_stride);
        }
        vertical_in = dst->data;
        vertical_stride = dst->row_stride;
    }
    if (yradius != 0) {
        for (x0 = 0; x0 < line; x0 += STRIP) {
            ptrdiff_t len = line - x0 < STRIP ? line - x0 : STRIP;
            uint8_t *out = dst->data + x0;
            if (passes == 1 && vertical_in == dst->data) {
                /* One pass cannot write the rows it reads: through t. */
                dl_box_pass(vertical_in + x0, vertical_stride, t, len, h, len, &ybox, acc);
                for (y0 = 0; y0 < h; y0++)
                    memcpy(out + y0 * dst->row_stride, t + y0 * len, (size_t)len);
            } else {
                dl_box_passes(vertical_in + x0, vertical_stride, out, dst->row_stride, h, len,
                              &ybox, passes, a, b, acc);
            }
        }
    } else if (xradius == 0) {
        dl_copy(src, dst);
    }
    free(buffers);
    return 0;
}
