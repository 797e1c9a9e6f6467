/* Decoding an audio stream resampled to a rate and a channel count, keeping
 * a window of it (dl_media.h).
 *
 * The stream is decoded from its start and the window cut from the output,
 * so that a window's samples are exactly those at the same positions of the
 * whole stream's output (a resampler started elsewhere would be in another
 * phase); decoding stops at the end of the window.  Output sample k is at
 * t0 + k / rate seconds, t0 being the first decoded frame's timestamp. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>

#include "dl_internal.h"
#include "dl_media.h"

typedef struct {
    const dl_audio_output_t *output;
    AVRational time_base;
    SwrContext *resampler;
    int in_rate, in_format;
    AVChannelLayout in_layout;
    int64_t first, last;    /* the window, in output samples from t0 */
    int64_t produced;       /* output samples so far, in and before the window */
    float *samples;         /* the window's samples kept so far, interleaved */
    int64_t kept, capacity;
} collector_t;

static int64_t sample_at(double seconds, double t0, int rate)
{
    return (int64_t)llround((seconds - t0) * rate);
}

static int start_resampler(collector_t *c, const AVFrame *frame, char *msg)
{
    const dl_audio_output_t *out = c->output;
    AVChannelLayout out_layout;
    double t0 = frame->pts == AV_NOPTS_VALUE ? 0.0 : (double)frame->pts * av_q2d(c->time_base);
    av_channel_layout_default(&out_layout, out->channels);
    int err = av_channel_layout_copy(&c->in_layout, &frame->ch_layout);
    if (err >= 0 && c->in_layout.order == AV_CHANNEL_ORDER_UNSPEC)
        av_channel_layout_default(&c->in_layout, c->in_layout.nb_channels);
    if (err >= 0)
        err = swr_alloc_set_opts2(&c->resampler, &out_layout, AV_SAMPLE_FMT_FLT, out->sample_rate,
                                  &c->in_layout, frame->format, frame->sample_rate, 0, NULL);
    if (err >= 0)
        err = swr_init(c->resampler);
    av_channel_layout_uninit(&out_layout);
    if (err < 0)
        return dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot resample %d Hz %d-channel audio",
                             frame->sample_rate, frame->ch_layout.nb_channels);
    c->in_rate = frame->sample_rate;
    c->in_format = frame->format;
    c->first = out->start > t0 ? sample_at(out->start, t0, out->sample_rate) : 0;
    c->last = out->end < 0 ? INT64_MAX : sample_at(out->end, t0, out->sample_rate);
    return DL_OK;
}

static int reserve(collector_t *c, int64_t more)
{
    if (c->kept + more <= c->capacity)
        return 1;
    int64_t capacity = c->capacity * 2 > c->kept + more ? c->capacity * 2 : c->kept + more;
    float *bigger = realloc(c->samples, (size_t)capacity * c->output->channels * sizeof(float));
    if (!bigger)
        return 0;
    c->samples = bigger;
    c->capacity = capacity;
    return 1;
}

/* Resamples `frame` (NULL: what the resampler still holds) onto the kept
 * samples, then drops what falls outside the window. */
static int collect(collector_t *c, const AVFrame *frame, char *msg)
{
    int channels = c->output->channels;
    int in_samples = frame ? frame->nb_samples : 0;
    int room = swr_get_out_samples(c->resampler, in_samples);
    if (room < 0 || !reserve(c, room))
        return dl_fail(msg, DL_ERR_NOMEM, "out of memory resampling the audio");
    uint8_t *tail = (uint8_t *)(c->samples + c->kept * channels);
    int made = swr_convert(c->resampler, &tail, room,
                           frame ? (const uint8_t **)frame->extended_data : NULL, in_samples);
    if (made < 0)
        return dl_media_fail(msg, DL_ERR_CORRUPT, made, "cannot resample the audio");
    int64_t begin = c->first > c->produced ? c->first - c->produced : 0;
    int64_t end = c->last - c->produced < made ? c->last - c->produced : made;
    c->produced += made;
    if (end <= begin)
        return DL_OK;
    if (begin)
        memmove(tail, tail + begin * channels * sizeof(float),
                (size_t)(end - begin) * channels * sizeof(float));
    c->kept += end - begin;
    return DL_OK;
}

static int take_frame(collector_t *c, const AVFrame *frame, char *msg)
{
    if (!c->resampler) {
        int status = start_resampler(c, frame, msg);
        return status == DL_OK ? collect(c, frame, msg) : status;
    }
    if (frame->sample_rate != c->in_rate || frame->format != c->in_format ||
        frame->ch_layout.nb_channels != c->in_layout.nb_channels)
        return dl_fail(msg, DL_ERR_CORRUPT, "the audio's format changes at %.3f s",
                       (double)frame->pts * av_q2d(c->time_base));
    return collect(c, frame, msg);
}

/* Decodes every frame the decoder gives for one packet (NULL: the end). */
static int decode_packet(collector_t *c, AVCodecContext *decoder, const AVPacket *packet,
                         AVFrame *frame, char *msg)
{
    int err = avcodec_send_packet(decoder, packet);
    if (err < 0 && err != AVERROR_EOF)
        return dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot decode the audio at byte %lld",
                             packet ? (long long)packet->pos : -1LL);
    int status = DL_OK;
    while (status == DL_OK && c->produced < c->last &&
           (err = avcodec_receive_frame(decoder, frame)) >= 0) {
        status = take_frame(c, frame, msg);
        av_frame_unref(frame);
    }
    if (status == DL_OK && err < 0 && err != AVERROR(EAGAIN) && err != AVERROR_EOF)
        status = dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot decode the audio at byte %lld",
                               packet ? (long long)packet->pos : -1LL);
    return status;
}

static int decode_stream(collector_t *c, dl_media_t *m, int stream, AVCodecContext *decoder,
                         char *msg)
{
    AVPacket *packet = av_packet_alloc();
    AVFrame *frame = av_frame_alloc();
    int status = packet && frame ? DL_OK : dl_fail(msg, DL_ERR_NOMEM, "out of memory decoding");
    int err = 0;
    while (status == DL_OK && c->produced < c->last &&
           (err = av_read_frame(m->format, packet)) >= 0) {
        if (packet->stream_index == stream)
            status = decode_packet(c, decoder, packet, frame, msg);
        av_packet_unref(packet);
    }
    if (status == DL_OK && err < 0 && err != AVERROR_EOF)
        status = dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot read the audio after %.3f s",
                               (double)c->produced / c->output->sample_rate);
    if (status == DL_OK && c->produced < c->last)
        status = decode_packet(c, decoder, NULL, frame, msg);
    if (status == DL_OK && c->resampler && c->produced < c->last)
        status = collect(c, NULL, msg);
    av_frame_free(&frame);
    av_packet_free(&packet);
    return status;
}

int dl_audio_decode(dl_media_t *m, int stream, const dl_audio_output_t *output,
                    float **samples, int64_t *count, char *msg)
{
    collector_t c = {.output = output, .time_base = m->format->streams[stream]->time_base,
                     .last = INT64_MAX};
    AVCodecContext *decoder = NULL;
    int status = dl_open_decoder(m, stream, 1, &decoder, msg);
    if (status == DL_OK)
        status = decode_stream(&c, m, stream, decoder, msg);
    avcodec_free_context(&decoder);
    swr_free(&c.resampler);
    av_channel_layout_uninit(&c.in_layout);
    if (status != DL_OK) {
        free(c.samples);
        return status;
    }
    *samples = c.samples;
    *count = c.kept;
    return DL_OK;
}
