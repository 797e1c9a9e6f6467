/* How the vectorised resize passes (dl_resize_avx2.c) read their weights:
 * Pillow's fixed-point weights rewritten, exactly, as 16-bit values (whole,
 * or split in halves) for the AVX2 loops, or as signed base-256 digits for
 * the AVX-512 VNNI ones; see dl_resize_avx2.h.  Plain C: the plan is made
 * once per pass, the loops read it for every row. */
#include <stdlib.h>

#include "dl_resize.h"
#include "dl_resize_avx2.h"

/* What the plan needs to know of a pass's weights, from one scan: the
 * smallest and largest, and the bits any of them has. */
typedef struct {
    int32_t low, high, ored;
} dl_weights_range_t;

static dl_weights_range_t dl_weights_range(const int32_t *weights, size_t count)
{
    dl_weights_range_t r = {0, 0, 0};
    for (size_t i = 0; i < count; i++) {
        r.low = weights[i] < r.low ? weights[i] : r.low;
        r.high = weights[i] > r.high ? weights[i] : r.high;
        r.ored |= weights[i];
    }
    return r;
}

/* Whether every weight, shifted right by `shift`, lies in lo..hi. */
static int dl_within(const dl_weights_range_t *r, int shift, int32_t lo, int32_t hi)
{
    return r->low >> shift >= lo && r->high >> shift <= hi;
}

int dl_halves_fit(const int32_t *weights, size_t count)
{
    dl_weights_range_t r = dl_weights_range(weights, count);
    return dl_within(&r, DL_SPLIT_BITS, INT16_MIN, INT16_MAX);
}

/* A weight that fits 16 bits once `drop` trailing bits, zero in every
 * weight, are dropped: then the sums are the portable loop's divided by
 * 2^drop, exactly, and shifting them by bits - drop (after adding half of
 * that) gives the same bytes.  Returns the largest drop needed, or -1 when
 * some weight does not fit 16 bits whatever is dropped. */
static int dl_whole_drop(const dl_weights_range_t *r, int bits)
{
    int drop = 0;
    while (!dl_within(r, drop, INT16_MIN, INT16_MAX) && drop < bits && !(r->ored >> drop & 1))
        drop++;
    return dl_within(r, drop, INT16_MIN, INT16_MAX) ? drop : -1;
}

/* One tap pair's weights (t0 in the low 16 bits) as the AVX2 loops read
 * them: one word when whole (`drop` >= 0, the weights shifted right by it),
 * else two, the lo halves then the hi halves. */
static void dl_pair_words(int32_t t0, int32_t t1, int drop, uint32_t *at)
{
    if (drop >= 0) {
        at[0] = (uint32_t)(uint16_t)(t0 >> drop) | (uint32_t)(uint16_t)(t1 >> drop) << 16;
        return;
    }
    at[0] = (uint32_t)(uint16_t)(t0 & ((1 << DL_SPLIT_BITS) - 1)) |
            (uint32_t)(uint16_t)(t1 & ((1 << DL_SPLIT_BITS) - 1)) << 16;
    at[1] = (uint32_t)(uint16_t)(t0 >> DL_SPLIT_BITS) |
            (uint32_t)(uint16_t)(t1 >> DL_SPLIT_BITS) << 16;
}

/* One quad of taps' weights, shifted right by `drop`, as `digits` words of
 * signed base-256 digits (see dl_horizontal_pixel_vnni): digit d of tap i
 * in byte i of word d. */
static void dl_quad_words(const int32_t *taps, int drop, int digits, uint32_t *at)
{
    uint32_t word[3] = {0, 0, 0}; /* built in registers, stored once */
    for (int i = 0; i < 4; i++) {
        int32_t v = taps[i] >> drop;
        for (int d = 0; d < 3; d++) {
            int32_t digit = (int32_t)(int8_t)(uint8_t)v; /* -128..127 */
            word[d] |= (uint32_t)(uint8_t)digit << 8 * i;
            v = (v - digit) >> 8; /* exact: v - digit is a multiple of 256 */
        }
    }
    for (int d = 0; d < digits; d++)
        at[d] = word[d];
}

/* The plan for these weights and a window of `widest` taps; returns 0, or 1
 * when they do not suit the vectorised passes (a weight whose high half, or
 * whose third base-256 digit, does not fit a 16-bit value, or a byte: never
 * for normalised weights, which are near 1). */
static int dl_resize_plan(const int32_t *weights, size_t count, int bits, int widest,
                          dl_resize_plan_t *plan)
{
    dl_weights_range_t r = dl_weights_range(weights, count);
    int drop = dl_whole_drop(&r, bits);
    plan->vnni = dl_resize_vnni(-1);
    /* VNNI's quads of taps, but pairs for windows of 2 taps (upscales), half
     * of whose quads would be zero weights (dl_horizontal_pixel_pairs). */
    plan->taps = plan->vnni && widest > 2 ? 4 : 2;
    plan->units = (widest + plan->taps - 1) / plan->taps;
    plan->drop = drop > 0 ? drop : 0;
    if (plan->taps == 4) { /* the signed base-256 digits of every weight: 2 or 3 */
        plan->kind = plan->words = dl_within(&r, plan->drop, -32896, 32639) ? 2 : 3;
        return !dl_within(&r, plan->drop, -8421504, 8355711);
    }
    plan->kind = drop < 0; /* split */
    plan->words = plan->kind + 1;
    return !dl_within(&r, DL_SPLIT_BITS, INT16_MIN, INT16_MAX);
}

/* The weights of `outputs` outputs as the plan has them, output xx's
 * window starting at input start[xx] (at its first tap without start). */
static void dl_resize_plan_words(const dl_resize_plan_t *plan, int outputs, int ksize, const int *bounds,
                          const int32_t *weights, const int *start, uint32_t *w)
{
    for (int xx = 0; xx < outputs; xx++) {
        const int32_t *k = weights + (ptrdiff_t)xx * ksize;
        int n = bounds[2 * xx + 1], j = start == NULL ? 0 : start[xx] - bounds[2 * xx];
        for (int u = 0; u < plan->units; u++) {
            int32_t taps[4]; /* of the window: the output's taps j .. */
            uint32_t *at = w + ((ptrdiff_t)xx * plan->units + u) * plan->words;
            for (int t = 0; t < plan->taps; t++, j++)
                taps[t] = j >= 0 && j < n ? k[j] : 0;
            if (plan->taps == 4)
                dl_quad_words(taps, plan->drop, plan->kind, at);
            else
                dl_pair_words(taps[0], taps[1], plan->kind ? -1 : plan->drop, at);
        }
    }
}

/* A plan and its words for `outputs` outputs: w (to free), or NULL with
 * *status 1 when the weights do not suit the vectorised passes or the row
 * is shorter than `shortest` taps, -1 when memory runs out. */
uint32_t *dl_planned_words(int outputs, int ksize, const int *bounds,
                                  const int32_t *weights, int bits, int in_size, int *start,
                                  dl_resize_plan_t *plan, int *status)
{
    int widest = 1, taps;
    uint32_t *w;
    for (int xx = 0; xx < outputs; xx++)
        widest = bounds[2 * xx + 1] > widest ? bounds[2 * xx + 1] : widest;
    *status = 1;
    if (dl_resize_plan(weights, (size_t)outputs * (size_t)ksize, bits, widest, plan) != 0)
        return NULL;
    taps = plan->units * plan->taps;
    if (start != NULL && (in_size < 4 || in_size < taps))
        return NULL;
    *status = -1;
    w = malloc(sizeof(uint32_t) * (size_t)plan->words * (size_t)plan->units * (size_t)outputs);
    if (w == NULL)
        return NULL;
    for (int xx = 0; start != NULL && xx < outputs; xx++)
        start[xx] = bounds[2 * xx] < in_size - taps ? bounds[2 * xx] : in_size - taps;
    dl_resize_plan_words(plan, outputs, ksize, bounds, weights, start, w);
    *status = 0;
    return w;
}
