"""``BucketBatchSampler``: budgets, shuffles, equal ranks, resumption through the loader."""

from collections import Counter
from itertools import pairwise

import numpy as np
import pytest
from resuming import run_in_pieces

from dataloader import BucketBatchSampler, DataLoader, Dataset, PadCollator
from dataloader._core.shuffle import shuffle_exact_into
from dataloader._sampling.seeding import epoch_generator

WORKER_KINDS = {
    "direct": {"num_workers": 0},
    "threads": {"num_workers": 2, "worker_type": "thread"},
    "processes": {"num_workers": 2, "worker_type": "process"},
}


def text_lengths(count, seed=0):
    """Token counts shaped like tokenised text: lognormal, 1 to 2048."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(5.0, 1.0, count).astype(np.int64), 1, 2048)


def padded_tokens(batches, padded):
    return sum(len(batch) * max(padded[i] for i in batch) for batch in batches)


@pytest.mark.parametrize("batch_size,max_tokens", [(None, 4096), (32, None), (16, 8192)])
def test_each_epoch_visits_every_item_once_within_the_budget(batch_size, max_tokens):
    lengths = text_lengths(3000)
    collator = PadCollator(pad_to_multiple_of=8)
    sampler = BucketBatchSampler(lengths, batch_size, max_tokens=max_tokens, padding=collator,
                                 seed=1)
    padded = collator.padded_lengths(lengths)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for batch in batches for i in batch) == list(range(3000))
        for batch in batches:
            if batch_size is not None:
                assert len(batch) <= batch_size
            if max_tokens is not None:
                assert len(batch) * max(padded[i] for i in batch) <= max_tokens
    if batch_size is not None and max_tokens is None:
        assert Counter(map(len, batches)) == {32: 3000 // 32, 3000 % 32: 1}


def reference_cuts(padded, batch_size, max_tokens):
    cuts, batch = [0], []
    for position, length in enumerate(padded):
        wider = (len(batch) + 1) * max([*batch, length])
        if batch and ((batch_size and len(batch) == batch_size)
                      or (max_tokens and wider > max_tokens)):
            cuts.append(position)
            batch = []
        batch.append(length)
    return cuts + [len(padded)] if batch else cuts


def reference_batches(padded, batch_size, max_tokens, window, seed, epoch, shuffle, drop_last):
    """The epoch's batches by numpy: windows of the shuffled items sorted stably by padded
    length, cut greedily, the short last batch dropped, each window's batches shuffled."""
    rng = epoch_generator(seed, epoch)
    order = np.arange(len(padded), dtype=np.int64)
    if shuffle:  # Fisher-Yates seeded by four words of the epoch's generator
        shuffle_exact_into(order, rng.bit_generator.random_raw(4))
    batches = []
    for start in range(0, len(padded), window):
        items = order[start:start + window]
        items = items[np.argsort(padded[items], kind="stable")]
        cuts = reference_cuts(padded[items].tolist(), batch_size, max_tokens)
        window_batches = [items[a:b].tolist() for a, b in pairwise(cuts)]
        last = start + window >= len(padded)
        if last and drop_last and max_tokens is None and len(window_batches[-1]) < batch_size:
            window_batches.pop()
        if shuffle:
            window_batches = [window_batches[i]
                              for i in rng.permutation(len(window_batches)).tolist()]
        batches += window_batches
    return batches


@pytest.mark.parametrize("batch_size,max_tokens", [(None, 100), (3, None), (4, 64), (1, 1)])
def test_batches_are_the_numpy_references(batch_size, max_tokens):
    rng = np.random.default_rng(batch_size or 0)
    for size, longest, window in [(0, 60, None), (1, 60, 5), (7, 60, 3), (300, 60, None),
                                  (300, 1, 16), (500, 70_000, 64), (200, 1 << 20, 50),
                                  (120, 1 << 26, 40),  # lengths past the packed entries
                                  # Windows small enough for the first to be drawn alone.
                                  (3000, 300, 25), (1000, 1 << 26, 40)]:
        lengths = rng.integers(0, longest, size)
        budget = max_tokens and max(max_tokens, int(lengths.max(initial=0)))
        for shuffle, drop_last, epoch in [(True, False, 0), (True, True, 3), (False, True, 0)]:
            sampler = BucketBatchSampler(lengths, batch_size, max_tokens=budget, window=window,
                                         shuffle=shuffle, seed=size, drop_last=drop_last)
            sampler.set_epoch(epoch)
            assert list(sampler) == reference_batches(
                lengths, batch_size, budget, sampler.window, size, epoch, shuffle, drop_last)


def test_the_order_is_a_function_of_seed_and_epoch():
    lengths = text_lengths(500)

    def epoch_of(seed, epoch):
        sampler = BucketBatchSampler(lengths, max_tokens=2048, seed=seed)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert epoch_of(3, 1) == epoch_of(3, 1)
    assert epoch_of(3, 1) != epoch_of(3, 2)
    assert epoch_of(3, 1) != epoch_of(4, 1)


def test_batches_hold_items_of_similar_length_and_waste_about_what_a_whole_sort_does():
    lengths = text_lengths(20000, seed=2)
    bucketed = BucketBatchSampler(lengths, max_tokens=16384, seed=0)
    whole = BucketBatchSampler(lengths, max_tokens=16384, window=len(lengths), shuffle=False)
    # As many batches of items drawn at random.
    unsorted = np.array_split(np.random.default_rng(0).permutation(len(lengths)), len(bucketed))
    real = int(lengths.sum())
    waste = {name: 1 - real / padded_tokens(list(batches), lengths)
             for name, batches in (("bucketed", bucketed), ("whole", whole),
                                   ("unsorted", unsorted))}
    assert waste["unsorted"] > 0.5  # without sorting, most of a batch is padding
    # A generous bound at this size; the benchmark prints the figure at scale.
    assert waste["bucketed"] - waste["whole"] < 0.04, waste


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("replicas", [2, 3, 7])
def test_every_rank_has_the_same_number_of_batches(replicas, drop_last):
    lengths = text_lengths(1001)
    ranks = [BucketBatchSampler(lengths, max_tokens=4096, seed=5, drop_last=drop_last,
                                num_replicas=replicas, rank=rank) for rank in range(replicas)]
    shares = [list(sampler) for sampler in ranks]
    assert len({len(share) for share in shares}) == 1
    assert all(len(sampler) == len(shares[0]) for sampler in ranks)
    every = [i for share in shares for batch in share for i in batch]
    single = list(BucketBatchSampler(lengths, max_tokens=4096, seed=5))
    if drop_last:
        assert len(every) == len(set(every))  # nothing repeated
        assert len(shares[0]) == len(single) // replicas
    else:
        assert set(every) == set(range(1001))  # everything, the first batches again
        assert len(shares[0]) == -(-len(single) // replicas)


def test_the_rank_comes_from_the_environment_like_distributed_samplers(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    sampler = BucketBatchSampler(text_lengths(100), batch_size=4)
    assert (sampler.num_replicas, sampler.rank) == (4, 3)


@pytest.mark.parametrize("arguments,error,message", [
    ({"lengths": [3, 4]}, ValueError, "needs batch_size, max_tokens or both"),
    ({"lengths": [3, 40], "max_tokens": 32}, ValueError, "item 1 alone takes 40 padded"),
    ({"lengths": [3, 30], "max_tokens": 31, "padding": PadCollator(pad_to_multiple_of=8)},
     ValueError, "item 1 alone takes 32 padded"),
    ({"lengths": [[3, 4]], "batch_size": 2}, TypeError, "1-D sequence of integers"),
    ({"lengths": [3.5], "batch_size": 2}, TypeError, "1-D sequence of integers"),
    ({"lengths": [3, -1], "batch_size": 2}, ValueError, r"lengths\[1\]=-1"),
    ({"lengths": [3], "batch_size": 0}, ValueError, "batch_size should be a positive"),
    ({"lengths": [3], "batch_size": 2, "padding": len}, TypeError, "a PadCollator"),
    ({"lengths": [3], "batch_size": 2, "num_replicas": 2, "rank": 2}, ValueError,
     "Invalid rank 2"),
])
def test_bad_arguments_are_named(arguments, error, message):
    with pytest.raises(error, match=message):
        BucketBatchSampler(**arguments)


def test_a_state_of_another_number_of_ranks_is_refused():
    state = BucketBatchSampler([1, 2], batch_size=1, num_replicas=2, rank=0).state_dict()
    with pytest.raises(ValueError, match="num_replicas=2"):
        BucketBatchSampler([1, 2], batch_size=1).load_state_dict(state)


class Texts(Dataset):
    def __init__(self, lengths):
        self.lengths = lengths

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, index):
        return {"input_ids": np.full(self.lengths[index], index, np.int64), "index": index}


def as_lists(batch):
    return [batch["index"].tolist(), batch["input_ids"].shape, int(batch["attention_mask"].sum())]


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_token_budget_batches_resumed_twice_continue_exactly_epoch_after_epoch(kind):
    lengths = text_lengths(300, seed=4) // 8 + 1

    def make():
        collator = PadCollator(pad_to_multiple_of=4)
        sampler = BucketBatchSampler(lengths, max_tokens=512, padding=collator, seed=9,
                                     num_replicas=2, rank=1)
        return DataLoader(Texts(lengths), batch_sampler=sampler, collate_fn=collator,
                          timeout=120, **WORKER_KINDS[kind])

    with make() as loader:
        expected = []
        for _ in range(3):
            epoch = []
            for batch in loader:
                epoch.append(as_lists(batch))
                del batch
            expected.append(epoch)
    assert expected[0] != expected[1] != expected[2]
    for epoch in expected:
        assert all(shape[0] * shape[1] <= 512 for _, shape, _ in epoch)
    middle = len(expected[0]) // 2
    assert run_in_pieces(make, (3, middle, len(expected[0]) + 2), 3, record=as_lists) == expected


def test_the_loader_trusts_its_batches_but_checks_a_subclass_that_makes_its_own():
    class Shifted(BucketBatchSampler):
        def __iter__(self):
            return ([index - 1 for index in batch] for batch in super().__iter__())

    lengths = np.array([3, 1, 2, 5])
    trusted = BucketBatchSampler(lengths, batch_size=4, shuffle=False)
    loader = DataLoader(Texts(lengths), batch_sampler=trusted, collate_fn=PadCollator())
    assert [batch["index"].tolist() for batch in loader] == [[1, 2, 0, 3]]
    shifted = Shifted(lengths, batch_size=4, shuffle=False)
    loader = DataLoader(Texts(lengths), batch_sampler=shifted, collate_fn=PadCollator())
    with pytest.raises(ValueError, match="sampler yielded -1, expected a non-negative int"):
        next(iter(loader))


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_an_epoch_is_planned_a_window_at_a_time_and_its_length_known_when_asked(kind):
    lengths = text_lengths(2000, seed=6) // 16 + 1
    collator = PadCollator()
    sampler = BucketBatchSampler(lengths, max_tokens=256, padding=collator, window=100, seed=2)
    expected = list(sampler)
    sampler._plan = None  # forget the epoch planned by list()
    with DataLoader(Texts(lengths), batch_sampler=sampler, collate_fn=collator, timeout=120,
                    **WORKER_KINDS[kind]) as loader:
        iterator = iter(loader)
        first = next(iterator)["index"].tolist()
        # The loader asked for the batches in flight, a few of the 20 windows.
        assert sampler._plan[1]._items < len(lengths) // 2
        assert len(iterator) == len(expected) - 1  # the length is planned when asked
        batches = [first]
        for batch in iterator:
            batches.append(batch["index"].tolist())
            if len(batches) == len(expected):
                # Saved after the epoch's last batch: the next epoch starts afresh.
                assert loader.state_dict()["epoch"] == 1
                assert loader.state_dict()["batches"] == 0
            del batch
    assert batches == expected
