/* The run pass of a transform chain (see dl_pipeline.h): the pixel work of
 * the steps the plan pass (dl_plan.c) resolved, through two per-thread
 * scratch buffers (dl_scratch.c, slots DL_SCRATCH_STEP_A and _B; a policy
 * has a third), the last op writing straight into the output. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl_geometry.h"
#include "dl_internal.h"
#include "dl_resize.h"

#define DL_ALIGNMENT 64

/* ---- the run pass ------------------------------------------------------- */

static size_t shape_bytes(const dl_shape_t *s)
{
    return (size_t)s->height * s->width * s->channels * s->sample_size;
}

static dl_image_t packed(uint8_t *data, const dl_shape_t *s)
{
    dl_image_t image = {data, (ptrdiff_t)s->width * s->channels * s->sample_size, s->height,
                        s->width, s->channels, s->sample_size};
    return image;
}

/* Where the chain's output goes: the caller's buffer, checked, or a new one. */
static int prepare_output(const dl_shape_t *last, dl_chain_output_t *output, char *msg)
{
    if (output->data != NULL) {
        if (output->height != last->height || output->width != last->width ||
            output->channels != last->channels || output->sample_size != last->sample_size ||
            output->layout != last->layout) {
            dl_shape_t expected = {output->height, output->width, output->channels,
                                   output->sample_size, output->layout};
            char wanted[96];
            snprintf(wanted, sizeof wanted, "%s", dl_describe(&expected));
            return dl_fail(msg, DL_ERR_ARGUMENT, "the transform produced %s, the batch holds %s",
                        dl_describe(last), wanted);
        }
        return DL_OK;
    }
    size_t bytes = shape_bytes(last);
    size_t rounded = (bytes + DL_ALIGNMENT - 1) / DL_ALIGNMENT * DL_ALIGNMENT;
    output->data = aligned_alloc(DL_ALIGNMENT, rounded ? rounded : DL_ALIGNMENT);
    if (output->data == NULL) return dl_fail(msg, DL_ERR_NOMEM, "cannot allocate %zu bytes", bytes);
    output->height = last->height;
    output->width = last->width;
    output->channels = last->channels;
    output->sample_size = last->sample_size;
    output->layout = last->layout;
    output->row_stride = (ptrdiff_t)last->width * last->channels * last->sample_size;
    return DL_OK;
}

typedef struct {
    const dl_op_t *ops;
    const dl_step_t *steps;
    int n;
    const dl_chain_input_t *input;
    dl_chain_output_t *output;
    char *msg;
    dl_image_t current;
    int current_layout;
    int current_buffer;   /* scratch index holding `current`, or -1 */
    int output_written;
    int status;           /* of the op that failed */
    int pending_buffer;   /* where the op running now writes (see begin) */
    int last_writer;      /* the op writing the output (dl_last_writer) */
} dl_run_t;

/* Where op k writes: the output for the chain's last op, else a free scratch buffer. */
static int destination(dl_run_t *run, int k, dl_image_t *dst, int *buffer)
{
    const dl_shape_t *out = &run->steps[k].out;
    if (k == run->n - 1 || k == run->last_writer) {
        dl_image_t image = packed(run->output->data, out);
        if (out->layout == DL_LAYOUT_HWC) image.row_stride = run->output->row_stride;
        *dst = image;
        *buffer = -1;
        run->output_written = 1;
        return DL_OK;
    }
    *buffer = run->current_buffer == 0 ? 1 : 0;
    uint8_t *data = dl_scratch(*buffer, shape_bytes(out));
    if (data == NULL) return dl_fail(run->msg, DL_ERR_NOMEM, "cannot allocate scratch memory");
    *dst = packed(data, out);
    return DL_OK;
}

/* An op that writes pixels: `begin` finds where the output of op k (the
 * last op it stands for) goes, `end` makes it the current image, or records
 * the failure. Both return what run_<key> returns: the ops consumed, or -1. */
static int begin(dl_run_t *run, int k, dl_image_t *dst)
{
    return destination(run, k, dst, &run->pending_buffer);
}

static int end(dl_run_t *run, int k, const dl_image_t *dst, int status, int consumed)
{
    if (status != DL_OK) {
        run->status = status;
        return -1;
    }
    run->current = *dst;
    run->current_layout = run->steps[k].out.layout;
    run->current_buffer = run->pending_buffer;
    return consumed;
}

static int out_of_memory(dl_run_t *run)
{
    return dl_fail(run->msg, DL_ERR_NOMEM, "cannot allocate scratch memory");
}

/* An op whose output is a view of its input: nothing to write. */
static int view(dl_run_t *run, int k)
{
    const dl_step_t *step = &run->steps[k];
    run->current = dl_crop_view(run->current, step->top, step->left, step->out.height,
                                step->out.width);
    return 1;
}

/* Normalize's mean and std for each of 4 channels (one value for all when
 * the op was given one). */
static void normalize_params(const dl_op_t *op, float *mean, float *std)
{
    for (int c = 0; c < 4; c++) {
        mean[c] = (float)op->f[op->i[0] == 1 ? 0 : c];
        std[c] = (float)op->f[4 + (op->i[0] == 1 ? 0 : c)];
    }
}

/* The float tail, ops first .. first + tail - 1 (none: NULL), as a sink
 * writing the chain's output `dst`: each channel's table is the tail's own
 * kernels run on the 256 values a uint8 sample can take, so the fused
 * output is the unfused chain's, value for value; the flips that apply to
 * this item compose into one mirror per axis. */
static const dl_float_sink_t *float_sink(dl_run_t *run, int first, int tail,
                                         const dl_image_t *dst, dl_float_sink_t *sink)
{
    uint8_t ramp[256];
    float mean[4], std[4];
    if (tail == 0) return NULL;
    sink->flip_x = sink->flip_y = 0;
    for (int k = first; k < first + tail; k++) {
        const dl_op_t *op = &run->ops[k];
        int flips = op->kind == DL_OP_FLIP || (op->kind == DL_OP_RANDOM_FLIP && run->steps[k].apply);
        if (flips && op->i[0]) sink->flip_x ^= 1;
        else if (flips) sink->flip_y ^= 1;
    }
    for (int v = 0; v < 256; v++) ramp[v] = (uint8_t)v;
    for (int c = 0; c < dst->channels; c++) {
        int is_float = 0;
        for (int k = first; k < first + tail; k++) {
            const dl_op_t *op = &run->ops[k];
            if (op->kind == DL_OP_TO_FLOAT && !is_float) {
                dl_to_float(ramp, sink->lut[c], 256);
                is_float = 1;
            } else if (op->kind == DL_OP_NORMALIZE) {
                normalize_params(op, mean, std);
                dl_normalize(is_float ? (const void *)sink->lut[c] : ramp, !is_float,
                             sink->lut[c], 256, 1, 0, &mean[c], &std[c]);
                is_float = 1;
            }
        }
    }
    sink->data = dst->data;
    sink->row_stride = dst->row_stride;
    sink->chw = run->steps[first + tail - 1].out.layout == DL_LAYOUT_CHW;
    return sink;
}

/* ---- each op's run ---------------------------------------------------------
 * run_<key>(run, k) runs op k (the function its DL_OPS row names) on
 * run->current; it returns the ops consumed (2 when it fused the next op
 * in), or -1 with run->status set. */

/* A JPEG's decode does what the plan pass's fusion (dl_plan.c) set in its
 * step: the window steps[k] names, at its DCT scale, written as the output
 * of the crop it stands for, or resampled as a RandomResizedCrop or as the
 * part of a Resize a CenterCrop keeps; other formats decode whole. */
/* Whether the chain's resizes may round as Pillow-SIMD does (results within
 * 1 of Pillow's, dl_resize.c): when it starts with Decode(exact=False). */
static int fast_resize(const dl_run_t *run)
{
    return run->ops[0].kind == DL_OP_DECODE && !run->ops[0].i[3];
}

static int run_decode(dl_run_t *run, int k)
{
    const dl_step_t *step = &run->steps[k];
    const dl_chain_input_t *input = run->input;
    int last = k + step->fused + step->tail, consumed = 1 + step->fused + step->tail;
    dl_image_t dst;
    dl_float_sink_t sink;
    int status = begin(run, last, &dst);
    if (status != DL_OK) return end(run, last, &dst, status, consumed);
    if (dl_sniff(input->bytes, input->size) != DL_FMT_JPEG) {
        status = dl_decode(input->bytes, input->size, 8, dst.height, dst.width, dst.channels,
                           dst.data, dst.row_stride, run->msg);
        return end(run, k, &dst, status, 1);
    }
    dl_window_t window = {step->top, step->left, step->height, step->width};
    if (step->fused && (run->ops[k + 1].kind == DL_OP_RANDOM_RESIZED_CROP ||
                        run->ops[k + 1].kind == DL_OP_RESIZE)) {
        /* The window, then resampled into the output of the op(s) it stands for. */
        dl_shape_t shape = {step->height, step->width, step->out.channels, 1, DL_LAYOUT_HWC};
        uint8_t *data = dl_scratch(run->pending_buffer == 0 ? 1 : 0, shape_bytes(&shape));
        if (data == NULL) return end(run, last, &dst, out_of_memory(run), consumed);
        dl_image_t src = packed(data, &shape);
        status = dl_jpeg_decode_window(input->bytes, input->size, step->scale, &window,
                                       src.channels, src.data, src.row_stride, run->msg);
        const dl_op_t *resize = &run->ops[k + 1];
        const dl_shape_t *out = &run->steps[k + step->fused].out; /* the resampled image */
        dl_resize_part_t part = {step->height, step->width, out->height, out->width,
                                 {0, 0, step->height, step->width},
                                 {0, 0, out->height, out->width}};
        int filter = resize->i[2], antialias = 1; /* RandomResizedCrop's */
        if (resize->kind == DL_OP_RESIZE) { /* then CenterCrop: a part of the resize */
            part = dl_fused_resize_part(&run->steps[k]);
            filter = resize->i[3];
            antialias = resize->i[4];
        }
        part.fast = fast_resize(run);
        const dl_float_sink_t *to = float_sink(run, k + step->fused + 1, step->tail, &dst, &sink);
        if (status == DL_OK && dl_resize_part(src.data, src.row_stride, src.channels, dst.data,
                                              dst.row_stride, &part, filter, antialias, to) != 0)
            status = out_of_memory(run);
        return end(run, last, &dst, status, consumed);
    }
    if (step->scale != 8) { /* a scaled whole image, packed in scratch memory */
        dst.height = step->height;
        dst.width = step->width;
        dst.row_stride = (ptrdiff_t)dst.width * dst.channels;
    }
    status = dl_jpeg_decode_window(input->bytes, input->size, step->scale, &window, dst.channels,
                                   dst.data, dst.row_stride, run->msg);
    return end(run, last, &dst, status, consumed);
}

static int run_convert(dl_run_t *run, int k)
{
    dl_image_t dst, src = run->current;
    int status = begin(run, k, &dst);
    if (status == DL_OK)
        dl_convert_rows(src.data, src.row_stride, src.channels, dst.data, dst.row_stride,
                        dst.channels, src.height, src.width);
    return end(run, k, &dst, status, 1);
}

static int run_crop(dl_run_t *run, int k) { return view(run, k); }

/* The input placed in a border: crops record their window in input
 * coordinates (a crop past the edges pads with zeros), pads where the
 * input goes (filled by `mode`, or with the op's fill when constant). */
static int bordered(dl_run_t *run, int k, int is_crop, int mode)
{
    const dl_op_t *op = &run->ops[k];
    const dl_step_t *step = &run->steps[k];
    dl_image_t dst, src = run->current;
    uint8_t pixel[16];
    int status = begin(run, k, &dst);
    if (status != DL_OK) return end(run, k, &dst, status, 1);
    ptrdiff_t top = is_crop ? -step->top : step->top;
    ptrdiff_t left = is_crop ? -step->left : step->left;
    memset(pixel, 0, sizeof pixel);
    for (int c = 0; !is_crop && c < src.channels; c++) {
        if (src.sample_size == 1) pixel[c] = (uint8_t)op->f[c];
        else ((float *)pixel)[c] = (float)op->f[c];
    }
    if (dl_pad(&src, &dst, top, left, mode, pixel) != 0) status = out_of_memory(run);
    return end(run, k, &dst, status, 1);
}

static int run_center_crop(dl_run_t *run, int k)
{
    const dl_step_t *step = &run->steps[k];
    if (step->top >= 0 && step->left >= 0) return view(run, k);
    return bordered(run, k, 1, DL_PAD_CONSTANT);
}

static int run_random_crop(dl_run_t *run, int k) { return bordered(run, k, 1, DL_PAD_CONSTANT); }
static int run_pad(dl_run_t *run, int k) { return bordered(run, k, 0, run->ops[k].i[4]); }
static int run_pad_to(dl_run_t *run, int k) { return bordered(run, k, 0, DL_PAD_CONSTANT); }

/* Op k resamples src into its output, and performs its float tail too when
 * the plan fused one in (steps[k].tail). */
static int resampled(dl_run_t *run, int k, dl_image_t src, int filter, int antialias)
{
    const dl_step_t *step = &run->steps[k];
    int last = k + step->tail;
    dl_image_t dst;
    dl_float_sink_t sink;
    int status = begin(run, last, &dst);
    if (status != DL_OK) return end(run, last, &dst, status, 1 + step->tail);
    dl_resize_part_t whole = {src.height, src.width, step->out.height, step->out.width,
                              {0, 0, src.height, src.width},
                              {0, 0, step->out.height, step->out.width}, fast_resize(run)};
    if (dl_resize_part(src.data, src.row_stride, src.channels, dst.data, dst.row_stride, &whole,
                       filter, antialias, float_sink(run, k + 1, step->tail, &dst, &sink)) != 0)
        status = out_of_memory(run);
    return end(run, last, &dst, status, 1 + step->tail);
}

/* A resize of the window the plan drew (a JPEG's decode does this itself:
 * run_decode). */
static int run_random_resized_crop(dl_run_t *run, int k)
{
    const dl_step_t *step = &run->steps[k];
    return resampled(run, k, dl_crop_view(run->current, step->top, step->left, step->height,
                                          step->width), run->ops[k].i[2], 1);
}

static int run_resize(dl_run_t *run, int k)
{
    return resampled(run, k, run->current, run->ops[k].i[3], run->ops[k].i[4]);
}

static int run_flip(dl_run_t *run, int k)
{
    dl_image_t dst, src = run->current;
    int status = begin(run, k, &dst);
    if (status == DL_OK) dl_flip(&src, &dst, run->ops[k].i[0]);
    return end(run, k, &dst, status, 1);
}

static int run_random_flip(dl_run_t *run, int k)
{
    return run->steps[k].apply ? run_flip(run, k) : 1;
}

static int run_rotate90(dl_run_t *run, int k)
{
    dl_image_t dst, src = run->current;
    int turns = run->ops[k].i[0] % 4;
    if (turns == 0) return 1;
    int status = begin(run, k, &dst);
    if (status == DL_OK) dl_rotate90(&src, &dst, turns);
    return end(run, k, &dst, status, 1);
}

static int run_to_float(dl_run_t *run, int k)
{
    dl_image_t dst, src = run->current;
    /* Already float; or Normalize comes next, and reads uint8 directly. */
    if (run->steps[k].in.sample_size == 4 ||
        (k + 1 < run->n && run->ops[k + 1].kind == DL_OP_NORMALIZE))
        return 1;
    int status = begin(run, k, &dst);
    for (int y = 0; status == DL_OK && y < src.height; y++)
        dl_to_float(src.data + y * src.row_stride, (float *)(dst.data + y * dst.row_stride),
                    (ptrdiff_t)src.width * src.channels);
    return end(run, k, &dst, status, 1);
}

static int run_normalize(dl_run_t *run, int k)
{
    const dl_op_t *op = &run->ops[k];
    const dl_step_t *step = &run->steps[k];
    dl_image_t dst, src = run->current;
    float mean[4], std[4];
    /* Normalize then ToChw, from HWC: one pass writes the CHW output. */
    int fused = k + 1 < run->n && run->ops[k + 1].kind == DL_OP_TO_CHW &&
                step->in.layout == DL_LAYOUT_HWC;
    int status = begin(run, k + fused, &dst);
    if (status != DL_OK) return end(run, k + fused, &dst, status, 1 + fused);
    normalize_params(op, mean, std);
    if (fused)
        dl_normalize_to_chw(&src, (float *)dst.data, mean, std);
    else if (step->in.layout == DL_LAYOUT_CHW)
        dl_normalize(src.data, src.sample_size == 1, (float *)dst.data,
                     (ptrdiff_t)src.height * src.width * src.channels, src.channels,
                     (ptrdiff_t)src.height * src.width, mean, std);
    else
        for (int y = 0; y < src.height; y++)
            dl_normalize(src.data + y * src.row_stride, src.sample_size == 1,
                         (float *)(dst.data + y * dst.row_stride),
                         (ptrdiff_t)src.width * src.channels, src.channels, 0, mean, std);
    return end(run, k + fused, &dst, status, 1 + fused);
}

static int run_to_chw(dl_run_t *run, int k)
{
    dl_image_t dst, src = run->current;
    if (run->steps[k].in.layout == DL_LAYOUT_CHW) return 1;
    int status = begin(run, k, &dst);
    if (status == DL_OK) dl_hwc_to_chw(&src, dst.data);
    return end(run, k, &dst, status, 1);
}

static int run_to_hwc(dl_run_t *run, int k)
{
    dl_image_t dst, src = run->current;
    if (run->steps[k].in.layout == DL_LAYOUT_HWC) return 1;
    int status = begin(run, k, &dst);
    if (status == DL_OK) dl_chw_to_hwc(src.data, &dst);
    return end(run, k, &dst, status, 1);
}

/* Colour and filter ops: the kernel dl_colour_chain.c runs for op k, from
 * the current image into its output, when the plan drew that it applies. */
typedef int (*dl_colour_run_fn)(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,
                                const dl_image_t *dst);

static int colour_op(dl_run_t *run, int k, dl_colour_run_fn kernel)
{
    dl_image_t dst, src = run->current;
    if (!run->steps[k].apply) return 1;
    int status = begin(run, k, &dst);
    if (status == DL_OK && (status = kernel(&run->ops[k], &run->steps[k], &src, &dst)) != DL_OK)
        status = out_of_memory(run);
    return end(run, k, &dst, status, 1);
}

#define DL_RUN_COLOUR(key) \
    static int run_##key(dl_run_t *run, int k) { return colour_op(run, k, dl_run_##key); }
DL_RUN_COLOUR(color_jitter) DL_RUN_COLOUR(grayscale) DL_RUN_COLOUR(gaussian_blur)
DL_RUN_COLOUR(posterize) DL_RUN_COLOUR(solarize) DL_RUN_COLOUR(sharpness)
DL_RUN_COLOUR(autocontrast) DL_RUN_COLOUR(equalize) DL_RUN_COLOUR(invert)
#undef DL_RUN_COLOUR

/* The warps: the matrix the plan drew, Pillow's arithmetic (dl_geometry.c);
 * with a crop fused in (steps[k].fused), only the crop's window of the warp. */
static int warped(dl_run_t *run, int k, int fill_at)
{
    const dl_op_t *op = &run->ops[k];
    const dl_step_t *step = &run->steps[k];
    int last = k + step->fused;
    dl_image_t dst, src = run->current;
    dl_warp_t warp = {{0}, op->i[0], {0}, step->out.height, step->out.width,
                      step->fused ? run->steps[k + 1].top : 0,
                      step->fused ? run->steps[k + 1].left : 0};
    memcpy(warp.matrix, step->matrix, sizeof warp.matrix);
    for (int c = 0; c < 4; c++) warp.fill[c] = (uint8_t)op->f[fill_at + c];
    int status = begin(run, last, &dst);
    if (status == DL_OK && dl_affine(&src, &dst, &warp) != 0)
        status = dl_fail(run->msg, DL_ERR_ARGUMENT, "%s cannot warp %s", dl_op_name(op),
                         dl_describe(&step->in));
    return end(run, last, &dst, status, 1 + step->fused);
}

static int run_random_rotation(dl_run_t *run, int k) { return warped(run, k, 4); }
static int run_random_affine(dl_run_t *run, int k) { return warped(run, k, 12); }

/* A standard normal float from a splitmix64 stream (Box-Muller). */
static float normal(uint64_t *state)
{
    static const double two_pi = 6.283185307179586;
    double u1 = ((dl_splitmix64(state) >> 11) + 1) * 0x1.0p-53, u2 = (dl_splitmix64(state) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(two_pi * u2));
}

/* torchvision's F.erase of the window the plan drew, in place: the image is
 * this run's own (a scratch buffer or the output; anything else, such as
 * the caller's input, is first copied where this op writes). */
static int run_random_erasing(dl_run_t *run, int k)
{
    const dl_op_t *op = &run->ops[k];
    const dl_step_t *step = &run->steps[k];
    if (!step->apply) return 1;
    if (run->current_buffer < 0 && !run->output_written) {
        dl_image_t dst;
        int status = begin(run, k, &dst);
        if (status == DL_OK) {
            if (step->in.layout == DL_LAYOUT_HWC) dl_copy(&run->current, &dst);
            else memcpy(dst.data, run->current.data, shape_bytes(&step->in));
        }
        if (end(run, k, &dst, status, 1) < 0) return -1;
    }
    int chw = step->in.layout == DL_LAYOUT_CHW, channels = step->in.channels;
    ptrdiff_t row = chw ? (ptrdiff_t)step->in.width * 4 : run->current.row_stride;
    ptrdiff_t plane = chw ? row * step->in.height : 4, pixel = chw ? 4 : (ptrdiff_t)channels * 4;
    uint64_t noise = step->noise;
    for (int c = 0; c < channels; c++) {
        float value = (float)op->f[5 + (op->i[1] == 1 ? 0 : c)];
        for (int y = step->top; y < step->top + step->height; y++) {
            uint8_t *at = run->current.data + y * row + c * plane + step->left * pixel;
            for (int x = 0; x < step->width; x++, at += pixel) {
                float v = op->i[0] ? normal(&noise) : value;
                memcpy(at, &v, sizeof v);
            }
        }
    }
    return 1;
}

/* The augmentation policies (dl_policy.c): their sub-ops alternate between
 * the op's destination and the spare scratch buffer, the last writing the
 * destination. */
static int run_policy(dl_run_t *run, int k)
{
    const dl_shape_t *out = &run->steps[k].out;
    dl_image_t dst, src = run->current;
    int status = begin(run, k, &dst);
    if (status == DL_OK) {
        uint8_t *data = dl_scratch(DL_SCRATCH_POLICY, shape_bytes(out));
        dl_image_t spare = packed(data, out);
        if (data == NULL || dl_run_policy(&run->ops[k], &run->steps[k], &src, &dst, &spare) != 0)
            status = out_of_memory(run);
    }
    return end(run, k, &dst, status, 1);
}
#define run_rand_augment run_policy
#define run_trivial_augment_wide run_policy
#define run_auto_augment run_policy

/* ---- the pass ------------------------------------------------------------ */

typedef int (*dl_run_fn)(dl_run_t *run, int k);
#define DL_RUN_FN(name, key, ...) run_##key,
static const dl_run_fn runs[DL_OP_COUNT] = {DL_OPS(DL_RUN_FN)};

int dl_chain_run(const dl_op_t *ops, int n_ops, const dl_chain_input_t *input, uint64_t seed,
                 dl_chain_output_t *output, char *msg)
{
    dl_step_t stack_steps[16];
    dl_step_t *steps = n_ops <= 16 ? stack_steps : malloc(sizeof *steps * (size_t)n_ops);
    int status;
    if (steps == NULL) return dl_fail(msg, DL_ERR_NOMEM, "cannot allocate the chain's plan");
    msg[0] = 0;
    status = dl_plan(ops, n_ops, input, seed, steps, msg);
    dl_shape_t last = n_ops ? steps[n_ops - 1].out
                            : (dl_shape_t){input->image.height, input->image.width,
                                           input->image.channels, input->image.sample_size,
                                           input->layout};
    int allocated = output->data == NULL;
    if (status == DL_OK) status = prepare_output(&last, output, msg);
    if (status != DL_OK) goto done;
    dl_run_t run = {ops, steps, n_ops, input, output, msg, input->image, input->layout, -1, 0,
                    DL_OK, -1, n_ops ? dl_last_writer(ops, n_ops) : 0};
    for (int k = 0; k < n_ops;) {
        int consumed = runs[ops[k].kind](&run, k);
        if (consumed < 0) {
            status = run.status;
            break;
        }
        k += consumed;
    }
    if (status == DL_OK && !run.output_written) {
        /* The last ops only changed the view (a crop) or did nothing. */
        dl_image_t dst = packed(output->data, &last);
        if (last.layout == DL_LAYOUT_HWC) {
            dst.row_stride = output->row_stride;
            dl_copy(&run.current, &dst);
        } else {
            memcpy(dst.data, run.current.data, shape_bytes(&last));
        }
    }
    if (status != DL_OK && allocated) {
        free(output->data);
        output->data = NULL;
    }
done:
    if (steps != stack_steps) free(steps);
    return status;
}
