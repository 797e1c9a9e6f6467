/* The plan pass of the augmentations (see dl_plan.c): RandomRotation and
 * RandomAffine draw torchvision's parameters and build the matrix
 * torchvision hands to Pillow (dl_geometry.h); RandomErasing draws
 * torchvision's window. dl_plan.c's tables call these through its
 * shape_<key> and plan_<key> names. */
#include <math.h>

#include "dl_geometry.h"
#include "dl_internal.h"

/* The warps (dl_geometry.h): the matrix drawn for this item, Pillow's arithmetic. */
static int check_warp(const dl_op_t *op, int fill, const dl_shape_t *in, char *msg)
{
    if (in->channels == 2)
        return dl_fail(msg, DL_ERR_ARGUMENT, "%s got %s; it takes 1, 3 or 4 channels",
                       dl_op_name(op), dl_describe(in));
    return dl_check_fill(op, fill, in, msg);
}

/* Uniform in [low, high), as torchvision's uniform_(low, high). */
static double between(uint64_t *rng, double low, double high)
{
    return low + dl_uniform(rng) * (high - low);
}

/* With expand, the size depends on the angle drawn: unknown until planned. */
dl_shape_t dl_shape_random_rotation(const dl_op_t *op, dl_shape_t in)
{
    if (op->i[1]) in.height = in.width = 0;
    return in;
}

int dl_plan_random_rotation(DL_PLAN_ARGS)
{
    int h = step->in.height, w = step->in.width;
    (void)input;
    double angle = between(rng, op->f[0], op->f[1]);
    double cx = op->i[2] ? op->f[2] : w / 2.0, cy = op->i[2] ? op->f[3] : h / 2.0;
    dl_rotation_matrix(angle, cx, cy, op->i[1], h, w, step->matrix, &step->out.height,
                       &step->out.width);
    return check_warp(op, 4, &step->in, msg);
}

int dl_plan_random_affine(DL_PLAN_ARGS)
{
    /* torchvision's RandomAffine.get_params, then F.affine's matrix for PIL. */
    int h = step->in.height, w = step->in.width;
    double max_dx = op->f[2] * w, max_dy = op->f[3] * h;
    dl_affine_params_t p;
    (void)input;
    p.angle = between(rng, op->f[0], op->f[1]);
    p.translate_x = nearbyint(between(rng, -max_dx, max_dx));
    p.translate_y = nearbyint(between(rng, -max_dy, max_dy));
    p.scale = between(rng, op->f[4], op->f[5]);
    p.shear_x = between(rng, op->f[6], op->f[7]);
    p.shear_y = between(rng, op->f[8], op->f[9]);
    p.center_x = op->i[1] ? op->f[10] : w * 0.5;
    p.center_y = op->i[1] ? op->f[11] : h * 0.5;
    dl_affine_matrix(&p, step->matrix);
    return check_warp(op, 12, &step->in, msg);
}

int dl_plan_random_erasing(DL_PLAN_ARGS)
{
    /* torchvision's RandomErasing: whether, then get_params's ten attempts at
     * a window strictly inside the image; none fitting erases nothing. */
    dl_shape_t in = step->in;
    (void)input;
    if (in.sample_size != 4)
        return dl_fail(msg, DL_ERR_ARGUMENT, "RandomErasing got %s; it erases float32 images "
                       "(put it after ToFloat or Normalize)", dl_describe(&in));
    if (!op->i[0] && op->i[1] != 1 && op->i[1] != in.channels)
        return dl_fail(msg, DL_ERR_ARGUMENT, "RandomErasing has %d values, got %s: give one "
                       "value or one per channel", op->i[1], dl_describe(&in));
    step->apply = dl_uniform(rng) < op->f[0];
    if (!step->apply) return DL_OK;
    double area = (double)in.height * in.width, log_lo = log(op->f[3]), log_hi = log(op->f[4]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double erase_area = area * between(rng, op->f[1], op->f[2]);
        double aspect = exp(between(rng, log_lo, log_hi));
        double eh = nearbyint(sqrt(erase_area * aspect)), ew = nearbyint(sqrt(erase_area / aspect));
        if (!(eh < in.height && ew < in.width)) continue;
        step->height = (int)eh;
        step->width = (int)ew;
        step->top = dl_randint(rng, 0, in.height - step->height + 1);
        step->left = dl_randint(rng, 0, in.width - step->width + 1);
        step->noise = dl_splitmix64(rng);
        return DL_OK;
    }
    step->apply = 0;
    return DL_OK;
}
