"""Shuffled orders: permutations at every length, reproducible, uniform, random access.

The statistical checks use fixed keys and seeds, so each of them either
passes or fails on every run; their thresholds are chi-square quantiles at
p = 1e-6, far from what a uniform order gives and close to what any
visible bias gives.
"""

import math
import tracemalloc
from collections import Counter

import numpy as np
import pytest

from dataloader import (
    DistributedSampler,
    RandomSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from dataloader._core.shuffle import Permutation, shuffle_exact_into
from dataloader._sampling.seeding import epoch_generator
from dataloader._sampling.shuffle import CHUNK, EXACT_BELOW, Order, draw_key

BIG = 10**10


class Huge:
    """A dataset of ``n`` items whose item ``i`` is ``i``: only its length is big."""

    def __init__(self, n=BIG):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return index


def native_order(n, key=(1, 2), stream=0):
    out = np.empty(n, dtype=np.int64)
    Permutation(n, key[0], key[1], stream).fill_into(0, 1, out)
    return out


def sampler_order(sampler, start=0):
    chunks = list(sampler._index_chunks(start))
    return np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)


def chi_square_limit(df, z=4.753):
    """The chi-square quantile at p = 1e-6 (Wilson-Hilferty)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi_square(counts):
    counts = np.asarray(counts, dtype=np.float64)
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


AWKWARD = sorted(
    {1, 2, 3, 5, 7, 13, 31, 97, 127, 4093, 65521, 1_000_003}
    | {2**k + d for k in range(1, 21) for d in (-1, 0, 1)}
)


# ---- the native bijection ----------------------------------------------------


@pytest.mark.parametrize("key", [(0, 0), (1, 2), (2**64 - 1, 2**63 + 5)])
def test_native_order_is_a_permutation_for_awkward_lengths(key):
    for n in AWKWARD:
        order = native_order(n, key)
        assert np.array_equal(np.sort(order), np.arange(n)), n


def test_native_order_is_a_permutation_across_streams_and_at_full_width():
    for stream in (0, 1, 2**64 - 1):
        assert np.array_equal(np.sort(native_order(1000, (3, 4), stream)), np.arange(1000))
    # The widest domain (63 bits): positions anywhere, indices in range and distinct.
    n = 2**63 - 25
    out = np.empty(4096, dtype=np.int64)
    Permutation(n, 5, 6).fill_into(n - 2048, 1, out)
    assert out.min() >= 0 and len(np.unique(out)) == 4096


def test_native_random_access_matches_the_whole_order():
    n = 70_001
    permutation = Permutation(n, 7, 8)
    whole = native_order(n, (7, 8))
    windows = [(0, 1, n), (123, 1, 999), (n - 5, 1, 5), (3, 8, 9000), (5, 7, 3 * n)]
    for start, step, count in windows:
        out = np.empty(count, dtype=np.int64)
        permutation.fill_into(start, step, out)
        assert np.array_equal(out, whole[(start + step * np.arange(count)) % n])


def test_native_walk_is_bounded_by_the_domain():
    # A walk only visits the 2^bits - n values past n before landing.
    for n in (1, 2, 3, 5, 2**20 + 1, BIG):
        bits = (n - 1).bit_length()
        assert Permutation(n, 0, 0).walk_limit == 2**bits - n + 1


def test_native_order_rejects_an_empty_or_too_large_range():
    with pytest.raises(ValueError, match="n="):
        Permutation(0, 1, 2)
    with pytest.raises(ValueError, match="n="):
        Permutation(2**63, 1, 2)


def test_native_orders_differ_per_key_and_stream():
    n = 10_000
    base = native_order(n, (1, 2))
    for other in [native_order(n, (1, 3)), native_order(n, (2, 2)), native_order(n, (1, 2), 1)]:
        # Two independent permutations share about one fixed position.
        assert np.count_nonzero(base == other) < 20


@pytest.mark.parametrize("n", [3, 6, 10, 16, 33])
def test_native_position_of_each_index_is_uniform_over_keys(n):
    # The network in its hardest regime: halves of one to three bits.
    keys = 4000
    orders = np.stack([native_order(n, (key, 99)) for key in range(keys)])
    cells = np.bincount((orders * n + np.arange(n)).ravel(), minlength=n * n)
    assert chi_square(cells) < chi_square_limit((n - 1) ** 2)


@pytest.mark.parametrize("n", [5, 12, 16])
def test_native_adjacent_pairs_are_uniform_over_keys(n):
    keys = 6000
    orders = np.stack([native_order(n, (key, 7)) for key in range(keys)])
    for position in (0, n // 2, n - 2):
        first, second = orders[:, position], orders[:, position + 1]
        cells = np.bincount(first * n + second, minlength=n * n).reshape(n, n)
        pairs = cells[~np.eye(n, dtype=bool)]  # an index never follows itself
        assert chi_square(pairs) < chi_square_limit(n * (n - 1) - 1)


# ---- the exact in-place shuffle (BucketBatchSampler's epochs) -------------------


def exact_order(n, seed):
    order = np.arange(n, dtype=np.int64)
    shuffle_exact_into(order, np.random.default_rng(seed).bit_generator.random_raw(4))
    return order


def test_exact_shuffle_gives_every_order_of_four_equally_often():
    draws = 24_000
    codes = [int("".join(map(str, exact_order(4, seed)))) for seed in range(draws)]
    counts = list(Counter(codes).values())
    assert len(counts) == 24  # every permutation of 4 appears
    assert chi_square(counts) < chi_square_limit(23)


@pytest.mark.parametrize("n", [2, 7, 33, 1000])
def test_exact_shuffle_places_each_index_uniformly_and_repeats_for_a_state(n):
    seeds = max(4000, 40 * n)
    positions = np.stack([exact_order(n, seed) for seed in range(seeds)])
    assert (np.sort(positions, axis=1) == np.arange(n)).all()
    index_zero_at = np.argmax(positions == 0, axis=1)  # where item 0 lands
    assert chi_square(np.bincount(index_zero_at, minlength=n)) < chi_square_limit(n - 1)
    np.testing.assert_array_equal(exact_order(n, 5), exact_order(n, 5))


def test_exact_shuffle_of_an_all_zero_state_still_shuffles():
    order = np.arange(100, dtype=np.int64)
    shuffle_exact_into(order, np.zeros(4, np.uint64))
    assert sorted(order.tolist()) == list(range(100)) and order.tolist() != list(range(100))
    with pytest.raises(ValueError, match="4 words"):
        shuffle_exact_into(order, np.zeros(3, np.uint64))


# ---- orders past the switch (the Feistel side) ---------------------------------


def bucketed(values, n, buckets):
    return np.minimum(values.astype(np.float64) * buckets / n, buckets - 1).astype(np.int64)


@pytest.mark.parametrize("n", [EXACT_BELOW + 1, 3 * EXACT_BELOW - 7, BIG])
def test_index_at_each_position_is_uniform_over_keys(n):
    keys, buckets = 4000, 16
    positions = [0, 1, n // 2, n - 1]
    found = np.empty((keys, len(positions)), dtype=np.int64)
    for key in range(keys):
        order = Order(n, (key, 1234))
        found[key] = [order.take(p, 1, 1)[0] for p in positions]
    for column in range(len(positions)):
        cells = np.bincount(bucketed(found[:, column], n, buckets), minlength=buckets)
        assert chi_square(cells) < chi_square_limit(buckets - 1)


@pytest.mark.parametrize("n", [EXACT_BELOW + 1, BIG])
def test_adjacent_indices_are_independent_over_keys(n):
    keys, buckets = 4000, 8
    firsts, seconds = np.empty(keys, np.int64), np.empty(keys, np.int64)
    for key in range(keys):
        firsts[key], seconds[key] = Order(n, (key, 4321)).take(n // 3, 1, 2)
    cells = np.bincount(
        bucketed(firsts, n, buckets) * buckets + bucketed(seconds, n, buckets),
        minlength=buckets * buckets,
    )
    assert chi_square(cells) < chi_square_limit(buckets * buckets - 1)


@pytest.mark.parametrize("n", [EXACT_BELOW + 1, 2**31 + 1, BIG])
def test_steps_between_consecutive_positions_look_random(n):
    # A weak network shows structure along the order: consecutive positions
    # landing near each other, or on indices of related low bits.
    order = Order(n, (11, 12)).take(12345, 1, 4 * CHUNK)
    steps = (order[1:] - order[:-1]) % n
    cells = np.bincount(bucketed(steps, n, 64), minlength=64)
    assert chi_square(cells) < chi_square_limit(63)
    parities = np.bincount((order[:-1] % 4) * 4 + order[1:] % 4, minlength=16)
    assert chi_square(parities) < chi_square_limit(15)


def test_position_and_index_are_uncorrelated_in_a_whole_order():
    n = EXACT_BELOW + 3
    for key in range(3):
        order = Order(n, (key, 0)).take(0, 1, n)
        correlation = np.corrcoef(np.arange(n), order)[0, 1]
        assert abs(correlation) < 5 / math.sqrt(n)


# ---- samplers -----------------------------------------------------------------------


SIZES = [1, 2, 3, 7, 64, 1000, EXACT_BELOW - 1, EXACT_BELOW, EXACT_BELOW + 1]


@pytest.mark.parametrize("n", SIZES)
def test_random_sampler_gives_a_permutation_on_both_sides_of_the_switch(n):
    order = sampler_order(RandomSampler(range(n), seed=3))
    assert np.array_equal(np.sort(order), np.arange(n))


@pytest.mark.parametrize("n", [1000, EXACT_BELOW + 1000, BIG])
def test_random_sampler_order_is_a_function_of_seed_and_epoch(n):
    def head(seed, epoch):
        sampler = RandomSampler(Huge(n), seed=seed)
        sampler.set_epoch(epoch)
        return next(sampler._index_chunks())[:1000]

    assert np.array_equal(head(1, 2), head(1, 2))
    assert np.count_nonzero(head(1, 2) != head(1, 3)) > 900
    assert np.count_nonzero(head(1, 2) != head(2, 2)) > 900


def test_random_sampler_with_a_generator_draws_a_new_order_each_epoch():
    sampler = RandomSampler(range(EXACT_BELOW + 5), generator=np.random.default_rng(0))
    first, second = sampler_order(sampler), sampler_order(sampler)
    assert np.array_equal(np.sort(first), np.sort(second))
    assert np.count_nonzero(first != second) > len(first) - 100


@pytest.mark.parametrize("n, num_samples", [(10, 35), (4, 10**5 + 3), (1000, 3 * CHUNK),
                                            (EXACT_BELOW + 1, 2 * EXACT_BELOW + 5)])
def test_random_sampler_passes_past_n_are_permutations_of_their_own(n, num_samples):
    order = sampler_order(RandomSampler(range(n), num_samples=num_samples, seed=4))
    assert len(order) == num_samples
    whole = order[: num_samples // n * n].reshape(-1, n)
    assert np.array_equal(np.sort(whole, axis=1), np.broadcast_to(np.arange(n), whole.shape))
    rest = order[num_samples // n * n :]
    assert len(np.unique(rest)) == len(rest)
    assert not np.array_equal(whole[0][:10], whole[1][:10])


def test_many_passes_over_a_tiny_dataset_are_uniform_permutations():
    # 4! orders, each pass one of them: all equally often.
    passes = sampler_order(RandomSampler(range(4), num_samples=4 * 48_000, seed=8)).reshape(-1, 4)
    codes = passes @ np.array([64, 16, 4, 1])
    counts = np.unique(codes, return_counts=True)[1]
    assert len(counts) == 24
    assert chi_square(counts) < chi_square_limit(23)


def resumable_samplers(n):
    yield RandomSampler(range(n), seed=5)
    yield RandomSampler(range(n), num_samples=n + n // 2 + 1, seed=5)
    yield RandomSampler(range(n), replacement=True, num_samples=n, seed=5)
    yield SubsetRandomSampler(range(10, 10 + 3 * n, 3), seed=5)
    yield SubsetRandomSampler(list(range(n, 0, -1)), seed=5)
    yield WeightedRandomSampler(np.ones(n), n, seed=5)
    for rank in (0, 3):
        yield DistributedSampler(range(n), 8, rank, seed=5)
        yield DistributedSampler(range(n), 8, rank, shuffle=False)
        yield DistributedSampler(range(n), 8, rank, seed=5, drop_last=True)


@pytest.mark.parametrize("n", [13, 1000, EXACT_BELOW + 3])
def test_every_sampler_starts_anywhere_in_its_order(n):
    for sampler in resumable_samplers(n):
        whole = sampler_order(sampler)
        assert len(whole) == len(sampler)
        for start in sorted({0, 1, 5, CHUNK - 1, CHUNK + 7, len(whole) // 2, len(whole) - 1,
                             len(whole)}):
            if start <= len(whole):
                assert np.array_equal(sampler_order(sampler, start), whole[start:]), (
                    type(sampler).__name__, start)


def test_subset_random_sampler_over_a_huge_range_is_never_materialised():
    indices = range(10**12, 10**12 + 3 * BIG, 3)
    sampler = SubsetRandomSampler(indices, seed=1)
    tracemalloc.start()
    try:
        head = next(sampler._index_chunks())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20
    assert len(np.unique(head)) == len(head)
    assert all(value in indices for value in head[:100].tolist())


@pytest.mark.parametrize("n, replicas", [(EXACT_BELOW + 3, 8), (EXACT_BELOW - 3, 8), (50, 8)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_shares_deal_one_order_round_robin(n, replicas, drop_last):
    shares = [sampler_order(DistributedSampler(range(n), replicas, rank, seed=9,
                                               drop_last=drop_last))
              for rank in range(replicas)]
    per_rank = n // replicas if drop_last else -(-n // replicas)
    assert all(len(share) == per_rank for share in shares)
    dealt = np.stack(shares, axis=1).ravel()  # position p is rank p % replicas's
    order = Order(n, draw_key(epoch_generator(9, 0))).take(0, 1, n)
    assert np.array_equal(dealt, np.resize(order, per_rank * replicas))


def test_distributed_sampler_over_ten_billion_items_computes_only_its_positions():
    sampler = DistributedSampler(Huge(), num_replicas=8, rank=3, seed=2)
    sampler.set_epoch(4)
    tracemalloc.start()
    try:
        head = next(iter(sampler._index_chunks()))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20
    order = Order(BIG, draw_key(epoch_generator(2, 4)))
    assert np.array_equal(head[:100], order.take(3, 8, 100))
    assert len(sampler) == BIG // 8


# ---- the loader -----------------------------------------------------------------------


def test_shuffled_loader_over_ten_billion_items_starts_at_once(make_loader):
    # No path of the loader (direct, lanes, worker threads) builds an array
    # or a list of the dataset's length.
    loader = make_loader(Huge(), batch_size=64, shuffle=True, seed=0)
    assert len(loader) == BIG // 64
    tracemalloc.start()
    try:
        with loader:
            batch = next(iter(loader))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20
    assert len(np.unique(batch)) == 64 and 0 <= batch.min() and batch.max() < BIG


def test_resume_jumps_to_its_position_in_a_huge_epoch(make_loader):
    loader = make_loader(Huge(), batch_size=64, shuffle=True, seed=6)
    delivered = 10**8 + 7  # replaying them would take hours
    loader.load_state_dict({"format": 1, "epoch": 2, "batches": delivered, "seed": 6})
    it = iter(loader)
    assert len(it) == BIG // 64 - delivered
    batch = next(it)
    loader.close()
    order = Order(BIG, draw_key(epoch_generator(6, 2)))
    assert batch.tolist() == order.take(64 * delivered, 1, 64).tolist()
