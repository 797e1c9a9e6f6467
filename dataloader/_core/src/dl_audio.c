/* Decoding an audio stream resampled to a rate and a channel count, keeping
 * a window of it (dl_media.h).
 *
 * A window's samples are exactly those at the same positions of the whole
 * stream's output: output sample k is at t0 + k / rate seconds, t0 being
 * the first decoded frame's timestamp, and decoding stops at the end of the
 * window.  A window that starts early is cut from a decode from the start.
 * A later one is reached by a seek to PREROLL_SECONDS before it: the
 * decoder's first frames after a seek lack the overlap of the frames before
 * them, and a resampler starts on silence, so both are let settle before
 * the window.  The resampler is started on an input sample where the whole
 * stream's resampler is in the same phase (a multiple of in_rate / gcd of
 * the rates from t0), so from there on it computes the same samples. */
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

/* How long before a window its decode starts when it seeks (the decoder's
 * and the resampler's settling), and how far into the stream a window
 * starts before a seek is worth it. */
#define PREROLL_SECONDS 1.0
#define SEEK_AFTER_SECONDS (4 * PREROLL_SECONDS)

typedef struct {
    const dl_audio_output_t *output;
    AVRational time_base;
    SwrContext *resampler;
    int in_rate, in_format;
    AVChannelLayout in_layout;
    int64_t first, last;    /* the window, in output samples from t0 */
    int64_t produced;       /* output samples so far, in and before the window */
    int t0_known;           /* after a seek: t0 was read before it */
    double t0;
    int seeked;             /* to the window's preroll */
    int missed;             /* the seek landed after the window's preroll: start over */
    int64_t skip_in;        /* input samples still to pass over (resampler phase) */
    float *samples;         /* the window's samples kept so far, interleaved */
    int64_t kept, capacity;
} collector_t;

static int64_t sample_at(double seconds, double t0, int rate)
{
    return (int64_t)llround((seconds - t0) * rate);
}

static double frame_seconds(const collector_t *c, const AVFrame *frame)
{
    return frame->pts == AV_NOPTS_VALUE ? 0.0 : (double)frame->pts * av_q2d(c->time_base);
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* A resampler starting at `frame`, after a seek: the input samples to pass
 * over so that it starts in the whole stream's phase, and the index of its
 * first output sample in the whole stream's output. */
static void align_phase(collector_t *c, const AVFrame *frame)
{
    int64_t in_rate = frame->sample_rate, out_rate = c->output->sample_rate;
    int64_t period = in_rate / gcd64(in_rate, out_rate);  /* input samples a phase repeats */
    int64_t position = sample_at(frame_seconds(c, frame), c->t0, (int)in_rate);
    c->skip_in = ((-position) % period + period) % period;
    c->produced = (position + c->skip_in) / period * (out_rate * period / in_rate);
}

static int start_resampler(collector_t *c, const AVFrame *frame, char *msg)
{
    const dl_audio_output_t *out = c->output;
    if (frame->sample_rate <= 0 || frame->sample_rate > DL_AUDIO_MAX_RATE ||
        frame->ch_layout.nb_channels <= 0 || frame->ch_layout.nb_channels > DL_AUDIO_MAX_CHANNELS)
        return dl_fail(msg, DL_ERR_CORRUPT, "the audio claims %d Hz and %d channels",
                       frame->sample_rate, frame->ch_layout.nb_channels);
    AVChannelLayout out_layout;
    double t0 = c->t0_known ? c->t0 : frame_seconds(c, frame);
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
    if (c->t0_known)
        align_phase(c, frame);
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
    const uint8_t **input = frame ? (const uint8_t **)frame->extended_data : NULL;
    const uint8_t *skipped[DL_AUDIO_MAX_CHANNELS];
    if (frame && c->skip_in) {  /* the input before the phase the resampler starts at */
        if (c->skip_in >= in_samples) {
            c->skip_in -= in_samples;
            return DL_OK;
        }
        int planar = av_sample_fmt_is_planar(frame->format);
        int planes = planar ? frame->ch_layout.nb_channels : 1;
        int step = av_get_bytes_per_sample(frame->format) *
                   (planar ? 1 : frame->ch_layout.nb_channels);
        if (planes > DL_AUDIO_MAX_CHANNELS)
            return dl_fail(msg, DL_ERR_CORRUPT, "the audio has %d channels, more than %d",
                           planes, DL_AUDIO_MAX_CHANNELS);
        for (int plane = 0; plane < planes; plane++)
            skipped[plane] = frame->extended_data[plane] + c->skip_in * step;
        input = skipped;
        in_samples -= (int)c->skip_in;
        c->skip_in = 0;
    }
    int room = swr_get_out_samples(c->resampler, in_samples);
    if (room < 0 || !reserve(c, room))
        return dl_fail(msg, DL_ERR_NOMEM, "out of memory resampling the audio");
    uint8_t *tail = (uint8_t *)(c->samples + c->kept * channels);
    int made = swr_convert(c->resampler, &tail, room, frame ? input : NULL, in_samples);
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
    if (!c->resampler && c->seeked &&
        (frame->pts == AV_NOPTS_VALUE || frame_seconds(c, frame) < c->t0 ||
         frame_seconds(c, frame) > c->output->start - PREROLL_SECONDS / 2)) {
        /* No time to place the samples by, one before the stream's, or too late to settle. */
        c->missed = 1;
        return dl_fail(msg, DL_ERR_CORRUPT, "the seek to %.3f s missed", c->output->start);
    }
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

/* Decodes from the demuxer's position until the stream's first frame: t0. */
static int read_t0(collector_t *c, dl_media_t *m, int stream, AVCodecContext *decoder,
                   char *msg)
{
    AVPacket *packet = av_packet_alloc();
    AVFrame *frame = av_frame_alloc();
    int status = packet && frame ? DL_OK : dl_fail(msg, DL_ERR_NOMEM, "out of memory decoding");
    int err = 0;
    while (status == DL_OK && !c->t0_known && (err = av_read_frame(m->format, packet)) >= 0) {
        if (packet->stream_index == stream && avcodec_send_packet(decoder, packet) >= 0 &&
            avcodec_receive_frame(decoder, frame) >= 0) {
            c->t0 = frame_seconds(c, frame);
            c->t0_known = 1;
        }
        av_frame_unref(frame);
        av_packet_unref(packet);
    }
    av_frame_free(&frame);
    av_packet_free(&packet);
    return status;
}

/* Moves the demuxer to the packet at or before `timestamp` of `stream` (to
 * the start, for INT64_MIN) and empties the decoder. */
static int seek(dl_media_t *m, int stream, int64_t timestamp, AVCodecContext *decoder,
                char *msg)
{
    int err = av_seek_frame(m->format, timestamp == INT64_MIN ? -1 : stream, timestamp,
                            AVSEEK_FLAG_BACKWARD);
    if (err < 0)
        return dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot seek in the audio");
    avcodec_flush_buffers(decoder);
    return DL_OK;
}

/* A window far into the stream: t0 read from the first frame, then a seek
 * to PREROLL_SECONDS before the window.  Returns with the demuxer at the
 * start when the stream is too short to seek in, or says nothing of time. */
static int seek_to_window(collector_t *c, dl_media_t *m, int stream, AVCodecContext *decoder,
                          char *msg)
{
    const AVStream *st = m->format->streams[stream];
    double start = st->start_time == AV_NOPTS_VALUE ? 0.0 : st->start_time * av_q2d(st->time_base);
    if (c->output->start - start < SEEK_AFTER_SECONDS)
        return DL_OK;
    int status = read_t0(c, m, stream, decoder, msg);
    if (status != DL_OK || !c->t0_known || c->output->start - c->t0 < SEEK_AFTER_SECONDS) {
        c->t0_known = 0;
        return status == DL_OK ? seek(m, stream, INT64_MIN, decoder, msg) : status;
    }
    double target = c->output->start - PREROLL_SECONDS;
    c->seeked = seek(m, stream, (int64_t)floor(target / av_q2d(st->time_base)), decoder,
                     msg) == DL_OK;
    /* A stream that cannot seek there is decoded from its start. */
    return c->seeked ? DL_OK : seek(m, stream, INT64_MIN, decoder, msg);
}

/* Forgets what a decode after a missed seek collected. */
static void start_over(collector_t *c)
{
    swr_free(&c->resampler);
    av_channel_layout_uninit(&c->in_layout);
    c->kept = c->produced = c->skip_in = 0;
    c->seeked = c->missed = 0;
    c->last = INT64_MAX;
}

int dl_audio_decode(dl_media_t *m, int stream, const dl_audio_output_t *output,
                    float **samples, int64_t *count, char *msg)
{
    collector_t c = {.output = output, .time_base = m->format->streams[stream]->time_base,
                     .last = INT64_MAX};
    AVCodecContext *decoder = NULL;
    int status = dl_open_decoder(m, stream, 1, &decoder, msg);
    if (status == DL_OK)
        status = seek_to_window(&c, m, stream, decoder, msg);
    if (status == DL_OK)
        status = decode_stream(&c, m, stream, decoder, msg);
    if (c.missed) {  /* decode from the start after all (t0 known: phase 0 is aligned) */
        start_over(&c);
        status = seek(m, stream, INT64_MIN, decoder, msg);
        if (status == DL_OK)
            status = decode_stream(&c, m, stream, decoder, msg);
    }
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
