"""interleave: Hugging Face interleave_datasets semantics, determinism, resume, stats."""

import json

import pytest

from dataloader import DataLoader, IterableDataset, interleave

A, B, C = list(range(3)), list(range(10, 14)), list(range(100, 110))


class Stream(IterableDataset):
    """A resumable stream of a list (sharded by worker through a map-style share)."""

    def __init__(self, items):
        self.items = items

    def __iter__(self):
        from dataloader._datasets.interleave import _MapShare
        from dataloader._loading.worker import get_worker_info

        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        return _MapShare(self.items, worker, workers)


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
