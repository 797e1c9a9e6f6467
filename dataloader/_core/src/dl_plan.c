/* The plan pass of a transform chain (see dl_pipeline.h): per item, every
 * op's input and output shape, its window and its random draws, before any
 * pixel work. Each op has two functions, named by its key in DL_OPS
 * (dl_tables.h): shape_<key>, its output shape, which also answers for a
 * chain whose input is not known yet (dl_chain_static_shape: what a batch
 * of its outputs looks like), and plan_<key>, its checks and draws. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dl_internal.h"

/* ---- randomness (dl_splitmix64, dl_internal.h) ------------------------- */

uint64_t dl_item_seed(uint64_t seed, uint64_t epoch, uint64_t index)
{
    uint64_t state = seed;
    uint64_t mixed = dl_splitmix64(&state);
    state = mixed ^ epoch;
    mixed = dl_splitmix64(&state);
    state = mixed ^ index;
    return dl_splitmix64(&state);
}


/* ---- messages ----------------------------------------------------------- */

const char *dl_op_name(const dl_op_t *op)
{
    /* One op code serves several transforms; messages name the one given. */
    if (op->kind == DL_OP_FLIP) return op->i[0] ? "HFlip" : "VFlip";
    if (op->kind == DL_OP_RANDOM_FLIP) return op->i[0] ? "RandomHFlip" : "RandomVFlip";
    if (op->kind == DL_OP_CONVERT) return op->i[0] == 1 ? "ToGray" : op->i[0] == 4 ? "ToRgba" : "ToRgb";
    const dl_op_row_t *row = dl_op_row(op->kind);
    return row ? row->name : "an unknown op";
}

int dl_fail(char *msg, int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(msg, DL_MSG_LEN, format, args);
    va_end(args);
    return status;
}

const char *dl_describe(const dl_shape_t *s)
{
    /* Only ever used for one message at a time per thread. */
    static __thread char text[96];
    int hwc = s->layout == DL_LAYOUT_HWC;
    snprintf(text, sizeof text, "%s %s image of shape (%d, %d, %d)",
             s->sample_size == 1 ? "a uint8" : "a float32", hwc ? "HWC" : "CHW",
             hwc ? s->height : s->channels, hwc ? s->width : s->height,
             hwc ? s->channels : s->width);
    return text;
}

static int is_image(const dl_shape_t *s)
{
    return dl_is_image_shape(s->height, s->width, s->channels);
}

/* ---- helpers ------------------------------------------------------------ */

/* A side computed in long long, as an int that stays past the image rule's
 * limit when it was (the plan pass then reports it). */
static int clamp_side(long long side)
{
    return side > INT_MAX ? INT_MAX : (int)side;
}

/* A side plus a border, unknown (0) while the side is. */
static int grown(int side, int before, int after)
{
    return side ? clamp_side((long long)side + before + after) : 0;
}

static dl_shape_t sized(dl_shape_t in, int height, int width)
{
    in.height = height;
    in.width = width;
    return in;
}

/* A constant fill of `op` (f[first..first+3]: Pad, PadTo, the warps) in the samples of `in`. */
int dl_check_fill(const dl_op_t *op, int first, const dl_shape_t *in, char *msg)
{
    for (int c = 0; c < in->channels; c++)
        if (!dl_is_fill_value(op->f[first + c], in->sample_size))
            return dl_fail(msg, DL_ERR_ARGUMENT, "%s(fill=%g) cannot apply to %s: " DL_FILL_RULE,
                           dl_op_name(op), op->f[first + c], dl_describe(in));
    return DL_OK;
}

/* The input an op takes, as its DL_OPS row says. */
static int check_input(const dl_op_t *op, const dl_shape_t *in, char *msg)
{
    int input = dl_op_row(op->kind)->input;
    if (input != DL_IN_ANY && in->layout != DL_LAYOUT_HWC)
        return dl_fail(msg, DL_ERR_ARGUMENT,
                       "%s got %s; geometric ops need HWC images (put ToChw last)",
                       dl_op_name(op), dl_describe(in));
    if (input == DL_IN_HWC_UINT8 && in->sample_size != 1)
        return dl_fail(msg, DL_ERR_ARGUMENT,
                       "%s got %s; it needs uint8 samples (put ToFloat after it)",
                       dl_op_name(op), dl_describe(in));
    return DL_OK;
}

/* ---- each op's shape rule and plan --------------------------------------- *
 * shape_<key>(op, in): the output shape; a side or channel count of 0 is
 * unknown, and stays so where the output depends on it.
 * plan_<key>(op, input, rng, step, msg): whether the op applies to step->in,
 * where its window lies (drawn from `rng` for the random ops, in op order);
 * step->out holds shape_<key>'s answer on entry. */

#define PLAN_ARGS DL_PLAN_ARGS
#define UNUSED_PLAN_ARGS (void)op, (void)input, (void)rng, (void)step, (void)msg

static dl_shape_t keep_shape(const dl_op_t *op, dl_shape_t in) { (void)op; return in; }
static int plan_nothing(PLAN_ARGS) { UNUSED_PLAN_ARGS; return DL_OK; }

static dl_shape_t shape_decode(const dl_op_t *op, dl_shape_t in)
{
    (void)in;
    return (dl_shape_t){0, 0, op->i[0], 1, DL_LAYOUT_HWC};
}

static int plan_decode(PLAN_ARGS)
{
    dl_info_t info;
    (void)rng;
    if (input->bytes == NULL)
        return dl_fail(msg, DL_ERR_ARGUMENT, "Decode got %s, expected encoded bytes",
                       dl_describe(&step->in));
    if (input->size == 0)
        return dl_fail(msg, DL_ERR_CORRUPT, "the data is empty (0 bytes)");
    if (!dl_format_is_native(dl_sniff(input->bytes, input->size))) return DL_NEEDS_FALLBACK;
    int status = dl_image_info(input->bytes, input->size, &info, msg);
    if (status != DL_OK) return status;
    int channels = op->i[0] ? op->i[0] : info.channels;
    status = dl_check_limits(info.height, info.width, channels, op->i[1], op->i[2], op->f[0],
                             dl_decode_work(&info, channels), msg);
    if (status != DL_OK) {
        char limit[DL_MSG_LEN];
        snprintf(limit, sizeof limit, "%s", msg);
        return dl_fail(msg, status, "Decode: %s", limit);
    }
    step->out = (dl_shape_t){info.height, info.width, channels, 1, DL_LAYOUT_HWC};
    return DL_OK;
}

static dl_shape_t shape_convert(const dl_op_t *op, dl_shape_t in)
{
    in.channels = op->i[0];
    return in;
}
#define plan_convert plan_nothing

static dl_shape_t shape_crop(const dl_op_t *op, dl_shape_t in)
{
    return sized(in, op->i[2], op->i[3]);
}

static int plan_crop(PLAN_ARGS)
{
    (void)input, (void)rng;
    if ((long long)op->i[0] + op->i[2] > step->in.height ||
        (long long)op->i[1] + op->i[3] > step->in.width)
        return dl_fail(msg, DL_ERR_ARGUMENT, "Crop(top=%d, left=%d, height=%d, width=%d) "
                       "does not fit in %s", op->i[0], op->i[1], op->i[2], op->i[3],
                       dl_describe(&step->in));
    step->top = op->i[0];
    step->left = op->i[1];
    return DL_OK;
}

/* The ops whose output is (height, width) = (i[0], i[1]). */
static dl_shape_t shape_fixed(const dl_op_t *op, dl_shape_t in)
{
    return sized(in, op->i[0], op->i[1]);
}
#define shape_center_crop shape_fixed
#define shape_random_crop shape_fixed
#define shape_random_resized_crop shape_fixed
#define shape_pad_to shape_fixed

static int plan_center_crop(PLAN_ARGS)
{
    dl_shape_t in = step->in;
    UNUSED_PLAN_ARGS;
    /* torchvision rounds half to even; a crop larger than the image pads with zeros. */
    step->top = (int)nearbyint((in.height - op->i[0]) / 2.0);
    step->left = (int)nearbyint((in.width - op->i[1]) / 2.0);
    if (in.height < op->i[0]) step->top = -((op->i[0] - in.height) / 2);
    if (in.width < op->i[1]) step->left = -((op->i[1] - in.width) / 2);
    return DL_OK;
}

static int plan_random_crop(PLAN_ARGS)
{
    int padded_h = grown(step->in.height, op->i[3], op->i[5]);
    int padded_w = grown(step->in.width, op->i[2], op->i[4]);
    (void)input;
    if (padded_h < op->i[0] || padded_w < op->i[1])
        return dl_fail(msg, DL_ERR_ARGUMENT, "RandomCrop: crop size %dx%d is larger than the "
                       "(padded) input of %dx%d", op->i[0], op->i[1], padded_h, padded_w);
    /* Window position in the padded image, then relative to the input. */
    step->top = dl_randint(rng, 0, padded_h - op->i[0] + 1) - op->i[3];
    step->left = dl_randint(rng, 0, padded_w - op->i[1] + 1) - op->i[2];
    return DL_OK;
}

/* torchvision's RandomResizedCrop.get_params, with this item's generator. */
static void resized_crop_window(const dl_op_t *op, int h, int w, uint64_t *rng, dl_step_t *step)
{
    double area = (double)h * w;
    double log_lo = log(op->f[2]), log_hi = log(op->f[3]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (op->f[0] + dl_uniform(rng) * (op->f[1] - op->f[0]));
        double aspect = exp(log_lo + dl_uniform(rng) * (log_hi - log_lo));
        /* Compared as doubles: an extreme ratio gives sides no int can hold. */
        double cw = nearbyint(sqrt(target * aspect)), ch = nearbyint(sqrt(target / aspect));
        if (cw >= 1 && cw <= w && ch >= 1 && ch <= h) {
            step->top = dl_randint(rng, 0, h - (int)ch + 1);
            step->left = dl_randint(rng, 0, w - (int)cw + 1);
            step->height = (int)ch;
            step->width = (int)cw;
            return;
        }
    }
    /* The central crop of the ratio's nearest bound; at least one pixel, as
     * the fused decode divides by the window's size. */
    double in_ratio = (double)w / h;
    int cw = w, ch = h;
    if (in_ratio < op->f[2]) {
        ch = (int)fmax(1.0, fmin(h, nearbyint(w / op->f[2])));
    } else if (in_ratio > op->f[3]) {
        cw = (int)fmax(1.0, fmin(w, nearbyint(h * op->f[3])));
    }
    step->height = ch;
    step->width = cw;
    step->top = (h - ch) / 2;
    step->left = (w - cw) / 2;
}

static int plan_random_resized_crop(PLAN_ARGS)
{
    (void)input, (void)msg;
    resized_crop_window(op, step->in.height, step->in.width, rng, step);
    return DL_OK;
}

static dl_shape_t shape_pad(const dl_op_t *op, dl_shape_t in)
{
    return sized(in, grown(in.height, op->i[1], op->i[3]), grown(in.width, op->i[0], op->i[2]));
}

static int plan_pad(PLAN_ARGS)
{
    (void)input, (void)rng;
    step->top = op->i[1];
    step->left = op->i[0];
    return dl_check_fill(op, 0, &step->in, msg);
}

static int plan_pad_to(PLAN_ARGS)
{
    int status = dl_check_fill(op, 0, &step->in, msg);
    (void)input, (void)rng;
    if (status != DL_OK) return status;
    if (step->in.height > op->i[0] || step->in.width > op->i[1])
        return dl_fail(msg, DL_ERR_ARGUMENT, "PadTo(%d, %d) got %s, larger than the target",
                       op->i[0], op->i[1], dl_describe(&step->in));
    step->top = (int)floor((op->i[0] - step->in.height) * op->f[4]);
    step->left = (int)floor((op->i[1] - step->in.width) * op->f[5]);
    return DL_OK;
}

static dl_shape_t shape_resize(const dl_op_t *op, dl_shape_t in)
{
    if (op->i[1] > 0) return sized(in, op->i[0], op->i[1]); /* an explicit (height, width) */
    if (in.height < 1 || in.width < 1) return sized(in, 0, 0); /* the ratio of an unknown input */
    /* torchvision: the shorter side becomes `size`, the longer one keeps the
     * ratio. The input follows the image rule, so `shorter` is at least 1. */
    int h = in.height, w = in.width;
    long long size = op->i[0], max_size = op->i[2];
    long long shorter = h <= w ? h : w, longer = h <= w ? w : h;
    long long new_short = size, new_long = size * longer / shorter;
    if (max_size > 0 && new_long > max_size) {
        new_short = max_size * new_short / new_long;
        new_long = max_size;
    }
    return sized(in, clamp_side(h <= w ? new_short : new_long),
                 clamp_side(h <= w ? new_long : new_short));
}
#define plan_resize plan_nothing

#define shape_flip keep_shape
#define plan_flip plan_nothing
#define shape_random_flip keep_shape

static int plan_random_flip(PLAN_ARGS)
{
    (void)input, (void)msg;
    step->apply = dl_uniform(rng) < op->f[0];
    return DL_OK;
}

static dl_shape_t shape_rotate90(const dl_op_t *op, dl_shape_t in)
{
    return op->i[0] % 2 ? sized(in, in.width, in.height) : in;
}
#define plan_rotate90 plan_nothing

static dl_shape_t shape_to_float(const dl_op_t *op, dl_shape_t in)
{
    (void)op;
    in.sample_size = 4;
    return in;
}
#define plan_to_float plan_nothing
#define shape_normalize shape_to_float

static int plan_normalize(PLAN_ARGS)
{
    (void)input, (void)rng;
    if (op->i[0] != step->in.channels && op->i[0] != 1)
        return dl_fail(msg, DL_ERR_ARGUMENT, "Normalize has %d means and stds, got %s",
                       op->i[0], dl_describe(&step->in));
    return DL_OK;
}

static dl_shape_t shape_to_chw(const dl_op_t *op, dl_shape_t in)
{
    (void)op;
    in.layout = DL_LAYOUT_CHW;
    return in;
}
#define plan_to_chw plan_nothing

static dl_shape_t shape_to_hwc(const dl_op_t *op, dl_shape_t in)
{
    (void)op;
    in.layout = DL_LAYOUT_HWC;
    return in;
}
#define plan_to_hwc plan_nothing

/* Colour and filter ops keep the input's shape (Grayscale may change its
 * channels); their plans are in dl_colour_chain.c. */
#define shape_color_jitter keep_shape
#define shape_grayscale dl_shape_grayscale
#define shape_gaussian_blur keep_shape
#define shape_posterize keep_shape
#define shape_solarize keep_shape
#define shape_sharpness keep_shape
#define shape_autocontrast keep_shape
#define shape_equalize keep_shape
#define shape_invert keep_shape
#define plan_color_jitter dl_plan_color_jitter
#define plan_grayscale dl_plan_grayscale
#define plan_gaussian_blur dl_plan_gaussian_blur
#define plan_posterize dl_plan_posterize
#define plan_solarize dl_plan_solarize
#define plan_sharpness dl_plan_sharpness
#define plan_autocontrast dl_plan_autocontrast
#define plan_equalize dl_plan_equalize
#define plan_invert dl_plan_invert

/* The augmentations' rules and plans live in dl_augment.c. */
#define shape_random_rotation dl_shape_random_rotation
#define plan_random_rotation dl_plan_random_rotation
#define shape_random_affine keep_shape
#define plan_random_affine dl_plan_random_affine
#define shape_random_erasing keep_shape
#define plan_random_erasing dl_plan_random_erasing
/* The augmentation policies keep the shape; their plans are in dl_policy.c. */
#define shape_rand_augment keep_shape
#define shape_trivial_augment_wide keep_shape
#define shape_auto_augment keep_shape
#define plan_rand_augment dl_plan_policy
#define plan_trivial_augment_wide dl_plan_policy
#define plan_auto_augment dl_plan_policy

/* ---- fusion: what a JPEG's decode does for the ops after it -------------- *
 * Decided once per item, after every op is planned, on the logical sizes
 * (so fusion never changes a draw); the run pass follows steps[0]. A
 * window crop (Crop, CenterCrop, RandomCrop) is decoded as a window, and
 * so is a RandomResizedCrop's window, which the decode then resizes
 * itself; a Resize followed by a CenterCrop inside its output resamples
 * only the outputs the crop keeps, from the window of inputs they read
 * (dl_fused_resize_part). Unless Decode(exact=True), a decode followed by a shrinking
 * Resize or RandomResizedCrop runs at the smallest DCT scale n/8 whose
 * image stays DL_FUSION_MARGIN times the resize's target: the antialiased
 * resize then averages at least that many scaled pixels per output pixel,
 * which bounds its difference from the exact chain. A resized crop needs
 * more (DL_FUSION_MARGIN_CROP times its target as it maps onto the whole
 * image), as its window's edges move by up to half a scaled pixel when
 * rounded to the scaled image. docs/transforms.md gives the measured
 * differences (benchmarks/fusion_error.py). */

#define DL_FUSION_MARGIN 3.0
#define DL_FUSION_MARGIN_CROP 4.0

/* The smallest DCT scale at which an h x w JPEG still covers `margin` times
 * target_h x target_w. */
static int fusion_scale(int h, int w, double margin, double target_h, double target_w)
{
    return dl_jpeg_scale_for(h, w, clamp_side((long long)ceil(margin * target_h)),
                             clamp_side((long long)ceil(margin * target_w)));
}

dl_resize_part_t dl_fused_resize_part(const dl_step_t *steps)
{
    dl_resize_part_t part;
    dl_jpeg_scaled_size(steps[0].out.height, steps[0].out.width, steps[0].scale, &part.in_h,
                        &part.in_w);
    part.out_h = steps[1].out.height;
    part.out_w = steps[1].out.width;
    part.source = (dl_window_t){steps[0].top, steps[0].left, steps[0].height, steps[0].width};
    part.region = (dl_window_t){steps[2].top, steps[2].left, steps[2].out.height,
                                steps[2].out.width};
    return part;
}

static void plan_fusion(const dl_op_t *ops, int n, const dl_chain_input_t *input,
                        dl_step_t *steps)
{
    dl_step_t *decode = &steps[0];
    const dl_step_t *next = &steps[1];
    int h = decode->out.height, w = decode->out.width;
    decode->scale = 8;
    decode->fused = 0;
    decode->top = decode->left = 0;
    decode->height = h;
    decode->width = w;
    if (n < 2 || ops[0].kind != DL_OP_DECODE || dl_sniff(input->bytes, input->size) != DL_FMT_JPEG)
        return;
    int exact = ops[0].i[3];
    switch (ops[1].kind) {
    case DL_OP_CROP: case DL_OP_CENTER_CROP: case DL_OP_RANDOM_CROP:
        decode->top = next->top;
        decode->left = next->left;
        decode->height = next->out.height;
        decode->width = next->out.width;
        decode->fused = 1;
        return;
    case DL_OP_RESIZE:
        if (!exact)
            decode->scale = fusion_scale(h, w, DL_FUSION_MARGIN, next->out.height,
                                         next->out.width);
        dl_jpeg_scaled_size(h, w, decode->scale, &decode->height, &decode->width);
        if (n > 2 && ops[2].kind == DL_OP_CENTER_CROP && steps[2].top >= 0 &&
            steps[2].left >= 0) {
            dl_resize_part_t part = dl_fused_resize_part(steps);
            dl_resize_source(&part, ops[1].i[3], ops[1].i[4]);
            decode->top = part.source.top;
            decode->left = part.source.left;
            decode->height = part.source.height;
            decode->width = part.source.width;
            decode->fused = 2;
        }
        return;
    case DL_OP_RANDOM_RESIZED_CROP: {
        if (!exact) {
            /* The target is the whole image at the crop's output resolution. */
            decode->scale = fusion_scale(h, w, DL_FUSION_MARGIN_CROP,
                                         (double)h * next->out.height / next->height,
                                         (double)w * next->out.width / next->width);
        }
        /* The window's edges, rounded to the scaled image's pixels. */
        int sh, sw;
        dl_jpeg_scaled_size(h, w, decode->scale, &sh, &sw);
        double ry = (double)sh / h, rx = (double)sw / w;
        int top = (int)nearbyint(next->top * ry), left = (int)nearbyint(next->left * rx);
        int wh = (int)nearbyint((next->top + next->height) * ry) - top;
        int ww = (int)nearbyint((next->left + next->width) * rx) - left;
        wh = wh < 1 ? 1 : wh;
        ww = ww < 1 ? 1 : ww;
        decode->top = top + wh > sh ? sh - wh : top;
        decode->left = left + ww > sw ? sw - ww : left;
        decode->height = wh;
        decode->width = ww;
        decode->fused = 1;
        return;
    }
    default:
        return;
    }
}

/* ---- fusion: a float tail written by the last resampling pass ------------ *
 * When a chain ends in value ops (ToFloat, Normalize, ToChw, and flips;
 * the output float32) right after an op whose pass resamples (Resize,
 * RandomResizedCrop, or a JPEG's decode doing their work), that pass writes
 * the tail's output itself (dl_float_sink_t): no uint8 image and no pass
 * over it. Every value op maps each uint8 sample on its own and a flip only
 * moves it, so the output is the unfused chain's. */
static int is_tail_op(int kind)
{
    return kind == DL_OP_TO_FLOAT || kind == DL_OP_NORMALIZE || kind == DL_OP_TO_CHW ||
           kind == DL_OP_FLIP || kind == DL_OP_RANDOM_FLIP;
}

static void plan_float_tail(const dl_op_t *ops, int n, dl_step_t *steps)
{
    /* RandomErasing ops at the very end erase the output in place once it
     * is written (dl_pipeline.c, run_random_erasing): the tail stops before them. */
    n = dl_last_writer(ops, n) + 1;
    int first = n;
    while (first > 0 && is_tail_op(ops[first - 1].kind)) first--;
    if (first == 0 || first == n || steps[n - 1].out.sample_size != 4) return;
    int p = first - 1; /* the op making the image the tail maps */
    const dl_step_t *decode = &steps[0];
    if (ops[0].kind == DL_OP_DECODE && decode->fused == p && p > 0 &&
        (ops[1].kind == DL_OP_RESIZE || ops[1].kind == DL_OP_RANDOM_RESIZED_CROP))
        steps[0].tail = n - first; /* the decode resamples (run_decode) */
    else if ((ops[p].kind == DL_OP_RESIZE || ops[p].kind == DL_OP_RANDOM_RESIZED_CROP) &&
             !(ops[0].kind == DL_OP_DECODE && decode->fused >= p))
        steps[p].tail = n - first;
}

/* ---- fusion: a crop after a warp ----------------------------------------- *
 * A warp followed by a crop inside its output (Crop, CenterCrop, RandomCrop)
 * computes only the crop's window of the warp (dl_warp_t's top and left),
 * the same bytes as the whole warp cut. */
static void plan_warp_crops(const dl_op_t *ops, int n, dl_step_t *steps)
{
    for (int k = 0; k + 1 < n; k++) {
        int warp = ops[k].kind, crop = ops[k + 1].kind;
        const dl_step_t *next = &steps[k + 1];
        if ((warp == DL_OP_RANDOM_ROTATION || warp == DL_OP_RANDOM_AFFINE) &&
            (crop == DL_OP_CROP || crop == DL_OP_CENTER_CROP || crop == DL_OP_RANDOM_CROP) &&
            next->top >= 0 && next->left >= 0 && next->top + next->out.height <= next->in.height &&
            next->left + next->out.width <= next->in.width)
            steps[k].fused = 1;
    }
}

/* ---- the passes ----------------------------------------------------------- */

int dl_last_writer(const dl_op_t *ops, int n)
{
    int last = n - 1;
    while (last > 0 && ops[last].kind == DL_OP_RANDOM_ERASING) last--;
    return last;
}

typedef dl_shape_t (*dl_shape_fn)(const dl_op_t *op, dl_shape_t in);
typedef int (*dl_plan_fn)(PLAN_ARGS);

#define DL_SHAPE_FN(name, key, ...) shape_##key,
#define DL_PLAN_FN(name, key, ...) plan_##key,
static const dl_shape_fn shapes[DL_OP_COUNT] = {DL_OPS(DL_SHAPE_FN)};
static const dl_plan_fn plans[DL_OP_COUNT] = {DL_OPS(DL_PLAN_FN)};

int dl_chain_static_shape(const dl_op_t *ops, int n, dl_chain_output_t *shape)
{
    dl_shape_t s = {0, 0, 0, 1, DL_LAYOUT_HWC};
    for (int k = 0; k < n; k++) s = shapes[ops[k].kind](&ops[k], s);
    shape->data = NULL;
    shape->row_stride = 0;
    shape->height = s.height;
    shape->width = s.width;
    shape->channels = s.channels;
    shape->sample_size = s.sample_size;
    shape->layout = s.layout;
    return is_image(&s);
}

int dl_plan(const dl_op_t *ops, int n, const dl_chain_input_t *input, uint64_t seed,
            dl_step_t *steps, char *msg)
{
    uint64_t rng = seed;
    dl_shape_t shape = {input->image.height, input->image.width, input->image.channels,
                        input->image.sample_size, input->layout};
    if (input->bytes != NULL && (n == 0 || ops[0].kind != DL_OP_DECODE))
        return dl_fail(msg, DL_ERR_ARGUMENT, "%s got encoded bytes; start the chain with Decode()",
                       n ? dl_op_name(&ops[0]) : "the chain");
    /* Every shape of the chain follows the image rule: the input's (known
     * only now, after any decode) and each op's output, before any op
     * divides by a side or allocates for it. */
    if (input->bytes == NULL && !is_image(&shape))
        return dl_fail(msg, DL_ERR_ARGUMENT, "%s got %s: " DL_IMAGE_RULE,
                       n ? dl_op_name(&ops[0]) : "the chain", dl_describe(&shape));
    for (int k = 0; k < n; k++) {
        const dl_op_t *op = &ops[k];
        memset(&steps[k], 0, sizeof steps[k]);
        steps[k].in = shape;
        int status = check_input(op, &shape, msg);
        if (status != DL_OK) return status;
        steps[k].out = shapes[op->kind](op, shape);
        if ((status = plans[op->kind](op, input, &rng, &steps[k], msg)) != DL_OK) return status;
        if (!is_image(&steps[k].out))
            return dl_fail(msg, DL_ERR_ARGUMENT, "%s would make %s: " DL_IMAGE_RULE,
                           dl_op_name(op), dl_describe(&steps[k].out));
        shape = steps[k].out;
    }
    if (n > 0 && ops[0].kind == DL_OP_DECODE) plan_fusion(ops, n, input, steps);
    plan_warp_crops(ops, n, steps);
    plan_float_tail(ops, n, steps);
    return DL_OK;
}

/* ---- a crop done by a video decoder (dl_pipeline.h) ----------------------- */

int dl_chain_lead_window(const dl_op_t *ops, int n, int height, int width, int channels,
                         uint64_t seed, dl_lead_window_t *window, char *msg)
{
    uint64_t rng = seed;
    dl_shape_t shape = {height, width, channels, 1, DL_LAYOUT_HWC};
    dl_chain_input_t input = {.image = {NULL, 0, height, width, channels, 1}};
    dl_step_t step = {.in = shape};
    *window = (dl_lead_window_t){.filter = -1, .rest_seed = seed};
    int kind = n > 0 ? ops[0].kind : -1;
    if (kind != DL_OP_CROP && kind != DL_OP_CENTER_CROP && kind != DL_OP_RANDOM_CROP &&
        kind != DL_OP_RANDOM_RESIZED_CROP)
        return DL_OK;
    if (!is_image(&shape))
        return dl_fail(msg, DL_ERR_ARGUMENT, "%s got %s: " DL_IMAGE_RULE, dl_op_name(&ops[0]),
                       dl_describe(&shape));
    /* The first op's plan as dl_plan makes it: the same draws. */
    step.out = shapes[kind](&ops[0], shape);
    int status = plans[kind](&ops[0], &input, &rng, &step, msg);
    if (status != DL_OK) return status;
    int resized = kind == DL_OP_RANDOM_RESIZED_CROP;
    int wh = resized ? step.height : step.out.height, ww = resized ? step.width : step.out.width;
    /* A window reaching past the input (padding) is left to the chain. */
    if (step.top < 0 || step.left < 0 || step.top + wh > height || step.left + ww > width)
        return DL_OK;
    *window = (dl_lead_window_t){step.top, step.left, wh, ww, step.out.height, step.out.width,
                                 resized ? ops[0].i[2] : -1, rng};
    return DL_OK;
}
