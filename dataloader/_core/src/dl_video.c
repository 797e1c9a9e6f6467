/* Decoding chosen frames of a scanned video stream (dl_media.h).
 *
 * Frames are asked for in presentation order.  For each, the decoder seeks
 * to the last keyframe shown at or before it unless the frames decoded so
 * far lead there without one (a keyframe between them would be skipped to),
 * then decodes forward and drops frames until the one with the frame's
 * timestamp.  Matching timestamps rather than counting frames is what keeps
 * variable frame rates, B-frames (decoded out of order) and streams that do
 * not start at 0 right.  Seeks ask for the keyframe's presentation time
 * (how MP4 and Matroska index keyframes); one that lands after the frame
 * asks again by the keyframe's decoding time (MPEG-TS), then for the
 * keyframe before.  Each frame is cropped and resized by libswscale straight from the
 * decoder's planes (into per-thread rows of the output size, see convert):
 * no full-size RGB frame is made when a smaller one is asked for. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "dl_internal.h"
#include "dl_media.h"

/* Bytes libswscale's stores may reach past a frame's last row. */
#define DL_VIDEO_SLACK 64
/* Seeks back one more keyframe at most this often for one frame. */
#define DL_SEEK_RETRIES 4

typedef struct {
    dl_media_t *m;
    const dl_video_output_t *output;
    AVCodecContext *decoder;
    AVPacket *packet;
    AVFrame *frame;
    struct SwsContext *scaler;
    int scaler_key[4];   /* the frames r->scaler was made for (prepare_scaler) */
    const int64_t *wanted;   /* the timestamps of the frames asked for, ascending */
    int64_t wanted_count;
    int draining;        /* the end of the stream was sent to the decoder */
    int after_seek;      /* packets are dropped until a keyframe */
    int64_t last;        /* the timestamp of the last frame decoded since the seek */
    int64_t position;    /* byte offset of the last packet read, for messages */
} reader_t;

static void close_reader(reader_t *r, int clean)
{
    sws_freeContext(r->scaler);
    av_frame_free(&r->frame);
    av_packet_free(&r->packet);
    dl_give_video_decoder(r->m, r->m->stream, r->output->threads, &r->decoder, clean);
}

/* The last keyframe shown at or before `pts` (the first one when none is). */
static int64_t keyframe_before(const dl_media_t *m, int64_t pts)
{
    int64_t low = 0, high = m->key_count;   /* keys[low - 1].pts <= pts < keys[high].pts */
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        if (m->keys[middle].pts <= pts)
            low = middle + 1;
        else
            high = middle;
    }
    return low > 0 ? low - 1 : 0;
}

/* Seeks to keyframe `key` by its presentation time, or by its decoding time. */
static int seek(reader_t *r, int64_t key, int by_dts, char *msg)
{
    const dl_keyframe_t *k = &r->m->keys[key];
    int err = av_seek_frame(r->m->format, r->m->stream, by_dts ? k->dts : k->pts,
                            AVSEEK_FLAG_BACKWARD);
    if (err < 0)
        return dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot seek to the keyframe at "
                             "timestamp %lld", (long long)k->pts);
    avcodec_flush_buffers(r->decoder);
    r->draining = 0;
    r->after_seek = 1;
    r->last = INT64_MIN;
    return DL_OK;
}

static int is_wanted(const reader_t *r, int64_t pts)
{
    int64_t low = 0, high = r->wanted_count;
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        if (r->wanted[middle] < pts)
            low = middle + 1;
        else
            high = middle;
    }
    return low < r->wanted_count && r->wanted[low] == pts;
}

/* A frame no other frame refers to need not be decoded unless it is asked
 * for (B-frames mostly: about half of them). The decoder reads skip_frame
 * while it decodes the packet just sent, so this holds only without its
 * own threads, which decode packets later. */
static void skip_unwanted(reader_t *r, const AVPacket *packet)
{
    if (r->output->threads == 1)
        r->decoder->skip_frame = is_wanted(r, packet->pts != AV_NOPTS_VALUE ? packet->pts
                                                                           : packet->dts)
                                     ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
}

/* Feeds the decoder one packet of the stream, or the end of the stream. */
static int feed(reader_t *r)
{
    for (;;) {
        int err = av_read_frame(r->m->format, r->packet);
        if (err == AVERROR_EOF) {
            r->draining = 1;
            return avcodec_send_packet(r->decoder, NULL);
        }
        if (err < 0)
            return err;
        int wanted = r->packet->stream_index == r->m->stream &&
                     !(r->after_seek && !(r->packet->flags & AV_PKT_FLAG_KEY));
        if (wanted) {
            r->after_seek = 0;
            r->position = r->packet->pos;
            skip_unwanted(r, r->packet);
            err = avcodec_send_packet(r->decoder, r->packet);
        }
        av_packet_unref(r->packet);
        if (wanted)
            return err;
    }
}

/* The next decoded frame into r->frame: 0, AVERROR_EOF or an error. */
static int next_frame(reader_t *r)
{
    for (;;) {
        int err = avcodec_receive_frame(r->decoder, r->frame);
        if (err != AVERROR(EAGAIN))
            return err;
        if (r->draining)
            return AVERROR_EOF;
        if ((err = feed(r)) < 0 && err != AVERROR(EAGAIN))
            return err;
    }
}

static int64_t frame_time(const AVFrame *frame)
{
    return frame->pts != AV_NOPTS_VALUE ? frame->pts : frame->best_effort_timestamp;
}

/* A new scaler for frames like r->frame: where its chroma samples sit (the
 * default, centred, would shift the colours of a left-sited stream when
 * resizing), and its own colour matrix and range. */
static struct SwsContext *new_scaler(const AVFrame *f, const dl_video_output_t *out)
{
    struct SwsContext *scaler = sws_alloc_context();
    int chroma_x = -513, chroma_y = -513;   /* libswscale's "unknown" */
    if (!scaler)
        return NULL;
#if LIBAVCODEC_VERSION_MAJOR < 61   /* FFmpeg 7 moved it to libavutil */
    avcodec_enum_to_chroma_pos(&chroma_x, &chroma_y, f->chroma_location);
#else
    av_chroma_location_enum_to_pos(&chroma_x, &chroma_y, f->chroma_location);
#endif
    int full_range = f->color_range == AVCOL_RANGE_JPEG;
    av_opt_set_int(scaler, "srcw", out->crop_width, 0);
    av_opt_set_int(scaler, "srch", out->crop_height, 0);
    av_opt_set_int(scaler, "src_format", f->format, 0);
    av_opt_set_int(scaler, "dstw", out->width, 0);
    av_opt_set_int(scaler, "dsth", out->height, 0);
    av_opt_set_int(scaler, "dst_format", AV_PIX_FMT_RGB24, 0);
    av_opt_set_int(scaler, "sws_flags", dl_video_filter_flag(out->filter), 0);
    av_opt_set_int(scaler, "src_h_chr_pos", chroma_x, 0);
    av_opt_set_int(scaler, "src_v_chr_pos", chroma_y, 0);
    if (sws_init_context(scaler, NULL, NULL) < 0) {
        sws_freeContext(scaler);
        return NULL;
    }
    sws_setColorspaceDetails(scaler, sws_getCoefficients(f->colorspace), full_range,
                             sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
    return scaler;
}

/* r->scaler, made again when the frames' format, colours or chroma siting change. */
static int prepare_scaler(reader_t *r, char *msg)
{
    const AVFrame *f = r->frame;
    int key[4] = {f->format, (int)f->colorspace, (int)f->color_range, (int)f->chroma_location};
    if (r->scaler && !memcmp(key, r->scaler_key, sizeof key))
        return DL_OK;
    sws_freeContext(r->scaler);
    r->scaler = new_scaler(f, r->output);
    if (!r->scaler)
        return dl_fail(msg, DL_ERR_CORRUPT, "cannot convert frames of pixel format %s to RGB",
                       av_get_pix_fmt_name(f->format));
    memcpy(r->scaler_key, key, sizeof key);
    return DL_OK;
}

static int convert(reader_t *r, int64_t index, uint8_t *dst, char *msg)
{
    const dl_video_output_t *out = r->output;
    AVFrame *f = r->frame;
    const AVCodecParameters *par = r->m->format->streams[r->m->stream]->codecpar;
    if (f->decode_error_flags || (f->flags & AV_FRAME_FLAG_CORRUPT))
        return dl_fail(msg, DL_ERR_CORRUPT, "frame %lld (byte %lld) is corrupt",
                       (long long)index, (long long)r->position);
    if (f->width != par->width || f->height != par->height)
        return dl_fail(msg, DL_ERR_CORRUPT, "frame %lld is %dx%d, the stream's frames %dx%d",
                       (long long)index, f->width, f->height, par->width, par->height);
    /* The crop starts on the chroma grid (even rows and columns of 4:2:0):
     * av_frame_apply_cropping offsets a subsampled plane by the offset
     * rounded down, so an odd start would pair each pixel with the chroma
     * sample of its left or upper neighbour. The window keeps its size and
     * stays inside the frame. */
    const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(f->format);
    int top = out->crop_top, left = out->crop_left;
    if (desc && !(desc->flags & AV_PIX_FMT_FLAG_RGB)) {
        top &= ~((1 << desc->log2_chroma_h) - 1);
        left &= ~((1 << desc->log2_chroma_w) - 1);
    }
    f->crop_top = (size_t)top;
    f->crop_left = (size_t)left;
    f->crop_bottom = (size_t)(f->height - top - out->crop_height);
    f->crop_right = (size_t)(f->width - left - out->crop_width);
    int err = av_frame_apply_cropping(f, AV_FRAME_CROP_UNALIGNED);
    if (err < 0)
        return dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot crop frame %lld", (long long)index);
    int status = prepare_scaler(r, msg);
    if (status != DL_OK)
        return status;
    /* libswscale's fast YUV-to-RGB path (FFmpeg 5 on x86) converts rows in
     * blocks of 8 pixels: it leaves the last pixels of a row unwritten when
     * the width is not a multiple of 8 and the stride no wider, and its
     * stores reach past the last block.  So it writes scratch rows padded to
     * the block, with room after the last one, which are then copied. */
    size_t row = (size_t)out->width * 3, padded = (size_t)((out->width + 7) & ~7) * 3;
    uint8_t *rows = dl_scratch(DL_SCRATCH_MEDIA, padded * (size_t)out->height + DL_VIDEO_SLACK);
    if (!rows)
        return dl_fail(msg, DL_ERR_NOMEM, "out of memory converting frame %lld", (long long)index);
    uint8_t *planes[4] = {rows, NULL, NULL, NULL};
    int strides[4] = {(int)padded, 0, 0, 0};
    sws_scale(r->scaler, (const uint8_t *const *)f->data, f->linesize, 0, f->height, planes,
              strides);
    for (int y = 0; y < out->height; y++)
        memcpy(dst + (size_t)y * row, rows + (size_t)y * padded, row);
    return DL_OK;
}

/* Decodes forward to the frame shown at `pts` (the scanned frame `index`)
 * and converts it into dst, seeking first when that is quicker or needed. */
static int decode_one(reader_t *r, int64_t index, int64_t pts, uint8_t *dst, char *msg)
{
    int64_t key = keyframe_before(r->m, pts);
    int retries = 0, by_dts = 0, status = DL_OK;
    if (r->last == INT64_MIN || pts <= r->last || r->m->keys[key].pts > r->last)
        status = seek(r, key, by_dts, msg);
    while (status == DL_OK) {
        int err = next_frame(r);
        if (err < 0 && err != AVERROR_EOF)
            return dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot decode frame %lld (byte %lld)",
                                 (long long)index, (long long)r->position);
        int64_t time = err == 0 ? frame_time(r->frame) : INT64_MAX;
        if (time == pts) {
            r->last = time;
            status = convert(r, index, dst, msg);
            av_frame_unref(r->frame);
            return status;
        }
        av_frame_unref(r->frame);
        if (time < pts) {
            r->last = time;
            continue;
        }
        /* Past the frame (or the end) without seeing it: start earlier, seeking
         * to the keyframe by its decoding time, then to the one before. */
        if ((by_dts && key == 0) || ++retries > DL_SEEK_RETRIES)
            return dl_fail(msg, DL_ERR_CORRUPT, "frame %lld (timestamp %lld) was not decoded: "
                           "the stream is damaged or truncated (byte %lld)", (long long)index,
                           (long long)pts, (long long)r->position);
        key -= by_dts;
        by_dts = !by_dts;
        status = seek(r, key, by_dts, msg);
    }
    return status;
}

int dl_video_decode(dl_media_t *m, const int64_t *frames, int64_t count,
                    const dl_video_output_t *output, uint8_t *dst, char *msg)
{
    reader_t r = {.m = m, .output = output, .last = INT64_MIN, .position = -1};
    size_t frame_bytes = (size_t)output->height * (size_t)output->width * 3;
    int64_t *wanted = malloc((size_t)(count > 0 ? count : 1) * sizeof *wanted);
    if (!wanted)
        return dl_fail(msg, DL_ERR_NOMEM, "out of memory decoding");
    for (int64_t k = 0; k < count; k++)
        wanted[k] = m->pts[frames[k]];
    r.wanted = wanted;
    r.wanted_count = count;
    int status = dl_take_video_decoder(m, m->stream, output->threads, &r.decoder, msg);
    r.packet = av_packet_alloc();
    r.frame = av_frame_alloc();
    if (status == DL_OK && (!r.packet || !r.frame))
        status = dl_fail(msg, DL_ERR_NOMEM, "out of memory decoding");
    for (int64_t k = 0; status == DL_OK && k < count; k++)
        status = decode_one(&r, frames[k], m->pts[frames[k]], dst + (size_t)k * frame_bytes, msg);
    close_reader(&r, status == DL_OK);
    free(wanted);
    return status;
}
