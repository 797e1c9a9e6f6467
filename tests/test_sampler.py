"""Samplers: torch's constructors and meanings, numpy randomness."""

import sys
from itertools import pairwise

import numpy as np
import pytest

from dataloader import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from dataloader._sampling import sampler as sampler_module


def rng(seed=0):
    return np.random.default_rng(seed)


def test_sequential_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert len(SequentialSampler(range(4))) == 4
    assert list(SequentialSampler([])) == []


def test_sampler_yields_python_ints():
    assert {type(i) for i in RandomSampler(range(10), generator=rng())} == {int}


def test_random_sampler_permutes_and_reproduces():
    first = list(RandomSampler(range(100), generator=rng(1)))
    assert sorted(first) == list(range(100))
    assert first != list(range(100))
    assert first == list(RandomSampler(range(100), generator=rng(1)))


def test_random_sampler_epochs_differ_with_one_generator():
    sampler = RandomSampler(range(50), generator=rng(2))
    assert list(sampler) != list(sampler)


def test_random_sampler_num_samples_larger_than_dataset_without_replacement():
    values = list(RandomSampler(range(4), num_samples=10, generator=rng()))
    assert len(values) == 10
    assert sorted(values[:4]) == sorted(values[4:8]) == [0, 1, 2, 3]
    assert len(set(values[8:])) == 2


def test_random_sampler_with_replacement():
    sampler = RandomSampler(range(3), replacement=True, num_samples=1000, generator=rng())
    values = list(sampler)
    assert len(sampler) == len(values) == 1000
    assert set(values) == {0, 1, 2}


def test_random_sampler_validation():
    with pytest.raises(TypeError, match="replacement"):
        RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="num_samples"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(TypeError, match="generator"):
        RandomSampler(range(3), generator=np.random.RandomState(0))


def test_random_sampler_length_follows_the_data_source():
    data = [1, 2]
    sampler = RandomSampler(data)
    data.append(3)
    assert len(sampler) == 3


def test_torch_generator_is_accepted():
    torch = pytest.importorskip("torch")
    first = list(RandomSampler(range(20), generator=torch.Generator().manual_seed(5)))
    second = list(RandomSampler(range(20), generator=torch.Generator().manual_seed(5)))
    assert first == second and sorted(first) == list(range(20))
    # Each torch seed gives its own order (no two of 20! orders coincide by chance).
    orders = {tuple(RandomSampler(range(20), generator=torch.Generator().manual_seed(seed)))
              for seed in range(100)}
    assert len(orders) == 100


def test_large_permutation_is_produced_in_chunks():
    sampler = RandomSampler(range(10**8), generator=rng())
    it = iter(sampler)
    head = [next(it) for _ in range(1000)]
    assert len(set(head)) == 1000
    assert all(0 <= i < 10**8 for i in head)


def test_large_batches_come_out_of_numpy_chunks():
    batches = iter(BatchSampler(SequentialSampler(range(10**8)), 4096, False))
    first = next(batches)
    assert first == list(range(4096))
    assert len(BatchSampler(SequentialSampler(range(10**8)), 4096, False)) == -(-(10**8) // 4096)


def test_subset_random_sampler():
    sampler = SubsetRandomSampler([10, 20, 30, 40], generator=rng())
    values = list(sampler)
    assert sorted(values) == [10, 20, 30, 40]
    assert len(sampler) == 4
    assert list(SubsetRandomSampler([])) == []


def test_subset_random_sampler_shuffles_reproducibly():
    subset = list(range(100, 164))
    orders = []
    for seed in range(3):
        order = list(SubsetRandomSampler(subset, seed=seed))
        assert sorted(order) == subset
        # A permutation of 64 items left in place has probability 1/64!.
        assert order != subset
        assert order == list(SubsetRandomSampler(subset, seed=seed))
        orders.append(order)
    assert orders[0] != orders[1] and orders[0] != orders[2] and orders[1] != orders[2]
    # Epochs of one seed differ too, and each is a permutation of the subset.
    sampler = SubsetRandomSampler(subset, seed=0)
    sampler.set_epoch(1)
    assert sorted(sampler) == subset and list(sampler) != orders[0]
    generated = list(SubsetRandomSampler(subset, generator=rng()))
    assert sorted(generated) == subset and generated != subset


def test_weighted_random_sampler_never_draws_zero_weights():
    sampler = WeightedRandomSampler([0.0, 3.0, 0.0, 1.0], 4000, generator=rng())
    values = np.array(list(sampler))
    assert set(values.tolist()) == {1, 3}
    assert 0.7 < np.mean(values == 1) < 0.8


def test_random_sampler_edge_sizes():
    assert list(RandomSampler(["only"], generator=rng())) == [0]
    sampler = RandomSampler(["only"], replacement=True, num_samples=3, generator=rng())
    assert list(sampler) == [0] * 3
    assert list(RandomSampler([], replacement=True, generator=rng())) == []
    assert list(RandomSampler([], generator=rng())) == []
    with pytest.raises(ValueError, match="empty dataset"):
        list(RandomSampler([], replacement=True, num_samples=1, generator=rng()))


def test_random_sampler_with_replacement_beyond_one_chunk():
    values = np.array(list(RandomSampler(range(5), replacement=True, num_samples=70_000,
                                         generator=rng())))
    assert len(values) == 70_000
    assert set(values.tolist()) == set(range(5))


@pytest.mark.parametrize("num_samples", [1, 10, 70_000])
def test_weighted_random_sampler_yields_num_samples(num_samples):
    sampler = WeightedRandomSampler([1.0, 2.0, 0.0, 3.0], num_samples, generator=rng())
    values = list(sampler)
    assert len(sampler) == len(values) == num_samples
    assert set(values) <= {0, 1, 3}


def test_weighted_random_sampler_without_replacement():
    values = list(WeightedRandomSampler([1, 1, 1, 0], 3, replacement=False, generator=rng()))
    assert sorted(values) == [0, 1, 2]


@pytest.mark.parametrize(
    "weights, num_samples, replacement, match",
    [
        ([1.0, 2.0], 0, True, "num_samples"),
        ([[1.0]], 1, True, "1d sequence"),
        ([1.0, -1.0], 1, True, "non-negative"),
        ([1.0, float("nan")], 1, True, "finite"),
        ([0.0, 0.0], 1, True, "positive sum"),
        ([1.0, 0.0], 2, False, "without replacement"),
        ([1.0], 1, "yes", "replacement"),
    ],
)
def test_weighted_random_sampler_validation(weights, num_samples, replacement, match):
    with pytest.raises(ValueError, match=match):
        WeightedRandomSampler(weights, num_samples, replacement)


# The large cases cross the growing chunks in which indices become Python ints.
@pytest.mark.parametrize("n, size, drop_last",
                         [(10, 3, False), (10, 3, True), (9, 3, False), (0, 2, False),
                          (200_003, 64, False), (150_001, 1000, True), (70_000, 3, False)])
def test_batch_sampler_over_our_sampler_matches_a_generic_iterable(n, size, drop_last):
    fast = list(BatchSampler(SequentialSampler(range(n)), size, drop_last))
    generic = list(BatchSampler(list(range(n)), size, drop_last))
    assert fast == generic
    assert len(BatchSampler(SequentialSampler(range(n)), size, drop_last)) == len(fast)


def test_batch_sampler_respects_an_overridden_iter():
    class Reversed(SequentialSampler):
        def __iter__(self):
            return iter(range(len(self.data_source) - 1, -1, -1))

    assert list(BatchSampler(Reversed(range(5)), 2, False)) == [[4, 3], [2, 1], [0]]


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_batch_sampler_rejects_bad_batch_size(size):
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(range(3), size, False)


def test_batch_sampler_rejects_non_bool_drop_last():
    with pytest.raises(ValueError, match="drop_last"):
        BatchSampler(range(3), 2, 0)


def test_sampler_base_class():
    class Evens(Sampler):
        def __iter__(self):
            return iter([0, 2])

    assert list(Evens()) == [0, 2]
    with pytest.raises(NotImplementedError):
        iter(Sampler())


def test_epoch_rng_without_a_generator_draws_fresh_entropy():
    from dataloader._sampling.sampler import epoch_rng

    first, second = epoch_rng(None), epoch_rng(None)
    assert isinstance(first, np.random.Generator)
    assert first.integers(2**62) != second.integers(2**62)


def test_an_interrupt_while_a_batch_is_taken_leaves_the_batches_usable():
    # Ctrl-C landing in the batching (on the consumer's thread) must not end
    # the epoch: the batch being taken is lost, the next ones come.
    class InterruptedOnce:
        def __init__(self):
            self.next_index, self.interrupted = 0, False

        def __iter__(self):
            return self

        def __next__(self):
            if self.next_index == 5 and not self.interrupted:
                self.interrupted = True
                raise KeyboardInterrupt
            if self.next_index == 10:
                raise StopIteration
            self.next_index += 1
            return self.next_index - 1

    batches = iter(BatchSampler(InterruptedOnce(), 2, drop_last=False))
    taken = [next(batches), next(batches)]
    with pytest.raises(KeyboardInterrupt):
        next(batches)
    assert taken + list(batches) == [[0, 1], [2, 3], [5, 6], [7, 8], [9]]
    assert list(batches) == []


def taken_with_an_interrupt(batches, at):
    """Every batch of ``batches``, with Ctrl-C landing before the ``at``-th line of
    sampler.py run while they are taken; also how many landed, and how many lines ran.
    """
    lines = 0

    def on_line(frame, event, arg):
        nonlocal lines
        if event == "line":
            lines += 1
            if lines == at:
                raise KeyboardInterrupt  # raised in that frame; it also ends the tracing
        return on_line

    def on_call(frame, event, arg):
        return on_line if frame.f_code.co_filename == sampler_module.__file__ else None

    received, interrupts = [], 0
    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        while True:
            try:
                received.append(next(batches))
            except StopIteration:
                break
            except KeyboardInterrupt:
                interrupts += 1
    finally:
        sys.settrace(previous)
    return received, interrupts, lines


@pytest.mark.parametrize("drop_last", [False, True])
def test_an_interrupt_on_any_line_cutting_batches_from_chunks_loses_at_most_one(drop_last):
    # Our samplers' batches are cut from numpy chunks of indices. Ctrl-C
    # landing anywhere in that (on the consumer's thread) may lose the batch
    # being taken; the others come, in order, none twice. Batches of 300 span
    # the uneven chunks, and become lists in blocks of 3, 6, 12... rows.
    size, bounds = 300, [0, 700, 701, 2900, 4100, 6650]
    chunks = [np.arange(start, stop) for start, stop in pairwise(bounds)]
    expected = [list(range(start, min(start + size, bounds[-1])))
                for start in range(0, bounds[-1], size)]
    if drop_last:
        expected.pop()
    sampler = BatchSampler(SequentialSampler(range(bounds[-1])), size, drop_last)
    received, interrupts, lines = taken_with_an_interrupt(
        sampler._batches_of_chunks(iter(chunks)), at=0)
    assert (received, interrupts) == (expected, 0)
    for at in range(1, lines + 1):
        received, interrupts, _ = taken_with_an_interrupt(
            sampler._batches_of_chunks(iter(chunks)), at)
        assert interrupts == 1
        assert received == [batch for batch in expected if batch in received], at
        assert len(received) >= len(expected) - 1, at
