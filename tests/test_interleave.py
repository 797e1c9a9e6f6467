"""interleave: Hugging Face interleave_datasets semantics, determinism, resume, stats."""

import json

import pytest
from stream_datasets import Resumable

from dataloader import DataLoader, IterableDataset, interleave

A, B, C = list(range(3)), list(range(10, 14)), list(range(100, 110))


class Stream(IterableDataset):
    """A resumable stream of a list, split by worker as torch's examples split streams."""

    def __init__(self, items):
        self.items = items

    def __iter__(self):
        from dataloader import get_worker_info

        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        return Resumable(self.items[worker::workers])


def test_round_robin_matches_hugging_face():
    # interleave_datasets' documented examples.
    assert list(interleave([A, B, C])) == [0, 10, 100, 1, 11, 101, 2, 12, 102]
    assert list(interleave([A, B, C], stopping_strategy="all_exhausted")) == [
        0, 10, 100, 1, 11, 101, 2, 12, 102, 0, 13, 103, 1, 10, 104, 2, 11, 105, 0, 12, 106,
        1, 13, 107, 2, 10, 108, 0, 11, 109]


@pytest.mark.parametrize("strategy", ["first_exhausted", "all_exhausted"])
def test_random_mixture_stops_as_the_strategy_says(strategy):
    mixed = list(interleave([A, B, C], probabilities=[0.2, 0.3, 0.5], seed=42,
                            stopping_strategy=strategy))
    assert mixed == list(interleave([A, B, C], probabilities=[0.2, 0.3, 0.5], seed=42,
                                    stopping_strategy=strategy))
    assert mixed != list(interleave([A, B, C], probabilities=[0.2, 0.3, 0.5], seed=7,
                                    stopping_strategy=strategy))
    counts = [sum(x in source for x in mixed) for source in (A, B, C)]
    last = mixed[-1]
    owner = next(source for source in (A, B, C) if last in source)
    if strategy == "first_exhausted":
        # The last example is the last of the first source to run out.
        assert last == owner[-1] and counts[[A, B, C].index(owner)] == len(owner)
    else:
        assert all(count >= len(source) for count, source in zip(counts, (A, B, C), strict=True))


def test_map_style_mixture_is_the_same_whatever_the_workers():
    mixed = interleave([A, B, C], probabilities=[0.5, 0.25, 0.25], seed=3)
    expected = list(mixed)
    for workers in (0, 1, 3):
        with DataLoader(mixed, batch_size=4, num_workers=workers) as loader:
            assert [x for batch in loader for x in batch.tolist()] == expected


def test_proportions_are_realised_and_reported():
    big = [list(range(10_000)), list(range(10_000, 20_000))]
    mixed = interleave(big, probabilities=[0.7, 0.3], seed=0)
    list(mixed)
    stats = mixed.stats()
    assert stats["counts"][0] + stats["counts"][1] == len(mixed)
    assert abs(stats["proportions"][0] - 0.7) < 0.03


def test_streams_resume_exactly():
    def make():
        return interleave([Stream(A), B, Stream(C)], probabilities=[0.3, 0.3, 0.4], seed=1,
                          stopping_strategy="all_exhausted")

    whole = list(make())
    for stop in (0, 2, 9, len(whole) - 1):
        iterator = iter(make())
        head = [next(iterator) for _ in range(stop)]
        state = json.loads(json.dumps(iterator.state_dict()))
        resumed = iter(make())
        resumed.load_state_dict(state)
        assert head + list(resumed) == whole


def test_streams_split_among_workers_and_report_counts():
    mixed = interleave([Stream(A), Stream(C)], stopping_strategy="all_exhausted")
    with DataLoader(mixed, batch_size=None, num_workers=2) as loader:
        got = [int(x) for x in loader]
    assert set(got) == set(A) | set(C)
    assert sum(mixed.stats()["counts"]) == len(got)


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="probabilities"):
        interleave([A, B], probabilities=[0.5, 0.6])
    with pytest.raises(ValueError, match="probabilities"):
        interleave([A, B], probabilities=[1.0])
    with pytest.raises(ValueError, match="stopping_strategy='never'"):
        interleave([A, B], stopping_strategy="never")
    with pytest.raises(ValueError, match="datasets"):
        interleave([])
    with pytest.raises(TypeError, match=r"datasets\[1\]"):
        interleave([A, 5])


def mixtures():
    """A map-style and two streaming sources, by weight and in turn, under both strategies."""
    for probabilities in ([0.5, 0.3, 0.2], None):
        for strategy in ("first_exhausted", "all_exhausted"):
            yield lambda p=probabilities, s=strategy: interleave(
                [list(range(40)), Stream(list(range(100, 117))), Stream(list(range(200, 231)))],
                probabilities=p, seed=5, stopping_strategy=s)


def flat(loader):
    return [x for batch in loader for x in (batch.tolist() if hasattr(batch, "tolist")
                                            else [batch])]


@pytest.mark.parametrize("batch_size", [None, 1, 4, 5])
def test_stream_mixture_is_the_same_whatever_the_workers(batch_size):
    for make in mixtures():
        expected = list(make())
        for workers in (0, 1, 2, 4):
            mixed = make()
            with DataLoader(mixed, batch_size=batch_size, num_workers=workers) as loader:
                assert flat(loader) == expected, (workers, batch_size)
            assert sum(mixed.stats()["counts"]) == len(expected)


def test_stream_mixture_differs_by_seed_and_epoch():
    def make(seed):
        return interleave([list(range(30)), Stream(list(range(100, 130)))],
                          probabilities=[0.5, 0.5], seed=seed)

    with DataLoader(make(1), batch_size=3, num_workers=2) as loader:
        first, second = flat(loader), flat(loader)
    assert first != second  # a new epoch draws anew
    with DataLoader(make(1), batch_size=3, num_workers=4) as loader:
        assert flat(loader) == first
    with DataLoader(make(2), batch_size=3, num_workers=2) as loader:
        assert flat(loader) != first


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_stream_mixture_resumes_exactly_with_workers(workers):
    for make in mixtures():
        with DataLoader(make(), batch_size=3, num_workers=workers) as loader:
            whole = [batch.tolist() for batch in loader]
        for stop in (1, len(whole) // 2, len(whole) - 1):
            with DataLoader(make(), batch_size=3, num_workers=workers) as loader:
                iterator = iter(loader)
                head = [next(iterator).tolist() for _ in range(stop)]
                state = json.loads(json.dumps(loader.state_dict()))
            with DataLoader(make(), batch_size=3, num_workers=workers) as loader:
                loader.load_state_dict(state)
                assert head + [batch.tolist() for batch in loader] == whole, (workers, stop)


def test_out_of_order_delivery_keeps_the_examples():
    make = next(mixtures())
    expected = list(make())
    with DataLoader(make(), batch_size=4, num_workers=3, in_order=False) as loader:
        assert sorted(flat(loader)) == sorted(expected)
