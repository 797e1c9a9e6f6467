/* The automatic augmentation policies as chain ops: torchvision's
 * RandAugment, TrivialAugmentWide and AutoAugment, with their op spaces
 * (DL_AUGMENT_OPS, dl_tables.h), magnitude tables and draws, each sub-op
 * running the colour kernels (dl_colour.h) or the affine warp
 * (dl_geometry.h) as torchvision's _apply_op runs Pillow's functions.
 *
 * The plan pass draws one 64-bit seed from the item's generator
 * (step->noise); the run pass draws the sub-ops and their magnitudes from
 * it, so an item's policy depends only on (seed, epoch, index). */
#include <math.h>

#include "dl_colour.h"
#include "dl_geometry.h"
#include "dl_internal.h"

/* torch.linspace(start, end, bins)[index] as torch's CPU kernel computes it
 * in float32: from the start for the first half, from the end after. */
static double linspace(double start, double end, int bins, int index)
{
    float s = (float)start, e = (float)end;
    if (bins < 2) return s;
    float step = (e - s) / (float)(bins - 1);
    return index < bins / 2 ? s + step * (float)index : e - step * (float)(bins - index - 1);
}

/* The magnitude of bin `bin` of `op`: RandAugment's and AutoAugment's space,
 * or TrivialAugmentWide's (`wide`), for an h x w image. Posterize's bits are
 * 8 - round(bin / ((bins - 1) / steps)), rounded half to even as torch. */
static double magnitude(int wide, int op, int bin, int bins, int h, int w)
{
    switch (op) {
    case DL_AUGMENT_SHEAR_X:
    case DL_AUGMENT_SHEAR_Y: return linspace(0.0, wide ? 0.99 : 0.3, bins, bin);
    case DL_AUGMENT_TRANSLATE_X: return linspace(0.0, wide ? 32.0 : 150.0 / 331.0 * w, bins, bin);
    case DL_AUGMENT_TRANSLATE_Y: return linspace(0.0, wide ? 32.0 : 150.0 / 331.0 * h, bins, bin);
    case DL_AUGMENT_ROTATE: return linspace(0.0, wide ? 135.0 : 30.0, bins, bin);
    case DL_AUGMENT_BRIGHTNESS:
    case DL_AUGMENT_COLOR:
    case DL_AUGMENT_CONTRAST:
    case DL_AUGMENT_SHARPNESS: return linspace(0.0, wide ? 0.99 : 0.9, bins, bin);
    case DL_AUGMENT_POSTERIZE:
        return 8 - (int)rintf((float)bin / (float)((bins - 1) / (wide ? 6.0 : 4.0)));
    case DL_AUGMENT_SOLARIZE: return linspace(255.0, 0.0, bins, bin);
    default: return 0.0;
    }
}

/* The ops whose magnitude takes a random sign (ShearX .. Sharpness). */
static int is_signed(int op) { return op >= DL_AUGMENT_SHEAR_X && op <= DL_AUGMENT_SHARPNESS; }

/* The ops with a magnitude table (TrivialAugmentWide draws a bin for them). */
static int has_magnitudes(int op)
{
    return op != DL_AUGMENT_IDENTITY && op != DL_AUGMENT_AUTOCONTRAST &&
           op != DL_AUGMENT_EQUALIZE && op != DL_AUGMENT_INVERT;
}

/* ---- AutoAugment's sub-policies (torchvision's _get_policies) ----------- */

typedef struct {
    signed char op;
    double p;
    signed char bin; /* -1: no magnitude */
} dl_sub_policy_t;

#define S(op, p, bin) {DL_AUGMENT_##op, p, bin}
static const dl_sub_policy_t policies[DL_POLICY_COUNT][25][2] = {
    {/* imagenet */
     {S(POSTERIZE, 0.4, 8), S(ROTATE, 0.6, 9)}, {S(SOLARIZE, 0.6, 5), S(AUTOCONTRAST, 0.6, -1)},
     {S(EQUALIZE, 0.8, -1), S(EQUALIZE, 0.6, -1)}, {S(POSTERIZE, 0.6, 7), S(POSTERIZE, 0.6, 6)},
     {S(EQUALIZE, 0.4, -1), S(SOLARIZE, 0.2, 4)}, {S(EQUALIZE, 0.4, -1), S(ROTATE, 0.8, 8)},
     {S(SOLARIZE, 0.6, 3), S(EQUALIZE, 0.6, -1)}, {S(POSTERIZE, 0.8, 5), S(EQUALIZE, 1.0, -1)},
     {S(ROTATE, 0.2, 3), S(SOLARIZE, 0.6, 8)}, {S(EQUALIZE, 0.6, -1), S(POSTERIZE, 0.4, 6)},
     {S(ROTATE, 0.8, 8), S(COLOR, 0.4, 0)}, {S(ROTATE, 0.4, 9), S(EQUALIZE, 0.6, -1)},
     {S(EQUALIZE, 0.0, -1), S(EQUALIZE, 0.8, -1)}, {S(INVERT, 0.6, -1), S(EQUALIZE, 1.0, -1)},
     {S(COLOR, 0.6, 4), S(CONTRAST, 1.0, 8)}, {S(ROTATE, 0.8, 8), S(COLOR, 1.0, 2)},
     {S(COLOR, 0.8, 8), S(SOLARIZE, 0.8, 7)}, {S(SHARPNESS, 0.4, 7), S(INVERT, 0.6, -1)},
     {S(SHEAR_X, 0.6, 5), S(EQUALIZE, 1.0, -1)}, {S(COLOR, 0.4, 0), S(EQUALIZE, 0.6, -1)},
     {S(EQUALIZE, 0.4, -1), S(SOLARIZE, 0.2, 4)}, {S(SOLARIZE, 0.6, 5), S(AUTOCONTRAST, 0.6, -1)},
     {S(INVERT, 0.6, -1), S(EQUALIZE, 1.0, -1)}, {S(COLOR, 0.6, 4), S(CONTRAST, 1.0, 8)},
     {S(EQUALIZE, 0.8, -1), S(EQUALIZE, 0.6, -1)}},
    {/* cifar10 */
     {S(INVERT, 0.1, -1), S(CONTRAST, 0.2, 6)}, {S(ROTATE, 0.7, 2), S(TRANSLATE_X, 0.3, 9)},
     {S(SHARPNESS, 0.8, 1), S(SHARPNESS, 0.9, 3)}, {S(SHEAR_Y, 0.5, 8), S(TRANSLATE_Y, 0.7, 9)},
     {S(AUTOCONTRAST, 0.5, -1), S(EQUALIZE, 0.9, -1)}, {S(SHEAR_Y, 0.2, 7), S(POSTERIZE, 0.3, 7)},
     {S(COLOR, 0.4, 3), S(BRIGHTNESS, 0.6, 7)}, {S(SHARPNESS, 0.3, 9), S(BRIGHTNESS, 0.7, 9)},
     {S(EQUALIZE, 0.6, -1), S(EQUALIZE, 0.5, -1)}, {S(CONTRAST, 0.6, 7), S(SHARPNESS, 0.6, 5)},
     {S(COLOR, 0.7, 7), S(TRANSLATE_X, 0.5, 8)}, {S(EQUALIZE, 0.3, -1), S(AUTOCONTRAST, 0.4, -1)},
     {S(TRANSLATE_Y, 0.4, 3), S(SHARPNESS, 0.2, 6)}, {S(BRIGHTNESS, 0.9, 6), S(COLOR, 0.2, 8)},
     {S(SOLARIZE, 0.5, 2), S(INVERT, 0.0, -1)}, {S(EQUALIZE, 0.2, -1), S(AUTOCONTRAST, 0.6, -1)},
     {S(EQUALIZE, 0.2, -1), S(EQUALIZE, 0.6, -1)}, {S(COLOR, 0.9, 9), S(EQUALIZE, 0.6, -1)},
     {S(AUTOCONTRAST, 0.8, -1), S(SOLARIZE, 0.2, 8)}, {S(BRIGHTNESS, 0.1, 3), S(COLOR, 0.7, 0)},
     {S(SOLARIZE, 0.4, 5), S(AUTOCONTRAST, 0.9, -1)}, {S(TRANSLATE_Y, 0.9, 9), S(TRANSLATE_Y, 0.7, 9)},
     {S(AUTOCONTRAST, 0.9, -1), S(SOLARIZE, 0.8, 3)}, {S(EQUALIZE, 0.8, -1), S(INVERT, 0.1, -1)},
     {S(TRANSLATE_Y, 0.7, 9), S(AUTOCONTRAST, 0.9, -1)}},
    {/* svhn */
     {S(SHEAR_X, 0.9, 4), S(INVERT, 0.2, -1)}, {S(SHEAR_Y, 0.9, 8), S(INVERT, 0.7, -1)},
     {S(EQUALIZE, 0.6, -1), S(SOLARIZE, 0.6, 6)}, {S(INVERT, 0.9, -1), S(EQUALIZE, 0.6, -1)},
     {S(EQUALIZE, 0.6, -1), S(ROTATE, 0.9, 3)}, {S(SHEAR_X, 0.9, 4), S(AUTOCONTRAST, 0.8, -1)},
     {S(SHEAR_Y, 0.9, 8), S(INVERT, 0.4, -1)}, {S(SHEAR_Y, 0.9, 5), S(SOLARIZE, 0.2, 6)},
     {S(INVERT, 0.9, -1), S(AUTOCONTRAST, 0.8, -1)}, {S(EQUALIZE, 0.6, -1), S(ROTATE, 0.9, 3)},
     {S(SHEAR_X, 0.9, 4), S(SOLARIZE, 0.3, 3)}, {S(SHEAR_Y, 0.8, 8), S(INVERT, 0.7, -1)},
     {S(EQUALIZE, 0.9, -1), S(TRANSLATE_Y, 0.6, 6)}, {S(INVERT, 0.9, -1), S(EQUALIZE, 0.6, -1)},
     {S(CONTRAST, 0.3, 3), S(ROTATE, 0.8, 4)}, {S(INVERT, 0.8, -1), S(TRANSLATE_Y, 0.0, 2)},
     {S(SHEAR_Y, 0.7, 6), S(SOLARIZE, 0.4, 8)}, {S(INVERT, 0.6, -1), S(ROTATE, 0.8, 4)},
     {S(SHEAR_Y, 0.3, 7), S(TRANSLATE_X, 0.9, 3)}, {S(SHEAR_X, 0.1, 6), S(INVERT, 0.6, -1)},
     {S(SOLARIZE, 0.7, 2), S(TRANSLATE_Y, 0.6, 7)}, {S(SHEAR_Y, 0.8, 4), S(INVERT, 0.8, -1)},
     {S(SHEAR_X, 0.7, 9), S(AUTOCONTRAST, 0.8, -1)}, {S(SHEAR_Y, 0.8, 5), S(AUTOCONTRAST, 0.7, -1)},
     {S(SHEAR_X, 0.7, 2), S(INVERT, 0.1, -1)}},
};
#undef S

/* ---- one sub-op: torchvision's _apply_op on a PIL image ------------------ */

typedef struct {
    int filter;
    const double *fill;
    int total, done;             /* sub-ops that change the image; those run so far */
    const dl_image_t *src, *dst, *spare, *current;
} dl_policy_run_t;

static int apply(const dl_policy_run_t *r, int op, double m, const dl_image_t *src,
                 const dl_image_t *dst)
{
    static const double rad_to_deg = 180.0 / 3.141592653589793;
    int h = src->height, w = src->width;
    dl_warp_t warp = {{0}, r->filter, {0}, h, w, 0, 0};
    dl_affine_params_t p = {0.0, 0.0, 0.0, 1.0, 0.0, 0.0, w * 0.5, h * 0.5};
    for (int c = 0; c < 4; c++) warp.fill[c] = (uint8_t)r->fill[c];
    switch (op) {
    case DL_AUGMENT_SHEAR_X:
    case DL_AUGMENT_SHEAR_Y: /* degrees(atan(m)) about (0, 0) */
        *(op == DL_AUGMENT_SHEAR_X ? &p.shear_x : &p.shear_y) = atan(m) * rad_to_deg;
        p.center_x = p.center_y = 0.0;
        break;
    case DL_AUGMENT_TRANSLATE_X: p.translate_x = (double)(int)m; break;
    case DL_AUGMENT_TRANSLATE_Y: p.translate_y = (double)(int)m; break;
    case DL_AUGMENT_ROTATE: {
        int out_h, out_w;
        dl_rotation_matrix(m, w / 2.0, h / 2.0, 0, h, w, warp.matrix, &out_h, &out_w);
        return dl_affine(src, dst, &warp);
    }
    case DL_AUGMENT_BRIGHTNESS: dl_adjust_brightness(src, dst, 1.0 + m); return 0;
    case DL_AUGMENT_COLOR: dl_adjust_saturation(src, dst, 1.0 + m); return 0;
    case DL_AUGMENT_CONTRAST: dl_adjust_contrast(src, dst, 1.0 + m); return 0;
    case DL_AUGMENT_SHARPNESS: return dl_adjust_sharpness(src, dst, 1.0 + m);
    case DL_AUGMENT_POSTERIZE: dl_posterize(src, dst, (int)m); return 0;
    case DL_AUGMENT_SOLARIZE: dl_solarize(src, dst, m); return 0;
    case DL_AUGMENT_AUTOCONTRAST: dl_autocontrast(src, dst); return 0;
    case DL_AUGMENT_EQUALIZE: dl_equalize(src, dst); return 0;
    case DL_AUGMENT_INVERT: dl_invert(src, dst); return 0;
    default: dl_copy(src, dst); return 0;
    }
    dl_affine_matrix(&p, warp.matrix);
    return dl_affine(src, dst, &warp);
}

/* Counts a sub-op (r->total < 0 ... counting pass) or runs it: the sub-ops
 * alternate between dst and spare so that the last one writes dst, each
 * reading the one before (the first reads src, which is neither). */
static int sub_op(dl_policy_run_t *r, int op, double m)
{
    if (op == DL_AUGMENT_IDENTITY) return 0;
    int k = r->done++;
    if (r->total < 0) return 0;
    const dl_image_t *target = (r->total - 1 - k) % 2 == 0 ? r->dst : r->spare;
    if (apply(r, op, m, r->current, target) != 0) return -1;
    r->current = target;
    return 0;
}

/* RandAugment.forward: num_ops ops drawn uniformly, each of the fixed
 * magnitude bin, signed at random when the op is. */
static int rand_augment(const dl_op_t *op, dl_policy_run_t *r, uint64_t *rng)
{
    int h = r->src->height, w = r->src->width;
    for (int k = 0; k < op->i[0]; k++) {
        int sub = op->i[4] >= 0 ? op->i[4] : dl_randint(rng, 0, DL_AUGMENT_INVERT);
        double m = op->i[4] >= 0 ? op->f[4] : magnitude(0, sub, op->i[1], op->i[2], h, w);
        if (op->i[4] < 0 && is_signed(sub) && dl_randint(rng, 0, 2)) m = -m;
        if (sub_op(r, sub, m) != 0) return -1;
    }
    return 0;
}

/* TrivialAugmentWide.forward: one op, a uniform bin when it has
 * magnitudes, then a random sign when it is signed. */
static int trivial_augment_wide(const dl_op_t *op, dl_policy_run_t *r, uint64_t *rng)
{
    int sub = dl_randint(rng, 0, DL_AUGMENT_INVERT);
    double m = 0.0;
    if (has_magnitudes(sub))
        m = magnitude(1, sub, dl_randint(rng, 0, op->i[0]), op->i[0], r->src->height,
                      r->src->width);
    if (is_signed(sub) && dl_randint(rng, 0, 2)) m = -m;
    return sub_op(r, sub, m);
}

/* AutoAugment.forward: get_params (a sub-policy, two uniform draws, two
 * signs), then each op of the sub-policy whose draw is <= its chance, of
 * the 10-bin space, negative when its sign is 0. */
static int auto_augment(const dl_op_t *op, dl_policy_run_t *r, uint64_t *rng)
{
    const dl_sub_policy_t *chosen = policies[op->i[0]][dl_randint(rng, 0, 25)];
    double probs[2] = {dl_uniform(rng), dl_uniform(rng)};
    int signs[2] = {dl_randint(rng, 0, 2), dl_randint(rng, 0, 2)};
    for (int k = 0; k < 2; k++) {
        if (!(probs[k] <= chosen[k].p)) continue;
        int sub = chosen[k].op;
        double m = chosen[k].bin < 0 ? 0.0 : magnitude(0, sub, chosen[k].bin, 10,
                                                        r->src->height, r->src->width);
        if (is_signed(sub) && signs[k] == 0) m = -m;
        if (sub_op(r, sub, m) != 0) return -1;
    }
    return 0;
}

static int walk(const dl_op_t *op, dl_policy_run_t *r, uint64_t seed)
{
    uint64_t rng = seed;
    switch (op->kind) {
    case DL_OP_RAND_AUGMENT: return rand_augment(op, r, &rng);
    case DL_OP_TRIVIAL_AUGMENT_WIDE: return trivial_augment_wide(op, r, &rng);
    default: return auto_augment(op, r, &rng);
    }
}

/* ---- the chain op's plan and run ------------------------------------------ */

int dl_plan_policy(DL_PLAN_ARGS)
{
    (void)input;
    if (step->in.channels == 2)
        return dl_fail(msg, DL_ERR_ARGUMENT, "%s got %s; it takes 1, 3 or 4 channels",
                       dl_op_name(op), dl_describe(&step->in));
    step->noise = dl_splitmix64(rng);
    return dl_check_fill(op, 0, &step->in, msg);
}

int dl_run_policy(const dl_op_t *op, const dl_step_t *step, const dl_image_t *src,
                  const dl_image_t *dst, const dl_image_t *spare)
{
    int filter = op->kind == DL_OP_RAND_AUGMENT ? op->i[3] : op->i[1];
    dl_policy_run_t r = {filter, op->f, -1, 0, src, dst, spare, src};
    walk(op, &r, step->noise); /* counting: the same draws, nothing run */
    if (r.done == 0) {
        dl_copy(src, dst);
        return 0;
    }
    r.total = r.done;
    r.done = 0;
    return walk(op, &r, step->noise);
}
