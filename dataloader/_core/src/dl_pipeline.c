#include "dl_pipeline.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl_codecs.h"
#include "dl_resize.h"

#define DL_ALIGNMENT 64

typedef struct {
    int height, width, channels, sample_size, layout;
} dl_shape_t;

/* One op resolved for one item: shapes, and the parameters it drew. */
typedef struct {
    dl_shape_t in, out;
    int top, left, height, width; /* a window of the input, or where the input goes */
    int apply;                    /* random flips: whether this item flips */
} dl_step_t;

/* ---- randomness --------------------------------------------------------- */

static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t dl_item_seed(uint64_t seed, uint64_t epoch, uint64_t index)
{
    uint64_t state = seed;
    uint64_t mixed = splitmix64(&state);
    state = mixed ^ epoch;
    mixed = splitmix64(&state);
    state = mixed ^ index;
    return splitmix64(&state);
}

/* Uniform in [0, 1). */
static inline double uniform(uint64_t *state) { return (splitmix64(state) >> 11) * 0x1.0p-53; }

/* Uniform integer in [low, high). */
static inline int randint(uint64_t *state, int low, int high)
{
    int value = low + (int)(uniform(state) * (double)(high - low));
    return value < high ? value : high - 1;
}

/* ---- messages ----------------------------------------------------------- */

static const char *op_name(const dl_op_t *op)
{
    static const char *const names[DL_OP_COUNT] = {
        "Decode", "Convert", "Crop", "CenterCrop", "RandomCrop", "RandomResizedCrop", "Pad",
        "PadTo", "Resize", "Flip", "RandomFlip", "Rotate90", "ToFloat", "Normalize", "ToChw",
        "ToHwc",
    };
    if (op->kind == DL_OP_FLIP) return op->i[0] ? "HFlip" : "VFlip";
    if (op->kind == DL_OP_RANDOM_FLIP) return op->i[0] ? "RandomHFlip" : "RandomVFlip";
    if (op->kind == DL_OP_CONVERT) return op->i[0] == 1 ? "ToGray" : op->i[0] == 4 ? "ToRgba" : "ToRgb";
    return names[op->kind];
}

static int fail(char *msg, int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(msg, DL_MSG_LEN, format, args);
    va_end(args);
    return status;
}

static const char *describe(const dl_shape_t *s)
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

/* ---- the plan pass ------------------------------------------------------ */

/* A side computed in long long, as an int that stays past the image rule's
 * limit when it was (the plan pass then reports it). */
static int clamp_side(long long side)
{
    return side > INT_MAX ? INT_MAX : (int)side;
}

static void resize_target(const dl_op_t *op, int h, int w, int *out_h, int *out_w)
{
    if (op->i[1] > 0) { /* an explicit (height, width) */
        *out_h = op->i[0];
        *out_w = op->i[1];
        return;
    }
    /* torchvision: the shorter side becomes `size`, the longer one keeps the
     * ratio. The input follows the image rule, so `shorter` is at least 1. */
    long long size = op->i[0], max_size = op->i[2];
    long long shorter = h <= w ? h : w, longer = h <= w ? w : h;
    long long new_short = size, new_long = size * longer / shorter;
    if (max_size > 0 && new_long > max_size) {
        new_short = max_size * new_short / new_long;
        new_long = max_size;
    }
    *out_h = clamp_side(h <= w ? new_short : new_long);
    *out_w = clamp_side(h <= w ? new_long : new_short);
}

/* torchvision's RandomResizedCrop.get_params, with this item's generator. */
static void resized_crop_window(const dl_op_t *op, int h, int w, uint64_t *rng, dl_step_t *step)
{
    double area = (double)h * w;
    double log_lo = log(op->f[2]), log_hi = log(op->f[3]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (op->f[0] + uniform(rng) * (op->f[1] - op->f[0]));
        double aspect = exp(log_lo + uniform(rng) * (log_hi - log_lo));
        /* Compared as doubles: an extreme ratio gives sides no int can hold. */
        double cw = nearbyint(sqrt(target * aspect)), ch = nearbyint(sqrt(target / aspect));
        if (cw >= 1 && cw <= w && ch >= 1 && ch <= h) {
            step->top = randint(rng, 0, h - (int)ch + 1);
            step->left = randint(rng, 0, w - (int)cw + 1);
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

static int check_limits(const dl_op_t *op, int h, int w, int c, char *msg)
{
    if (w > op->i[1] || h > op->i[2])
        return fail(msg, DL_ERR_ARGUMENT,
                    "Decode: image of %dx%d pixels (width x height) exceeds the limit of %dx%d",
                    w, h, op->i[1], op->i[2]);
    if ((double)h * w * c > op->f[0])
        return fail(msg, DL_ERR_ARGUMENT,
                    "Decode: image of %dx%dx%d needs %.0f bytes, over the limit of %.0f", w, h, c,
                    (double)h * w * c, op->f[0]);
    return DL_OK;
}

static int plan_decode(const dl_op_t *op, const dl_chain_input_t *input, dl_step_t *step,
                       char *msg)
{
    dl_info_t info;
    if (input->bytes == NULL)
        return fail(msg, DL_ERR_ARGUMENT, "Decode got %s, expected encoded bytes",
                    describe(&step->in));
    if (input->size == 0)
        return fail(msg, DL_ERR_CORRUPT, "cannot decode image: the data is empty (0 bytes)");
    int format = dl_sniff(input->bytes, input->size);
    if (format != DL_FMT_JPEG && format != DL_FMT_PNG && format != DL_FMT_WEBP)
        return DL_NEEDS_FALLBACK;
    int status = dl_image_info(input->bytes, input->size, &info, msg);
    if (status != DL_OK) return status;
    int channels = op->i[0] ? op->i[0] : info.channels;
    status = check_limits(op, info.height, info.width, channels, msg);
    if (status != DL_OK) return status;
    step->out = (dl_shape_t){info.height, info.width, channels, 1, DL_LAYOUT_HWC};
    return DL_OK;
}

/* A constant border of `op` (Pad, PadTo: fill in f[0..3]) in the samples of `in`. */
static int check_fill(const dl_op_t *op, const dl_shape_t *in, char *msg)
{
    for (int c = 0; c < in->channels; c++)
        if (!dl_is_fill_value(op->f[c], in->sample_size))
            return fail(msg, DL_ERR_ARGUMENT, "%s(fill=%g) cannot apply to %s: " DL_FILL_RULE,
                        op_name(op), op->f[c], describe(in));
    return DL_OK;
}

static int require_hwc(const dl_op_t *op, const dl_shape_t *in, int uint8_only, char *msg)
{
    if (in->layout != DL_LAYOUT_HWC)
        return fail(msg, DL_ERR_ARGUMENT, "%s got %s; geometric ops need HWC images (put ToChw last)",
                    op_name(op), describe(in));
    if (uint8_only && in->sample_size != 1)
        return fail(msg, DL_ERR_ARGUMENT, "%s got %s; it needs uint8 samples (put ToFloat after it)",
                    op_name(op), describe(in));
    return DL_OK;
}

static int plan_step(const dl_op_t *op, const dl_chain_input_t *input, uint64_t *rng,
                     dl_step_t *step, char *msg)
{
    dl_shape_t in = step->in;
    dl_shape_t out = in;
    int status = DL_OK;
    if (op->kind == DL_OP_DECODE) return plan_decode(op, input, step, msg);
    if (op->kind <= DL_OP_ROTATE90) {
        int uint8_only = op->kind == DL_OP_CONVERT || op->kind == DL_OP_RESIZE ||
                         op->kind == DL_OP_RANDOM_RESIZED_CROP;
        if ((status = require_hwc(op, &in, uint8_only, msg)) != DL_OK) return status;
    }
    switch (op->kind) {
    case DL_OP_CONVERT:
        out.channels = op->i[0];
        break;
    case DL_OP_CROP:
        if ((long long)op->i[0] + op->i[2] > in.height || (long long)op->i[1] + op->i[3] > in.width)
            return fail(msg, DL_ERR_ARGUMENT, "Crop(top=%d, left=%d, height=%d, width=%d) does "
                        "not fit in %s", op->i[0], op->i[1], op->i[2], op->i[3], describe(&in));
        step->top = op->i[0];
        step->left = op->i[1];
        out.height = op->i[2];
        out.width = op->i[3];
        break;
    case DL_OP_CENTER_CROP:
        /* torchvision rounds half to even; a crop larger than the image pads with zeros. */
        step->top = (int)nearbyint((in.height - op->i[0]) / 2.0);
        step->left = (int)nearbyint((in.width - op->i[1]) / 2.0);
        if (in.height < op->i[0]) step->top = -((op->i[0] - in.height) / 2);
        if (in.width < op->i[1]) step->left = -((op->i[1] - in.width) / 2);
        out.height = op->i[0];
        out.width = op->i[1];
        break;
    case DL_OP_RANDOM_CROP: {
        int padded_h = clamp_side((long long)in.height + op->i[3] + op->i[5]);
        int padded_w = clamp_side((long long)in.width + op->i[2] + op->i[4]);
        if (padded_h < op->i[0] || padded_w < op->i[1])
            return fail(msg, DL_ERR_ARGUMENT, "RandomCrop: crop size %dx%d is larger than the "
                        "(padded) input of %dx%d", op->i[0], op->i[1], padded_h, padded_w);
        /* Window position in the padded image, then relative to the input. */
        step->top = randint(rng, 0, padded_h - op->i[0] + 1) - op->i[3];
        step->left = randint(rng, 0, padded_w - op->i[1] + 1) - op->i[2];
        out.height = op->i[0];
        out.width = op->i[1];
        break;
    }
    case DL_OP_RANDOM_RESIZED_CROP:
        resized_crop_window(op, in.height, in.width, rng, step);
        out.height = op->i[0];
        out.width = op->i[1];
        break;
    case DL_OP_PAD:
        if ((status = check_fill(op, &in, msg)) != DL_OK) return status;
        step->top = op->i[1];
        step->left = op->i[0];
        out.height = clamp_side((long long)in.height + op->i[1] + op->i[3]);
        out.width = clamp_side((long long)in.width + op->i[0] + op->i[2]);
        break;
    case DL_OP_PAD_TO:
        if ((status = check_fill(op, &in, msg)) != DL_OK) return status;
        if (in.height > op->i[0] || in.width > op->i[1])
            return fail(msg, DL_ERR_ARGUMENT, "PadTo(%d, %d) got %s, larger than the target",
                        op->i[0], op->i[1], describe(&in));
        step->top = (int)floor((op->i[0] - in.height) * op->f[4]);
        step->left = (int)floor((op->i[1] - in.width) * op->f[5]);
        out.height = op->i[0];
        out.width = op->i[1];
        break;
    case DL_OP_RESIZE:
        resize_target(op, in.height, in.width, &out.height, &out.width);
        break;
    case DL_OP_RANDOM_FLIP:
        step->apply = uniform(rng) < op->f[0];
        break;
    case DL_OP_ROTATE90:
        if (op->i[0] % 2) {
            out.height = in.width;
            out.width = in.height;
        }
        break;
    case DL_OP_TO_FLOAT:
        out.sample_size = 4;
        break;
    case DL_OP_NORMALIZE:
        if (op->i[0] != in.channels && op->i[0] != 1)
            return fail(msg, DL_ERR_ARGUMENT, "Normalize has %d means and stds, got %s", op->i[0],
                        describe(&in));
        out.sample_size = 4;
        break;
    case DL_OP_TO_CHW:
        out.layout = DL_LAYOUT_CHW;
        break;
    case DL_OP_TO_HWC:
        out.layout = DL_LAYOUT_HWC;
        break;
    default:
        break;
    }
    step->out = out;
    return DL_OK;
}

static int plan(const dl_op_t *ops, int n, const dl_chain_input_t *input, uint64_t seed,
                dl_step_t *steps, char *msg)
{
    uint64_t rng = seed;
    dl_shape_t shape = {input->image.height, input->image.width, input->image.channels,
                        input->image.sample_size, input->layout};
    if (input->bytes != NULL && (n == 0 || ops[0].kind != DL_OP_DECODE))
        return fail(msg, DL_ERR_ARGUMENT, "%s got encoded bytes; start the chain with Decode()",
                    n ? op_name(&ops[0]) : "the chain");
    /* Every shape of the chain follows the image rule: the input's (known
     * only now, after any decode) and each op's output, before any op
     * divides by a side or allocates for it. */
    if (input->bytes == NULL && !is_image(&shape))
        return fail(msg, DL_ERR_ARGUMENT, "%s got %s: " DL_IMAGE_RULE,
                    n ? op_name(&ops[0]) : "the chain", describe(&shape));
    for (int k = 0; k < n; k++) {
        memset(&steps[k], 0, sizeof steps[k]);
        steps[k].in = shape;
        int status = plan_step(&ops[k], input, &rng, &steps[k], msg);
        if (status != DL_OK) return status;
        if (!is_image(&steps[k].out))
            return fail(msg, DL_ERR_ARGUMENT, "%s would make %s: " DL_IMAGE_RULE,
                        op_name(&ops[k]), describe(&steps[k].out));
        shape = steps[k].out;
    }
    return DL_OK;
}

/* ---- scratch memory: two growing buffers per thread --------------------- */

typedef struct {
    uint8_t *data[2];
    size_t size[2];
} dl_scratch_t;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *raw)
{
    dl_scratch_t *scratch = raw;
    free(scratch->data[0]);
    free(scratch->data[1]);
    free(scratch);
}

static void scratch_key_create(void) { pthread_key_create(&scratch_key, scratch_free); }

static uint8_t *scratch_buffer(int which, size_t bytes)
{
    pthread_once(&scratch_once, scratch_key_create);
    dl_scratch_t *scratch = pthread_getspecific(scratch_key);
    if (scratch == NULL) {
        if ((scratch = calloc(1, sizeof *scratch)) == NULL) return NULL;
        pthread_setspecific(scratch_key, scratch);
    }
    if (scratch->size[which] < bytes) {
        free(scratch->data[which]);
        scratch->size[which] = 0;
        if ((scratch->data[which] = malloc(bytes)) == NULL) return NULL;
        scratch->size[which] = bytes;
    }
    return scratch->data[which];
}

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
            snprintf(wanted, sizeof wanted, "%s", describe(&expected));
            return fail(msg, DL_ERR_MISMATCH, "the transform produced %s, the batch holds %s",
                        describe(last), wanted);
        }
        return DL_OK;
    }
    size_t bytes = shape_bytes(last);
    size_t rounded = (bytes + DL_ALIGNMENT - 1) / DL_ALIGNMENT * DL_ALIGNMENT;
    output->data = aligned_alloc(DL_ALIGNMENT, rounded ? rounded : DL_ALIGNMENT);
    if (output->data == NULL) return fail(msg, DL_ERR_NOMEM, "cannot allocate %zu bytes", bytes);
    output->height = last->height;
    output->width = last->width;
    output->channels = last->channels;
    output->sample_size = last->sample_size;
    output->layout = last->layout;
    output->row_stride = (ptrdiff_t)last->width * last->channels * last->sample_size;
    return DL_OK;
}

/* How much larger than its target a DCT-scaled image must stay: the resize
 * that follows then still averages several scaled pixels per output pixel,
 * which keeps fused output within about one level of the exact chain. A
 * resized crop needs more, as its window's edges move by up to half a
 * scaled pixel when mapped to the scaled image. */
#define DL_FUSION_MARGIN 2
#define DL_FUSION_MARGIN_CROP 4

/* The JPEG DCT scale (1, 2, 4 or 8) whose output still covers `margin`
 * times height x width. */
static int dct_scale(const dl_info_t *info, int height, int width, int margin)
{
    for (int denom = 8; denom > 1; denom /= 2) {
        int h, w;
        dl_jpeg_scaled_size(info->height, info->width, denom, &h, &w);
        if (h >= margin * height && w >= margin * width) return denom;
    }
    return 1;
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
} dl_run_t;

/* Where op k writes: the output for the chain's last op, else a free scratch buffer. */
static int destination(dl_run_t *run, int k, dl_image_t *dst, int *buffer)
{
    const dl_shape_t *out = &run->steps[k].out;
    if (k == run->n - 1) {
        dl_image_t image = packed(run->output->data, out);
        if (out->layout == DL_LAYOUT_HWC) image.row_stride = run->output->row_stride;
        *dst = image;
        *buffer = -1;
        run->output_written = 1;
        return DL_OK;
    }
    *buffer = run->current_buffer == 0 ? 1 : 0;
    uint8_t *data = scratch_buffer(*buffer, shape_bytes(out));
    if (data == NULL) return fail(run->msg, DL_ERR_NOMEM, "cannot allocate scratch memory");
    *dst = packed(data, out);
    return DL_OK;
}

static int run_decode(dl_run_t *run, dl_image_t *dst)
{
    const dl_op_t *op = &run->ops[0];
    const dl_step_t *step = &run->steps[0];
    int denom = 1;
    dl_info_t info;
    /* Fusion: a JPEG that is shrunk next is decoded at the DCT scale that covers the target. */
    if (!op->i[3] && run->n > 1 &&
        dl_sniff(run->input->bytes, run->input->size) == DL_FMT_JPEG &&
        dl_image_info(run->input->bytes, run->input->size, &info, run->msg) == DL_OK) {
        const dl_step_t *next = &run->steps[1];
        if (run->ops[1].kind == DL_OP_RESIZE)
            denom = dct_scale(&info, next->out.height, next->out.width, DL_FUSION_MARGIN);
        else if (run->ops[1].kind == DL_OP_RANDOM_RESIZED_CROP) {
            int h = (int)((long long)info.height * next->out.height / next->height);
            int w = (int)((long long)info.width * next->out.width / next->width);
            denom = dct_scale(&info, h, w, DL_FUSION_MARGIN_CROP);
        }
    }
    if (denom > 1) {
        int h, w;
        dl_jpeg_scaled_size(step->out.height, step->out.width, denom, &h, &w);
        dst->height = h;
        dst->width = w;
        dst->row_stride = (ptrdiff_t)w * dst->channels;
    }
    return dl_decode(run->input->bytes, run->input->size, denom, dst->height, dst->width,
                     dst->channels, dst->data, dst->row_stride, run->msg);
}

/* A resize of `src` into `dst` from the logical window (top, left, height,
 * width) of the logical input size `logical`: scaled to the actual size of
 * `src`, which a fused decode may have shrunk. */
static int resize_window(dl_run_t *run, const dl_op_t *op, const dl_step_t *step,
                         const dl_image_t *dst)
{
    dl_image_t src = run->current;
    double ry = (double)src.height / step->in.height, rx = (double)src.width / step->in.width;
    int top = (int)nearbyint(step->top * ry), left = (int)nearbyint(step->left * rx);
    int h = (int)nearbyint((step->top + step->height) * ry) - top;
    int w = (int)nearbyint((step->left + step->width) * rx) - left;
    if (h < 1) h = 1;
    if (w < 1) w = 1;
    if (top + h > src.height) top = src.height - h;
    if (left + w > src.width) left = src.width - w;
    src = dl_crop_view(src, top, left, h, w);
    if (dl_resize(src.data, src.row_stride, src.height, src.width, src.channels, dst->data,
                  dst->row_stride, dst->height, dst->width, op->i[2], 1) != 0)
        return fail(run->msg, DL_ERR_NOMEM, "cannot allocate scratch memory");
    return DL_OK;
}

static void fill_pixel(const dl_op_t *op, int channels, int sample_size, uint8_t *pixel)
{
    for (int k = 0; k < channels; k++) {
        if (sample_size == 1) pixel[k] = (uint8_t)op->f[k];
        else ((float *)pixel)[k] = (float)op->f[k];
    }
}

/* Runs op k (or ops k and k+1 when fused); returns the number of ops consumed or < 0. */
static int run_op(dl_run_t *run, int k, int *status)
{
    const dl_op_t *op = &run->ops[k];
    const dl_step_t *step = &run->steps[k];
    dl_image_t dst, src = run->current;
    int buffer, consumed = 1;
    uint8_t pixel[16];
    float mean[4], std[4];
    *status = DL_OK;

    /* Ops that only change the view, or do nothing for this item. */
    if (op->kind == DL_OP_CROP || (op->kind == DL_OP_CENTER_CROP && step->top >= 0 &&
                                   step->left >= 0)) {
        run->current = dl_crop_view(src, step->top, step->left, step->out.height, step->out.width);
        return 1;
    }
    if ((op->kind == DL_OP_RANDOM_FLIP && !step->apply) ||
        (op->kind == DL_OP_TO_FLOAT && step->in.sample_size == 4) ||
        (op->kind == DL_OP_TO_CHW && step->in.layout == DL_LAYOUT_CHW) ||
        (op->kind == DL_OP_TO_HWC && step->in.layout == DL_LAYOUT_HWC) ||
        (op->kind == DL_OP_ROTATE90 && op->i[0] % 4 == 0))
        return 1;
    /* ToFloat then Normalize (then ToChw): Normalize reads uint8 directly. */
    if (op->kind == DL_OP_TO_FLOAT && k + 1 < run->n && run->ops[k + 1].kind == DL_OP_NORMALIZE)
        return 1;
    if (op->kind == DL_OP_NORMALIZE && k + 1 < run->n && run->ops[k + 1].kind == DL_OP_TO_CHW &&
        step->in.layout == DL_LAYOUT_HWC) {
        k += 1;
        consumed = 2;
    }
    if ((*status = destination(run, k, &dst, &buffer)) != DL_OK) return -1;
    switch (op->kind) {
    case DL_OP_DECODE:
        *status = run_decode(run, &dst);
        break;
    case DL_OP_CONVERT:
        dl_convert_rows(src.data, src.row_stride, src.channels, dst.data, dst.row_stride,
                        dst.channels, src.height, src.width);
        break;
    case DL_OP_CENTER_CROP: /* larger than the image: pad with zeros */
    case DL_OP_RANDOM_CROP:
    case DL_OP_PAD:
    case DL_OP_PAD_TO: {
        /* Crops record their window in input coordinates, pads where the input goes. */
        int is_crop = op->kind == DL_OP_CENTER_CROP || op->kind == DL_OP_RANDOM_CROP;
        ptrdiff_t top = is_crop ? -step->top : step->top;
        ptrdiff_t left = is_crop ? -step->left : step->left;
        memset(pixel, 0, sizeof pixel);
        if (!is_crop) fill_pixel(op, src.channels, src.sample_size, pixel);
        if (dl_pad(&src, &dst, top, left, op->kind == DL_OP_PAD ? op->i[4] : DL_PAD_CONSTANT,
                   pixel) != 0)
            *status = fail(run->msg, DL_ERR_NOMEM, "cannot allocate scratch memory");
        break;
    }
    case DL_OP_RANDOM_RESIZED_CROP:
        *status = resize_window(run, op, step, &dst);
        break;
    case DL_OP_RESIZE:
        if (dl_resize(src.data, src.row_stride, src.height, src.width, src.channels, dst.data,
                      dst.row_stride, dst.height, dst.width, op->i[3], op->i[4]) != 0)
            *status = fail(run->msg, DL_ERR_NOMEM, "cannot allocate scratch memory");
        break;
    case DL_OP_FLIP:
    case DL_OP_RANDOM_FLIP:
        dl_flip(&src, &dst, op->i[0]);
        break;
    case DL_OP_ROTATE90:
        dl_rotate90(&src, &dst, op->i[0] % 4);
        break;
    case DL_OP_TO_FLOAT:
        for (int y = 0; y < src.height; y++)
            dl_to_float(src.data + y * src.row_stride, (float *)(dst.data + y * dst.row_stride),
                        (ptrdiff_t)src.width * src.channels);
        break;
    case DL_OP_NORMALIZE:
        for (int c = 0; c < 4; c++) {
            mean[c] = (float)op->f[op->i[0] == 1 ? 0 : c];
            std[c] = (float)op->f[4 + (op->i[0] == 1 ? 0 : c)];
        }
        if (consumed == 2)
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
        break;
    case DL_OP_TO_CHW:
        dl_hwc_to_chw(&src, dst.data);
        break;
    case DL_OP_TO_HWC:
        dl_chw_to_hwc(src.data, &dst);
        break;
    default:
        break;
    }
    if (*status != DL_OK) return -1;
    run->current = dst;
    run->current_layout = run->steps[k].out.layout;
    run->current_buffer = buffer;
    return consumed;
}

int dl_chain_run(const dl_op_t *ops, int n_ops, const dl_chain_input_t *input, uint64_t seed,
                 dl_chain_output_t *output, char *msg)
{
    dl_step_t stack_steps[16];
    dl_step_t *steps = n_ops <= 16 ? stack_steps : malloc(sizeof *steps * (size_t)n_ops);
    int status;
    if (steps == NULL) return fail(msg, DL_ERR_NOMEM, "cannot allocate the chain's plan");
    msg[0] = 0;
    status = plan(ops, n_ops, input, seed, steps, msg);
    dl_shape_t last = n_ops ? steps[n_ops - 1].out
                            : (dl_shape_t){input->image.height, input->image.width,
                                           input->image.channels, input->image.sample_size,
                                           input->layout};
    int allocated = output->data == NULL;
    if (status == DL_OK) status = prepare_output(&last, output, msg);
    if (status != DL_OK) goto done;
    dl_run_t run = {ops, steps, n_ops, input, output, msg, input->image, input->layout, -1, 0};
    for (int k = 0; k < n_ops;) {
        int consumed = run_op(&run, k, &status);
        if (consumed < 0) break;
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
