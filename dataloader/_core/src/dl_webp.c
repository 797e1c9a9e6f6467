/* WebP (lossy, lossless, alpha) through libwebp's advanced decoding API,
 * writing straight into the destination rows. */
#include <stdio.h>
#include <stdlib.h>
#include <webp/decode.h>

#include "dl_internal.h"

static const char *dl_webp_status(VP8StatusCode code)
{
    switch (code) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated data";
    default: return "unknown error";
    }
}

int dl_webp_info(const uint8_t *data, size_t size, dl_info_t *info, char *msg)
{
    WebPBitstreamFeatures features;
    VP8StatusCode code = WebPGetFeatures(data, size, &features);
    if (code != VP8_STATUS_OK) {
        snprintf(msg, DL_MSG_LEN, "WebP: %s", dl_webp_status(code));
        return DL_ERR_CORRUPT;
    }
    if (features.has_animation) {
        snprintf(msg, DL_MSG_LEN, "WebP: animated images are not supported");
        return DL_ERR_CORRUPT;
    }
    info->format = DL_FMT_WEBP;
    info->width = features.width;
    info->height = features.height;
    info->channels = features.has_alpha ? 4 : 3;
    info->whole_image_to_convert = 1;  /* into other channels: through a whole scratch image */
    return DL_OK;
}

int dl_webp_decode(const uint8_t *data, size_t size, int height, int width, int channels,
                   uint8_t *dst, ptrdiff_t row_stride, char *msg)
{
    WebPDecoderConfig config;
    VP8StatusCode code;
    dl_info_t info;
    uint8_t *scratch = NULL;
    int status = dl_webp_info(data, size, &info, msg);
    int native = info.channels;
    if (status != DL_OK)
        return status;
    if (info.height != height || info.width != width) {
        snprintf(msg, DL_MSG_LEN, "WebP: size %dx%d does not match the destination %dx%d",
                 info.height, info.width, height, width);
        return DL_ERR_MISMATCH;
    }
    if (!WebPInitDecoderConfig(&config)) {
        snprintf(msg, DL_MSG_LEN, "WebP: incompatible libwebp version");
        return DL_ERR_CORRUPT;
    }
    if (channels != native) {
        scratch = malloc((size_t)width * (size_t)height * (size_t)native);
        if (scratch == NULL) {
            snprintf(msg, DL_MSG_LEN, "WebP: out of memory");
            return DL_ERR_NOMEM;
        }
    }
    config.output.colorspace = native == 4 ? MODE_RGBA : MODE_RGB;
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = scratch != NULL ? scratch : dst;
    config.output.u.RGBA.stride = scratch != NULL ? width * native : (int)row_stride;
    config.output.u.RGBA.size = (size_t)config.output.u.RGBA.stride * (size_t)(height - 1)
                                + (size_t)width * (size_t)native;
    code = WebPDecode(data, size, &config);
    WebPFreeDecBuffer(&config.output);
    if (code != VP8_STATUS_OK) {
        snprintf(msg, DL_MSG_LEN, "WebP: %s", dl_webp_status(code));
        status = code == VP8_STATUS_OUT_OF_MEMORY ? DL_ERR_NOMEM : DL_ERR_CORRUPT;
    } else if (scratch != NULL) {
        dl_convert_rows(scratch, (ptrdiff_t)width * native, native, dst, row_stride, channels,
                        height, width);
    }
    free(scratch);
    return status;
}
