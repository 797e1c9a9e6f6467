#include "dl_shuffle.h"

#include "dl_clones.h"

/* Positions go through the network this many at a time: the rounds then
 * run over independent lanes (no branch, no dependency between lanes), so
 * the compiler vectorises them and the CPU overlaps their latencies. */
#define BLOCK 64

/* The rounds are also compiled for AVX2 (8 lanes of 32-bit multiplies),
 * picked at load time when the CPU has it (dl_clones.h). */

/* A 32-bit integer hash of low bias (Wellons' "lowbias32"): a bijection in
 * which every input bit flips each output bit with probability near 1/2. */
static inline uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7FEB352DU;
    x ^= x >> 15;
    x *= 0x846CA68BU;
    return x ^ (x >> 16);
}

/* The 64-bit finaliser of MurmurHash3, for the key schedule only. */
static inline uint64_t mix64(uint64_t z)
{
    z ^= z >> 33;
    z *= 0xFF51AFD7ED558CCDULL;
    z ^= z >> 33;
    z *= 0xC4CEB9FE1A85EC53ULL;
    return z ^ (z >> 33);
}

/* One pass of x[0..count) through the network, in place: a bijection of
 * [0, 2^bits). The rounds alternate: the high half takes a keyed hash of
 * the low one, then the low half one of the (new) high one. Both halves
 * have at most 32 bits (bits <= 63). */
DL_AVX2_CLONES
static void permute_block(const dl_shuffle_t *shuffle, uint64_t *x, int count)
{
    uint32_t high[BLOCK], low[BLOCK];
    const int low_bits = shuffle->low_bits;
    const uint32_t high_mask = shuffle->high_mask, low_mask = shuffle->low_mask;
    for (int i = 0; i < count; i++) {
        high[i] = (uint32_t)(x[i] >> low_bits);
        low[i] = (uint32_t)x[i] & low_mask;
    }
    for (int round = 0; round < DL_SHUFFLE_ROUNDS; round += 2) {
        const uint32_t key_high = shuffle->keys[round], key_low = shuffle->keys[round + 1];
        for (int i = 0; i < count; i++) {
            high[i] ^= mix32(low[i] ^ key_high) & high_mask;
            low[i] ^= mix32(high[i] ^ key_low) & low_mask;
        }
    }
    for (int i = 0; i < count; i++)
        x[i] = ((uint64_t)high[i] << low_bits) | low[i];
}

void dl_shuffle_init(dl_shuffle_t *shuffle, uint64_t n, uint64_t key0, uint64_t key1,
                     uint64_t stream)
{
    int bits = 0;
    while (bits < 64 && ((n - 1) >> bits) != 0)
        bits++;
    const int high_bits = bits / 2, low_bits = bits - bits / 2;
    shuffle->n = n;
    shuffle->low_bits = low_bits;
    shuffle->high_mask = (uint32_t)(((uint64_t)1 << high_bits) - 1);
    shuffle->low_mask = (uint32_t)(((uint64_t)1 << low_bits) - 1);
    /* A walk from a position p < n visits distinct values (the cycle of p
     * under a bijection), all >= n but the last: at most 2^bits - n + 1
     * steps. bits <= 63 as n < 2^63, so the shift cannot overflow. */
    shuffle->walk_limit = ((uint64_t)1 << bits) - n + 1;
    /* Round keys: a counter (Weyl sequence) through the mixer, started at
     * a hash of the whole key and the stream. */
    uint64_t state = mix64(key0 ^ mix64(key1 ^ mix64(stream ^ 0x2545F4914F6CDD1DULL)));
    for (int round = 0; round < DL_SHUFFLE_ROUNDS; round++) {
        state += 0x9E3779B97F4A7C15ULL;
        shuffle->keys[round] = (uint32_t)(mix64(state) >> 32);
    }
}

int dl_shuffle_fill(const dl_shuffle_t *shuffle, uint64_t start, uint64_t step, int64_t *out,
                    ptrdiff_t count)
{
    /* BLOCK lanes, each carrying one position through its walk. After every
     * pass through the network the lanes that landed in [0, n) write their
     * index and take the next positions; the others walk on. Every pass
     * thus runs on full lanes, and no branch depends on where a lane landed
     * (a coin toss the CPU cannot predict). */
    const uint64_t n = shuffle->n, walk_limit = shuffle->walk_limit;
    uint64_t x[BLOCK], steps[BLOCK];
    ptrdiff_t slot[BLOCK];
    int64_t discard;
    ptrdiff_t next = 0;
    int active = 0;
    for (;;) {
        for (; active < BLOCK && next < count; active++, next++) {
            const uint64_t position = start + (uint64_t)next * step;
            x[active] = position < n ? position : position % n;
            slot[active] = next;
            steps[active] = 0;
        }
        if (active == 0)
            return 0;
        permute_block(shuffle, x, active);
        int walking = 0;
        for (int i = 0; i < active; i++) {
            const int landed = x[i] < n;
            int64_t *target = landed ? &out[slot[i]] : &discard;
            *target = (int64_t)x[i];
            if (++steps[i] > walk_limit)
                return -1;
            x[walking] = x[i];
            slot[walking] = slot[i];
            steps[walking] = steps[i];
            walking += !landed;
        }
        active = walking;
    }
}

static inline uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** (Blackman and Vigna, 2018): the next 64 random bits. */
static inline uint64_t xoshiro_next(uint64_t s[4])
{
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* A uniform draw from [0, bound), bound >= 1 (Lemire, "Fast random integer
 * generation in an interval", 2019). */
static inline uint64_t draw_below(uint64_t s[4], uint64_t bound)
{
    __uint128_t product = (__uint128_t)xoshiro_next(s) * bound;
    uint64_t low = (uint64_t)product;
    if (low < bound) {
        const uint64_t threshold = -bound % bound;
        while (low < threshold) {
            product = (__uint128_t)xoshiro_next(s) * bound;
            low = (uint64_t)product;
        }
    }
    return (uint64_t)(product >> 64);
}

void dl_shuffle_exact_steps(int64_t *values, ptrdiff_t n, ptrdiff_t from, ptrdiff_t to,
                            uint64_t state[4])
{
    if ((state[0] | state[1] | state[2] | state[3]) == 0)
        state[0] = 0x9E3779B97F4A7C15ULL;
    if (to > n - 1)
        to = n - 1;  /* the last entry is final once all before it are */
    for (ptrdiff_t i = from; i < to; i++) {
        const ptrdiff_t j = i + (ptrdiff_t)draw_below(state, (uint64_t)(n - i));
        const int64_t kept = values[i];
        values[i] = values[j];
        values[j] = kept;
    }
}

void dl_shuffle_exact(int64_t *values, ptrdiff_t n, const uint64_t state[4])
{
    uint64_t s[4] = {state[0], state[1], state[2], state[3]};
    dl_shuffle_exact_steps(values, n, 0, n, s);
}
