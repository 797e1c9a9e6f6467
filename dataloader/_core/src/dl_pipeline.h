/* Native transform chains: decode, geometry and value ops run one after the
 * other on one item with no Python.
 *
 * A chain runs in two passes. The plan pass reads the image header (or the
 * input image's shape), draws every random parameter from the item's own
 * generator in op order, and computes every op's output shape, on the
 * logical (unfused) sizes, and then decides the fusion of a JPEG's decode
 * with the op after it (dl_plan.c): a crop's window is decoded alone, and,
 * unless Decode(exact=True), a shrinking resize lets the decode run at a DCT
 * scale n/8 that still covers its target; the same seed draws the same crops
 * and flips whether or not the chain is fused; a chain ending in value ops
 * (ToFloat, Normalize, ToChw) after a resize has them done by the resize's
 * last pass, which writes the float32 output. The run pass then does the
 * pixel work. Intermediate images live in two
 * per-thread scratch buffers; the last op writes straight into the output
 * (an item's slot of a batch buffer, or a new buffer). */
#ifndef DL_PIPELINE_H
#define DL_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "dl_codecs.h"
#include "dl_ops.h"
#include "dl_tables.h"

/* The ops (dl_op_kind_t) and what each slot of i[] and f[] means: DL_OPS in
 * dl_tables.h. */

typedef struct {
    int kind;
    int i[6];
    double f[16];
} dl_op_t;

enum { DL_LAYOUT_HWC = 0, DL_LAYOUT_CHW = 1 };

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

/* What every output of the chain looks like, from the ops alone (the plan
 * pass's shape rule on an input not known yet): fills `shape`'s sizes,
 * sample size and layout, 0 for a side or channel count that depends on the
 * input. Returns whether all are known and follow the image rule, i.e.
 * whether a batch of the outputs can be allocated before any item is read. */
int dl_chain_static_shape(const dl_op_t *ops, int n_ops, dl_chain_output_t *shape);

/* The window a chain's first op reads of an input of height x width x channels
 * (uint8 HWC), when that op is a crop a video decoder can do while it scales
 * (Crop, CenterCrop, RandomCrop, RandomResizedCrop) and the window lies
 * inside the input: drawn as dl_chain_run draws it from `seed`. The rest of
 * the chain, run from `rest_seed` (the generator after the op's draws),
 * draws what the whole chain would. `height` 0: no such window, `rest_seed`
 * is `seed` and the whole chain is to run. */
typedef struct {
    int top, left, height, width;   /* the window of the input */
    int out_height, out_width;      /* what the op makes of it */
    int filter;                     /* its resampling filter (dl_filter_t); -1: it only cuts */
    uint64_t rest_seed;
} dl_lead_window_t;

int dl_chain_lead_window(const dl_op_t *ops, int n_ops, int height, int width, int channels,
                         uint64_t seed, dl_lead_window_t *window, char *msg);

/* The seed of one item's generator: a stable mix of (seed, epoch, index). */
uint64_t dl_item_seed(uint64_t seed, uint64_t epoch, uint64_t index);

#endif
