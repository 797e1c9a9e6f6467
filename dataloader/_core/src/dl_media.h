/* Video and audio decoding on FFmpeg's libraries, with no Python: a file or
 * an in-memory copy opened through the library's own I/O (so no demuxer can
 * open another file or a URL), each video stream's frames indexed by their
 * presentation timestamps, chosen frames decoded with seeks to the keyframe
 * before each and converted (cropped, resized) straight into the caller's
 * rows by libswscale, and audio resampled by libswresample.  FFmpeg's log
 * is silenced; its last error message is kept per thread for ours.  Every
 * function returns a dl_status_t (dl_codecs.h) with `msg` (DL_MSG_LEN
 * bytes) saying what failed and where.  A dl_media_t is used by one thread
 * at a time. */
#ifndef DL_MEDIA_H
#define DL_MEDIA_H

#include <stddef.h>
#include <stdint.h>

#include "dl_codecs.h"

/* The resampling filters of a resize at decode: name, libswscale flag. */
#define DL_VIDEO_FILTERS(X)          \
    X(NEAREST, "nearest", SWS_POINT) \
    X(BILINEAR, "bilinear", SWS_BILINEAR) \
    X(BICUBIC, "bicubic", SWS_BICUBIC) \
    X(AREA, "area", SWS_AREA)

#define DL_VIDEO_FILTER_ENUM(name, text, flag) DL_VIDEO_##name,
typedef enum { DL_VIDEO_FILTERS(DL_VIDEO_FILTER_ENUM) DL_VIDEO_FILTER_COUNT } dl_video_filter_t;
#undef DL_VIDEO_FILTER_ENUM

const char *dl_video_filter_name(int filter);

/* The largest frame a video decoder is let allocate (8192 x 8192 pixels): a
 * stream claiming a larger one fails to decode instead of taking gigabytes
 * per reference frame. */
#define DL_VIDEO_MAX_PIXELS (8192LL * 8192LL)

typedef struct dl_media dl_media_t;

/* Silences FFmpeg's log (which prints to stderr) and makes fork() wait for
 * the shared frame-index table's lock; called once before any other
 * function here, when the extension is imported. */
void dl_media_init(void);

enum { DL_STREAM_OTHER = 0, DL_STREAM_VIDEO = 1, DL_STREAM_AUDIO = 2 };

typedef struct {
    int kind;                 /* DL_STREAM_* */
    char codec[32];           /* the decoder's short name, "" when FFmpeg has none */
    double duration;          /* seconds; < 0 when the file does not say */
    double frame_rate;        /* average frames per second; 0 when unknown */
    int64_t time_base_num, time_base_den;
    int width, height;        /* video */
    int sample_rate, channels;/* audio */
} dl_stream_info_t;

/* Opens `size` bytes at `data` (which must outlive the dl_media_t) or the
 * file at `path`; with `probe_streams` FFmpeg also reads the start of the
 * streams for what the headers do not say (frame rates, durations).  A file
 * that cannot be opened is DL_ERR_OS with errno kept in *os_error. */
int dl_media_open_memory(const uint8_t *data, size_t size, int probe_streams,
                         dl_media_t **media, char *msg);
int dl_media_open_file(const char *path, int probe_streams, dl_media_t **media, int *os_error,
                       char *msg);
void dl_media_close(dl_media_t *media);

int dl_media_stream_count(const dl_media_t *media);
void dl_media_stream_info(const dl_media_t *media, int stream, dl_stream_info_t *info);
/* The stream FFmpeg prefers of a kind, or -1 when there is none. */
int dl_media_best_stream(const dl_media_t *media, int kind);

/* Reads every packet of a video stream (decoding nothing) and indexes its
 * frames: their presentation timestamps in order, and the keyframes. */
int dl_video_scan(dl_media_t *media, int stream, char *msg);
/* The scanned frames' timestamps, in the stream's time base, ascending. */
const int64_t *dl_video_frame_pts(const dl_media_t *media, int64_t *count);
/* How many scans this process has made: openings that found no index kept
 * for their file (every thread shares the last indexes made, dl_media.c). */
int64_t dl_video_index_scans(void);

typedef struct {
    int crop_top, crop_left, crop_height, crop_width;   /* of the decoded frame */
    int height, width;        /* of the output, after the crop */
    int filter;               /* dl_video_filter_t */
    int threads;              /* the decoder's own threads; 1 is none, 0 FFmpeg's choice */
} dl_video_output_t;

/* Decodes the scanned frames `frames` (ascending, distinct) into `dst`, one
 * output->height x width x 3 RGB image after another. */
int dl_video_decode(dl_media_t *media, const int64_t *frames, int64_t count,
                    const dl_video_output_t *output, uint8_t *dst, char *msg);

/* The largest sample rate and channel count an audio stream may claim: a
 * hostile file claiming more (a billion samples a second) fails to decode
 * as corrupt instead of asking the resampler for gigabytes. */
#define DL_AUDIO_MAX_RATE 768000
#define DL_AUDIO_MAX_CHANNELS 64

typedef struct {
    int sample_rate, channels;    /* of the output */
    double start, end;            /* the window, seconds of the stream's timeline; end < 0: to the end */
} dl_audio_output_t;

/* Decodes an audio stream from its start (or from a seek 1 s before a window
 * 4 s or more into it: dl_audio.c), resampled, and keeps the samples
 * of the window: *samples (malloc'ed, the caller frees) holds *count frames
 * of output->channels interleaved float32 samples. */
int dl_audio_decode(dl_media_t *media, int stream, const dl_audio_output_t *output,
                    float **samples, int64_t *count, char *msg);

#endif
