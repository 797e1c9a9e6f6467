/* The colour and filter ops of a transform chain: their shape rules and
 * plans (the draws, called by dl_plan.c's tables as plan_<key>) and their
 * runs (the kernels of dl_colour.c on one item, called by dl_pipeline.c as
 * run_<key>). Each op keeps its input's size; only Grayscale may change
 * the channels. Draws follow torchvision's order: ColorJitter a random
 * order of its four adjustments, then the factor of each one given
 * (brightness, contrast, saturation, hue); the others one chance `p`. An
 * op whose chance is 0 or 1, or whose range is one value, draws nothing. */
#include "dl_colour.h"
#include "dl_internal.h"

/* ---- plans ------------------------------------------------------------------ */

/* Whether an op of chance p applies to this item. */
static int chance(double p, uint64_t *rng)
{
    return p >= 1.0 || (p > 0.0 && dl_uniform(rng) < p);
}

/* Uniform in [low, high]; no draw for a single value. */
static double between(const double *range, uint64_t *rng)
{
    return range[0] == range[1] ? range[0] : range[0] + dl_uniform(rng) * (range[1] - range[0]);
}

static int plan_chance(const dl_op_t *op, double p, uint64_t *rng, dl_step_t *step)
{
    (void)op;
    step->apply = chance(p, rng);
    return DL_OK;
}

int dl_plan_color_jitter(const dl_op_t *op, const dl_chain_input_t *input, uint64_t *rng,
                         dl_step_t *step, char *msg)
{
    (void)input, (void)msg;
    /* torch.randperm(4): a uniform order, Fisher-Yates from the last slot. */
    for (int j = 0; j < 4; j++) step->order[j] = j;
    for (int j = 3; j > 0; j--) {
        int swap = (int)(dl_uniform(rng) * (j + 1));
        swap = swap > j ? j : swap;
        int kept = step->order[j];
        step->order[j] = step->order[swap];
        step->order[swap] = kept;
    }
    for (int j = 0; j < 4; j++)
        if (op->i[0] & (1 << j)) step->factors[j] = between(&op->f[2 * j], rng);
    step->apply = 1;
    return DL_OK;
}

int dl_plan_grayscale(const dl_op_t *op, const dl_chain_input_t *input, uint64_t *rng,
                      dl_step_t *step, char *msg)
{
    (void)input, (void)msg;
    return plan_chance(op, op->f[0], rng, step);
}

/* num_output_channels (1 or 3), or 0: the input's (gray with its alpha kept). */
dl_shape_t dl_shape_grayscale(const dl_op_t *op, dl_shape_t in)
{
    if (op->i[0]) in.channels = op->i[0];
    return in;
}

int dl_plan_gaussian_blur(const dl_op_t *op, const dl_chain_input_t *input, uint64_t *rng,
                          dl_step_t *step, char *msg)
{
    (void)input, (void)msg;
    step->factors[0] = between(&op->f[0], rng);
    step->apply = 1;
    return DL_OK;
}

#define DL_PLAN_CHANCE(key, slot)                                                           \
    int dl_plan_##key(const dl_op_t *op, const dl_chain_input_t *input, uint64_t *rng,       \
                      dl_step_t *step, char *msg)                                            \
    {                                                                                        \
        (void)input, (void)msg;                                                              \
        return plan_chance(op, op->f[slot], rng, step);                                      \
    }
DL_PLAN_CHANCE(posterize, 0)
DL_PLAN_CHANCE(solarize, 1)
DL_PLAN_CHANCE(sharpness, 1)
DL_PLAN_CHANCE(autocontrast, 0)
DL_PLAN_CHANCE(equalize, 0)
DL_PLAN_CHANCE(invert, 0)

/* ---- runs: op k from src into dst (same size; a status) --------------------- */

int dl_run_color_jitter(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,
                        const dl_image_t *dst)
{
    /* The first adjustment reads src, the next ones work in place. */
    const dl_image_t *from = src;
    for (int j = 0; j < 4; j++) {
        int which = step->order[j];
        if (!(op->i[0] & (1 << which))) continue;
        double factor = step->factors[which];
        if (which == 0) dl_adjust_brightness(from, dst, factor);
        else if (which == 1) dl_adjust_contrast(from, dst, factor);
        else if (which == 2) dl_adjust_saturation(from, dst, factor);
        else dl_adjust_hue(from, dst, factor);
        from = dst;
    }
    if (from == src) dl_copy(src, dst);
    return DL_OK;
}

int dl_run_grayscale(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,
                     const dl_image_t *dst)
{
    (void)op, (void)step;
    dl_grayscale(src, dst);
    return DL_OK;
}

int dl_run_gaussian_blur(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,
                         const dl_image_t *dst)
{
    double sigma = step->factors[0];
    return dl_gaussian_blur(src, dst, op->i[0], op->i[1], sigma, sigma) ? DL_ERR_NOMEM : DL_OK;
}

int dl_run_posterize(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,
                     const dl_image_t *dst)
{
    (void)step;
    dl_posterize(src, dst, op->i[0]);
    return DL_OK;
}

int dl_run_solarize(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,
                    const dl_image_t *dst)
{
    (void)step;
    dl_solarize(src, dst, op->f[0]);
    return DL_OK;
}

int dl_run_sharpness(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,
                     const dl_image_t *dst)
{
    (void)step;
    return dl_adjust_sharpness(src, dst, op->f[0]) ? DL_ERR_NOMEM : DL_OK;
}

#define DL_RUN_PLAIN(key)                                                                   \
    int dl_run_##key(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,       \
                     const dl_image_t *dst)                                                 \
    {                                                                                       \
        (void)op, (void)step;                                                               \
        dl_##key(src, dst);                                                                 \
        return DL_OK;                                                                       \
    }
DL_RUN_PLAIN(autocontrast)
DL_RUN_PLAIN(equalize)
DL_RUN_PLAIN(invert)
