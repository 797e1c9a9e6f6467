/* PNG through libpng's low-level API.  Errors longjmp back to dl_png_run
 * with the message kept in the source struct; warnings are ignored (they
 * never leave pixels undecoded).  Samples are reduced to 8 bits by keeping
 * the high byte, palettes are expanded (to RGBA when a tRNS chunk is
 * present) and gray below 8 bits is scaled to 0..255, as Pillow does. */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl_internal.h"

typedef struct {
    const uint8_t *data;
    size_t size;
    size_t pos;
    char *msg;
} dl_png_source_t;

static void dl_png_error(png_structp png, png_const_charp message)
{
    dl_png_source_t *src = png_get_error_ptr(png);
    snprintf(src->msg, DL_MSG_LEN, "PNG: %s", message);
    png_longjmp(png, 1);
}

static void dl_png_warning(png_structp png, png_const_charp message)
{
    (void)png;
    (void)message;
}

static void dl_png_read(png_structp png, png_bytep out, size_t n)
{
    dl_png_source_t *src = png_get_io_ptr(png);
    if (n > src->size - src->pos)
        png_error(png, "truncated data");
    memcpy(out, src->data + src->pos, n);
    src->pos += n;
}

/* Reads the header and, when dst is not NULL, the pixels. */
static int dl_png_run(const uint8_t *data, size_t size, dl_info_t *info, int height, int width,
                      int channels, uint8_t *dst, ptrdiff_t row_stride, char *msg)
{
    dl_png_source_t src = {data, size, 0, msg};
    png_structp png;
    png_infop png_info;
    uint8_t *volatile scratch = NULL;
    png_bytep *volatile rows = NULL;
    volatile int status = DL_OK;
    png_uint_32 w, h, y;
    int bit_depth, color_type, interlace, native;

    png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, dl_png_error, dl_png_warning);
    if (png == NULL) {
        snprintf(msg, DL_MSG_LEN, "PNG: out of memory");
        return DL_ERR_NOMEM;
    }
    png_info = png_create_info_struct(png);
    if (png_info == NULL) {
        png_destroy_read_struct(&png, NULL, NULL);
        snprintf(msg, DL_MSG_LEN, "PNG: out of memory");
        return DL_ERR_NOMEM;
    }
    if (setjmp(png_jmpbuf(png))) {
        if (status == DL_OK)
            status = DL_ERR_CORRUPT;
        goto done;
    }
    png_set_read_fn(png, &src, dl_png_read);
    png_read_info(png, png_info);
    png_get_IHDR(png, png_info, &w, &h, &bit_depth, &color_type, &interlace, NULL, NULL);
    switch (color_type) {
    case PNG_COLOR_TYPE_GRAY: native = 1; break;
    case PNG_COLOR_TYPE_GRAY_ALPHA: native = 2; break;
    case PNG_COLOR_TYPE_RGB: native = 3; break;
    case PNG_COLOR_TYPE_RGB_ALPHA: native = 4; break;
    case PNG_COLOR_TYPE_PALETTE:
        native = png_get_valid(png, png_info, PNG_INFO_tRNS) ? 4 : 3;
        break;
    default: png_error(png, "unknown color type");
    }
    info->format = DL_FMT_PNG;
    info->width = (int)w;
    info->height = (int)h;
    info->channels = native;
    if (dst == NULL)
        goto done;
    if ((int)w != width || (int)h != height) {
        status = DL_ERR_MISMATCH;
        snprintf(msg, DL_MSG_LEN, "PNG: size %ux%u does not match the destination %dx%d",
                 (unsigned)h, (unsigned)w, height, width);
        png_longjmp(png, 1);
    }
    if (bit_depth == 16)
        png_set_strip_16(png);
    if (color_type == PNG_COLOR_TYPE_PALETTE) {
        png_set_palette_to_rgb(png);
        if (native == 4)
            png_set_tRNS_to_alpha(png);
    }
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, png_info);
    if ((int)png_get_channels(png, png_info) != native || png_get_bit_depth(png, png_info) != 8)
        png_error(png, "unexpected sample layout after expansion");
    if (channels != native && interlace == PNG_INTERLACE_NONE) {
        /* One row at a time, converted into dst: no image-sized scratch. */
        scratch = malloc((size_t)w * (size_t)native);
        if (scratch == NULL) {
            status = DL_ERR_NOMEM;
            png_error(png, "out of memory");
        }
        for (y = 0; y < h; y++) {
            png_read_row(png, scratch, NULL);
            dl_convert_rows(scratch, 0, native, dst + y * row_stride, 0, channels, 1, w);
        }
        goto done;
    }
    rows = malloc(sizeof(png_bytep) * h);
    if (channels != native)  /* Adam7: counted in the limit (dl_decode_work) */
        scratch = malloc((size_t)w * h * (size_t)native);
    if (rows == NULL || (channels != native && scratch == NULL)) {
        status = DL_ERR_NOMEM;
        png_error(png, "out of memory");
    }
    for (y = 0; y < h; y++)
        rows[y] = scratch != NULL ? scratch + (size_t)y * w * native : dst + y * row_stride;
    png_read_image(png, rows);
    if (scratch != NULL)
        dl_convert_rows(scratch, (ptrdiff_t)w * native, native, dst, row_stride, channels, h, w);
done:
    free(rows);
    free(scratch);
    png_destroy_read_struct(&png, &png_info, NULL);
    return status;
}

static uint32_t dl_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* The header is parsed here without libpng so that a file holding only its
 * header (or claiming any size) is described without reading further: IHDR
 * gives the size and color type, and a palette image has an alpha channel
 * when a tRNS chunk comes before the first IDAT. */
int dl_png_info(const uint8_t *data, size_t size, dl_info_t *info, char *msg)
{
    uint32_t width, height;
    int bit_depth, color_type, channels;
    size_t pos;
    if (size < 33 || dl_be32(data + 8) != 13 || memcmp(data + 12, "IHDR", 4) != 0) {
        snprintf(msg, DL_MSG_LEN, "PNG: missing or truncated IHDR chunk");
        return DL_ERR_CORRUPT;
    }
    width = dl_be32(data + 16);
    height = dl_be32(data + 20);
    bit_depth = data[24];
    color_type = data[25];
    switch (color_type) {
    case 0: channels = 1; break;
    case 2: channels = 3; break;
    case 3: channels = 3; break;
    case 4: channels = 2; break;
    case 6: channels = 4; break;
    default: channels = 0; break;
    }
    if (width == 0 || height == 0 || width > 0x7fffffffu || height > 0x7fffffffu
        || channels == 0 || bit_depth == 0 || bit_depth > 16 || (bit_depth & (bit_depth - 1))) {
        snprintf(msg, DL_MSG_LEN, "PNG: invalid IHDR (%ux%u, bit depth %d, color type %d)",
                 (unsigned)width, (unsigned)height, bit_depth, color_type);
        return DL_ERR_CORRUPT;
    }
    if (color_type == 3) {
        for (pos = 33; pos + 8 <= size;) {
            uint32_t length = dl_be32(data + pos);
            if (memcmp(data + pos + 4, "tRNS", 4) == 0) {
                channels = 4;
                break;
            }
            if (memcmp(data + pos + 4, "IDAT", 4) == 0 || memcmp(data + pos + 4, "IEND", 4) == 0
                || length > size - pos - 8)
                break;
            pos += 12 + (size_t)length;
        }
    }
    info->format = DL_FMT_PNG;
    info->width = (int)width;
    info->height = (int)height;
    info->channels = channels;
    /* Adam7 rows are assembled over seven passes: converted from a whole image. */
    info->whole_image_to_convert = data[28] == 1;
    return DL_OK;
}

int dl_png_decode(const uint8_t *data, size_t size, int height, int width, int channels,
                  uint8_t *dst, ptrdiff_t row_stride, char *msg)
{
    dl_info_t info;
    return dl_png_run(data, size, &info, height, width, channels, dst, row_stride, msg);
}
