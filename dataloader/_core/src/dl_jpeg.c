/* JPEG through the TurboJPEG API.  Decoding uses TJFLAG_STOPONWARNING: a
 * warning from libjpeg-turbo (truncated or corrupt entropy data, which it
 * would otherwise fill with gray) is reported as an error, so no pixel that
 * was not decoded from the file is ever returned. */
#include <stdio.h>
#include <stdlib.h>
#include <turbojpeg.h>

#include "dl_internal.h"

static void dl_tj_message(tjhandle handle, char *msg)
{
    snprintf(msg, DL_MSG_LEN, "JPEG: %s", tjGetErrorStr2(handle));
}

void dl_jpeg_scaled_size(int height, int width, int scale_denom, int *out_h, int *out_w)
{
    tjscalingfactor sf = {1, scale_denom};
    *out_h = TJSCALED(height, sf);
    *out_w = TJSCALED(width, sf);
}

int dl_jpeg_scale_for(int height, int width, int min_h, int min_w)
{
    for (int denom = 8; denom > 1; denom /= 2) {
        int h, w;
        dl_jpeg_scaled_size(height, width, denom, &h, &w);
        if (h >= min_h && w >= min_w) return denom;
    }
    return 1;
}

/* Read the header into w, h and colorspace; a status, with `msg` on failure. */
static int dl_jpeg_header(tjhandle handle, const uint8_t *data, size_t size, int *w, int *h,
                          int *colorspace, char *msg)
{
    int subsamp = -1;
    *w = *h = 0;
    *colorspace = -1;
    if (tjDecompressHeader3(handle, data, (unsigned long)size, w, h, &subsamp, colorspace) < 0) {
        dl_tj_message(handle, msg);
        return DL_ERR_CORRUPT;
    }
    if (*w < 1 || *h < 1 || *colorspace < 0) {
        /* A stream that ends before its frame header "succeeds" with no size. */
        snprintf(msg, DL_MSG_LEN, "JPEG: no frame header (truncated data)");
        return DL_ERR_CORRUPT;
    }
    return DL_OK;
}

int dl_jpeg_info(const uint8_t *data, size_t size, dl_info_t *info, char *msg)
{
    int w, h, colorspace, status;
    tjhandle handle = tjInitDecompress();
    if (handle == NULL) {
        snprintf(msg, DL_MSG_LEN, "JPEG: cannot create a decompressor");
        return DL_ERR_NOMEM;
    }
    status = dl_jpeg_header(handle, data, size, &w, &h, &colorspace, msg);
    if (status == DL_OK) {
        info->format = DL_FMT_JPEG;
        info->width = w;
        info->height = h;
        info->channels = colorspace == TJCS_GRAY ? 1 : 3;
    }
    tjDestroy(handle);
    return status;
}

/* CMYK to RGB as Pillow's convert does, each channel
 * (255 - k) - c * (255 - k) / 255, rounded, on samples stored inverted
 * (255 = no ink), as Adobe writes them. Every four-component JPEG is taken
 * to be inverted, whether or not it carries an APP14 "Adobe" segment: the
 * segment only tells CMYK from YCCK (libjpeg's jdapimin.c), libjpeg writes
 * it with every CMYK file it compresses, and a file without it is most
 * likely one whose APPn segments were stripped. Pillow (its JPEG plugin's
 * "CMYK;I" raw mode) and libjpeg-turbo's tools (cmyk.h, used by djpeg and
 * tjbench) make the same assumption, with no test of the segment. */
static void dl_cmyk_to_rgb(const uint8_t *src, uint8_t *dst, size_t n_pixels)
{
    size_t i;
    for (i = 0; i < n_pixels; i++, src += 4, dst += 3) {
        int c;
        int nk = src[3];
        for (c = 0; c < 3; c++) {
            int v = 255 - src[c];
            int t = v * nk + 128;
            int r = nk - (((t >> 8) + t) >> 8);
            dst[c] = (uint8_t)(r < 0 ? 0 : r);
        }
    }
}

int dl_jpeg_decode(const uint8_t *data, size_t size, int scale_denom, int height, int width,
                   int channels, uint8_t *dst, ptrdiff_t row_stride, char *msg)
{
    int w, h, colorspace, sh, sw, pf, native, status;
    int flags = TJFLAG_STOPONWARNING;
    uint8_t *scratch = NULL, *rgb = NULL;
    tjhandle handle = tjInitDecompress();
    if (handle == NULL) {
        snprintf(msg, DL_MSG_LEN, "JPEG: cannot create a decompressor");
        return DL_ERR_NOMEM;
    }
    status = dl_jpeg_header(handle, data, size, &w, &h, &colorspace, msg);
    if (status != DL_OK)
        goto done;
    dl_jpeg_scaled_size(h, w, scale_denom, &sh, &sw);
    if (sh != height || sw != width) {
        snprintf(msg, DL_MSG_LEN, "JPEG: decoded size %dx%d does not match the destination %dx%d",
                 sh, sw, height, width);
        status = DL_ERR_MISMATCH;
        goto done;
    }
    if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
        size_t n = (size_t)sh * (size_t)sw;
        scratch = malloc(n * 4);
        rgb = channels == 3 ? NULL : malloc(n * 3);
        if (scratch == NULL || (channels != 3 && rgb == NULL)) {
            snprintf(msg, DL_MSG_LEN, "JPEG: out of memory");
            status = DL_ERR_NOMEM;
            goto done;
        }
        if (tjDecompress2(handle, data, (unsigned long)size, scratch, sw, sw * 4, sh,
                          TJPF_CMYK, flags) < 0) {
            dl_tj_message(handle, msg);
            status = DL_ERR_CORRUPT;
            goto done;
        }
        if (channels == 3) {
            ptrdiff_t y;
            for (y = 0; y < sh; y++)
                dl_cmyk_to_rgb(scratch + (size_t)y * sw * 4, dst + y * row_stride, (size_t)sw);
        } else {
            dl_cmyk_to_rgb(scratch, rgb, n);
            dl_convert_rows(rgb, (ptrdiff_t)sw * 3, 3, dst, row_stride, channels, sh, sw);
        }
        goto done;
    }
    native = colorspace == TJCS_GRAY ? 1 : 3;
    if (channels == native)
        pf = native == 1 ? TJPF_GRAY : TJPF_RGB;
    else if (channels == 3)
        pf = TJPF_RGB;
    else if (channels == 4)
        pf = TJPF_RGBA;   /* libjpeg-turbo fills alpha with 255 */
    else
        pf = -1;          /* L from color, LA: decode natively, then convert */
    if (pf >= 0) {
        if (tjDecompress2(handle, data, (unsigned long)size, dst, sw, (int)row_stride, sh, pf,
                          flags) < 0) {
            dl_tj_message(handle, msg);
            status = DL_ERR_CORRUPT;
        }
        goto done;
    }
    scratch = malloc((size_t)sh * (size_t)sw * (size_t)native);
    if (scratch == NULL) {
        snprintf(msg, DL_MSG_LEN, "JPEG: out of memory");
        status = DL_ERR_NOMEM;
        goto done;
    }
    if (tjDecompress2(handle, data, (unsigned long)size, scratch, sw, sw * native, sh,
                      native == 1 ? TJPF_GRAY : TJPF_RGB, flags) < 0) {
        dl_tj_message(handle, msg);
        status = DL_ERR_CORRUPT;
        goto done;
    }
    dl_convert_rows(scratch, (ptrdiff_t)sw * native, native, dst, row_stride, channels, sh, sw);
done:
    free(scratch);
    free(rgb);
    tjDestroy(handle);
    return status;
}
