/* Private prototypes of the native code: what one C file of src/ calls in
 * another and no extension module sees. Declared here once; the public
 * headers (dl_codecs.h, dl_ops.h, dl_pipeline.h, ...) hold what Python
 * reaches through their .pxd files. */
#ifndef DL_INTERNAL_H
#define DL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dl_codecs.h"
#include "dl_pipeline.h"

/* ---- one codec per format, dispatched by dl_codecs.c --------------------- */

int dl_jpeg_info(const uint8_t *data, size_t size, dl_info_t *info, char *msg);
int dl_jpeg_decode(const uint8_t *data, size_t size, int scale, int height, int width,
                   int channels, uint8_t *dst, ptrdiff_t row_stride, char *msg);

/* A rectangle of an image: rows top..top+height-1, columns left..left+width-1. */
typedef struct {
    int top, left, height, width;
} dl_window_t;

/* Decodes `window` of the JPEG's image scaled by scale/8 (1..8) into dst
 * (window->height rows of window->width x channels samples, `row_stride`
 * bytes apart): the same bytes as that window cut from the whole decoded
 * image, where parts of the window outside the image are zeros. Only the
 * iMCU rows and columns the window needs are decoded (dl_jpeg.c). */
int dl_jpeg_decode_window(const uint8_t *data, size_t size, int scale, const dl_window_t *window,
                          int channels, uint8_t *dst, ptrdiff_t row_stride, char *msg);
int dl_png_info(const uint8_t *data, size_t size, dl_info_t *info, char *msg);
int dl_png_decode(const uint8_t *data, size_t size, int height, int width, int channels,
                  uint8_t *dst, ptrdiff_t row_stride, char *msg);
int dl_webp_info(const uint8_t *data, size_t size, dl_info_t *info, char *msg);
int dl_webp_decode(const uint8_t *data, size_t size, int height, int width, int channels,
                   uint8_t *dst, ptrdiff_t row_stride, char *msg);

/* ---- resampling a part of a resize (dl_resize.c) -------------------------- */

/* Of an in_h x in_w image resized to out_h x out_w, the outputs `region`,
 * computed from the inputs `source` (in the whole input's coordinates):
 * the same bytes as those outputs of the whole resize.  `fast` (0 when
 * left out of an initialiser) rounds bilinear's weights as Pillow-SIMD
 * does, for results within 1 of Pillow's (see dl_resize.c). */
typedef struct {
    int in_h, in_w, out_h, out_w;
    dl_window_t source, region;
    int fast;
} dl_resize_part_t;

/* Whether the CPU has AVX2 (x86-64 with GCC or Clang only: the kernels
 * that call it have baseline code for every other machine; dl_convert.c). */
int dl_has_avx2(void);

/* Copies a rows x cols block of `channels`-byte pixels into its transpose:
 * pixel (y, x) of src goes to dst + x * dst_stride + y * channels (dl_ops.c,
 * beside the quarter turns; the resize's portable horizontal pass and the
 * box blur, dl_blur.c, run on transposed rows). */
void dl_transpose(const uint8_t *src, ptrdiff_t src_stride, int rows, int cols, int channels,
                  uint8_t *dst, ptrdiff_t dst_stride);

/* Sets part->source to the inputs that part->region's outputs read. */
void dl_resize_source(dl_resize_part_t *part, int filter, int antialias);

/* Where a resize's outputs go when a chain's float tail (ToFloat,
 * Normalize, ToChw, flips after it) is fused into its last pass: each
 * output row, rounded to uint8 as the unfused resize rounds it, is converted
 * at once through `lut` (sample v of channel c becomes lut[c][v], the tail's
 * value for it) into float32 at `data`: HWC rows `row_stride` bytes apart,
 * or, with `chw`, planes of the region's size; mirrored left to right with
 * `flip_x`, top to bottom with `flip_y`. No uint8 image is made; rows pass
 * through a strip of a few rows that stays in cache. */
typedef struct {
    float lut[4][256];
    uint8_t *data;
    ptrdiff_t row_stride;
    int chw, flip_x, flip_y;
} dl_float_sink_t;

/* Resamples part->source (src, `src_stride` bytes a row) into part->region:
 * uint8 at dst (`dst_stride` bytes a row), or, with `sink`, float32 through
 * it (dst unused); 0, or -1 when scratch memory could not be allocated. */
int dl_resize_part(const uint8_t *src, ptrdiff_t src_stride, int channels, uint8_t *dst,
                   ptrdiff_t dst_stride, const dl_resize_part_t *part, int filter, int antialias,
                   const dl_float_sink_t *sink);

/* The chains' generator (splitmix64): the next 64 random bits of `state`. */
static inline uint64_t dl_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1), and an integer in [low, high), from the generator. */
static inline double dl_uniform(uint64_t *state) { return (dl_splitmix64(state) >> 11) * 0x1.0p-53; }

static inline int dl_randint(uint64_t *state, int low, int high)
{
    int value = low + (int)(dl_uniform(state) * (double)(high - low));
    return value < high ? value : high - 1;
}

/* ---- transform chains: the plan pass (dl_plan.c) for the run pass -------- */

typedef struct {
    int height, width, channels, sample_size, layout;
} dl_shape_t;

/* One op resolved for one item: shapes, and the parameters it drew. */
typedef struct {
    dl_shape_t in, out;
    int top, left, height, width; /* a window of the input, or where the input goes; for
                                     Decode, the window it decodes (of the scaled image) */
    int apply;                    /* random flips: whether this item flips */
    int scale;                    /* Decode: the JPEG's DCT scale in eighths (8: full size) */
    int fused;                    /* Decode: how many ops after it the decode performs;
                                     a warp: 1 when it computes only the crop after it */
    int tail;                     /* the op whose last pass resamples (a Resize or
                                     RandomResizedCrop, or a Decode resampling for them):
                                     how many value ops after it (the chain's float tail)
                                     that pass performs as well (dl_float_sink_t) */
    /* Colour and filter ops (dl_colour_chain.c): */
    double factors[4];            /* the drawn factors (ColorJitter: brightness, contrast,
                                     saturation, hue; GaussianBlur: sigma) */
    int order[4];                 /* ColorJitter: the order of its adjustments */
    double matrix[6];             /* RandomRotation, RandomAffine: the inverse map drawn
                                     (dl_geometry.h) */
    uint64_t noise;               /* RandomErasing with value="random": its noise's seed;
                                     the policies: the seed of their sub-ops' draws */
} dl_step_t;

/* Resolves every op of the chain for one item into steps[0..n-1] (shapes,
 * windows, random draws); a status, with `msg` naming the op on failure. */
int dl_plan(const dl_op_t *ops, int n, const dl_chain_input_t *input, uint64_t seed,
            dl_step_t *steps, char *msg);

/* ---- colour and filter ops of a chain (dl_colour_chain.c) ------------------
 * dl_plan_<key>: the op's draws, as dl_plan.c's plan_<key>; dl_run_<key>:
 * its pixel work from src into dst (a status), run by dl_pipeline.c. */
#define DL_COLOUR_OP(key)                                                                  \
    int dl_plan_##key(const dl_op_t *op, const dl_chain_input_t *input, uint64_t *rng,      \
                      dl_step_t *step, char *msg);                                          \
    int dl_run_##key(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,       \
                     const dl_image_t *dst);
DL_COLOUR_OP(color_jitter) DL_COLOUR_OP(grayscale) DL_COLOUR_OP(gaussian_blur)
DL_COLOUR_OP(posterize) DL_COLOUR_OP(solarize) DL_COLOUR_OP(sharpness)
DL_COLOUR_OP(autocontrast) DL_COLOUR_OP(equalize) DL_COLOUR_OP(invert)
#undef DL_COLOUR_OP
dl_shape_t dl_shape_grayscale(const dl_op_t *op, dl_shape_t in);
/* What a plan_<key> function takes (dl_plan.c): the op, the chain's input,
 * the item's generator, its step (step->out holds the shape rule's answer)
 * and the message buffer. */
#define DL_PLAN_ARGS const dl_op_t *op, const dl_chain_input_t *input, uint64_t *rng, \
    dl_step_t *step, char *msg

/* The augmentations' shape rules and plans (dl_augment.c). */
dl_shape_t dl_shape_random_rotation(const dl_op_t *op, dl_shape_t in);
int dl_plan_random_rotation(DL_PLAN_ARGS);
int dl_plan_random_affine(DL_PLAN_ARGS);
int dl_plan_random_erasing(DL_PLAN_ARGS);

/* The augmentation policies (dl_policy.c): the plan draws the seed of the
 * item's sub-ops (step->noise); the run applies them from src into dst
 * through spare (all of the step's shape, three distinct buffers): 0, or -1
 * without memory. */
int dl_plan_policy(DL_PLAN_ARGS);
int dl_run_policy(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,
                  const dl_image_t *dst, const dl_image_t *spare);

/* Whether op's constant fill (f[first..first+3]: Pad, PadTo, the warps)
 * holds samples of `in`; DL_ERR_ARGUMENT with `msg` otherwise. */
int dl_check_fill(const dl_op_t *op, int first, const dl_shape_t *in, char *msg);

/* The op whose output is the chain's output: the last one, or the one
 * before the RandomErasing ops ending the chain, which then erase that
 * output in place. */
int dl_last_writer(const dl_op_t *ops, int n);

/* The part of the resize after a fused decode (steps[0]: Decode, steps[1]:
 * Resize, steps[2]: CenterCrop) that the crop keeps: of the decoded image,
 * at the decode's scale, the crop's outputs, from the decode's window. */
dl_resize_part_t dl_fused_resize_part(const dl_step_t *steps);

/* The op's name in messages (DL_OPS' display name, refined for flips and
 * conversions). */
const char *dl_op_name(const dl_op_t *op);

/* "a uint8 HWC image of shape (h, w, c)"; one message at a time per thread. */
const char *dl_describe(const dl_shape_t *s);

/* ---- per-thread scratch memory (dl_scratch.c) ---------------------------- */

/* The buffers: the run pass's two (dl_pipeline.c), in turn the input and
 * the output of a step, the image between a resize's two passes
 * (dl_resize.c), and the spare an augmentation policy's sub-ops alternate
 * with (run_policy). A thread uses each for one thing at a time. */
enum {
    DL_SCRATCH_STEP_A,
    DL_SCRATCH_STEP_B,
    DL_SCRATCH_BETWEEN,
    DL_SCRATCH_POLICY,
    DL_SCRATCH_MEDIA,   /* a video frame's rows padded for libswscale (dl_video.c) */
    DL_SCRATCH_SLOTS
};

/* This thread's buffer `slot` of at least `bytes`, grown (never shrunk)
 * and kept until the thread ends; NULL when out of memory. */
uint8_t *dl_scratch(int slot, size_t bytes);

/* Writes the printf-style message into `msg` (DL_MSG_LEN bytes); returns `status`. */
int dl_fail(char *msg, int status, const char *format, ...);

/* ---- media (dl_media.c, dl_video.c, dl_audio.c) ---------------------------- */

struct AVFormatContext;
struct AVIOContext;
struct AVCodecContext;

/* A keyframe of the scanned stream: its presentation time, and its decoding
 * time (demuxers index keyframes by either, dl_video.c). */
typedef struct {
    int64_t pts, dts;
} dl_keyframe_t;

struct dl_media {
    struct AVFormatContext *format;
    struct AVIOContext *io;     /* ours: reads `data`, or `fd` with pread */
    const uint8_t *data;        /* the caller's bytes (NULL for a file) */
    int fd;
    size_t size, position;
    int stream;                 /* the scanned video stream */
    int scanned;                /* a scan read the packets (to the end) */
    int64_t frames, key_count;
    int64_t *pts;               /* frames' presentation times, ascending */
    dl_keyframe_t *keys;        /* ascending by pts */
    /* A file's identity (device, inode, size, modification time): the key
     * of its frame index in the thread's cache (dl_video_scan). */
    int identified;
    uint64_t device, inode, modified_ns;
};

/* The stream's decoder, opened with `threads` threads of its own (1: none,
 * 0: FFmpeg's choice); the caller frees *decoder, on failure too. */
int dl_open_decoder(const struct dl_media *m, int stream, int threads,
                    struct AVCodecContext **decoder, char *msg);
/* A video stream's decoder for one dl_video_decode: the one this thread kept
 * from its last clip when it was opened for the same stream parameters and
 * threads (flushed), else a new one (dl_open_decoder); given back after it,
 * to be kept when `clean` (the decode succeeded), else freed. */
int dl_take_video_decoder(const struct dl_media *m, int stream, int threads,
                          struct AVCodecContext **decoder, char *msg);
void dl_give_video_decoder(const struct dl_media *m, int stream, int threads,
                           struct AVCodecContext **decoder, int clean);
/* dl_fail with FFmpeg's reason for `av_error` (when < 0) and its last logged
 * error appended.  FFmpeg's "out of memory" keeps `status`: FFmpeg gives it
 * for sizes a file claims and does not hold, and what it allocates is
 * sized by the file, so the file is what is wrong. */
int dl_media_fail(char *msg, int status, int av_error, const char *format, ...);
/* libswscale's flag of a dl_video_filter_t. */
int dl_video_filter_flag(int filter);

#endif
