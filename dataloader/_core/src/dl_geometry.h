/* Affine warps of uint8 HWC images (1, 3 or 4 channels), as Pillow's
 * Image.transform(size, AFFINE, matrix, resample, fillcolor=fill), which
 * torchvision's rotate and affine call for PIL images; and the matrices
 * torchvision and Pillow build for a rotation (Image.rotate) and for an
 * affine map (torchvision's _get_inverse_affine_matrix).
 *
 * A matrix maps each output pixel's centre back into the input: output
 * pixel (x, y) reads the input at
 *     (m[0] (x + 0.5) + m[1] (y + 0.5) + m[2],  m[3] (x + 0.5) + m[4] (y + 0.5) + m[5])
 * in pixel units, (0, 0) being the input's top-left corner. Outputs reading
 * outside the input take `fill` (one sample per channel).
 *
 * This is the C API the policy ops (RandAugment and the others) call with
 * their own parameters; no function here touches Python or allocates. */
#ifndef DL_GEOMETRY_H
#define DL_GEOMETRY_H

#include <stdint.h>

#include "dl_ops.h"

/* What a random affine draw resolves to, in torchvision's terms: degrees
 * (positive turns the picture clockwise on screen, as F.affine), a
 * translation in pixels, a scale, shears in degrees, and the centre in
 * pixel coordinates (x, y). */
typedef struct {
    double angle, translate_x, translate_y, scale, shear_x, shear_y, center_x, center_y;
} dl_affine_params_t;

/* torchvision's _get_inverse_affine_matrix(center, angle, translate, scale,
 * shear): the matrix F.affine hands to Pillow. */
void dl_affine_matrix(const dl_affine_params_t *params, double matrix[6]);

/* Pillow's Image.rotate(angle, expand=expand, center=(center_x, center_y))
 * on an h x w image: the matrix (angle in degrees, counter-clockwise on
 * screen; its sine and cosine rounded to 15 decimals as Pillow rounds them)
 * and the output size, which with `expand` is the rotated corners' bounding
 * box as Pillow computes it. */
void dl_rotation_matrix(double angle, double center_x, double center_y, int expand, int h,
                        int w, double matrix[6], int *out_h, int *out_w);

/* One warp: the matrix, the filter (DL_FILTER_NEAREST or DL_FILTER_BILINEAR),
 * the fill (one sample per channel), the size of the whole output (which
 * decides Pillow's arithmetic path) and where the part written lies in it. */
typedef struct {
    double matrix[6];
    int filter;
    uint8_t fill[4];
    int out_h, out_w;   /* the whole output */
    int top, left;      /* dst is the window of the whole output at (top, left) */
} dl_warp_t;

/* Warps `src` into `dst` (both uint8, same channels: 1, 3 or 4) as `warp`
 * says: dst receives outputs (top + y, left + x) of the whole warp, the same
 * bytes as those outputs of the whole warp (so a crop after a warp costs
 * only its window). Pillow's arithmetic: nearest truncates the mapped
 * coordinate as Pillow's fast affine path does (16.16 fixed point, or
 * doubles when the whole output's corners leave its range or the map is a
 * pure scale), accumulated along rows as it accumulates them; bilinear
 * clamps its neighbours at the edges and truncates the result; 4 channels
 * are resampled premultiplied by alpha, as Pillow's RGBa, and the fill is
 * taken as premultiplied too. Returns 0, or -1 for an unsupported filter,
 * sample size, channel count or window. */
int dl_affine(const dl_image_t *src, const dl_image_t *dst, const dl_warp_t *warp);

#endif
