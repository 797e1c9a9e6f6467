/* Resampling as Pillow's Image.resize computes it, so that results agree
 * with Pillow's for uint8 images:
 *
 *  - the filter's support is stretched by the downscale factor (antialias),
 *    and each output sample's weights are normalised to sum to one;
 *  - weights are rounded to signed fixed point with DL_PRECISION_BITS
 *    fractional bits, sums start at one half and are clipped to 0..255;
 *  - the horizontal pass runs first, over only the input rows the vertical
 *    pass reads, and its result is rounded to uint8 before the vertical pass;
 *    or the vertical pass first when Pillow 13 runs it first (dl_vertical_first):
 *    the orders round apart by several levels at sharp edges.
 *  - nearest neighbour walks the source with an accumulated double step from
 *    the first sample's centre, as Pillow's affine scaling does.
 *
 * Channels are independent: alpha is not premultiplied.
 *
 * A fast mode (dl_resize_part_t.fast; Decode(exact=False) chains and
 * kernels.resize(exact=False)) rounds bilinear's horizontal weights as
 * Pillow-SIMD does: to the most fractional bits (at most DL_PRECISION_BITS)
 * that keep the largest weight below 2^15, so that every weight is a 16-bit
 * value and the AVX2 horizontal pass needs one multiply-add per pair of
 * taps instead of two (VNNI: two digits instead of three).  The vertical
 * pass keeps Pillow's weights, so only one rounding differs from
 * Pillow's, and bilinear's weights, all positive and summing to one, carry
 * that difference of at most 1 through the vertical pass without growing
 * it: results are within 1 of Pillow's (tests/core/test_resize_fast.py).
 * Bicubic and lanczos would not keep that bound (their negative lobes can
 * turn two differences of 1 into 2), so they stay exact.  The portable and
 * AVX2 passes still agree bit for bit: both compute the same integer sums
 * with the same weights.
 *
 * Exact-mode weights whose trailing bits are all zero (a shrink by 8, say)
 * may fit 16 bits without them: the vectorised passes then drop those bits
 * and shift by fewer, the same sums divided by a power of two, the same bytes.
 *
 * Three implementations compute the same bytes:
 *  - portable loops: both passes are one loop, dl_filter_rows, whose inner
 *    loop runs along a whole row (the compiler vectorises it); the
 *    horizontal pass feeds it a transposed block (dl_filter_columns);
 *  - on x86-64 CPUs with AVX2, chosen at run time (dl_resize_avx2.c): both
 *    passes multiply pairs of taps of 16-bit values (vpmaddwd), the vertical
 *    one on pairs of rows for 32 samples at a time, the horizontal one (3
 *    and 4 channels) in place on four rows at a time, each 22-bit weight
 *    that does not fit 16 bits split into two 16-bit halves;
 *  - where the CPU also has AVX-512 VNNI: quads of taps multiplied as bytes
 *    (vpdpbusd) by signed base-256 digits of the weights, 2 or 3.
 * Every one computes Pillow's 32-bit sums exactly (dl_resize_plan.c writes
 * the weights as the vectorised loops read them).  dl_resize_vectorised and
 * dl_resize_vnni switch between them, for tests.
 *
 * The last pass writes uint8 rows, or, when a chain's float tail is fused in
 * (dl_float_sink_t), a few rows at a time into a strip that each row leaves
 * at once as float32 through the tail's tables (dl_emit). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dl_internal.h"
#include "dl_resize.h"

#include "dl_clones.h"
#include "dl_resize_avx2.h"

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

/* A filter's support, stretched by the downscale factor when antialiasing,
 * and the scales: what every output sample of one axis shares. */
typedef struct {
    double scale, filterscale, support;
} dl_kernel_t;

static dl_kernel_t dl_kernel(int in_size, int out_size, int filter, int antialias)
{
    dl_kernel_t kernel;
    switch (filter) {
    case DL_FILTER_BICUBIC: kernel.support = 2.0; break;
    case DL_FILTER_LANCZOS: kernel.support = 3.0; break;
    default: kernel.support = 1.0; break;
    }
    kernel.filterscale = kernel.scale = (double)in_size / out_size;
    if (kernel.filterscale < 1.0 || !antialias)
        kernel.filterscale = 1.0;
    kernel.support *= kernel.filterscale;
    return kernel;
}

/* The input samples output sample xx reads: xmin .. xmin + count - 1. */
static void dl_bounds(const dl_kernel_t *kernel, int in_size, int xx, int *xmin, int *count)
{
    double center = (xx + 0.5) * kernel->scale;
    int lo = (int)(center - kernel->support + 0.5);
    int hi = (int)(center + kernel->support + 0.5);
    if (lo < 0)
        lo = 0;
    if (hi > in_size)
        hi = in_size;
    *xmin = lo;
    *count = hi - lo;
}

/* The fractional bits of an axis's fixed-point weights: Pillow's
 * DL_PRECISION_BITS, or in fast mode the most bits (no more than those) at
 * which the largest weight, rounded, stays below 2^15. */
static int dl_weight_bits(const double *k, size_t count, int fast)
{
    double largest = 0.0;
    int bits;
    size_t i;
    if (!fast)
        return DL_PRECISION_BITS;
    for (i = 0; i < count; i++)
        largest = k[i] > largest ? k[i] : largest;
    for (bits = 0; bits < DL_PRECISION_BITS; bits++)
        if ((int)(0.5 + largest * (1 << (bits + 1))) >= (1 << 15))
            break;
    return bits;
}

/* Output xx's weights into k[0 .. ksize - 1] (zero past its count of
 * inputs), normalised to sum to one, as Pillow computes them: the same
 * operations in the same order, so the same doubles.  The filter is chosen
 * by a switch the compiler takes out of the loop, not a call per tap. */
static void dl_output_weights(const dl_kernel_t *kernel, int filter, int xx, int xmin, int count,
                              int ksize, double *k)
{
    double center = (xx + 0.5) * kernel->scale;
    double ww = 0.0, ss = 1.0 / kernel->filterscale;
    int x;
    for (x = 0; x < count; x++) {
        double at = (x + xmin - center + 0.5) * ss;
        k[x] = filter == DL_FILTER_BICUBIC   ? dl_bicubic(at)
               : filter == DL_FILTER_LANCZOS ? dl_lanczos(at)
                                             : dl_bilinear(at);
        ww += k[x];
    }
    if (ww != 0.0)
        for (x = 0; x < count; x++)
            k[x] /= ww;
    for (x = count; x < ksize; x++)
        k[x] = 0.0;
}

/* Fills bounds (first input index and count per output) and fixed-point
 * weights (ksize per output) with *bits fractional bits (dl_weight_bits);
 * returns ksize, or -1 on allocation failure. */
static int dl_coefficients(int in_size, int out_size, int filter, int antialias, int fast,
                           int **bounds_out, int32_t **weights_out, int *bits)
{
    dl_kernel_t kernel = dl_kernel(in_size, out_size, filter, antialias);
    int ksize = (int)ceil(kernel.support) * 2 + 1, xx, x;
    size_t count = (size_t)ksize * (size_t)out_size;
    int *bounds = malloc(sizeof(int) * 2 * (size_t)out_size);
    int32_t *weights = malloc(sizeof(int32_t) * count);
    double *normalised = malloc(sizeof(double) * count);
    if (bounds == NULL || weights == NULL || normalised == NULL) {
        free(bounds);
        free(weights);
        free(normalised);
        return -1;
    }
    for (xx = 0; xx < out_size; xx++) {
        dl_bounds(&kernel, in_size, xx, &bounds[2 * xx], &bounds[2 * xx + 1]);
        dl_output_weights(&kernel, filter, xx, bounds[2 * xx], bounds[2 * xx + 1], ksize,
                          normalised + (ptrdiff_t)xx * ksize);
    }
    *bits = dl_weight_bits(normalised, count, fast);
    for (x = 0; x < (int)count; x++) {
        double w = normalised[x] * (1 << *bits);
        weights[x] = (int32_t)(w < 0 ? -0.5 + w : 0.5 + w);
    }
    free(normalised);
    *bounds_out = bounds;
    *weights_out = weights;
    return ksize;
}

/* A sum of products with weights of `bits` fractional bits, to uint8. */
static inline uint8_t dl_clip8(int32_t v, int bits)
{
    if (v >= (1 << bits << 8))
        return 255;
    if (v <= 0)
        return 0;
    return (uint8_t)(v >> bits);
}

/* One filtering pass along the first axis: output row yy is the weighted
 * sum of input rows bounds[2yy] .. + bounds[2yy+1].  Every sample of a row
 * shares the row's weight, so the inner loop is a plain vector multiply-add
 * over `row_len` samples into `acc`, in the same integer arithmetic as
 * Pillow's (sums of exact products: the order of additions does not matter).
 * The horizontal pass runs through this function too, on a transposed image
 * (see dl_filter_columns), so that both passes vectorise. */
DL_AVX2_CLONES static void
dl_filter_rows(const uint8_t *src, ptrdiff_t src_stride, ptrdiff_t row_len, uint8_t *dst,
               ptrdiff_t dst_stride, int out_h, int ksize, const int *bounds,
               const int32_t *weights, int bits, int32_t *acc)
{
    int yy, y;
    ptrdiff_t i;
    for (yy = 0; yy < out_h; yy++) {
        const int32_t *k = weights + (ptrdiff_t)yy * ksize;
        int ymin = bounds[2 * yy], n = bounds[2 * yy + 1];
        const uint8_t *in = src + (ptrdiff_t)ymin * src_stride;
        uint8_t *out = dst + yy * dst_stride;
        for (i = 0; i < row_len; i++)
            acc[i] = 1 << bits >> 1;
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
            out[i] = dl_clip8(acc[i], bits);
    }
}

/* The horizontal pass computed in place, one output pixel at a time, for
 * very few taps, where transposing would cost more than it saves;
 * `channels` is a constant in each inlined copy so that its loop unrolls. */
static inline __attribute__((always_inline)) void
dl_horizontal_row(const uint8_t *in, uint8_t *out, int out_w, int channels, int ksize,
                  const int *bounds, const int32_t *weights, int bits)
{
    int xx, x, c;
    for (xx = 0; xx < out_w; xx++) {
        const int32_t *k = weights + (ptrdiff_t)xx * ksize;
        const uint8_t *p = in + (ptrdiff_t)bounds[2 * xx] * channels;
        int n = bounds[2 * xx + 1];
        int32_t ss[4] = {1 << bits >> 1, 1 << bits >> 1, 1 << bits >> 1, 1 << bits >> 1};
        for (x = 0; x < n; x++)
            for (c = 0; c < channels; c++)
                ss[c] += p[x * channels + c] * k[x];
        for (c = 0; c < channels; c++)
            out[(ptrdiff_t)xx * channels + c] = dl_clip8(ss[c], bits);
    }
}

static void dl_filter_columns_direct(const uint8_t *src, ptrdiff_t src_stride, int rows,
                                     int channels, uint8_t *dst, ptrdiff_t dst_stride, int out_w,
                                     int ksize, const int *bounds, const int32_t *weights,
                                     int bits)
{
    int y;
    for (y = 0; y < rows; y++) {
        const uint8_t *in = src + y * src_stride;
        uint8_t *out = dst + y * dst_stride;
        switch (channels) {
        case 1: dl_horizontal_row(in, out, out_w, 1, ksize, bounds, weights, bits); break;
        case 2: dl_horizontal_row(in, out, out_w, 2, ksize, bounds, weights, bits); break;
        case 3: dl_horizontal_row(in, out, out_w, 3, ksize, bounds, weights, bits); break;
        default: dl_horizontal_row(in, out, out_w, 4, ksize, bounds, weights, bits); break;
        }
    }
}

/* One pass along the first axis, vectorised where the CPU allows. */
static int dl_filter_rows_any(const uint8_t *src, ptrdiff_t src_stride, ptrdiff_t row_len,
                              uint8_t *dst, ptrdiff_t dst_stride, int out_h, int ksize,
                              const int *bounds, const int32_t *weights, int bits)
{
    int32_t *acc;
#if DL_HAVE_AVX2
    int status;
    if (row_len >= 32 && dl_resize_vectorised(-1) &&
        (status = dl_filter_rows_avx2(src, src_stride, row_len, dst, dst_stride, out_h, ksize,
                                      bounds, weights, bits)) != 1)
        return status;
#endif
    acc = malloc(sizeof(int32_t) * (size_t)row_len);
    if (acc == NULL)
        return -1;
    dl_filter_rows(src, src_stride, row_len, dst, dst_stride, out_h, ksize, bounds, weights, bits,
                   acc);
    free(acc);
    return 0;
}

/* The horizontal pass: transpose the rows x in_w block, filter along its
 * first axis with dl_filter_rows, transpose the rows x out_w result back
 * (directly, without transposing, for the 2-tap bilinear upscale). */
static int dl_filter_columns(const uint8_t *src, ptrdiff_t src_stride, int rows, int in_w,
                             int channels, uint8_t *dst, ptrdiff_t dst_stride, int out_w,
                             int ksize, const int *bounds, const int32_t *weights, int bits)
{
    ptrdiff_t line = (ptrdiff_t)rows * channels;
    uint8_t *t_in, *t_out;
    int status = -1;
#if DL_HAVE_AVX2
    if ((channels == 3 || channels == 4) && dl_resize_vectorised(-1) &&
        (status = dl_filter_columns_avx2(src, src_stride, rows, in_w, channels, dst, dst_stride,
                                         out_w, ksize, bounds, weights, bits)) != 1)
        return status;
    status = -1;
#endif
    if (ksize <= 3) {
        dl_filter_columns_direct(src, src_stride, rows, channels, dst, dst_stride, out_w, ksize,
                                 bounds, weights, bits);
        return 0;
    }
    t_in = malloc((size_t)in_w * line);
    t_out = malloc((size_t)out_w * line);
    if (t_in != NULL && t_out != NULL) {
        dl_transpose(src, src_stride, rows, in_w, channels, t_in, line);
        status = dl_filter_rows_any(t_in, line, line, t_out, line, out_w, ksize, bounds, weights,
                                    bits);
        if (status == 0)
            dl_transpose(t_out, line, out_w, rows, channels, dst, dst_stride);
    }
    free(t_in);
    free(t_out);
    return status;
}

/* Nearest neighbour's input index of each output of one axis, for outputs
 * first .. first + count - 1, minus `offset`: the source walked with an
 * accumulated double step from the first sample's centre, as Pillow's
 * affine scaling does, so a part of the axis gives the whole axis's indices. */
static void dl_nearest_indices(int in_size, int out_size, int first, int count, int offset,
                               int *index)
{
    double step = (double)in_size / out_size, at = step * 0.5;
    int x;
    for (x = 0; x < first + count; x++) {
        int i = at < 0.0 ? -1 : (int)at;
        i = i < 0 ? 0 : (i >= in_size ? in_size - 1 : i);
        if (x >= first)
            index[x - first] = i - offset;
        at += step;
    }
}

/* The inputs one axis's outputs first .. first + count - 1 read. */
static void dl_axis_source(int in_size, int out_size, int filter, int antialias, int first,
                           int count, int *source_first, int *source_count)
{
    int lo, hi, n;
    if (out_size == in_size) { /* not resampled: each output is its input */
        *source_first = first;
        *source_count = count;
        return;
    }
    if (filter == DL_FILTER_NEAREST) {
        dl_nearest_indices(in_size, out_size, first, 1, 0, &lo);
        dl_nearest_indices(in_size, out_size, first + count - 1, 1, 0, &hi);
        *source_first = lo;
        *source_count = hi + 1 - lo;
        return;
    }
    dl_kernel_t kernel = dl_kernel(in_size, out_size, filter, antialias);
    dl_bounds(&kernel, in_size, first, &lo, &n);
    dl_bounds(&kernel, in_size, first + count - 1, &hi, &n);
    *source_first = lo;
    *source_count = hi + n - lo;
}

void dl_resize_source(dl_resize_part_t *part, int filter, int antialias)
{
    const dl_window_t *r = &part->region;
    dl_axis_source(part->in_h, part->out_h, filter, antialias, r->top, r->height,
                   &part->source.top, &part->source.height);
    dl_axis_source(part->in_w, part->out_w, filter, antialias, r->left, r->width,
                   &part->source.left, &part->source.width);
}

/* Coefficients of one axis for the part's outputs: those of the whole axis
 * (computed whole, so every weight is the whole resize's), from output
 * `first` on, with input indices counted from `offset`. */
static int dl_part_coefficients(int in_size, int out_size, int filter, int antialias, int first,
                                int count, int offset, int fast, int **bounds,
                                int32_t **weights, int *bits)
{
    int ksize = dl_coefficients(in_size, out_size, filter, antialias, fast, bounds, weights, bits);
    if (ksize < 0)
        return -1;
    memmove(*bounds, *bounds + 2 * (ptrdiff_t)first, sizeof(int) * 2 * (size_t)count);
    memmove(*weights, *weights + (ptrdiff_t)first * ksize,
            sizeof(int32_t) * (size_t)ksize * (size_t)count);
    for (int i = 0; i < count; i++)
        (*bounds)[2 * i] -= offset;
    return ksize;
}

/* The pass that makes a resize's outputs, for output rows y0 .. y0 + n - 1
 * of the region: a copy (nothing resampled), nearest neighbour, the
 * vertical pass (ROWS) or the horizontal one (COLUMNS), over `src`, which
 * starts at the region's first input (copy, ROWS without a horizontal pass,
 * COLUMNS) or at the part's source (nearest) or is the other pass's result. */
enum { DL_LAST_COPY, DL_LAST_NEAREST, DL_LAST_ROWS, DL_LAST_COLUMNS };

typedef struct {
    int kind, channels, in_w, out_w, ksize;
    const uint8_t *src;
    ptrdiff_t src_stride;
    const int *bounds, *xin, *yin;
    const int32_t *weights;
    int bits; /* the weights' fractional bits */
} dl_last_pass_t;

static int dl_last_pass(const dl_last_pass_t *p, int y0, int n, uint8_t *dst,
                        ptrdiff_t dst_stride)
{
    ptrdiff_t line = (ptrdiff_t)p->out_w * p->channels;
    int x, y, c;
    switch (p->kind) {
    case DL_LAST_ROWS:
        return dl_filter_rows_any(p->src, p->src_stride, line, dst, dst_stride, n, p->ksize,
                                  p->bounds + 2 * (ptrdiff_t)y0,
                                  p->weights + (ptrdiff_t)y0 * p->ksize, p->bits);
    case DL_LAST_COLUMNS:
        return dl_filter_columns(p->src + y0 * p->src_stride, p->src_stride, n, p->in_w,
                                 p->channels, dst, dst_stride, p->out_w, p->ksize, p->bounds,
                                 p->weights, p->bits);
    case DL_LAST_NEAREST:
        for (y = 0; y < n; y++) {
            const uint8_t *in = p->src + p->yin[y0 + y] * p->src_stride;
            uint8_t *out = dst + y * dst_stride;
            for (x = 0; x < p->out_w; x++)
                for (c = 0; c < p->channels; c++)
                    out[x * p->channels + c] = in[p->xin[x] * p->channels + c];
        }
        return 0;
    default:
        for (y = 0; y < n; y++)
            memcpy(dst + y * dst_stride, p->src + (y0 + y) * p->src_stride, (size_t)line);
        return 0;
    }
}

/* The last pass into uint8 rows at dst, or, with a sink, strip by strip
 * through it into float32 (see dl_float_sink_t). */
static int dl_emit(const dl_last_pass_t *p, int out_h, uint8_t *dst, ptrdiff_t dst_stride,
                   const dl_float_sink_t *sink)
{
    enum { STRIP = 8 };
    ptrdiff_t line = (ptrdiff_t)p->out_w * p->channels, plane = (ptrdiff_t)out_h * p->out_w;
    int y0, y, x, c, n, status = 0;
    if (sink == NULL)
        return dl_last_pass(p, 0, out_h, dst, dst_stride);
    uint8_t *strip = malloc((size_t)(STRIP * line));
    if (strip == NULL)
        return -1;
    /* Output column x goes to x_first + x * x_step (mirrored with flip_x). */
    ptrdiff_t x_first = sink->flip_x ? p->out_w - 1 : 0, x_step = sink->flip_x ? -1 : 1;
    for (y0 = 0; status == 0 && y0 < out_h; y0 += STRIP) {
        n = out_h - y0 < STRIP ? out_h - y0 : STRIP;
        status = dl_last_pass(p, y0, n, strip, line);
        for (y = 0; status == 0 && y < n; y++) {
            const uint8_t *in = strip + y * line;
            int row = sink->flip_y ? out_h - 1 - (y0 + y) : y0 + y;
            if (sink->chw) {
                float *out = (float *)sink->data + (ptrdiff_t)row * p->out_w + x_first;
                for (c = 0; c < p->channels; c++)
                    for (x = 0; x < p->out_w; x++)
                        out[c * plane + x * x_step] = sink->lut[c][in[x * p->channels + c]];
            } else {
                float *out = (float *)(sink->data + row * sink->row_stride) +
                             x_first * p->channels;
                for (x = 0; x < p->out_w; x++)
                    for (c = 0; c < p->channels; c++)
                        out[x * x_step * p->channels + c] =
                            sink->lut[c][in[x * p->channels + c]];
            }
        }
    }
    free(strip);
    return status;
}

/* Pillow 13's order: vertical first when the height loses more than twice the
 * width's pixels; chosen by the whole resize, so all its parts round alike. */
static int dl_vertical_first(const dl_resize_part_t *part)
{
    int height_lost = part->in_h - part->out_h, width_lost = part->in_w - part->out_w;
    return height_lost > 0 && height_lost > 2 * width_lost;
}

int dl_resize_part(const uint8_t *src, ptrdiff_t src_stride, int channels, uint8_t *dst,
                   ptrdiff_t dst_stride, const dl_resize_part_t *part, int filter, int antialias,
                   const dl_float_sink_t *sink)
{
    int *hb = NULL, *vb = NULL, *xin = NULL, *yin = NULL;
    int32_t *hw = NULL, *vw = NULL;
    uint8_t *tmp = NULL; /* this thread's scratch (DL_SCRATCH_BETWEEN), not freed */
    const dl_window_t *source = &part->source, *r = &part->region;
    int in_w = source->width, out_h = r->height, out_w = r->width;
    int hk = 0, vk = 0, hbits = 0, vbits = 0, status = -1, y, first, last;
    /* Which passes run, and in which order, follow the whole resize. */
    int need_h = part->out_w != part->in_w, need_v = part->out_h != part->in_h;
    dl_last_pass_t pass = {DL_LAST_COPY, channels, in_w, out_w, 0, NULL, src_stride,
                           NULL, NULL, NULL, NULL, 0};

    if (filter == DL_FILTER_NEAREST) {
        xin = malloc(sizeof(int) * (size_t)r->width);
        yin = malloc(sizeof(int) * (size_t)r->height);
        if (xin == NULL || yin == NULL)
            goto done;
        dl_nearest_indices(part->in_w, part->out_w, r->left, r->width, source->left, xin);
        dl_nearest_indices(part->in_h, part->out_h, r->top, r->height, source->top, yin);
        pass.kind = DL_LAST_NEAREST;
        pass.src = src;
        pass.xin = xin;
        pass.yin = yin;
        goto emit;
    }
    if (!need_h && !need_v) {
        pass.src = src + (r->top - source->top) * src_stride +
                   (ptrdiff_t)(r->left - source->left) * channels;
        goto emit;
    }
    if (need_h && (hk = dl_part_coefficients(part->in_w, part->out_w, filter, antialias, r->left,
                                             out_w, source->left,
                                             part->fast && filter == DL_FILTER_BILINEAR, &hb, &hw,
                                             &hbits)) < 0)
        goto done;
    pass = (dl_last_pass_t){DL_LAST_COLUMNS, channels, in_w, out_w, hk, NULL, src_stride, hb,
                            NULL, NULL, hw, hbits};
    if (!need_v) {
        pass.src = src + (r->top - source->top) * src_stride;
        goto emit;
    }
    if ((vk = dl_part_coefficients(part->in_h, part->out_h, filter, antialias, r->top, out_h,
                                   source->top, 0, &vb, &vw, &vbits)) < 0)
        goto done;
    if (!need_h) {
        pass = (dl_last_pass_t){DL_LAST_ROWS, channels, in_w, out_w, vk,
                                src + (ptrdiff_t)(r->left - source->left) * channels,
                                src_stride, vb, NULL, NULL, vw, vbits};
        goto emit;
    }
    if (dl_vertical_first(part)) {
        tmp = dl_scratch(DL_SCRATCH_BETWEEN, (size_t)out_h * in_w * channels);
        if (tmp == NULL)
            goto done;
        if (dl_filter_rows_any(src, src_stride, (ptrdiff_t)in_w * channels, tmp,
                               (ptrdiff_t)in_w * channels, out_h, vk, vb, vw, vbits) != 0)
            goto done;
        pass.src = tmp;
        pass.src_stride = (ptrdiff_t)in_w * channels;
        goto emit;
    }
    /* Only rows first..last-1 of the input are read by the vertical pass. */
    first = vb[0];
    last = vb[2 * out_h - 2] + vb[2 * out_h - 1];
    for (y = 0; y < out_h; y++)
        vb[2 * y] -= first;
    tmp = dl_scratch(DL_SCRATCH_BETWEEN, (size_t)(last - first) * out_w * channels);
    if (tmp == NULL)
        goto done;
    if (dl_filter_columns(src + first * src_stride, src_stride, last - first, in_w, channels, tmp,
                          (ptrdiff_t)out_w * channels, out_w, hk, hb, hw, hbits) != 0)
        goto done;
    pass = (dl_last_pass_t){DL_LAST_ROWS, channels, in_w, out_w, vk, tmp,
                            (ptrdiff_t)out_w * channels, vb, NULL, NULL, vw, vbits};
emit:
    status = dl_emit(&pass, out_h, dst, dst_stride, sink);
done:
    free(hb);
    free(hw);
    free(vb);
    free(vw);
    free(xin);
    free(yin);
    return status;
}

int dl_resize(const uint8_t *src, ptrdiff_t src_stride, int in_h, int in_w, int channels,
              uint8_t *dst, ptrdiff_t dst_stride, int out_h, int out_w, int filter,
              int antialias, int fast)
{
    dl_resize_part_t whole = {in_h, in_w, out_h, out_w, {0, 0, in_h, in_w},
                              {0, 0, out_h, out_w}, fast};
    return dl_resize_part(src, src_stride, channels, dst, dst_stride, &whole, filter, antialias,
                          NULL);
}
