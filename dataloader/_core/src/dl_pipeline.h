/* Native transform chains: decode, geometry and value ops run one after the
 * other on one item with no Python.
 *
 * A chain runs in two passes. The plan pass reads the image header (or the
 * input image's shape), draws every random parameter from the item's own
 * generator in op order, and computes every op's output shape, on the
 * logical (unfused) sizes. The run pass then does the pixel work. Fusion
 * only changes the run pass: a JPEG followed by a downscaling resize (or a
 * random resized crop) is decoded at a DCT scale of 1/2, 1/4 or 1/8 that
 * still covers the target, so the same seed draws the same crops and flips
 * whether or not the chain is fused. Intermediate images live in two
 * per-thread scratch buffers; the last op writes straight into the output
 * (an item's slot of a batch buffer, or a new buffer). */
#ifndef DL_PIPELINE_H
#define DL_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "dl_ops.h"

typedef enum {
    DL_OP_DECODE = 0,          /* i: channels (0: the image's own), max_w, max_h, exact; f: max_bytes */
    DL_OP_CONVERT,             /* i: channels */
    DL_OP_CROP,                /* i: top, left, height, width */
    DL_OP_CENTER_CROP,         /* i: height, width */
    DL_OP_RANDOM_CROP,         /* i: height, width, pad left, top, right, bottom */
    DL_OP_RANDOM_RESIZED_CROP, /* i: height, width, filter; f: scale lo, hi, ratio lo, hi */
    DL_OP_PAD,                 /* i: left, top, right, bottom, mode; f: fill per channel */
    DL_OP_PAD_TO,              /* i: height, width; f: fill per channel, anchor y, x (f[4], f[5]) */
    DL_OP_RESIZE,              /* i: height (or shorter side), width (0: keep aspect), max_size, filter, antialias */
    DL_OP_FLIP,                /* i: horizontal */
    DL_OP_RANDOM_FLIP,         /* i: horizontal; f: probability */
    DL_OP_ROTATE90,            /* i: k */
    DL_OP_TO_FLOAT,
    DL_OP_NORMALIZE,           /* i: channels given; f: mean[4], std[4] */
    DL_OP_TO_CHW,
    DL_OP_TO_HWC,
    DL_OP_COUNT
} dl_op_kind_t;

typedef struct {
    int kind;
    int i[6];
    double f[8];
} dl_op_t;

enum { DL_LAYOUT_HWC = 0, DL_LAYOUT_CHW = 1 };

/* Statuses beyond dl_codecs.h's. */
enum {
    DL_ERR_ARGUMENT = 10,      /* an op cannot apply to what it got (msg names the op) */
    DL_NEEDS_FALLBACK = 11     /* a format without a native decoder: decode it elsewhere */
};

/* What goes in: encoded bytes (`bytes` not NULL), or an image. */
typedef struct {
    const uint8_t *bytes;
    size_t size;
    dl_image_t image;
    int layout;
} dl_chain_input_t;

/* What comes out. With `data` set on entry, the chain must produce exactly
 * the given shape, sample size and layout, and writes there (rows of HWC
 * output `row_stride` bytes apart; CHW output packed). Otherwise `data` is
 * allocated (aligned_alloc, 64 bytes; the caller frees it) and the fields
 * are filled in. */
typedef struct {
    uint8_t *data;
    ptrdiff_t row_stride;
    int height, width, channels, sample_size, layout;
} dl_chain_output_t;

int dl_chain_run(const dl_op_t *ops, int n_ops, const dl_chain_input_t *input, uint64_t seed,
                 dl_chain_output_t *output, char *msg);

/* The seed of one item's generator: a stable mix of (seed, epoch, index). */
uint64_t dl_item_seed(uint64_t seed, uint64_t epoch, uint64_t index);

#endif
