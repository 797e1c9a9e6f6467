/* A keyed random-access permutation of [0, n): position k of a shuffled
 * order maps to its index in O(1) time and memory, with no array of n.
 *
 * The domain [0, 2^bits) with 2^bits >= n (bits = the bit length of n - 1)
 * is split into a high and a low half of bits / 2 and bits - bits / 2
 * bits. Each round of an alternating (unbalanced) Feistel network XORs a
 * keyed hash of one half into the other, then swaps their roles; every
 * round is a bijection of the domain, hence so is the network. Positions
 * are mapped through it repeatedly until the result falls in [0, n)
 * (cycle-walking), which restricts a bijection of the domain to one of
 * [0, n). As 2^bits < 2n, fewer than two steps are expected per index; see
 * docs/datasets.md, "How shuffled orders are made", for the guarantees. */
#ifndef DL_SHUFFLE_H
#define DL_SHUFFLE_H

#include <stddef.h>
#include <stdint.h>

/* Rounds of the network: even, so the halves end in their starting places. */
#define DL_SHUFFLE_ROUNDS 12

typedef struct {
    uint64_t n;                          /* the permuted range is [0, n) */
    uint64_t walk_limit;                 /* the most cycle-walking steps any position takes */
    uint32_t keys[DL_SHUFFLE_ROUNDS];    /* one per round */
    uint32_t high_mask, low_mask;        /* the halves of the domain: bits / 2 and the rest */
    int low_bits;
} dl_shuffle_t;

/* The permutation of [0, n) selected by (key0, key1, stream). Each stream
 * of one key is an independent permutation (a RandomSampler drawing more
 * than n indices uses one per pass). n must be at least 1. */
void dl_shuffle_init(dl_shuffle_t *shuffle, uint64_t n, uint64_t key0, uint64_t key1,
                     uint64_t stream);

/* out[i] = the index at position (start + i * step) mod n, for i < count:
 * positions past the end wrap around to the start of the order, as
 * DistributedSampler's padding does. The caller guarantees that
 * start + (count - 1) * step does not overflow. Returns 0, or -1 if the
 * network failed to be a bijection (never: it is one by construction). */
int dl_shuffle_fill(const dl_shuffle_t *shuffle, uint64_t start, uint64_t step, int64_t *out,
                    ptrdiff_t count);

/* Shuffles values[0..n) in place, exactly: Fisher-Yates from the first
 * entry up, entry i swapped with one drawn from [i, n), each draw unbiased
 * (Lemire's multiply, rejecting the few products that would favour small
 * results), from xoshiro256** seeded with state[0..4) (an all-zero state,
 * which xoshiro cannot leave, is replaced by a fixed one). The same state
 * gives the same order. For arrays the caller holds whole: ~5 ns an entry,
 * where numpy's Generator.shuffle takes ~13. */
void dl_shuffle_exact(int64_t *values, ptrdiff_t n, const uint64_t state[4]);

/* Steps from..to of dl_shuffle_exact, advancing state in place: afterwards
 * values[from..to) hold their final entries, drawn from values[from..n).
 * Steps 0..k, then k..n, shuffle as dl_shuffle_exact(values, n, state) does,
 * so an epoch's order can be drawn a window at a time as it is needed. */
void dl_shuffle_exact_steps(int64_t *values, ptrdiff_t n, ptrdiff_t from, ptrdiff_t to,
                            uint64_t state[4]);

#endif
