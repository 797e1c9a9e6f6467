/* Affine warps and their matrices (see dl_geometry.h). The arithmetic is
 * Pillow's own (Geometry.c: the fast nearest affine path and the generic
 * bilinear one; Image.rotate's matrix and size), in the same order and in
 * doubles, so that outputs match Pillow's within one level (bilinear) and
 * pick the same input pixels (nearest). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl_geometry.h"

/* A pass inlined where it is called with a constant channel count. */
#if defined(__GNUC__)
#define DL_SPECIALISED static inline __attribute__((always_inline))
#else
#define DL_SPECIALISED static inline
#endif

/* Python's math.pi: radians(x) is x * (pi / 180), as math.radians computes it. */
#define DL_PI 3.14159265358979323846

void dl_affine_matrix(const dl_affine_params_t *p, double m[6])
{
    /* torchvision's _get_inverse_affine_matrix, inverted: RSS^-1 C^-1 T^-1, then C. */
    double rot = p->angle * (DL_PI / 180.0);
    double sx = p->shear_x * (DL_PI / 180.0), sy = p->shear_y * (DL_PI / 180.0);
    double cx = p->center_x, cy = p->center_y, tx = p->translate_x, ty = p->translate_y;
    double a = cos(rot - sy) / cos(sy);
    double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    double c = sin(rot - sy) / cos(sy);
    double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    m[0] = d / p->scale;
    m[1] = -b / p->scale;
    m[2] = 0.0 / p->scale;
    m[3] = -c / p->scale;
    m[4] = a / p->scale;
    m[5] = 0.0 / p->scale;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

/* Python's round(x, 15): the exact binary value rounded to 15 decimals
 * (glibc's printf rounds the exact value, as Python's dtoa does), read back. */
static double round15(double x)
{
    char text[48];
    snprintf(text, sizeof text, "%.15f", x);
    return strtod(text, NULL);
}

void dl_rotation_matrix(double angle, double center_x, double center_y, int expand, int h,
                        int w, double m[6], int *out_h, int *out_w)
{
    /* Python's angle % 360.0, then -radians(angle), as Image.rotate. */
    double turned = fmod(angle, 360.0);
    if (turned != 0.0 && turned < 0) turned += 360.0;
    double r = -(turned * (DL_PI / 180.0));
    m[0] = round15(cos(r));
    m[1] = round15(sin(r));
    m[2] = 0.0;
    m[3] = round15(-sin(r));
    m[4] = round15(cos(r));
    m[5] = 0.0;
    m[2] = m[0] * -center_x + m[1] * -center_y + m[2] + center_x;
    m[5] = m[3] * -center_x + m[4] * -center_y + m[5] + center_y;
    *out_h = h;
    *out_w = w;
    if (!expand) return;
    const double corners[4][2] = {{0, 0}, {w, 0}, {w, h}, {0, h}};
    double min_x = INFINITY, max_x = -INFINITY, min_y = INFINITY, max_y = -INFINITY;
    for (int k = 0; k < 4; k++) {
        double x = m[0] * corners[k][0] + m[1] * corners[k][1] + m[2];
        double y = m[3] * corners[k][0] + m[4] * corners[k][1] + m[5];
        min_x = fmin(min_x, x), max_x = fmax(max_x, x);
        min_y = fmin(min_y, y), max_y = fmax(max_y, y);
    }
    /* Sides past any image (or NaN, from a far centre) fail the image rule later. */
    double fw = ceil(max_x) - floor(min_x), fh = ceil(max_y) - floor(min_y);
    int nw = fw <= 4.0 * DL_MAX_SIDE ? (int)fw : 4 * DL_MAX_SIDE;
    int nh = fh <= 4.0 * DL_MAX_SIDE ? (int)fh : 4 * DL_MAX_SIDE;
    double dx = -(nw - w) / 2.0, dy = -(nh - h) / 2.0;
    double m2 = m[0] * dx + m[1] * dy + m[2], m5 = m[3] * dx + m[4] * dy + m[5];
    m[2] = m2;
    m[5] = m5;
    *out_h = nh;
    *out_w = nw;
}

/* Pillow's COORD: truncation, with every negative coordinate outside; so
 * are NaN and coordinates past any image (no int can hold them). */
static inline int coord(double v) { return v >= 0.0 && v < DL_MAX_SIDE ? (int)v : -1; }

static inline int clip(int v, int size) { return v < 0 ? 0 : v < size ? v : size - 1; }

/* A warp kernel's coefficients and fill, copied into the kernel's locals
 * (with the images themselves): the pixel writes (uint8_t may alias
 * anything) would otherwise reload every field and coefficient at each pixel. */
static inline void warp_locals(const dl_warp_t *warp, double a[6], uint8_t fill[4])
{
    memcpy(a, warp->matrix, sizeof warp->matrix);
    memcpy(fill, warp->fill, sizeof warp->fill);
}

/* The nearest paths' source: pixel (x, y) of `in`, or `fill` outside it. */
static inline const uint8_t *source_pixel(const dl_image_t *in, int x, int y,
                                          const uint8_t *fill, int channels)
{
    if (x >= 0 && x < in->width && y >= 0 && y < in->height)
        return in->data + (ptrdiff_t)y * in->row_stride + (ptrdiff_t)x * channels;
    return fill;
}

/* Whether Pillow's 16.16 fixed-point nearest path holds output corner (x, y). */
static int check_fixed(const double *a, int x, int y)
{
    return fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

static int fix(double v) { return (int)floor(v * 65536.0 + 0.5); }

/* Pillow's affine_fixed: 16.16 fixed-point coordinates accumulated along a
 * row and from row to row. */
DL_SPECIALISED void affine_fixed(const dl_image_t *src, const dl_image_t *dst,
                                 const dl_warp_t *warp, const int channels)
{
    const dl_image_t in = *src, to = *dst;
    double a[6];
    uint8_t fill[4];
    warp_locals(warp, a, fill);
    int a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
    int a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5), a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
    /* The window's first output: the integer sums Pillow's loops reach there
     * (they stay in range: the whole output's corners were checked). */
    a2 += warp->top * a1 + warp->left * a0;
    a5 += warp->top * a4 + warp->left * a3;
    for (int y = 0; y < to.height; y++) {
        uint8_t *out = to.data + (ptrdiff_t)y * to.row_stride;
        int xx = a2, yy = a5;
        for (int x = 0; x < to.width; x++, out += channels) {
            int xin = xx >> 16, yin = yy >> 16; /* arithmetic shifts: floor */
            const uint8_t *pixel = source_pixel(&in, xin, yin, fill, channels);
            for (int c = 0; c < channels; c++) out[c] = pixel[c];
            xx += a0;
            yy += a3;
        }
        a2 += a1;
        a5 += a4;
    }
}

/* Pillow's nearest paths (ImagingTransformAffine): a pure scale, or a map
 * whose corners leave 16.16 fixed point's range, accumulate coordinates in
 * doubles along a row and from row to row as Pillow does (ImagingScaleAffine
 * gives the same sequence); any other map runs in fixed point. */
DL_SPECIALISED void affine_nearest(const dl_image_t *src, const dl_image_t *dst,
                                   const dl_warp_t *warp, const int channels)
{
    const dl_image_t in = *src, to = *dst;
    double a[6];
    uint8_t fill[4];
    warp_locals(warp, a, fill);
    int w = warp->out_w, h = warp->out_h;
    if (!(a[1] == 0 && a[3] == 0) && check_fixed(a, 0, 0) && check_fixed(a, w, h) &&
        check_fixed(a, 0, h) && check_fixed(a, w, 0)) {
        affine_fixed(src, dst, warp, channels);
        return;
    }
    double xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
    double yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
    for (int y = 0; y < warp->top; y++) { /* the sums Pillow's loops reach, in its order */
        xo += a[1];
        yo += a[4];
    }
    for (int y = 0; y < to.height; y++) {
        uint8_t *out = to.data + (ptrdiff_t)y * to.row_stride;
        double xx = xo, yy = yo;
        for (int x = 0; x < warp->left; x++) {
            xx += a[0];
            yy += a[3];
        }
        for (int x = 0; x < to.width; x++, out += channels) {
            int xin = coord(xx), yin = coord(yy);
            const uint8_t *pixel = source_pixel(&in, xin, yin, fill, channels);
            for (int c = 0; c < channels; c++) out[c] = pixel[c];
            xx += a[0];
            yy += a[3];
        }
        xo += a[1];
        yo += a[4];
    }
}

/* Pillow's MULDIV255: a * b / 255, rounded, in integers. */
static inline int muldiv255(int a, int b)
{
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

/* Pillow's generic path with its bilinear filter: the mapped point's four
 * neighbours, clamped at the edges (the row below taken as the row itself
 * past the last row), the result truncated. */
DL_SPECIALISED void affine_bilinear(const dl_image_t *src, const dl_image_t *dst,
                                    const dl_warp_t *warp, const int channels)
{
    const dl_image_t in = *src, to = *dst;
    double a[6];
    uint8_t fill[4];
    warp_locals(warp, a, fill);
    const int premultiply = channels == 4;
    for (int y = 0; y < to.height; y++) {
        uint8_t *out = to.data + (ptrdiff_t)y * to.row_stride;
        double yc = (warp->top + y) + 0.5;
        for (int x = 0; x < to.width; x++, out += channels) {
            double xc = (warp->left + x) + 0.5;
            double xin = a[0] * xc + a[1] * yc + a[2];
            double yin = a[3] * xc + a[4] * yc + a[5];
            uint8_t value[4];
            if (!(xin >= 0.0 && xin < in.width && yin >= 0.0 && yin < in.height)) {
                memcpy(value, fill, (size_t)channels); /* outside, or NaN */
            } else {
                xin -= 0.5;
                yin -= 0.5;
                /* floor, for values of at least -0.5 */
                int xi = xin < 0.0 ? -1 : (int)xin, yi = yin < 0.0 ? -1 : (int)yin;
                double dx = xin - xi, dy = yin - yi;
                int x0 = clip(xi, in.width) * channels, x1 = clip(xi + 1, in.width) * channels;
                const uint8_t *r0 = in.data + (ptrdiff_t)clip(yi, in.height) * in.row_stride;
                int below = yi + 1 >= 0 && yi + 1 < in.height;
                const uint8_t *r1 = below ? in.data + (ptrdiff_t)(yi + 1) * in.row_stride : r0;
                for (int c = 0; c < channels; c++) {
                    double p00 = r0[x0 + c], p01 = r0[x1 + c], p10 = r1[x0 + c], p11 = r1[x1 + c];
                    if (premultiply && c < 3) {
                        p00 = muldiv255(r0[x0 + c], r0[x0 + 3]);
                        p01 = muldiv255(r0[x1 + c], r0[x1 + 3]);
                        p10 = muldiv255(r1[x0 + c], r1[x0 + 3]);
                        p11 = muldiv255(r1[x1 + c], r1[x1 + 3]);
                    }
                    double v1 = p00 + (p01 - p00) * dx;
                    double v2 = below ? p10 + (p11 - p10) * dx : v1;
                    value[c] = (uint8_t)(v1 + (v2 - v1) * dy);
                }
            }
            if (premultiply && value[3] != 0 && value[3] != 255) {
                /* Pillow's RGBa -> RGBA: 255 v / alpha, truncated, clipped. */
                for (int c = 0; c < 3; c++) {
                    int v = 255 * value[c] / value[3];
                    value[c] = (uint8_t)(v > 255 ? 255 : v);
                }
            }
            memcpy(out, value, (size_t)channels);
        }
    }
}

int dl_affine(const dl_image_t *src, const dl_image_t *dst, const dl_warp_t *warp)
{
    if (src->sample_size != 1 || dst->sample_size != 1 || src->channels != dst->channels ||
        (src->channels != 1 && src->channels != 3 && src->channels != 4) || warp->top < 0 ||
        warp->left < 0 || (long long)warp->top + dst->height > warp->out_h ||
        (long long)warp->left + dst->width > warp->out_w)
        return -1;
    /* Each pass compiled for each channel count (the pixel loops unrolled). */
    int nearest = warp->filter == DL_FILTER_NEAREST;
    if (!nearest && warp->filter != DL_FILTER_BILINEAR) return -1;
    switch (src->channels) {
    case 1:
        nearest ? affine_nearest(src, dst, warp, 1) : affine_bilinear(src, dst, warp, 1);
        break;
    case 3:
        nearest ? affine_nearest(src, dst, warp, 3) : affine_bilinear(src, dst, warp, 3);
        break;
    default:
        nearest ? affine_nearest(src, dst, warp, 4) : affine_bilinear(src, dst, warp, 4);
    }
    return 0;
}
