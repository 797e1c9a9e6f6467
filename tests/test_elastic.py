"""Elastic resumption in one process: epochs stopped on N ranks, resumed on M.

Each rank is a loader of its own here (the torchrun runs, killed and
resized, are in test_elastic_torchrun.py). Differential: what the resized
ranks deliver, added to what the stopped ones did, against the epoch's
samples (a map-style dataset's, a stream's, tar shards', the tokens of
packed documents, length buckets'); and the arithmetic of levels and deals
against explicit lists.
"""

import json
import random
from collections import Counter
from itertools import islice

import numpy as np
import pytest

from dataloader import (
    BucketBatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    LoaderCheckpoint,
    PackedDataset,
    gather_state,
    interleave,
    merge_states,
    shard,
)
from dataloader._sampling.remainder import Deal, Level, dealt_size
from dataloader.sources import TarDataset, TarWriter

# -- the arithmetic ---------------------------------------------------------------


def explicit_remaining(entries, owners, delivered):
    """The entries of a level left after each owner delivered its first ``delivered``."""
    return [e for k, e in enumerate(entries) if k // owners >= delivered[k % owners]]


@pytest.mark.parametrize("seed", range(6))
def test_stacked_levels_give_the_remaining_entries_in_order(seed):
    rng = random.Random(seed)
    for _ in range(150):
        size = rng.randint(0, 40)
        entries = list(range(size))
        levels = []
        owners = rng.randint(1, 5)
        exact = True  # no entry repeated by padding
        for _depth in range(rng.randint(1, 3)):
            counts = [len(range(r, len(entries), owners)) for r in range(owners)]
            delivered = [rng.randint(0, c) for c in counts]
            levels.append(Level(owners, len(entries), delivered))
            remaining = explicit_remaining(entries, owners, delivered)
            assert levels[-1].remaining() == len(remaining)
            owners = rng.randint(1, 5)
            pad = rng.choice([True, False, None])
            exact = exact and pad is not True
            dealt = dealt_size(len(remaining), owners, pad)
            deal = Deal(levels, owners, dealt)
            if remaining:
                entries = [remaining[k % len(remaining)] for k in range(dealt)]
            else:
                entries = []
            for owner in range(owners):
                mine = entries[owner::owners]
                assert deal.count(owner) == len(mine)
                assert deal.entries(owner, 0, len(mine)).tolist() == mine
                start = rng.randint(0, len(mine))
                assert deal.entries(owner, start, len(mine) - start).tolist() == mine[start:]
            if exact:
                for entry in range(size):
                    expected = None
                    if entry in entries:
                        k = entries.index(entry)
                        expected = (k % owners, k // owners)
                    assert deal.owner_of(entry) == expected


def test_an_unbounded_level_deals_its_tail_by_arithmetic():
    level = Level(3, None, [4, 2, 3])
    assert level.remaining() is None
    # Rows 2 and 3 are the band: owner 1 at rows 2, 3; owner 2 at row 3.
    assert level.select(np.arange(5)).tolist() == [7, 10, 11, 12, 13]
    assert [level.index(k) for k in (6, 7, 9, 10, 11, 12)] == [None, 0, None, 1, 2, 3]


# -- map-style under DistributedSampler ----------------------------------------------


def sampler_loader(n, rank, ranks, *, shuffle=True, drop_last=False, batch_size=3,
                   num_workers=0, seed=7):
    sampler = DistributedSampler(range(n), ranks, rank, shuffle=shuffle, seed=seed,
                                 drop_last=drop_last)
    return DataLoader(list(range(n)), batch_size=batch_size, sampler=sampler,
                      num_workers=num_workers)


def run_ranks(loaders, rng, stop):
    """Each loader's batches of its epoch, up to a random stop; the lists and states."""
    delivered, states = [], []
    for loader in loaders:
        iterator = iter(loader)
        limit = rng.randint(0, len(loader) - 1) if stop else len(loader)
        taken = [next(iterator).tolist() for _ in range(limit)]
        delivered.append(taken)
        states.append(loader.state_dict())
        del iterator
    return delivered, states


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("sizes", [(2, 3), (3, 2), (4, 1), (1, 4), (2, 2), (3, 4, 2)])
def test_map_style_epoch_resized_delivers_every_sample_once(shuffle, sizes):
    # n and the batch size make every count a multiple of every rank count:
    # no padding anywhere, so the epoch is each sample exactly once.
    n, batch_size = 12 * 24, 12
    rng = random.Random(hash((shuffle, sizes)) & 0xFFFF)
    seen = Counter()
    state = None
    for step, ranks in enumerate(sizes):
        loaders = [sampler_loader(n, r, ranks, shuffle=shuffle, batch_size=batch_size)
                   for r in range(ranks)]
        if state is not None:
            for loader in loaders:
                loader.load_state_dict(state)
            assert len({len(loader) for loader in loaders}) == 1  # equal shares
        last = step == len(sizes) - 1
        delivered, states = run_ranks(loaders, rng, stop=not last)
        seen.update(i for batches in delivered for batch in batches for i in batch)
        if last:
            assert len({len(batches) for batches in delivered}) == 1
        state = json.loads(json.dumps(merge_states(states)))
    assert seen == Counter(range(n))
    assert state["epoch"] == 1 and state["levels"] == []


def resize_chain(n, batch_size, sizes, shuffle, drop_last, rng, num_workers=0):
    """The samples delivered over one epoch stopped at random and resized through ``sizes``."""
    seen = Counter()
    state = None
    for step, ranks in enumerate(sizes):
        loaders = [sampler_loader(n, r, ranks, shuffle=shuffle, drop_last=drop_last,
                                  batch_size=batch_size, num_workers=num_workers)
                   for r in range(ranks)]
        if state is not None:
            for loader in loaders:
                loader.load_state_dict(state)
        delivered, states = run_ranks(loaders, rng, stop=step < len(sizes) - 1)
        seen.update(i for batches in delivered for batch in batches for i in batch)
        state = json.loads(json.dumps(merge_states(states)))
    return seen


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(4))
def test_long_chains_of_resizes_on_up_to_eight_ranks(seed):
    # 26880 divides by 1 to 8, and a batch of 840 (their common multiple) keeps
    # every remainder dividing too: no padding, so each sample exactly once.
    rng = random.Random(seed)
    for _ in range(25):
        sizes = [rng.randint(1, 8) for _ in range(rng.randint(2, 5))]
        seen = resize_chain(26880, 840, sizes, rng.random() < 0.5, rng.random() < 0.5, rng)
        assert seen == Counter(range(26880)), sizes


@pytest.mark.parametrize("drop_last", [False, True])
def test_uneven_remainders_are_padded_or_cut_as_the_sampler_does(drop_last):
    n = 50
    old = [sampler_loader(n, r, 2, drop_last=drop_last) for r in range(2)]
    delivered, states = run_ranks(old, random.Random(3), stop=True)
    merged = merge_states(states)
    new = [sampler_loader(n, r, 3, drop_last=drop_last) for r in range(3)]
    for loader in new:
        loader.load_state_dict(merged)
    assert len({len(loader.sampler) for loader in new}) == 1
    rest, _ = run_ranks(new, random.Random(0), stop=False)
    before = Counter(i for batches in delivered for batch in batches for i in batch)
    after = Counter(i for batches in rest for batch in batches for i in batch)
    remaining = Level.from_list(merged["levels"][-1]).remaining()
    assert sum(after.values()) == dealt_size(remaining, 3, not drop_last)
    total = before + after
    repeats = sum(total.values()) - len(total)
    if drop_last:  # the old epoch's drop (none here: 50 = 2 * 25) and up to 2 cut
        assert repeats == 0 and n - len(total) <= 2
    else:
        assert set(total) == set(range(n)) and repeats <= 2


def test_next_epoch_is_the_ordinary_one_for_the_new_ranks():
    old = [sampler_loader(48, r, 2) for r in range(2)]
    _, states = run_ranks(old, random.Random(1), stop=True)
    new = [sampler_loader(48, r, 3) for r in range(3)]
    for loader in new:
        loader.load_state_dict(merge_states(states))
        list(loader)
    fresh = [sampler_loader(48, r, 3) for r in range(3)]
    for loader in fresh:
        loader.sampler.set_epoch(1)
    assert [[b.tolist() for b in one] for one in new] == [
        [b.tolist() for b in one] for one in fresh
    ]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resumed_twice_inside_a_dealt_epoch_on_the_same_ranks(num_workers):
    """A rank's own state inside a dealt epoch restores the deal (no merging)."""
    n = 96
    old = [sampler_loader(n, r, 2) for r in range(2)]
    _, states = run_ranks(old, random.Random(5), stop=True)
    merged = merge_states(states)
    whole = sampler_loader(n, 1, 3, num_workers=num_workers)
    whole.load_state_dict(merged)
    expected = [b.tolist() for b in whole]
    part = sampler_loader(n, 1, 3, num_workers=num_workers)
    part.load_state_dict(merged)
    iterator = iter(part)
    head = [next(iterator).tolist() for _ in range(2)]
    saved = json.loads(json.dumps(part.state_dict()))
    del iterator
    again = sampler_loader(n, 1, 3, num_workers=num_workers)
    again.load_state_dict(saved)
    assert head + [b.tolist() for b in again] == expected


def test_state_of_an_epoch_of_ten_billion_samples_is_small():
    n = 10**10
    ranks = 8
    loaders = []
    states = []
    for rank in range(ranks):
        sampler = DistributedSampler(range(n), ranks, rank, seed=1)
        loader = DataLoader(range(n), batch_size=4, sampler=sampler)
        iterator = iter(loader)
        for _ in range(rank + 1):
            next(iterator)
        states.append(loader.state_dict())
        loaders.append(loader)
        del iterator
    merged = merge_states(states)
    new = [DataLoader(range(n), batch_size=4,
                      sampler=DistributedSampler(range(n), 3, rank, seed=1)) for rank in range(3)]
    sizes = []
    for loader in new:
        loader.load_state_dict(merged)
        iterator = iter(loader)
        next(iterator)
        sizes.append(len(json.dumps(loader.state_dict())))
        del iterator
    assert len(json.dumps(merged)) < 1 << 20
    assert max(len(json.dumps(state)) for state in states) < 1 << 20
    assert max(sizes) < 1 << 20
    print(f"state sizes for {n} samples: per rank {max(sizes)} bytes, merged "
          f"{len(json.dumps(merged))} bytes")


# -- streams: shard ------------------------------------------------------------------


class Numbers(IterableDataset):
    """A stream of 0 .. n - 1 without a length."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


def shard_loader(source, rank, ranks, num_workers, batch_size=4):
    return DataLoader(shard(source, rank, ranks), batch_size=batch_size, num_workers=num_workers)


@pytest.mark.parametrize("sized", [True, False])
@pytest.mark.parametrize("plan", [((2, 2), (3, 1)), ((3, 0), (2, 3)), ((1, 1), (4, 2), (2, 0))])
def test_shard_epoch_resized_delivers_every_item_once(sized, plan):
    n = 150
    source = list(range(n)) if sized else Numbers(n)
    rng = random.Random(hash((sized, plan)) & 0xFFFF)
    seen = Counter()
    state = None
    for step, (ranks, workers) in enumerate(plan):
        loaders = [shard_loader(source, r, ranks, workers) for r in range(ranks)]
        if state is not None:
            for loader in loaders:
                loader.load_state_dict(state)
        last = step == len(plan) - 1
        states = []
        for loader in loaders:
            limit = rng.randint(0, 12) if not last else None
            iterator = iter(loader)
            for count, batch in enumerate(iterator, 1):
                seen.update(batch.tolist())
                if limit is not None and count >= limit:
                    break
            states.append(loader.state_dict())
            del iterator
        state = json.loads(json.dumps(merge_states(states)))
    assert seen == Counter(range(n))


# -- errors ----------------------------------------------------------------------------


def states_of(loaders, batches=1):
    states = []
    for loader in loaders:
        iterator = iter(loader)
        for _ in range(batches):
            next(iterator)
        states.append(loader.state_dict())
        del iterator
    return states


def test_mixed_states_are_value_errors_naming_what_differs():
    two = states_of([sampler_loader(48, r, 2) for r in range(2)])
    with pytest.raises(ValueError, match="different epochs"):
        later = dict(two[1], epoch=3)
        merge_states([two[0], later])
    other_seed = states_of([sampler_loader(48, 1, 2, seed=8)])[0]
    with pytest.raises(ValueError, match=r"different datasets.*'seed': 7.*'seed': 8"):
        merge_states([two[0], other_seed])
    other_data = states_of([sampler_loader(60, 1, 2)])[0]
    with pytest.raises(ValueError, match=r"different datasets.*'length': 48.*'length': 60"):
        merge_states([two[0], other_data])
    with pytest.raises(ValueError, match=r"rank\(s\) \[1\] of 2 are missing"):
        merge_states([two[0]])
    with pytest.raises(ValueError, match="two states are of rank 0"):
        merge_states([two[0], two[0]])
    three = states_of([sampler_loader(48, r, 3) for r in range(3)])
    with pytest.raises(ValueError, match="different numbers of ranks"):
        merge_states([two[0], two[1], three[2]])
    plain = DataLoader(list(range(8)), batch_size=2)
    with pytest.raises(ValueError, match="does not say which share"):
        merge_states([plain.state_dict()])
    merged = merge_states(two)
    with pytest.raises(ValueError, match="dataset of 48 samples, this loader's has 60"):
        sampler_loader(60, 0, 3).load_state_dict(merged)
    with pytest.raises(ValueError, match="over a DistributedSampler"):
        DataLoader(list(range(48)), batch_size=3).load_state_dict(merged)


def test_a_rank_that_finished_its_epoch_counts_all_its_share():
    loaders = [sampler_loader(48, r, 2) for r in range(2)]
    list(loaders[0])
    states = [loaders[0].state_dict(), states_of([loaders[1]], batches=2)[0]]
    assert states[0]["epoch"] == 1
    merged = merge_states(states)
    assert merged["epoch"] == 0
    assert Level.from_list(merged["levels"][0]).remaining() == 24 - 6


def test_gather_and_checkpoint_without_torch_distributed_merge_this_process_alone():
    loader = sampler_loader(24, 0, 1)
    iterator = iter(loader)
    first = [next(iterator).tolist() for _ in range(2)]
    del iterator
    assert gather_state(loader)["levels"] == [[1, 24, [6]]]
    saved = LoaderCheckpoint(loader).state_dict()
    resumed = sampler_loader(24, 0, 1)
    LoaderCheckpoint(resumed).load_state_dict(saved)
    rest = [b.tolist() for b in resumed]
    assert sorted(i for batch in first + rest for i in batch) == list(range(24))


def test_a_resized_shard_with_equal_batches_stops_every_rank_together():
    n = 203
    old = [DataLoader(shard(list(range(n)), r, 2), batch_size=4, num_workers=2,
                      equal_batches=True) for r in range(2)]
    seen = Counter()
    states = []
    for loader, stop in zip(old, (5, 9), strict=True):
        iterator = iter(loader)
        for _ in range(stop):
            seen.update(next(iterator).tolist())
        states.append(loader.state_dict())
        del iterator
    merged = merge_states(states)
    new = [DataLoader(shard(list(range(n)), r, 3), batch_size=4, num_workers=2,
                      equal_batches=True) for r in range(3)]
    for loader in new:
        loader.load_state_dict(merged)
    lengths = {len(loader) for loader in new}
    rest = [[batch.tolist() for batch in loader] for loader in new]
    assert len(lengths) == 1 and {len(batches) for batches in rest} == lengths
    for batches in rest:
        seen.update(i for batch in batches for i in batch)
    # Only full batches, the same count on every rank: each item at most once, and
    # fewer than a batch per stream left out.
    assert max(seen.values()) == 1 and n - len(seen) < 3 * 2 * 4


def test_a_shard_reads_a_source_that_splits_itself_among_workers_whole():
    # interleave keeps, on each worker, that worker's batches: read as a shard's
    # source it must see one worker, or the shard would split it twice.
    source = interleave([Numbers(30), Numbers(30)], probabilities=[0.5, 0.5], seed=4)
    expected = Counter(source)
    seen = Counter()
    for rank in range(2):
        loader = DataLoader(shard(source, rank, 2), batch_size=3, num_workers=3)
        seen.update(i for batch in loader for i in batch.tolist())
    assert seen == expected


# -- tar shards, packing and length buckets --------------------------------------------
#
# Each epoch below is stopped at random steps on N ranks, resumed on M, stopped
# again and resumed on a third size: every worker kind on some step, and the
# workers' count changing with the ranks.

RESIZES = [(2, 3), (3, 2), (4, 1), (1, 4), (2, 2)]
WORKERS = {"0": {"num_workers": 0}, "thread2": {"num_workers": 2, "worker_type": "thread"},
           "process2": {"num_workers": 2, "worker_type": "process"},
           "auto2": {"num_workers": 2, "worker_type": "auto"},
           "thread3": {"num_workers": 3, "worker_type": "thread"}}
KIND_CYCLE = ["thread2", "process2", "0", "auto2", "thread3"]


def plan_of(sizes, case):
    """``sizes`` then a third size, each with a worker kind (every kind over the cases)."""
    ranks = [*sizes, 1 + (sum(sizes) + case) % 3]
    return [(r, KIND_CYCLE[(case + step) % len(KIND_CYCLE)]) for step, r in enumerate(ranks)]


def resize_epoch(make, plan, rng, record, stops=(1, 5)):
    """One epoch through ``plan``: on each step every rank takes up to a random number of
    batches (the last step runs to the end), ``record`` sees each, and the ranks' states
    are merged for the next step. The merged state after the last step."""
    state = None
    for step, (ranks, kind) in enumerate(plan):
        loaders = [make(rank, ranks, WORKERS[kind]) for rank in range(ranks)]
        if state is not None:
            for loader in loaders:
                loader.load_state_dict(state)
        last = step == len(plan) - 1
        states = []
        for loader in loaders:
            limit = None if last else rng.randint(*stops)
            iterator = iter(loader)
            for count, batch in enumerate(iterator, 1):
                record(batch)
                del batch
                if limit is not None and count >= limit:
                    break
            states.append(loader.state_dict())
            del iterator
            loader.close()
        state = json.loads(json.dumps(merge_states(states)))
    return state


@pytest.fixture(scope="module")
def tar_shards(tmp_path_factory):
    directory = tmp_path_factory.mktemp("elastic-shards")
    label = 0
    for n, count in enumerate([9, 14, 6, 11, 7, 5, 12, 8, 10, 4, 13, 6]):
        with TarWriter(str(directory / f"s-{n:02d}.tar")) as writer:
            for _ in range(count):
                writer.write({"__key__": f"{label:05d}", "cls": label})
                label += 1
    return sorted(str(path) for path in directory.glob("*.tar")), label


def tar_label(position, sample):
    return sample[0]


def tar_loader(shards, rank, ranks, workers, seed=1):
    dataset = TarDataset(shards, shuffle_buffer=5, shuffle_shards=True, seed=seed,
                         fields=("cls",)).shard(rank, ranks)
    return DataLoader(dataset, batch_size=3, transform=tar_label, **workers)


@pytest.mark.parametrize("case", range(len(RESIZES)),
                         ids=[f"{n}to{m}" for n, m in RESIZES])
def test_tar_shards_resized_twice_deliver_every_sample_once(tar_shards, case):
    shards, total = tar_shards
    seen = Counter()
    state = resize_epoch(lambda rank, ranks, workers: tar_loader(shards, rank, ranks, workers),
                         plan_of(RESIZES[case], case), random.Random(case),
                         lambda batch: seen.update(batch.tolist()))
    assert seen == Counter(range(total))
    assert state["epoch"] == 1 and state["levels"] == [] and state["pieces"] == []


def test_a_tar_epoch_dealt_again_resumes_on_the_same_ranks_from_their_own_states(tar_shards):
    shards, total = tar_shards
    rng = random.Random(11)
    seen = Counter()
    old = [tar_loader(shards, rank, 2, WORKERS["thread2"]) for rank in range(2)]
    merged = json.loads(json.dumps(states_taken(old, rng, seen)))
    merged = merge_states(merged)
    assert merged["pieces"], "the stopped streams' open shards and buffers are pieces"
    new = [tar_loader(shards, rank, 3, WORKERS["0"]) for rank in range(3)]
    for loader in new:
        loader.load_state_dict(merged)
    own = json.loads(json.dumps(states_taken(new, rng, seen)))
    again = [tar_loader(shards, rank, 3, WORKERS["0"]) for rank in range(3)]
    for loader, state in zip(again, own, strict=True):
        loader.load_state_dict(state)  # its own state, inside the dealt epoch
        for batch in loader:
            seen.update(batch.tolist())
    assert seen == Counter(range(total))
    assert {loader.state_dict()["epoch"] for loader in again} == {1}


def states_taken(loaders, rng, seen, stops=(1, 4)):
    """Each loader's state after a random number of batches (recorded in ``seen``)."""
    states = []
    for loader in loaders:
        iterator = iter(loader)
        for count, batch in enumerate(iterator, 1):
            seen.update(batch.tolist())
            if count >= rng.randint(*stops):
                break
        states.append(loader.state_dict())
        del iterator
    return states


def test_tar_states_of_other_shards_or_seeds_are_value_errors(tar_shards):
    shards, _ = tar_shards
    rng = random.Random(2)
    two = states_taken([tar_loader(shards, rank, 2, WORKERS["0"]) for rank in range(2)], rng,
                       Counter())
    other_seed = states_taken([tar_loader(shards, 1, 2, WORKERS["0"], seed=9)], rng, Counter())
    with pytest.raises(ValueError, match=r"different datasets.*'seed': 1.*'seed': 9"):
        merge_states([two[0], other_seed[0]])
    fewer = states_taken([tar_loader(shards[:-1], 1, 2, WORKERS["0"])], rng, Counter())
    with pytest.raises(ValueError, match=r"different datasets.*'shards': 12.*'shards': 11"):
        merge_states([two[0], fewer[0]])
    thread = states_taken([tar_loader(shards, 1, 2, WORKERS["thread2"])], rng, Counter())
    with pytest.raises(ValueError, match="different numbers of workers"):
        merge_states([two[0], thread[0]])
    merged = merge_states(two)
    with pytest.raises(ValueError, match=r"a TarDataset over .*'shards': 12.*'shards': 11"):
        tar_loader(shards[:-1], 0, 3, WORKERS["0"]).load_state_dict(merged)
    with pytest.raises(ValueError, match="over a TarDataset; this loader is not one"):
        sampler_loader(48, 0, 3).load_state_dict(merged)


# Packing: documents whose tokens are unique (document i holds 1000 i, 1000 i + 1, ...),
# cut into several rows when longer than seq_len.

DOCUMENTS = [np.arange(1000 * i, 1000 * i + length) for i, length in
             enumerate(np.random.default_rng(0).integers(1, 20, 150).tolist())]


def row_tokens(rows):
    """The tokens of each packed row, padding left out: what a batch delivered."""
    return [row["input_ids"][row["segment_ids"] > 0].tolist() for row in rows]


def packed_loader(rank, ranks, workers, window=6):
    packed = PackedDataset(shard(DOCUMENTS, rank, ranks), seq_len=8, window=window)
    return DataLoader(packed, batch_size=2, collate_fn=row_tokens, **workers)


@pytest.mark.parametrize("case", range(len(RESIZES)),
                         ids=[f"{n}to{m}" for n, m in RESIZES])
def test_packed_rows_resized_twice_hold_every_token_once(case):
    seen = Counter()

    def record(batch):
        for row in batch:
            assert 0 < len(row) <= 8
            seen.update(row)

    state = resize_epoch(packed_loader, plan_of(RESIZES[case], case),
                         random.Random(100 + case), record)
    assert seen == Counter(int(token) for document in DOCUMENTS for token in document)
    assert state["epoch"] == 1 and state["levels"] == []


def test_a_packed_epoch_dealt_again_resumes_on_the_same_ranks_from_their_own_states():
    rng = random.Random(5)
    seen = Counter()

    def taken(loaders):
        states = []
        for loader in loaders:
            iterator = iter(loader)
            for count, batch in enumerate(iterator, 1):
                seen.update(token for row in batch for token in row)
                if count >= rng.randint(1, 4):
                    break
            states.append(json.loads(json.dumps(loader.state_dict())))
            del iterator
        return states

    merged = merge_states(taken([packed_loader(r, 3, WORKERS["thread2"]) for r in range(3)]))
    assert all(len(piece["carried"]) <= 8 for piece in merged["pieces"])
    new = [packed_loader(r, 2, WORKERS["thread3"]) for r in range(2)]
    for loader in new:
        loader.load_state_dict(merged)
    own = taken(new)
    for rank, state in enumerate(own):
        loader = packed_loader(rank, 2, WORKERS["thread3"])
        loader.load_state_dict(state)
        for batch in loader:
            seen.update(token for row in batch for token in row)
    assert seen == Counter(int(token) for document in DOCUMENTS for token in document)


def test_the_same_ranks_resume_a_packed_epoch_exactly():
    loader = packed_loader(1, 2, WORKERS["thread2"])
    whole = list(loader)
    loader = packed_loader(1, 2, WORKERS["thread2"])
    iterator = iter(loader)
    head = [next(iterator) for _ in range(3)]
    state = json.loads(json.dumps(loader.state_dict()))
    del iterator
    resumed = packed_loader(1, 2, WORKERS["thread2"])
    resumed.load_state_dict(state)
    assert head + list(resumed) == whole


# Length buckets: 60 batches of 4 (240 items), which divides among 1 to 4 ranks.

BUCKET_LENGTHS = np.random.default_rng(3).integers(1, 64, 240).tolist()


def bucket_loader(rank, ranks, workers, drop_last=False, seed=3):
    sampler = BucketBatchSampler(BUCKET_LENGTHS, batch_size=4, seed=seed, window=40,
                                 drop_last=drop_last, num_replicas=ranks, rank=rank)
    return DataLoader(list(range(len(BUCKET_LENGTHS))), batch_sampler=sampler, **workers)


def bucket_chain(plan, rng, seen, exact):
    """Like ``resize_epoch``, but every rank's batches are counted, and with ``exact`` the
    stops leave a remainder the next ranks divide (no batch repeated or cut)."""
    state = None
    for step, (ranks, kind) in enumerate(plan):
        loaders = [bucket_loader(rank, ranks, WORKERS[kind]) for rank in range(ranks)]
        if state is not None:
            for loader in loaders:
                loader.load_state_dict(state)
        count = len(loaders[0])
        assert {len(loader) for loader in loaders} == {count}, "unequal batch counts"
        last = step == len(plan) - 1
        stops = [count if last else rng.randint(3, 6) for _ in loaders]
        if exact and not last:  # the batches left divide among the next ranks
            following = plan[step + 1][0]
            while (count * ranks - sum(stops)) % following:
                stops[stops.index(max(stops))] -= 1
        delivered, states = [], []
        for loader, stop in zip(loaders, stops, strict=True):
            iterator = iter(loader)
            batches = 0
            for batch in islice(iterator, stop):
                seen.update(batch.tolist())
                batches += 1
            delivered.append(batches)
            states.append(loader.state_dict())
            del iterator
        if last:
            assert len(set(delivered)) == 1, "unequal batch counts"
        state = json.loads(json.dumps(merge_states(states)))
    return state


@pytest.mark.parametrize("case", range(len(RESIZES)),
                         ids=[f"{n}to{m}" for n, m in RESIZES])
def test_length_buckets_resized_twice_give_equal_counts_and_every_item_once(case):
    seen = Counter()
    state = bucket_chain(plan_of(RESIZES[case], case), random.Random(case), seen, exact=True)
    assert seen == Counter(range(len(BUCKET_LENGTHS)))
    assert state["epoch"] == 1 and state["levels"] == []


@pytest.mark.parametrize("drop_last", [False, True])
def test_uneven_bucket_remainders_are_padded_or_cut_to_equal_counts(drop_last):
    old = [bucket_loader(rank, 2, WORKERS["0"], drop_last) for rank in range(2)]
    seen = Counter()
    states = []
    for loader, stop in zip(old, (3, 6), strict=True):  # 51 batches left, for 4 ranks
        iterator = iter(loader)
        for batch in islice(iterator, stop):
            seen.update(batch.tolist())
        states.append(loader.state_dict())
        del iterator
    merged = merge_states(states)
    new = [bucket_loader(rank, 4, WORKERS["thread2"], drop_last) for rank in range(4)]
    counts = []
    for loader in new:
        loader.load_state_dict(merged)
        batches = [batch.tolist() for batch in loader]
        counts.append(len(batches))
        seen.update(i for batch in batches for i in batch)
    assert counts == [12] * 4 if drop_last else counts == [13] * 4
    repeated = sum(seen.values()) - len(seen)
    if drop_last:  # three batches cut, none repeated
        assert repeated == 0 and len(seen) == len(BUCKET_LENGTHS) - 3 * 4
    else:  # one batch repeated, the first remaining
        assert set(seen) == set(range(len(BUCKET_LENGTHS))) and repeated == 4


def test_bucket_states_of_other_seeds_or_budgets_are_value_errors():
    rng = random.Random(1)
    two = [bucket_loader(rank, 2, WORKERS["0"]) for rank in range(2)]
    states = [state_after(loader, rng) for loader in two]
    other = state_after(bucket_loader(1, 2, WORKERS["0"], seed=4), rng)
    with pytest.raises(ValueError, match=r"different datasets.*'seed': 3.*'seed': 4"):
        merge_states([states[0], other])
    merged = merge_states(states)
    with pytest.raises(ValueError, match="over a BucketBatchSampler; this loader is not one"):
        sampler_loader(240, 0, 3).load_state_dict(merged)


def state_after(loader, rng):
    iterator = iter(loader)
    for _ in range(rng.randint(1, 4)):
        next(iterator)
    state = loader.state_dict()
    del iterator
    return state
