/* Colour and filter kernels (see dl_colour.h for each one's reference).
 * The per-sample ops build one table of 256 values per channel (alpha's
 * the identity) and map the image through it; saturation, hue and
 * grayscale mix a pixel's channels; sharpness and blur read neighbours.
 * Float expressions follow their reference's types step by step (float32
 * where Pillow computes in float, double where it computes in double), so
 * that results round the same way. */
#include "dl_colour.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dl_codecs.h"

typedef uint8_t dl_lut_t[DL_MAX_CHANNELS][256];

static inline uint8_t *row_of(const dl_image_t *image, ptrdiff_t y)
{
    return image->data + y * image->row_stride;
}

/* A factor as the float Pillow receives, kept finite: an infinite factor
 * would make 0 * inf, a NaN no uint8 can hold, where a sample equals its
 * degenerate value. */
static inline float finite_factor(double factor)
{
    return (float)(factor > FLT_MAX ? FLT_MAX : factor < -FLT_MAX ? -FLT_MAX : factor);
}

/* dst = lut[c][src] for every sample; alpha rows of `lut` must be the identity. */
static void apply_lut(const dl_image_t *src, const dl_image_t *dst, const dl_lut_t lut)
{
    int channels = src->channels;
    for (ptrdiff_t y = 0; y < src->height; y++) {
        const uint8_t *s = row_of(src, y);
        uint8_t *d = row_of(dst, y);
        if (channels == 1) {
            for (ptrdiff_t x = 0; x < src->width; x++) d[x] = lut[0][s[x]];
            continue;
        }
        for (ptrdiff_t x = 0; x < src->width; x++, s += channels, d += channels)
            for (int c = 0; c < channels; c++) d[c] = lut[c][s[c]];
    }
}

/* Every channel's table the identity: the start of every per-sample op. */
static void identity_luts(dl_lut_t lut)
{
    for (int c = 0; c < DL_MAX_CHANNELS; c++)
        for (int v = 0; v < 256; v++) lut[c][v] = (uint8_t)v;
}

/* The same table for every colour channel (alpha's stays the identity). */
static void map_colours(const dl_image_t *src, const dl_image_t *dst, const uint8_t *table)
{
    if (src->channels == 2 || src->channels == 4) {
        dl_lut_t lut;
        identity_luts(lut);
        for (int c = 0; c < dl_colour_channels(src->channels); c++) memcpy(lut[c], table, 256);
        apply_lut(src, dst, lut);
        return;
    }
    ptrdiff_t samples = (ptrdiff_t)src->width * src->channels; /* no alpha: one flat loop */
    for (ptrdiff_t y = 0; y < src->height; y++) {
        const uint8_t *s = row_of(src, y);
        uint8_t *d = row_of(dst, y);
        for (ptrdiff_t i = 0; i < samples; i++) d[i] = table[s[i]];
    }
}

/* Row y's luma (Image.convert("L")) into gray[0..width-1]. */
static void luma_row(const dl_image_t *src, ptrdiff_t y, uint8_t *gray)
{
    const uint8_t *s = row_of(src, y);
    int channels = src->channels;
    if (channels < 3) {
        for (ptrdiff_t x = 0; x < src->width; x++) gray[x] = s[x * channels];
        return;
    }
    for (ptrdiff_t x = 0; x < src->width; x++) gray[x] = dl_luma(s + x * channels);
}

/* Image.blend over n samples: dst[i] = blend(degenerate[i], src[i], factor),
 * written as one branch-free loop the compiler vectorises (the same float
 * operations as dl_blend; a value inside 0..255 is never clipped). */
static void blend_samples(const uint8_t *degenerate, const uint8_t *src, uint8_t *dst,
                          ptrdiff_t n, float factor)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        float value = (float)degenerate[i] + factor * (float)(src[i] - degenerate[i]);
        value = value < 0.0f ? 0.0f : value;
        value = value > 255.0f ? 255.0f : value;
        dst[i] = (uint8_t)(int)value;
    }
}

/* ---- enhancements: Image.blend(degenerate, image, factor) ------------------ */

void dl_adjust_brightness(const dl_image_t *src, const dl_image_t *dst, double factor)
{
    uint8_t table[256];
    for (int v = 0; v < 256; v++) table[v] = dl_blend(0, v, finite_factor(factor));
    map_colours(src, dst, table);
}

void dl_adjust_contrast(const dl_image_t *src, const dl_image_t *dst, double factor)
{
    /* ImageStat's mean of the luma, in double, then int(mean + 0.5). */
    uint8_t gray[DL_MAX_SIDE], table[256];
    unsigned long long sum = 0;
    for (ptrdiff_t y = 0; y < src->height; y++) {
        luma_row(src, y, gray);
        for (ptrdiff_t x = 0; x < src->width; x++) sum += gray[x];
    }
    double mean = (double)sum / ((double)src->height * (double)src->width);
    int level = (int)(mean + 0.5);
    for (int v = 0; v < 256; v++) table[v] = dl_blend(level, v, finite_factor(factor));
    map_colours(src, dst, table);
}

void dl_adjust_saturation(const dl_image_t *src, const dl_image_t *dst, double factor)
{
    /* The degenerate image, a row at a time: each sample's pixel luma (its
     * alpha for an alpha sample, which the blend then leaves as it is). */
    uint8_t gray[DL_MAX_SIDE], degenerate[DL_MAX_SIDE * DL_MAX_CHANNELS];
    int channels = src->channels;
    if (channels < 3) { /* the degenerate image is the image itself */
        if (dst->data != src->data) dl_copy(src, dst);
        return;
    }
    for (ptrdiff_t y = 0; y < src->height; y++) {
        const uint8_t *s = row_of(src, y);
        luma_row(src, y, gray);
        for (ptrdiff_t x = 0; x < src->width; x++) {
            uint8_t *g = degenerate + x * channels;
            g[0] = g[1] = g[2] = gray[x];
            if (channels == 4) g[3] = s[x * 4 + 3];
        }
        blend_samples(degenerate, s, row_of(dst, y), (ptrdiff_t)src->width * channels,
                      finite_factor(factor));
    }
}

/* ---- hue: Pillow's RGB <-> HSV in uint8 (Convert.c, after colorsys) -------- */

static inline int clip8(int v) { return v <= 0 ? 0 : v >= 255 ? 255 : v; }

/* C's round() of a non-negative double (half away from zero), without a
 * libm call: x - (int)x is exact for the values here. */
static inline int round_half_up(double x)
{
    int whole = (int)x;
    return whole + (x - whole >= 0.5);
}

static inline void rgb_to_hsv(const uint8_t *p, uint8_t *hsv)
{
    int r = p[0], g = p[1], b = p[2];
    int maxc = r > g ? (r > b ? r : b) : (g > b ? g : b);
    int minc = r < g ? (r < b ? r : b) : (g < b ? g : b);
    hsv[2] = (uint8_t)maxc;
    if (minc == maxc) {
        hsv[0] = hsv[1] = 0;
        return;
    }
    float cr = (float)(maxc - minc);
    float s = cr / (float)maxc;
    float rc = (float)(maxc - r) / cr, gc = (float)(maxc - g) / cr, bc = (float)(maxc - b) / cr;
    float h;
    if (r == maxc) h = bc - gc;
    else if (g == maxc) h = (float)(2.0 + rc - bc);
    else h = (float)(4.0 + gc - rc);
    /* fmod(h / 6.0 + 1.0, 1.0), for h / 6.0 + 1.0 in [5/6, 11/6]: exact. */
    double turn = h / 6.0 + 1.0;
    h = (float)(turn >= 1.0 ? turn - 1.0 : turn);
    hsv[0] = (uint8_t)clip8((int)(h * 255.0));
    hsv[1] = (uint8_t)clip8((int)(s * 255.0));
}

/* Pillow's hsv2rgb's values of h and s, computed once per image. */
typedef struct {
    int sector[256];     /* floor(h * 6 / 255) */
    float fraction[256]; /* h * 6 / 255 - sector */
    float saturation[256];
} dl_hsv_tables_t;

static void hsv_tables(dl_hsv_tables_t *t)
{
    for (int v = 0; v < 256; v++) {
        t->sector[v] = (int)((float)v * 6.0 / 255.0); /* floor of a non-negative value */
        t->fraction[v] = (float)((float)v * 6.0 / 255.0 - (float)t->sector[v]);
        t->saturation[v] = (float)((float)v / 255.0);
    }
}

static inline void hsv_to_rgb(const dl_hsv_tables_t *t, const uint8_t *hsv, uint8_t *p)
{
    int h = hsv[0], s = hsv[1], v = hsv[2];
    if (s == 0) {
        p[0] = p[1] = p[2] = (uint8_t)v;
        return;
    }
    int i = t->sector[h];
    float f = t->fraction[h], fs = t->saturation[s];
    uint8_t up = (uint8_t)clip8(round_half_up((float)v * (1.0 - fs)));
    uint8_t uq = (uint8_t)clip8(round_half_up((float)v * (1.0 - fs * f)));
    uint8_t ut = (uint8_t)clip8(round_half_up((float)v * (1.0 - fs * (1.0 - f))));
    uint8_t uv = (uint8_t)v;
    switch (i % 6) {
    case 0: p[0] = uv; p[1] = ut; p[2] = up; break;
    case 1: p[0] = uq; p[1] = uv; p[2] = up; break;
    case 2: p[0] = up; p[1] = uv; p[2] = ut; break;
    case 3: p[0] = up; p[1] = uq; p[2] = uv; break;
    case 4: p[0] = ut; p[1] = up; p[2] = uv; break;
    default: p[0] = uv; p[1] = up; p[2] = uq; break;
    }
}

void dl_adjust_hue(const dl_image_t *src, const dl_image_t *dst, double hue_factor)
{
    int channels = src->channels;
    /* numpy's uint8(hue_factor * 255): truncated toward zero, then modulo 256. */
    uint8_t shift = (uint8_t)((int)(hue_factor * 255) & 255);
    if (channels < 3) { /* a gray image is returned as it is */
        if (dst->data != src->data) dl_copy(src, dst);
        return;
    }
    /* Even a zero shift goes through HSV and back, which is not lossless. */
    dl_hsv_tables_t tables;
    hsv_tables(&tables);
    for (ptrdiff_t y = 0; y < src->height; y++) {
        const uint8_t *s = row_of(src, y);
        uint8_t *d = row_of(dst, y);
        for (ptrdiff_t x = 0; x < src->width; x++, s += channels, d += channels) {
            uint8_t hsv[3], alpha = channels == 4 ? s[3] : 0;
            rgb_to_hsv(s, hsv);
            hsv[0] = (uint8_t)(hsv[0] + shift);
            hsv_to_rgb(&tables, hsv, d);
            if (channels == 4) d[3] = alpha;
        }
    }
}

/* ---- sharpness: ImageFilter.SMOOTH (3x3: 1 1 1 / 1 5 1 / 1 1 1, / 13) ------- */

int dl_adjust_sharpness(const dl_image_t *src, const dl_image_t *dst, double factor)
{
    /* Pillow divides the kernel by its scale in float32, and sums each row
     * of three products, then the rows bottom to top, from 0.5 (rounding).
     * One flat loop over a row's inner samples (alpha's too, put back after). */
    const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
    uint8_t smooth[DL_MAX_SIDE * DL_MAX_CHANNELS];
    int channels = src->channels;
    ptrdiff_t h = src->height, w = src->width, c = channels;
    dl_copy(src, dst); /* the border, alpha, and images too small to filter */
    if (h < 3 || w < 3) return 0;
    for (ptrdiff_t y = 1; y < h - 1; y++) {
        const uint8_t *above = row_of(src, y - 1), *in = row_of(src, y), *below = row_of(src, y + 1);
        uint8_t *out = row_of(dst, y);
        for (ptrdiff_t i = c; i < (w - 1) * c; i++) {
            float ss = 0.5f;
            ss += (float)below[i - c] * k1 + (float)below[i] * k1 + (float)below[i + c] * k1;
            ss += (float)in[i - c] * k1 + (float)in[i] * k5 + (float)in[i + c] * k1;
            ss += (float)above[i - c] * k1 + (float)above[i] * k1 + (float)above[i + c] * k1;
            ss = ss < 0.0f ? 0.0f : ss;
            ss = ss > 255.0f ? 255.0f : ss;
            smooth[i] = (uint8_t)(int)ss;
        }
        blend_samples(smooth + c, in + c, out + c, (w - 2) * c, finite_factor(factor));
        if (c == 2 || c == 4)
            for (ptrdiff_t x = 1; x < w - 1; x++) out[x * c + c - 1] = in[x * c + c - 1];
    }
    return 0;
}

/* ---- grayscale --------------------------------------------------------------- */

void dl_grayscale(const dl_image_t *src, const dl_image_t *dst)
{
    uint8_t gray[DL_MAX_SIDE];
    int channels = dst->channels;
    for (ptrdiff_t y = 0; y < src->height; y++) {
        const uint8_t *s = row_of(src, y);
        uint8_t *d = row_of(dst, y);
        luma_row(src, y, gray);
        for (ptrdiff_t x = 0; x < src->width; x++, d += channels, s += src->channels) {
            d[0] = gray[x];
            if (channels >= 3) d[1] = d[2] = gray[x];
            if (channels == 2 || channels == 4) d[channels - 1] = s[src->channels - 1];
        }
    }
}

/* ---- ImageOps --------------------------------------------------------------- */

void dl_posterize(const dl_image_t *src, const dl_image_t *dst, int bits)
{
    uint8_t table[256];
    unsigned mask = ~((1u << (8 - bits)) - 1u) & 255u;
    for (int v = 0; v < 256; v++) table[v] = (uint8_t)(v & mask);
    map_colours(src, dst, table);
}

void dl_solarize(const dl_image_t *src, const dl_image_t *dst, double threshold)
{
    uint8_t table[256];
    for (int v = 0; v < 256; v++) table[v] = (uint8_t)(v < threshold ? v : 255 - v);
    map_colours(src, dst, table);
}

void dl_invert(const dl_image_t *src, const dl_image_t *dst)
{
    uint8_t table[256];
    for (int v = 0; v < 256; v++) table[v] = (uint8_t)(255 - v);
    map_colours(src, dst, table);
}

/* Each colour channel's histogram (counts[c][v]). */
static void histograms(const dl_image_t *src, unsigned long long counts[3][256])
{
    int channels = src->channels, colours = dl_colour_channels(channels);
    memset(counts, 0, sizeof(unsigned long long) * 3 * 256);
    for (ptrdiff_t y = 0; y < src->height; y++) {
        const uint8_t *s = row_of(src, y);
        for (ptrdiff_t x = 0; x < src->width; x++, s += channels)
            for (int c = 0; c < colours; c++) counts[c][s[c]]++;
    }
}

/* A histogram op's rule: one colour channel's LUT from its histogram (left
 * as the identity where the op changes nothing). */
typedef void (*histogram_rule_t)(const unsigned long long counts[256], uint8_t lut[256]);

/* Each colour channel mapped through the LUT `rule` makes of its histogram. */
static void apply_histogram_rule(const dl_image_t *src, const dl_image_t *dst,
                                 histogram_rule_t rule)
{
    unsigned long long counts[3][256];
    dl_lut_t lut;
    identity_luts(lut);
    histograms(src, counts);
    for (int c = 0; c < dl_colour_channels(src->channels); c++) rule(counts[c], lut[c]);
    apply_lut(src, dst, lut);
}

static void autocontrast_rule(const unsigned long long counts[256], uint8_t lut[256])
{
    int lo = 0, hi = 255;
    while (lo < 255 && !counts[lo]) lo++;
    while (hi > 0 && !counts[hi]) hi--;
    if (hi <= lo) return;
    double scale = 255.0 / (hi - lo), offset = -lo * scale;
    for (int v = 0; v < 256; v++) {
        double mapped = v * scale + offset;
        int value = (int)mapped; /* Python's int(): toward zero */
        lut[v] = (uint8_t)(value < 0 ? 0 : value > 255 ? 255 : value);
    }
}

void dl_autocontrast(const dl_image_t *src, const dl_image_t *dst)
{
    apply_histogram_rule(src, dst, autocontrast_rule);
}

static void equalize_rule(const unsigned long long counts[256], uint8_t lut[256])
{
    /* The step leaves out the last used level's count, divided by 255
     * (Pillow 13's rule, and torchvision's tensor equalize's). */
    unsigned long long total = 0, last = 0;
    int used = 0;
    for (int v = 0; v < 256; v++)
        if (counts[v]) {
            total += counts[v];
            last = counts[v];
            used++;
        }
    unsigned long long step = used > 1 ? (total - last) / 255 : 0;
    if (step == 0) return;
    unsigned long long n = step / 2;
    for (int v = 0; v < 256; v++) {
        unsigned long long level = n / step;
        lut[v] = (uint8_t)(level > 255 ? 255 : level);
        n += counts[v];
    }
}

void dl_equalize(const dl_image_t *src, const dl_image_t *dst)
{
    apply_histogram_rule(src, dst, equalize_rule);
}

/* ---- Gaussian blur: torchvision's kernel, separable, in float32 ------------- */

/* torchvision's _get_gaussian_kernel1d in float32: x = linspace(-(n-1)/2,
 * (n-1)/2, n), pdf = exp(-0.5 (x / sigma)^2), divided by its sum. */
static void gaussian_kernel(int size, double sigma, float *kernel)
{
    float half = (float)(size - 1) * 0.5f, total = 0.0f, s = (float)sigma;
    if (!(s >= FLT_MIN)) { /* sigma rounds to 0 in float32: the centre alone */
        for (int i = 0; i < size; i++) kernel[i] = i == size / 2 ? 1.0f : 0.0f;
        return;
    }
    for (int i = 0; i < size; i++) {
        float x = size > 1 ? -half + (2.0f * half) * (float)i / (float)(size - 1) : 0.0f;
        float z = x / s;
        kernel[i] = expf(-0.5f * z * z);
        total += kernel[i];
    }
    for (int i = 0; i < size; i++) kernel[i] /= total;
}

/* torch's "reflect" index of i in 0..n-1, reflecting as often as needed. */
static inline ptrdiff_t reflect(ptrdiff_t i, ptrdiff_t n)
{
    if (n == 1) return 0;
    ptrdiff_t period = 2 * (n - 1);
    i %= period;
    if (i < 0) i += period;
    return i < n ? i : period - i;
}

int dl_gaussian_blur(const dl_image_t *src, const dl_image_t *dst, int kernel_width,
                     int kernel_height, double sigma_x, double sigma_y)
{
    int channels = src->channels;
    ptrdiff_t h = src->height, w = src->width, rw = w * channels;
    int rx = kernel_width / 2, ry = kernel_height / 2;
    /* The kernels, each input row filtered horizontally once (a ring of
     * kernel_height rows), the column offsets of the reflected border and
     * one reflected input row. */
    float *kx = malloc(sizeof(float) * (size_t)(kernel_width + kernel_height));
    float *rows = malloc(sizeof(float) * (size_t)rw * (size_t)kernel_height);
    float *acc = malloc(sizeof(float) * (size_t)rw);
    ptrdiff_t *columns = malloc(sizeof(ptrdiff_t) * (size_t)(w + 2 * rx));
    float *padded = malloc(sizeof(float) * (size_t)(w + 2 * rx) * (size_t)channels);
    int status = -1;
    if (kx == NULL || rows == NULL || acc == NULL || columns == NULL || padded == NULL) goto done;
    float *ky = kx + kernel_width;
    gaussian_kernel(kernel_width, sigma_x, kx);
    gaussian_kernel(kernel_height, sigma_y, ky);
    for (ptrdiff_t x = -rx; x < w + rx; x++) columns[x + rx] = reflect(x, w) * channels;
    /* Row r of the input (reflected) lives in ring slot r mod kernel_height. */
    for (ptrdiff_t y = 0; y < h; y++) {
        for (ptrdiff_t j = y == 0 ? -ry : y + ry; j <= y + ry; j++) {
            const uint8_t *s = row_of(src, reflect(j, h));
            float *out = rows + ((j + ry) % kernel_height) * rw;
            /* The row with its reflected border, as floats; then each output
             * sample sums its taps, a flat loop the compiler vectorises. */
            for (ptrdiff_t x = 0; x < w + 2 * rx; x++)
                for (int c = 0; c < channels; c++)
                    padded[x * channels + c] = (float)s[columns[x] + c];
            for (ptrdiff_t i = 0; i < rw; i++) out[i] = 0.0f;
            for (int t = 0; t < kernel_width; t++) {
                const float *tap = padded + (ptrdiff_t)t * channels;
                float weight = kx[t];
                for (ptrdiff_t i = 0; i < rw; i++) out[i] += weight * tap[i];
            }
        }
        memset(acc, 0, sizeof(float) * (size_t)rw);
        for (int t = 0; t < kernel_height; t++) {
            const float *in = rows + ((y + t) % kernel_height) * rw;
            for (ptrdiff_t i = 0; i < rw; i++) acc[i] += ky[t] * in[i];
        }
        uint8_t *d = row_of(dst, y);
        for (ptrdiff_t i = 0; i < rw; i++) {
            float v = nearbyintf(acc[i]); /* torch.round: half to even */
            d[i] = (uint8_t)(v <= 0.0f ? 0 : v >= 255.0f ? 255 : v);
        }
    }
    status = 0;
done:
    free(kx);
    free(rows);
    free(acc);
    free(columns);
    free(padded);
    return status;
}
