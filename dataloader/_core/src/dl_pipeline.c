/* The run pass of a transform chain (see dl_pipeline.h): the pixel work of
 * the steps the plan pass (dl_plan.c) resolved, through two per-thread
 * scratch buffers, the last op writing straight into the output. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl_internal.h"
#include "dl_resize.h"

#define DL_ALIGNMENT 64

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

/* How much larger than its target a DCT-scaled image must stay: the resize
 * that follows then still averages several scaled pixels per output pixel,
 * which keeps fused output within about one level of the exact chain. A
 * resized crop needs more, as its window's edges move by up to half a
 * scaled pixel when mapped to the scaled image. */
#define DL_FUSION_MARGIN 2
#define DL_FUSION_MARGIN_CROP 4

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
    if (data == NULL) return dl_fail(run->msg, DL_ERR_NOMEM, "cannot allocate scratch memory");
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
            denom = dl_jpeg_scale_for(info.height, info.width, DL_FUSION_MARGIN * next->out.height,
                                      DL_FUSION_MARGIN * next->out.width);
        else if (run->ops[1].kind == DL_OP_RANDOM_RESIZED_CROP) {
            int h = (int)((long long)info.height * next->out.height / next->height);
            int w = (int)((long long)info.width * next->out.width / next->width);
            denom = dl_jpeg_scale_for(info.height, info.width, DL_FUSION_MARGIN_CROP * h,
                                      DL_FUSION_MARGIN_CROP * w);
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
        return dl_fail(run->msg, DL_ERR_NOMEM, "cannot allocate scratch memory");
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
            *status = dl_fail(run->msg, DL_ERR_NOMEM, "cannot allocate scratch memory");
        break;
    }
    case DL_OP_RANDOM_RESIZED_CROP:
        *status = resize_window(run, op, step, &dst);
        break;
    case DL_OP_RESIZE:
        if (dl_resize(src.data, src.row_stride, src.height, src.width, src.channels, dst.data,
                      dst.row_stride, dst.height, dst.width, op->i[3], op->i[4]) != 0)
            *status = dl_fail(run->msg, DL_ERR_NOMEM, "cannot allocate scratch memory");
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
