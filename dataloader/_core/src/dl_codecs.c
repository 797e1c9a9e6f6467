/* Format sniffing and dispatch to the codec of each format. */
#include <stdio.h>
#include <string.h>

#include "dl_internal.h"

int dl_sniff(const uint8_t *d, size_t n)
{
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF)
        return DL_FMT_JPEG;
    if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        return DL_FMT_PNG;
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return DL_FMT_WEBP;
    if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return DL_FMT_GIF;
    if (n >= 2 && d[0] == 'B' && d[1] == 'M')
        return DL_FMT_BMP;
    if (n >= 4 && (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0))
        return DL_FMT_TIFF;
    return DL_FMT_UNKNOWN;
}

double dl_decode_work(const dl_info_t *info, int channels)
{
    double work = info->coefficient_bytes;
    if (info->whole_image_to_convert && channels != info->channels)
        work += (double)info->height * info->width * info->channels;
    return work;
}

int dl_check_limits(int height, int width, int channels, int max_width, int max_height,
                    double max_bytes, double work_bytes, char *msg)
{
    double bytes = (double)height * width * channels + work_bytes;
    if (width > max_width || height > max_height) {
        snprintf(msg, DL_MSG_LEN,
                 "image of %dx%d pixels (width x height) exceeds the limit of %dx%d", width,
                 height, max_width, max_height);
        return DL_ERR_ARGUMENT;
    }
    if (bytes > max_bytes && work_bytes > 0) {
        snprintf(msg, DL_MSG_LEN, "image of %dx%dx%d needs %.0f bytes (%.0f of them the "
                 "decoder's working memory), over the limit of %.0f",
                 width, height, channels, bytes, work_bytes, max_bytes);
        return DL_ERR_ARGUMENT;
    }
    if (bytes > max_bytes) {
        snprintf(msg, DL_MSG_LEN, "image of %dx%dx%d needs %.0f bytes, over the limit of %.0f",
                 width, height, channels, bytes, max_bytes);
        return DL_ERR_ARGUMENT;
    }
    return DL_OK;
}

int dl_image_info(const uint8_t *data, size_t size, dl_info_t *info, char *msg)
{
    memset(info, 0, sizeof(*info));
    info->format = dl_sniff(data, size);
    switch (info->format) {
    case DL_FMT_JPEG: return dl_jpeg_info(data, size, info, msg);
    case DL_FMT_PNG: return dl_png_info(data, size, info, msg);
    case DL_FMT_WEBP: return dl_webp_info(data, size, info, msg);
    default:
        snprintf(msg, DL_MSG_LEN, "no native decoder for this format");
        return DL_ERR_CORRUPT;
    }
}

int dl_decode(const uint8_t *data, size_t size, int scale, int height, int width,
              int channels, uint8_t *dst, ptrdiff_t row_stride, char *msg)
{
    switch (dl_sniff(data, size)) {
    case DL_FMT_JPEG:
        return dl_jpeg_decode(data, size, scale, height, width, channels, dst, row_stride,
                              msg);
    case DL_FMT_PNG:
        return dl_png_decode(data, size, height, width, channels, dst, row_stride, msg);
    case DL_FMT_WEBP:
        return dl_webp_decode(data, size, height, width, channels, dst, row_stride, msg);
    default:
        snprintf(msg, DL_MSG_LEN, "no native decoder for this format");
        return DL_ERR_CORRUPT;
    }
}
