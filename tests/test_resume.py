"""Exact mid-epoch resume, epoch numbering, item seeds and stats()."""

import json
from itertools import chain

import numpy as np
import pytest
from resuming import run_in_pieces

from dataloader import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    WeightedRandomSampler,
    interleave,
    item_seed,
    shard,
)
from dataloader._loading.stats import STAGES


class Arrays:
    """Item i is a small array holding i, so data and indices are both checked."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return np.full(2, index, dtype=np.int64)


def as_lists(batches):
    return [batch.tolist() for batch in batches]


def uninterrupted(make, epochs):
    loader = make()
    return [as_lists(loader) for _ in range(epochs)]


def interrupted(make, stop_after, epochs, make_resumed=None):
    """Run epoch 0 for ``stop_after`` batches, save, resume in a new loader, finish."""
    loader = make()
    it = iter(loader)
    first = [next(it).tolist() for _ in range(stop_after)]
    state = json.loads(json.dumps(loader.state_dict()))  # survives JSON
    del it
    resumed = (make_resumed or make)()
    resumed.load_state_dict(state)
    runs = [first + as_lists(resumed)]
    runs += [as_lists(resumed) for _ in range(epochs - 1)]
    return runs


N, BATCH = 23, 4  # 6 batches, the last one short
STOPS = [0, 1, 3, 5]  # none, one, the middle, all but the last


@pytest.mark.parametrize("stop_after", STOPS)
@pytest.mark.parametrize("kind", ["sequential", "shuffle", "distributed", "weighted"])
def test_resume_continues_exactly(make_loader, stop_after, kind):
    def make():
        if kind == "shuffle":
            return make_loader(Arrays(N), batch_size=BATCH, shuffle=True, seed=9)
        if kind == "distributed":
            sampler = DistributedSampler(range(2 * N), num_replicas=2, rank=1, seed=9)
            return make_loader(Arrays(2 * N), batch_size=BATCH, sampler=sampler)
        if kind == "weighted":
            sampler = WeightedRandomSampler(np.arange(N) + 1.0, N, seed=9)
            return make_loader(Arrays(N), batch_size=BATCH, sampler=sampler)
        return make_loader(Arrays(N), batch_size=BATCH)

    assert interrupted(make, stop_after, 3) == uninterrupted(make, 3)


@pytest.mark.parametrize("stop_after", [1, 7, 22])
@pytest.mark.parametrize("shuffle", [False, True])
def test_resume_without_batching_continues_exactly(make_loader, stop_after, shuffle):
    def make():
        return make_loader(Arrays(N), batch_size=None, shuffle=shuffle,
                           seed=5 if shuffle else None)

    runs = interrupted(make, stop_after, 2)
    assert runs == uninterrupted(make, 2)
    assert sorted(item[0] for item in runs[0]) == list(range(N))


@pytest.mark.parametrize("stop_after", [1, 66])
def test_resume_across_the_samplers_internal_chunks(stop_after):
    # 70,000 indices come in two chunks of the sampler (65,536 and the
    # rest): the skipped batches end inside the first chunk or beyond it.
    def make():
        return DataLoader(range(70_000), batch_size=1000, shuffle=True, seed=8)

    assert interrupted(make, stop_after, 1) == uninterrupted(make, 1)


@pytest.mark.parametrize("resume_workers", [0, 1, 3])
def test_resume_with_a_changed_num_workers(make_loader, resume_workers):
    def make():
        return make_loader(Arrays(N), batch_size=BATCH, shuffle=True, seed=2)

    def make_resumed():
        return DataLoader(Arrays(N), batch_size=BATCH, shuffle=True, num_workers=resume_workers)

    assert interrupted(make, 3, 2, make_resumed) == uninterrupted(make, 2)


def test_resume_across_an_epoch_boundary(make_loader):
    def make():
        return make_loader(Arrays(N), batch_size=BATCH, shuffle=True, seed=4)

    expected = uninterrupted(make, 3)
    loader = make()
    as_lists(loader)  # epoch 0, whole
    state = loader.state_dict()
    assert (state["epoch"], state["batches"]) == (1, 0)
    resumed = make()
    resumed.seed = 12345  # overwritten by the state
    resumed.load_state_dict(state)
    assert [as_lists(resumed) for _ in range(2)] == expected[1:]
    assert resumed.epoch == 2


def test_resume_with_all_batches_delivered_goes_on_to_the_next_epoch(make_loader):
    def make():
        return make_loader(Arrays(N), batch_size=BATCH, shuffle=True, seed=4)

    expected = uninterrupted(make, 2)
    loader = make()
    it = iter(loader)
    for _ in range(6):  # every batch, without reaching StopIteration
        next(it)
    state = loader.state_dict()
    assert (state["epoch"], state["batches"]) == (1, 0)
    resumed = make()
    resumed.load_state_dict(state)
    assert as_lists(resumed) == expected[1]


def test_epoch_is_the_one_the_next_iteration_starts_until_it_does():
    loader = DataLoader(Arrays(N), batch_size=BATCH, shuffle=True, seed=3)
    assert loader.epoch == 0
    as_lists(loader)
    state = loader.state_dict()
    assert (loader.epoch, state["epoch"]) == (0, 1)  # epoch 0 ran last
    resumed = DataLoader(Arrays(N), batch_size=BATCH, shuffle=True, seed=3)
    resumed.load_state_dict({**state, "epoch": 4, "batches": 2})
    assert resumed.epoch == 4
    it = iter(resumed)
    next(it)
    assert resumed.epoch == 4
    assert resumed.state_dict()["batches"] == 3


@pytest.mark.parametrize("state, match", [
    ([], "not a DataLoader state_dict"),
    ({"format": 2, "epoch": 0, "batches": 0, "seed": 1}, "not a DataLoader state_dict"),
    ({"format": 1, "epoch": -1, "batches": 0, "seed": 1}, "epoch=-1"),
    ({"format": 1, "epoch": 0, "batches": -2, "seed": 1}, "batches=-2"),
])
def test_load_state_dict_rejects_what_is_not_a_valid_state(state, match):
    with pytest.raises(ValueError, match=match):
        DataLoader(Arrays(N), batch_size=BATCH).load_state_dict(state)


def test_a_samplers_own_state_is_saved_and_restored():
    class Stateful:
        """A sampler of the user's, with torchdata-style state."""

        def __init__(self):
            self.start = 0

        def __iter__(self):
            return iter(range(self.start, N))

        def __len__(self):
            return N - self.start

        def state_dict(self):
            return {"start": self.start}

        def load_state_dict(self, state):
            self.start = state["start"]

    sampler = Stateful()
    sampler.start = 7
    state = DataLoader(Arrays(N), batch_size=BATCH, sampler=sampler).state_dict()
    assert state["sampler"] == {"start": 7}
    other = Stateful()
    DataLoader(Arrays(N), batch_size=BATCH, sampler=other).load_state_dict(state)
    assert other.start == 7


@pytest.mark.parametrize("stop_after", [1, 3])
def test_resume_with_a_users_batch_sampler_or_sampler(make_loader, stop_after):
    class Batches:
        def __iter__(self):
            return iter([[5, 1], [0, 4], [3], [2, 6]])

        def __len__(self):
            return 4

    def with_batch_sampler():
        return make_loader(Arrays(N), batch_sampler=Batches())

    def with_sampler():
        return make_loader(Arrays(N), batch_size=2, sampler=[9, 3, 7, 1, 5, 0, 2])

    def unbatched_with_sampler():
        return make_loader(Arrays(N), batch_size=None, sampler=[9, 3, 7, 1, 5, 0, 2])

    for make in (with_batch_sampler, with_sampler, unbatched_with_sampler):
        assert interrupted(make, stop_after, 2) == uninterrupted(make, 2)


def test_state_is_small_and_json_serialisable():
    loader = DataLoader(list(range(10**6)), batch_size=64, shuffle=True, seed=1)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    assert state["epoch"] == 0 and state["batches"] == 1 and state["seed"] == 1
    assert len(json.dumps(state)) < 200


def test_len_of_a_resumed_epoch_counts_what_is_left():
    loader = DataLoader(list(range(10)), batch_size=2)
    loader.load_state_dict({"format": 1, "epoch": 0, "batches": 3, "seed": 0})
    it = iter(loader)
    assert len(it) == 2
    assert as_lists(it) == [[6, 7], [8, 9]]


def test_user_set_epoch_after_loading_wins():
    sampler = DistributedSampler(range(20), 2, 0, seed=1)
    loader = DataLoader(list(range(20)), batch_size=2, sampler=sampler)
    loader.load_state_dict({"format": 1, "epoch": 3, "batches": 2, "seed": 0,
                            "sampler": {"seed": 1, "epoch": 3, "num_replicas": 2}})
    sampler.set_epoch(3)  # as a torch training loop does: the same epoch, still resumed
    assert len(as_lists(loader)) == 3
    sampler.set_epoch(5)
    assert len(as_lists(loader)) == 5


def test_a_sampler_drawing_from_a_generator_cannot_save_a_mid_epoch_position():
    sampler = RandomSampler(range(10), generator=np.random.default_rng(0))
    loader = DataLoader(list(range(10)), batch_size=2, sampler=sampler)
    it = iter(loader)
    next(it)
    with pytest.raises(ValueError, match="pass seed="):
        loader.state_dict()


def test_distributed_state_refuses_another_world_size():
    loader = DataLoader(list(range(20)), sampler=DistributedSampler(range(20), 2, 0))
    state = loader.state_dict()
    other = DataLoader(list(range(20)), sampler=DistributedSampler(range(20), 4, 0))
    with pytest.raises(ValueError, match="num_replicas"):
        other.load_state_dict(state)


def test_in_order_false_cannot_save_a_mid_epoch_position():
    loader = DataLoader(list(range(10)), batch_size=2, num_workers=2, in_order=False)
    it = iter(loader)
    next(it)
    with pytest.raises(ValueError, match="in_order=False"):
        loader.state_dict()
    loader.close()


def test_in_order_false_saves_and_resumes_at_epoch_boundaries():
    def make():
        return DataLoader(Arrays(N), batch_size=BATCH, num_workers=2, in_order=False,
                          shuffle=True, seed=6)

    loader = make()
    assert (loader.state_dict()["epoch"], loader.state_dict()["batches"]) == (0, 0)
    first = sorted(item for batch in as_lists(loader) for item in batch)
    state = loader.state_dict()  # the epoch is complete: its end is a boundary
    assert (state["epoch"], state["batches"]) == (1, 0)
    loader.close()
    resumed = make()
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state
    second = sorted(item for batch in as_lists(resumed) for item in batch)
    assert first == second == [[i, i] for i in range(N)]
    assert resumed.epoch == 1
    resumed.close()


@pytest.mark.parametrize("stop_after", [0, 1, 4, 8])
def test_streaming_resume_through_shard(make_loader, stop_after):
    def make():
        return make_loader(shard(range(41), 0, 1), batch_size=3)

    # With workers the arrival order varies: compare what each run delivers as a set.
    def items(runs):
        return [sorted(chain.from_iterable(run)) for run in runs]

    resumed = interrupted(make, stop_after, 2)
    assert items(resumed) == items(uninterrupted(make, 2))
    assert all(len(run) == len(set(run)) for run in items(resumed))


def test_streaming_resume_in_direct_mode_is_exact():
    def make():
        return DataLoader(shard(range(41), 0, 1), batch_size=3)

    for stop_after in (0, 1, 7, 13):
        assert interrupted(make, stop_after, 2) == uninterrupted(make, 2)


def test_streaming_without_iterator_state_refuses_a_mid_epoch_position():
    class Plain(IterableDataset):
        def __iter__(self):
            return iter(range(10))

    loader = DataLoader(Plain(), batch_size=2)
    it = iter(loader)
    next(it)
    with pytest.raises(ValueError, match="no state_dict/load_state_dict"):
        loader.state_dict()
    with pytest.raises(ValueError, match="no state_dict/load_state_dict"):
        DataLoader(Plain()).load_state_dict({"format": 1, "epoch": 0, "batches": 1, "seed": 0})
    as_lists(it)
    state = loader.state_dict()  # at an epoch boundary there is nothing to restore
    assert (state["epoch"], state["batches"]) == (1, 0)


def test_streaming_resume_needs_the_same_num_workers():
    loader = DataLoader(shard(range(20), 0, 1), batch_size=2, num_workers=2)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    del it
    loader.close()
    other = DataLoader(shard(range(20), 0, 1), batch_size=2, num_workers=3)
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="same num_workers"):
        iter(other)


def test_item_seed_is_stable_and_distinct():
    assert item_seed(3, 1, 7) == item_seed(3, 1, 7)
    seeds = {item_seed(3, epoch, index) for epoch in range(3) for index in range(100)}
    assert len(seeds) == 300
    assert all(0 <= seed < 2**63 for seed in seeds)
    with pytest.raises(TypeError):
        item_seed("3", 1, 7)


def test_loader_exposes_epoch_and_seed_for_item_seeds(make_loader):
    seen = []

    def transform(index, item):
        seen.append(item_seed(loader.seed, loader.epoch, index))
        return item

    loader = make_loader(list(range(4)), batch_size=2, shuffle=True, seed=6, transform=transform)
    list(loader)
    assert loader.seed == 6 and loader.epoch == 0
    assert sorted(seen) == sorted(item_seed(6, 0, index) for index in range(4))


def test_stats_count_every_stage(make_loader, mode):
    loader = make_loader(list(range(20)), batch_size=5, transform=lambda index, item: item)
    list(loader)
    list(loader)
    stats = loader.stats()
    assert stats["fetch"]["count"] == stats["transform"]["count"] == 40
    assert stats["collate"]["count"] == 8
    assert stats["wait"]["count"] >= 8
    assert all(stats[stage]["seconds"] >= 0 for stage in STAGES)
    assert stats["workers"] == {"type": "thread", "count": mode[0]}
    assert json.dumps(stats)


def test_stats_of_a_stream(make_loader):
    loader = make_loader(shard(range(20), 0, 1), batch_size=5)
    list(loader)
    stats = loader.stats()
    assert stats["fetch"]["count"] == 20
    assert stats["transform"]["count"] == 0
    assert stats["collate"]["count"] == 4


# -- resumed more than once, epoch after epoch, on every worker kind ----------

WORKER_KINDS = {
    "direct": {"num_workers": 0},
    "threads": {"num_workers": 2, "worker_type": "thread"},
    "threads+lanes": {"num_workers": 2, "item_concurrency": 3, "worker_type": "thread"},
    "processes": {"num_workers": 2, "worker_type": "process"},
    "persistent processes": {"num_workers": 2, "worker_type": "process",
                             "persistent_workers": True},
    "processes+lanes": {"num_workers": 2, "item_concurrency": 2, "worker_type": "process"},
}
# Batches each loader takes before saving; the next loader resumes, the last one
# finishes. An epoch has 6 batches: two stops inside epoch 0; the second
# stop in epoch 1; both exactly at epoch ends; the second in epoch 2.
PIECES = [(2, 3), (4, 5), (6, 6), (3, 10)]


def every_epoch(make, epochs):
    with make() as loader:
        return [as_lists(loader) for _ in range(epochs)]


@pytest.mark.parametrize("pieces", PIECES, ids=str)
@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_a_shuffled_epoch_resumed_twice_continues_exactly_on_every_worker_kind(kind, pieces):
    def make():
        return DataLoader(Arrays(N), batch_size=BATCH, shuffle=True, seed=21, timeout=120,
                          **WORKER_KINDS[kind])

    expected = every_epoch(make, 3)
    assert expected[0] != expected[1] != expected[2]  # each epoch has its own order
    assert run_in_pieces(make, pieces, 3) == expected


@pytest.mark.parametrize("pieces", [(1, 2), (5, 3)], ids=str)
@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_a_sampler_of_the_users_resumed_twice_continues_exactly(kind, pieces):
    # A DistributedSampler: its own state (seed, epoch) goes through each save.
    def make():
        sampler = DistributedSampler(range(2 * N), num_replicas=2, rank=1, seed=4)
        return DataLoader(Arrays(2 * N), batch_size=BATCH, sampler=sampler, timeout=120,
                          **WORKER_KINDS[kind])

    assert run_in_pieces(make, pieces, 3) == every_epoch(make, 3)


def ordered_stream():
    """A stream in one order whatever the workers (interleave), new each epoch (set_epoch)."""
    return interleave([shard(range(40), 0, 1), list(range(100, 120))], [0.6, 0.4], seed=3)


@pytest.mark.parametrize("pieces", [(2, 3), (3, 4), (4, 5), (3, 10)], ids=str)
@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_an_ordered_stream_resumed_twice_continues_exactly(kind, pieces):
    # 12 to 14 batches of 4 an epoch, delivered by turn on workers; each
    # stream's batch count and iterator go through every save (after an odd
    # number of batches, the streams' counts differ: the turn must carry over).
    def make():
        return DataLoader(ordered_stream(), batch_size=4, timeout=120, **WORKER_KINDS[kind])

    expected = every_epoch(make, 3)
    assert expected[0] != expected[1] != expected[2]
    assert run_in_pieces(make, pieces, 3) == expected


@pytest.mark.parametrize("pieces", [(2, 3), (5, 4)], ids=str)
@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_a_sharded_stream_resumed_twice_gives_every_item_once_each_epoch(kind, pieces):
    # Arrival order varies with workers: each epoch is compared as a set, and
    # nothing may be lost or repeated across the two resumptions.
    def make():
        return DataLoader(shard(range(41), 0, 1), batch_size=3, timeout=120,
                          **WORKER_KINDS[kind])

    runs = run_in_pieces(make, pieces, 2)
    for run in runs:
        items = sorted(chain.from_iterable(run))
        assert items == list(range(41))


@pytest.mark.parametrize("kind", ["threads", "processes", "persistent processes"])
def test_in_order_false_resumed_at_each_epoch_end_twice(kind):
    def make():
        return DataLoader(Arrays(N), batch_size=BATCH, in_order=False, shuffle=True, seed=6,
                          timeout=120, **WORKER_KINDS[kind])

    runs = run_in_pieces(make, (6, 6), 3)
    in_order = every_epoch(lambda: DataLoader(Arrays(N), batch_size=BATCH, shuffle=True,
                                              seed=6), 3)
    # Each epoch's batches are the in-order epoch's, whatever order they came in.
    assert [sorted(run) for run in runs] == [sorted(epoch) for epoch in in_order]


@pytest.mark.parametrize("kind", ["direct", "threads", "processes"])
def test_a_resumed_stream_gives_transform_the_positions_of_the_whole_run(kind):
    # transform(position, item): `position` is the item's place in its stream
    # (docs/distributed.md, "Streaming"); a random augmentation seeded by it must
    # repeat after a resume as the rest of the epoch does.
    def make():
        return DataLoader(shard(range(41), 0, 1), batch_size=3, timeout=120,
                          transform=lambda position, item: np.array([position, item]),
                          **WORKER_KINDS[kind])

    def pairs(epoch):
        return sorted(tuple(pair) for batch in epoch for pair in batch)

    whole = every_epoch(make, 1)[0]
    assert pairs(run_in_pieces(make, (2, 3), 1)[0]) == pairs(whole)
