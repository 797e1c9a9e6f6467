/* Opening media through our own I/O, stream facts, FFmpeg's log, and the
 * frame index of a video stream (dl_media.h).  Decoding is in dl_video.c
 * and dl_audio.c. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libswscale/swscale.h>

#include "dl_media.h"
#include "dl_internal.h"

#define DL_IO_BUFFER 65536
/* The containers read (FFmpeg's demuxer names): files of media, never
 * playlists or lists of other files (HLS, DASH, concat), image sequences
 * or devices, whatever the bytes say they are. */
#define DL_MEDIA_CONTAINERS "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,mpeg,mpegvideo," \
    "ogg,wav,w64,aiff,caf,mp3,flac,aac,ivf,h264,hevc,obu,flv,asf,m4v"

static void index_lock_at_fork(void);

/* ---- FFmpeg's log: never printed; the last error kept per thread ---------- */

static __thread char last_error[DL_MSG_LEN];

static void keep_log_line(void *context, int level, const char *format, va_list args)
{
    (void)context;
    if (level <= AV_LOG_ERROR)
        vsnprintf(last_error, sizeof last_error, format, args);
}

/* Called once when the extension loads: FFmpeg's default callback prints to
 * stderr, which a library must not do. */
void dl_media_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    av_log_set_level(AV_LOG_ERROR);
    av_log_set_callback(keep_log_line);
    pthread_once(&once, index_lock_at_fork);
}

int dl_media_fail(char *msg, int status, int av_error, const char *format, ...)
{
    char reason[AV_ERROR_MAX_STRING_SIZE] = "";
    char what[DL_MSG_LEN];
    va_list args;
    va_start(args, format);
    vsnprintf(what, sizeof what, format, args);
    va_end(args);
    if (av_error < 0)
        av_strerror(av_error, reason, sizeof reason);
    /* The parts are cut to fit DL_MSG_LEN together. */
    int detail = (int)strcspn(last_error, "\n");
    detail = detail < 48 ? detail : 48;
    if (detail)
        snprintf(msg, DL_MSG_LEN, "%.150s: %.48s (%.*s)", what, reason[0] ? reason : "error",
                 detail, last_error);
    else
        snprintf(msg, DL_MSG_LEN, "%.150s%s%.48s", what, reason[0] ? ": " : "", reason);
    last_error[0] = 0;
    return status;
}

const char *dl_video_filter_name(int filter)
{
#define DL_VIDEO_FILTER_NAME(name, text, flag) text,
    static const char *const names[] = {DL_VIDEO_FILTERS(DL_VIDEO_FILTER_NAME)};
#undef DL_VIDEO_FILTER_NAME
    return filter >= 0 && filter < DL_VIDEO_FILTER_COUNT ? names[filter] : "";
}

int dl_video_filter_flag(int filter)
{
#define DL_VIDEO_FILTER_FLAG(name, text, flag) flag,
    static const int flags[] = {DL_VIDEO_FILTERS(DL_VIDEO_FILTER_FLAG)};
#undef DL_VIDEO_FILTER_FLAG
    return flags[filter];
}

/* ---- I/O over memory or a file descriptor --------------------------------- */

static int read_source(void *opaque, uint8_t *buffer, int size)
{
    dl_media_t *m = opaque;
    if (m->position >= m->size)
        return AVERROR_EOF;
    size_t wanted = (size_t)size < m->size - m->position ? (size_t)size : m->size - m->position;
    if (m->data) {
        memcpy(buffer, m->data + m->position, wanted);
        m->position += wanted;
        return (int)wanted;
    }
    ssize_t got;
    do {
        got = pread(m->fd, buffer, wanted, (off_t)m->position);
    } while (got < 0 && errno == EINTR);
    if (got < 0)
        return AVERROR(errno);
    if (got == 0)
        return AVERROR_EOF;
    m->position += (size_t)got;
    return (int)got;
}

static int64_t seek_source(void *opaque, int64_t offset, int whence)
{
    dl_media_t *m = opaque;
    int64_t base;
    switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE: return (int64_t)m->size;
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = (int64_t)m->position; break;
    case SEEK_END: base = (int64_t)m->size; break;
    default: return AVERROR(EINVAL);
    }
    if (offset < -base || base + offset < 0)
        return AVERROR(EINVAL);
    m->position = (size_t)(base + offset);
    return base + offset;
}

/* A demuxer asking for another file (a playlist, a reference movie) is
 * refused: untrusted media must not make us read anything but itself. */
static int refuse_other_files(struct AVFormatContext *s, AVIOContext **pb, const char *url,
                              int flags, AVDictionary **options)
{
    (void)s; (void)pb; (void)url; (void)flags; (void)options;
    return AVERROR(EPERM);
}

/* Whether a stream's size or sample rate is missing from the headers (an
 * MPEG-TS has none): FFmpeg then reads the start of the streams for them. */
static int headers_incomplete(const AVFormatContext *format)
{
    for (unsigned i = 0; i < format->nb_streams; i++) {
        const AVCodecParameters *par = format->streams[i]->codecpar;
        if ((par->codec_type == AVMEDIA_TYPE_VIDEO && (!par->width || !par->height)) ||
            (par->codec_type == AVMEDIA_TYPE_AUDIO && !par->sample_rate))
            return 1;
    }
    return 0;
}

static int open_input(dl_media_t *m, int probe_streams, char *msg)
{
    uint8_t *buffer = av_malloc(DL_IO_BUFFER);
    if (!buffer)
        return dl_fail(msg, DL_ERR_NOMEM, "out of memory opening the media");
    m->io = avio_alloc_context(buffer, DL_IO_BUFFER, 0, m, read_source, NULL, seek_source);
    m->format = avformat_alloc_context();
    if (!m->io || !m->format) {
        if (!m->io)
            av_free(buffer);
        return dl_fail(msg, DL_ERR_NOMEM, "out of memory opening the media");
    }
    m->format->pb = m->io;
    m->format->io_open = refuse_other_files;
    AVDictionary *options = NULL;
    int err = av_dict_set(&options, "format_whitelist", DL_MEDIA_CONTAINERS, 0);
    if (err >= 0)
        err = avformat_open_input(&m->format, NULL, NULL, &options);
    av_dict_free(&options);
    if (err < 0)   /* avformat_open_input freed the context */
        return dl_media_fail(msg, DL_ERR_CORRUPT, err, "not a media file FFmpeg reads");
    if ((probe_streams || headers_incomplete(m->format)) &&
        (err = avformat_find_stream_info(m->format, NULL)) < 0)
        return dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot read the streams");
    return DL_OK;
}

static dl_media_t *new_media(void)
{
    dl_media_t *m = calloc(1, sizeof *m);
    if (m)
        m->fd = -1;
    return m;
}

int dl_media_open_memory(const uint8_t *data, size_t size, int probe_streams,
                         dl_media_t **media, char *msg)
{
    dl_media_t *m = *media = new_media();
    if (!m)
        return dl_fail(msg, DL_ERR_NOMEM, "out of memory opening the media");
    m->data = data;
    m->size = size;
    return open_input(m, probe_streams, msg);
}

int dl_media_open_file(const char *path, int probe_streams, dl_media_t **media, int *os_error,
                       char *msg)
{
    dl_media_t *m = *media = new_media();
    struct stat facts;
    if (!m)
        return dl_fail(msg, DL_ERR_NOMEM, "out of memory opening the media");
    /* O_NONBLOCK: a FIFO must not block the open (it is refused below). */
    m->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (m->fd < 0 || fstat(m->fd, &facts) != 0) {
        *os_error = errno;
        return dl_fail(msg, DL_ERR_OS, "%s", strerror(errno));
    }
    if (!S_ISREG(facts.st_mode)) {
        *os_error = S_ISDIR(facts.st_mode) ? EISDIR : EINVAL;
        return dl_fail(msg, DL_ERR_OS, "%s", S_ISDIR(facts.st_mode) ? "is a directory"
                                                                    : "not a regular file");
    }
    m->size = (size_t)facts.st_size;
    m->identified = 1;
    m->device = (uint64_t)facts.st_dev;
    m->inode = (uint64_t)facts.st_ino;
    m->modified_ns = (uint64_t)facts.st_mtim.tv_sec * 1000000000u + (uint64_t)facts.st_mtim.tv_nsec;
    return open_input(m, probe_streams, msg);
}

void dl_media_close(dl_media_t *m)
{
    if (!m)
        return;
    avformat_close_input(&m->format);
    if (m->io) {
        av_freep(&m->io->buffer);
        avio_context_free(&m->io);
    }
    if (m->fd >= 0)
        close(m->fd);
    free(m->pts);
    free(m->keys);
    free(m);
}

/* ---- streams ------------------------------------------------------------------ */

int dl_media_stream_count(const dl_media_t *m)
{
    return (int)m->format->nb_streams;
}

static double seconds(int64_t value, AVRational time_base)
{
    return value == AV_NOPTS_VALUE ? -1.0 : (double)value * av_q2d(time_base);
}

void dl_media_stream_info(const dl_media_t *m, int stream, dl_stream_info_t *info)
{
    const AVStream *st = m->format->streams[stream];
    const AVCodecParameters *par = st->codecpar;
    const AVCodecDescriptor *codec = avcodec_descriptor_get(par->codec_id);
    memset(info, 0, sizeof *info);
    info->kind = par->codec_type == AVMEDIA_TYPE_VIDEO   ? DL_STREAM_VIDEO
                 : par->codec_type == AVMEDIA_TYPE_AUDIO ? DL_STREAM_AUDIO
                                                         : DL_STREAM_OTHER;
    snprintf(info->codec, sizeof info->codec, "%s", codec ? codec->name : "");
    info->duration = seconds(st->duration, st->time_base);
    if (info->duration < 0 && m->format->duration != AV_NOPTS_VALUE)
        info->duration = (double)m->format->duration / AV_TIME_BASE;
    info->frame_rate = st->avg_frame_rate.den ? av_q2d(st->avg_frame_rate) : 0.0;
    info->time_base_num = st->time_base.num;
    info->time_base_den = st->time_base.den;
    info->width = par->width;
    info->height = par->height;
    info->sample_rate = par->sample_rate;
    info->channels = par->ch_layout.nb_channels;
}

int dl_media_best_stream(const dl_media_t *m, int kind)
{
    enum AVMediaType type = kind == DL_STREAM_VIDEO ? AVMEDIA_TYPE_VIDEO : AVMEDIA_TYPE_AUDIO;
    int found = av_find_best_stream(m->format, type, -1, -1, NULL, 0);
    return found < 0 ? -1 : found;
}

int dl_open_decoder(const dl_media_t *m, int stream, int threads,
                    struct AVCodecContext **decoder, char *msg)
{
    const AVStream *st = m->format->streams[stream];
    const AVCodec *codec = avcodec_find_decoder(st->codecpar->codec_id);
    if (!codec)
        return dl_fail(msg, DL_ERR_CORRUPT, "FFmpeg has no decoder for the codec %s",
                       avcodec_get_name(st->codecpar->codec_id));
    AVCodecContext *d = *decoder = avcodec_alloc_context3(codec);
    if (!d)
        return dl_fail(msg, DL_ERR_NOMEM, "out of memory opening the decoder");
    int err = avcodec_parameters_to_context(d, st->codecpar);
    if (err >= 0) {
        d->thread_count = threads;
        d->max_pixels = DL_VIDEO_MAX_PIXELS;
        d->pkt_timebase = st->time_base;
        err = avcodec_open2(d, codec, NULL);
    }
    if (err < 0)
        return dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot open the %s decoder", codec->name);
    return DL_OK;
}

/* ---- one video decoder kept per thread ------------------------------------------ *
 * A decoder allocates its tables when opened and its frames' memory as it
 * decodes: for 720p frames, megabytes mapped and faulted in afresh for every
 * clip, a third of the time of a short one. Each thread keeps the last video
 * decoder it closed cleanly; the next clip of a stream with the same codec
 * parameters (extradata included), time base and thread count takes it back,
 * flushed (dl_video_decode seeks, which flushes, before its first frame). */

typedef struct {
    AVCodecContext *decoder;
    AVCodecParameters *parameters;   /* of the stream it was opened for */
    AVRational time_base;
    int threads;
} kept_decoder_t;

static pthread_key_t decoder_key;
static pthread_once_t decoder_once = PTHREAD_ONCE_INIT;

static void kept_decoder_free(void *raw)
{
    kept_decoder_t *kept = raw;
    avcodec_free_context(&kept->decoder);
    avcodec_parameters_free(&kept->parameters);
    free(kept);
}

static void decoder_key_create(void) { pthread_key_create(&decoder_key, kept_decoder_free); }

static kept_decoder_t *kept_decoder(void)
{
    pthread_once(&decoder_once, decoder_key_create);
    kept_decoder_t *kept = pthread_getspecific(decoder_key);
    if (kept == NULL && (kept = calloc(1, sizeof *kept)) != NULL) {
        kept->parameters = avcodec_parameters_alloc();
        if (!kept->parameters || pthread_setspecific(decoder_key, kept) != 0) {
            avcodec_parameters_free(&kept->parameters);
            free(kept);
            kept = NULL;
        }
    }
    return kept;
}

static int same_stream(const kept_decoder_t *kept, const AVStream *st, int threads)
{
    const AVCodecParameters *a = kept->parameters, *b = st->codecpar;
    return kept->threads == threads && !av_cmp_q(kept->time_base, st->time_base) &&
           a->codec_type == b->codec_type && a->codec_id == b->codec_id &&
           a->codec_tag == b->codec_tag && a->format == b->format && a->width == b->width &&
           a->height == b->height && a->profile == b->profile && a->level == b->level &&
           a->extradata_size == b->extradata_size &&
           (!a->extradata_size || !memcmp(a->extradata, b->extradata, (size_t)a->extradata_size));
}

int dl_take_video_decoder(const dl_media_t *m, int stream, int threads,
                          struct AVCodecContext **decoder, char *msg)
{
    const AVStream *st = m->format->streams[stream];
    kept_decoder_t *kept = kept_decoder();
    if (kept && kept->decoder && same_stream(kept, st, threads)) {
        *decoder = kept->decoder;
        kept->decoder = NULL;
        avcodec_flush_buffers(*decoder);
        (*decoder)->skip_frame = AVDISCARD_DEFAULT;
        return DL_OK;
    }
    return dl_open_decoder(m, stream, threads, decoder, msg);
}

void dl_give_video_decoder(const dl_media_t *m, int stream, int threads,
                           struct AVCodecContext **decoder, int clean)
{
    const AVStream *st = m->format->streams[stream];
    kept_decoder_t *kept = clean && *decoder ? kept_decoder() : NULL;
    if (!kept || avcodec_parameters_copy(kept->parameters, st->codecpar) < 0) {
        avcodec_free_context(decoder);
        return;
    }
    avcodec_free_context(&kept->decoder);
    kept->decoder = *decoder;
    kept->time_base = st->time_base;
    kept->threads = threads;
    *decoder = NULL;
}

/* ---- the frame index ---------------------------------------------------------- */

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int compare_keys(const void *a, const void *b)
{
    return compare_int64(&((const dl_keyframe_t *)a)->pts, &((const dl_keyframe_t *)b)->pts);
}

static int grow(void **array, int64_t *capacity, int64_t count, size_t item)
{
    if (count < *capacity)
        return 1;
    int64_t more = *capacity ? *capacity * 2 : 1024;
    void *bigger = realloc(*array, (size_t)more * item);
    if (!bigger)
        return 0;
    *array = bigger;
    *capacity = more;
    return 1;
}

/* A packet's presentation time: its pts, else its dts (raw streams). */
static int64_t packet_time(const AVPacket *packet)
{
    return packet->pts != AV_NOPTS_VALUE ? packet->pts : packet->dts;
}

static int index_packet(dl_media_t *m, const AVPacket *packet, int64_t *pts_capacity,
                        int64_t *key_capacity)
{
    int64_t time = packet_time(packet);
    /* Packets an edit list cuts out are decoded for their references only. */
    if (time == AV_NOPTS_VALUE || (packet->flags & AV_PKT_FLAG_DISCARD))
        return 1;
    if (!grow((void **)&m->pts, pts_capacity, m->frames, sizeof *m->pts))
        return 0;
    m->pts[m->frames++] = time;
    if (packet->flags & AV_PKT_FLAG_KEY) {
        if (!grow((void **)&m->keys, key_capacity, m->key_count, sizeof *m->keys))
            return 0;
        m->keys[m->key_count++] = (dl_keyframe_t){
            time, packet->dts != AV_NOPTS_VALUE ? packet->dts : time};
    }
    return 1;
}

/* ---- the frame indexes scanned, kept for the next opening --------------- *
 * Scanning reads every packet of the file: for a long video that is far more
 * than decoding a clip of it. The process keeps the last DL_INDEX_CACHE
 * indexes made, of files only, keyed by the file's identity (a file
 * rewritten in place keeps its inode but not its size and modification
 * time), and an opening of the same file copies its index from there: on
 * any thread, so a file is scanned once however many workers read it, and
 * a loader's new threads find what an earlier loader's scanned. One mutex
 * guards the table, held only to look an entry up and copy it in or out; a
 * fork() in the middle of that waits for it (dl_media_init's handlers), so
 * a child never inherits it held. */

#define DL_INDEX_CACHE 256

typedef struct {
    uint64_t device, inode, size, modified_ns;
    int stream;
    int64_t frames, key_count;
    int64_t *pts;
    dl_keyframe_t *keys;
} cached_index_t;

static struct {
    cached_index_t entries[DL_INDEX_CACHE];
    int next;   /* the entry replaced next: the oldest */
    int64_t scans;   /* scans made, not found here */
} index_cache;
static pthread_mutex_t index_lock = PTHREAD_MUTEX_INITIALIZER;

static void index_lock_take(void) { pthread_mutex_lock(&index_lock); }
static void index_lock_give(void) { pthread_mutex_unlock(&index_lock); }

static void index_lock_at_fork(void)
{
    pthread_atfork(index_lock_take, index_lock_give, index_lock_give);
}

/* The entry of m's file and stream, or NULL (index_lock held). */
static cached_index_t *cached_index(const dl_media_t *m, int stream)
{
    for (int k = 0; k < DL_INDEX_CACHE; k++) {
        cached_index_t *e = &index_cache.entries[k];
        if (e->pts && e->stream == stream && e->device == m->device && e->inode == m->inode &&
            e->size == (uint64_t)m->size && e->modified_ns == m->modified_ns)
            return e;
    }
    return NULL;
}

/* Copies `count` items of `size` bytes (a NULL copy of nothing is fine). */
static void *copy_of(const void *items, int64_t count, size_t size)
{
    void *copy = malloc((size_t)(count > 0 ? count : 1) * size);
    if (copy && count > 0)
        memcpy(copy, items, (size_t)count * size);
    return copy;
}

/* m's index from the cache: 1 when found and copied. */
static int index_from_cache(dl_media_t *m, int stream)
{
    if (!m->identified)
        return 0;
    int64_t *pts = NULL;
    dl_keyframe_t *keys = NULL;
    int64_t frames = 0, key_count = 0;
    pthread_mutex_lock(&index_lock);
    const cached_index_t *e = cached_index(m, stream);
    if (e) {
        frames = e->frames;
        key_count = e->key_count;
        pts = copy_of(e->pts, frames, sizeof *pts);
        keys = copy_of(e->keys, key_count, sizeof *keys);
    }
    pthread_mutex_unlock(&index_lock);
    if (!pts || !keys) {
        free(pts);
        free(keys);
        return 0;
    }
    free(m->pts);
    free(m->keys);
    m->pts = pts;
    m->keys = keys;
    m->frames = frames;
    m->key_count = key_count;
    m->stream = stream;
    return 1;
}

/* Keeps a copy of m's fresh index, in place of the oldest (nothing when out of
 * memory, or when another thread kept the same file's meanwhile). */
static void index_to_cache(const dl_media_t *m)
{
    if (!m->identified)
        return;
    int64_t *pts = copy_of(m->pts, m->frames, sizeof *pts);
    dl_keyframe_t *keys = copy_of(m->keys, m->key_count, sizeof *keys);
    cached_index_t old = {0};
    pthread_mutex_lock(&index_lock);
    if (pts && keys && !cached_index(m, m->stream)) {
        cached_index_t *e = &index_cache.entries[index_cache.next];
        index_cache.next = (index_cache.next + 1) % DL_INDEX_CACHE;
        old = *e;
        *e = (cached_index_t){m->device, m->inode, (uint64_t)m->size, m->modified_ns,
                              m->stream, m->frames, m->key_count, pts, keys};
        pts = NULL;
        keys = NULL;
    }
    pthread_mutex_unlock(&index_lock);
    free(old.pts);
    free(old.keys);
    free(pts);
    free(keys);
}

int64_t dl_video_index_scans(void)
{
    pthread_mutex_lock(&index_lock);
    int64_t scans = index_cache.scans;
    pthread_mutex_unlock(&index_lock);
    return scans;
}

int dl_video_scan(dl_media_t *m, int stream, char *msg)
{
    int64_t pts_capacity = 0, key_capacity = 0;
    if (index_from_cache(m, stream))
        return DL_OK;
    AVPacket *packet = av_packet_alloc();
    int err = 0;
    if (!packet)
        return dl_fail(msg, DL_ERR_NOMEM, "out of memory indexing the frames");
    m->frames = m->key_count = 0;
    m->stream = stream;
    pthread_mutex_lock(&index_lock);
    index_cache.scans++;
    pthread_mutex_unlock(&index_lock);
    /* Another stream's scan left the demuxer at the end. */
    if (m->scanned && (err = av_seek_frame(m->format, -1, INT64_MIN, AVSEEK_FLAG_BACKWARD)) < 0) {
        av_packet_free(&packet);
        return dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot go back to the start");
    }
    m->scanned = 1;
    while ((err = av_read_frame(m->format, packet)) >= 0) {
        int kept = packet->stream_index != stream || index_packet(m, packet, &pts_capacity,
                                                                  &key_capacity);
        av_packet_unref(packet);
        if (!kept) {
            av_packet_free(&packet);
            return dl_fail(msg, DL_ERR_NOMEM, "out of memory indexing the frames");
        }
    }
    av_packet_free(&packet);
    if (err != AVERROR_EOF)
        return dl_media_fail(msg, DL_ERR_CORRUPT, err, "cannot read the packets after frame %lld",
                             (long long)m->frames);
    if (m->frames && !m->key_count)
        return dl_fail(msg, DL_ERR_CORRUPT, "the video stream has no keyframe to decode from");
    /* Packets come in decoding order; frames are shown in timestamp order. */
    qsort(m->pts, (size_t)m->frames, sizeof *m->pts, compare_int64);
    qsort(m->keys, (size_t)m->key_count, sizeof *m->keys, compare_keys);
    index_to_cache(m);
    return DL_OK;
}

const int64_t *dl_video_frame_pts(const dl_media_t *m, int64_t *count)
{
    *count = m->frames;
    return m->pts;
}
