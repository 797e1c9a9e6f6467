"""DistributedSampler against torch's partition rules, and real multi-process runs."""

import math
import os
import subprocess
import sys
import threading
from itertools import chain
from pathlib import Path

import pytest

from dataloader import DataLoader, DistributedSampler, IterableDataset, RandomSampler, shard
from dataloader._sampling.distributed import AgreedBatches, RankGroup, world


def reference_partition(n, num_replicas, rank, order, drop_last):
    """torch's DistributedSampler.__iter__, written out over a given order."""
    indices = list(order)
    if not drop_last:
        num_samples = math.ceil(n / num_replicas)
        total = num_samples * num_replicas
        padding = total - len(indices)
        if padding <= len(indices):
            indices += indices[:padding]
        else:
            indices += (indices * math.ceil(padding / len(indices)))[:padding]
    else:
        num_samples = n // num_replicas
        total = num_samples * num_replicas
        indices = indices[:total]
    return indices[rank:total:num_replicas]


CASES = [(10, 3), (9, 3), (2, 5), (1, 4), (17, 4), (100, 7), (0, 2)]


@pytest.mark.parametrize("n, replicas", CASES)
@pytest.mark.parametrize("drop_last", [False, True])
def test_unshuffled_shares_follow_torchs_rules(n, replicas, drop_last):
    for rank in range(replicas):
        sampler = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        expected = reference_partition(n, replicas, rank, range(n), drop_last) if n else []
        assert list(sampler) == expected
        assert len(sampler) == len(expected)


@pytest.mark.parametrize("n, replicas", CASES)
@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffled_shares_are_equal_disjoint_and_cover(n, replicas, drop_last):
    shares = [list(DistributedSampler(range(n), replicas, rank, seed=3, drop_last=drop_last))
              for rank in range(replicas)]
    expected_len = n // replicas if drop_last else math.ceil(n / replicas)
    assert all(len(share) == expected_len for share in shares)
    everything = list(chain.from_iterable(shares))
    if drop_last:
        assert len(set(everything)) == len(everything)
    else:
        assert set(everything) == set(range(n))
        # Only the padding repeats: as many repeats as the padding is long.
        assert len(everything) - len(set(everything)) == expected_len * replicas - n
    # The shares are one order dealt round-robin, padded by wrapping.
    order = [share[i] for i in range(expected_len) for share in shares]
    if n and not drop_last:
        assert sorted(order[:n]) == list(range(n))
        # The padding repeats the order from its start (as often as needed).
        assert order[n:] == order[: len(order) - n]


def test_same_seed_and_epoch_give_the_same_partition_anywhere():
    def shares(seed, epoch):
        result = []
        for rank in range(3):
            sampler = DistributedSampler(range(50), 3, rank, seed=seed)
            sampler.set_epoch(epoch)
            result.append(list(sampler))
        return result

    assert shares(1, 4) == shares(1, 4)
    assert shares(1, 4) != shares(1, 5)
    assert shares(1, 4) != shares(2, 4)


def test_set_epoch_changes_the_order_and_is_repeatable():
    sampler = DistributedSampler(range(40), 2, 0, seed=0)
    first = list(sampler)
    assert list(sampler) == first  # no set_epoch: the same epoch
    sampler.set_epoch(1)
    assert list(sampler) != first
    sampler.set_epoch(0)
    assert list(sampler) == first


def test_indices_are_python_ints_and_vectorised_chunks_are_used():
    sampler = DistributedSampler(range(10**6), 4, 1, seed=0)
    chunks = list(sampler._index_chunks())
    assert sum(len(chunk) for chunk in chunks) == 250_000
    assert {type(i) for i in list(sampler)[:10]} == {int}


@pytest.mark.parametrize("kwargs", [{"num_replicas": 2, "rank": 2}, {"num_replicas": 2, "rank": -1},
                                    {"num_replicas": 0, "rank": 0}])
def test_invalid_rank_is_a_value_error(kwargs):
    with pytest.raises(ValueError, match=r"rank|num_replicas"):
        DistributedSampler(range(4), **kwargs)


def test_defaults_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    sampler = DistributedSampler(range(8), shuffle=False)
    assert (sampler.num_replicas, sampler.rank) == (4, 3)
    assert list(sampler) == [3, 7]


def test_one_argument_given_the_other_from_the_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "2")
    assert world(num_replicas=5) == (5, 2)
    assert world(rank=1) == (3, 1)
    assert world(1, 0) == (1, 0)  # a single process is a valid world


@pytest.mark.parametrize("kwargs", [
    {"num_replicas": True, "rank": 0}, {"num_replicas": 2.0, "rank": 0},
    {"num_replicas": 2, "rank": False}, {"num_replicas": 2, "rank": "1"},
])
def test_non_integer_world_is_a_value_error(kwargs):
    with pytest.raises(ValueError, match="should be an integer"):
        world(**kwargs)


def test_initialised_torch_distributed_defines_the_world(monkeypatch):
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    monkeypatch.setenv("WORLD_SIZE", "4")  # torch.distributed wins over the environment
    monkeypatch.setenv("RANK", "3")
    made = []
    new_group = dist.new_group
    monkeypatch.setattr(dist, "new_group", lambda **kw: made.append(new_group(**kw)) or made[-1])
    group = RankGroup()
    assert group.ready() is False
    for run in range(2):  # a re-initialised job gets a group of its own again
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
        try:
            assert world() == (1, 0)
            assert group.ready() is True
            assert group.ready() is True
            assert len(made) == run + 1  # one group per default group, made once
            assert group.min(7) == 7
        finally:
            dist.destroy_process_group()


def test_one_item_on_one_rank():
    assert list(DistributedSampler(range(1), num_replicas=1, rank=0)) == [0]


def test_defaults_are_torchs(monkeypatch):
    sampler = DistributedSampler(range(9), num_replicas=2, rank=1)
    assert (sampler.shuffle, sampler.seed, sampler.drop_last) == (True, 0, False)
    assert len(sampler) == 5
    assert list(sampler) == list(DistributedSampler(range(9), 2, 1, shuffle=True, seed=0))


def test_state_dict_restores_seed_and_epoch_on_the_same_number_of_ranks():
    sampler = DistributedSampler(range(20), num_replicas=2, rank=0, seed=5)
    sampler.set_epoch(3)
    state = sampler.state_dict()
    assert state == {"seed": 5, "epoch": 3, "num_replicas": 2}
    other = DistributedSampler(range(20), num_replicas=2, rank=0)
    other.load_state_dict(state)
    assert (other.seed, other.epoch) == (5, 3)
    assert list(other) == list(sampler)
    with pytest.raises(ValueError, match="num_replicas=2"):
        DistributedSampler(range(20), num_replicas=4, rank=0).load_state_dict(state)


def test_half_a_world_in_the_environment_is_not_a_world(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(ValueError, match="cannot tell this process's rank"):
        world()
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="should be integers"):
        world()


def test_missing_world_is_a_value_error_saying_what_to_pass(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(ValueError, match="pass num_replicas= and rank="):
        DistributedSampler(range(8))


def epoch_orders(loader, epochs):
    return [list(chain.from_iterable(batch.tolist() for batch in loader))
            for _ in range(epochs)]


def test_loader_advances_the_epoch_of_its_sampler(make_loader):
    sampler = DistributedSampler(range(30), 2, 1, seed=5)
    loader = make_loader(list(range(30)), batch_size=4, sampler=sampler)
    orders = epoch_orders(loader, 3)
    assert loader.epoch == 2 and sampler.epoch == 2
    expected = []
    for epoch in range(3):
        reference = DistributedSampler(range(30), 2, 1, seed=5)
        reference.set_epoch(epoch)
        expected.append(list(reference))
    assert orders == expected


def test_explicit_set_epoch_wins(make_loader):
    sampler = DistributedSampler(range(30), 2, 0, seed=5)
    loader = make_loader(list(range(30)), batch_size=4, sampler=sampler)
    sampler.set_epoch(7)
    seven = epoch_orders(loader, 1)[0]
    assert loader.epoch == 7
    sampler.set_epoch(7)
    assert epoch_orders(loader, 1)[0] == seven
    eight = epoch_orders(loader, 1)[0]  # no set_epoch: the loader goes on to 8
    assert loader.epoch == 8 and eight != seven


def test_shuffled_loader_order_is_a_function_of_seed_and_epoch(make_loader):
    loader = make_loader(list(range(25)), batch_size=5, shuffle=True, seed=11)
    orders = epoch_orders(loader, 3)
    for epoch, order in enumerate(orders):
        sampler = RandomSampler(range(25), seed=11)
        sampler.set_epoch(epoch)
        assert order == list(sampler)


def test_loader_draws_a_seed_when_given_none():
    first = DataLoader(list(range(10)), shuffle=True)
    second = DataLoader(list(range(10)), shuffle=True)
    assert isinstance(first.seed, int) and first.seed != second.seed


WORKER = Path(__file__).with_name("distributed_worker.py")


def torchrun(tmp_path, scenario, nproc=2):
    pytest.importorskip("torch")
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc_per_node={nproc}", str(WORKER), scenario, str(tmp_path)],
        capture_output=True, text=True, timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return (tmp_path / "result.txt").read_text()


@pytest.mark.parametrize("scenario", ["map", "stream", "stream-unsized"])
def test_torchrun_ranks_see_disjoint_equal_shares(tmp_path, scenario):
    assert torchrun(tmp_path, scenario) == "ok"


def test_torchrun_tar_shards_give_every_rank_the_same_samples(tmp_path):
    # Shards of uneven sizes: the ranks' shares differ, and so do their
    # workers' partial last batches, in size and place.
    from dataloader.sources import TarWriter

    label = 0
    for n, count in enumerate([3, 9, 5, 13, 7, 4, 11, 6]):
        with TarWriter(str(tmp_path / f"s-{n}.tar")) as writer:
            for _ in range(count):
                writer.write({"__key__": f"{label:05d}", "cls": label})
                label += 1
    assert torchrun(tmp_path, "tar") == "ok"


# -- equal_batches without known counts: the ranks agree in chunks -----------


class ThreadRanks:
    """Ranks as threads: ``min`` is an all_reduce(MIN) over a barrier, counted."""

    def __init__(self, world):
        self.barrier = threading.Barrier(world)
        self.lock = threading.Lock()
        self.values = []
        self.calls = 0

    def min(self, value):
        with self.lock:
            self.values.append(value)
            self.calls += 1
        self.barrier.wait(timeout=60)
        result = min(self.values[-self.barrier.parties:])
        self.barrier.wait(timeout=60)
        return result


class Rank:
    def __init__(self, ranks):
        self.ranks = ranks

    def min(self, value):
        return self.ranks.min(value)


def run_ranks(sources, max_chunks):
    """Deliver each rank's batches through AgreedBatches, the ranks on threads."""
    ranks = ThreadRanks(len(sources))
    delivered = [[] for _ in sources]
    exchanges = [0] * len(sources)

    def run(rank):
        batches = iter(sources[rank])

        def next_batch():
            batch = next(batches)
            if isinstance(batch, Exception):
                raise batch
            return batch

        agreed = AgreedBatches(next_batch, Rank(ranks), max_chunks[rank])
        while True:
            try:
                delivered[rank].append(agreed.next())
            except StopIteration:
                break
            except ValueError as exc:
                delivered[rank].append(exc)
        exchanges[rank] = agreed.exchanges

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(len(sources))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return delivered, exchanges


@pytest.mark.parametrize("counts", [(100, 37), (37, 100, 64), (0, 5), (8, 8), (1, 1000)])
def test_agreed_batches_stop_every_rank_at_the_smallest_count(counts):
    sources = [range(count) for count in counts]
    delivered, exchanges = run_ranks(sources, [8] * len(counts))
    assert all(batches == list(range(min(counts))) for batches in delivered)
    # Chunks of 1, 2, 4 (7 batches), then 8 at a time, and the exchange that
    # finds the end: far fewer exchanges than batches.
    assert exchanges == [exchanges[0]] * len(counts)
    assert exchanges[0] <= 4 + -(-max(min(counts) - 7, 0) // 8) + 1


def test_agreed_batches_with_different_windows_on_different_ranks():
    delivered, exchanges = run_ranks([range(50), range(80)], [2, 16])
    assert delivered == [list(range(50))] * 2
    assert exchanges[0] == exchanges[1]


def test_agreed_batches_raise_an_error_in_its_turn_and_go_on():
    failure = ValueError("batch 3")
    delivered, _ = run_ranks([[0, 1, 2, failure, 4, 5], range(5)], [4, 4])
    assert delivered[0] == [0, 1, 2, failure, 4]
    assert delivered[1] == [0, 1, 2, 3, 4]


class OneRank:
    """A one-rank group that records every count it is asked to agree on."""

    def __init__(self):
        self.counts = []

    def min(self, value):
        self.counts.append(value)
        return value


@pytest.mark.parametrize(("batches", "max_chunk", "schedule"), [
    (30, 8, [1, 2, 4, 8, 8, 7, 0]),
    (3, 1, [1, 1, 1, 0]),
    (0, 4, [0]),
])
def test_agreed_batches_take_chunks_of_one_then_doubling_up_to_the_window(
    batches, max_chunk, schedule,
):
    pulled = []

    def next_batch():
        if len(pulled) == batches:
            raise StopIteration
        pulled.append(len(pulled))
        return pulled[-1]

    group = OneRank()
    agreed = AgreedBatches(next_batch, group, max_chunk)
    delivered = []
    while True:
        try:
            delivered.append(agreed.next())
        except StopIteration:
            break
        if len(delivered) == 1:
            assert pulled == [0]  # the first batch waits for nothing more than itself
    assert delivered == list(range(batches))
    assert group.counts == schedule
    assert agreed.exchanges == len(schedule)


@pytest.mark.parametrize(("n", "replicas", "drop_last", "total"), [
    (10, 3, False, 12), (10, 3, True, 9), (0, 2, False, 0),
])
def test_total_size_counts_every_ranks_share_with_padding(n, replicas, drop_last, total):
    sampler = DistributedSampler(range(n), num_replicas=replicas, rank=0, drop_last=drop_last)
    assert sampler.total_size == total


# -- equal_batches at its boundary: every rank the same count, nothing twice --


def full_batches_of_rank(n, rank, world, workers, batch_size):
    """The batches one rank's workers make of a stream of ``n`` items, partial ones
    left out, by the documented split: position p goes to rank p % world, and there
    to worker (p // world) % workers."""
    share = list(range(rank, n, world))
    streams = max(workers, 1)
    return sum(len(share[w::streams]) // (batch_size or 1) for w in range(streams))


def lengths_around_the_boundaries(world, workers, batch_size):
    """From nothing to two full batches on every worker of every rank, and a little
    beyond: the ranks' counts are equal, or differ by one item or by one batch."""
    unit = world * max(workers, 1) * (batch_size or 1)
    return range(0, 2 * unit + world * (batch_size or 1) + 2)


# (ranks, num_workers, batch_size, drop_last); without batches there is no drop_last.
SPLITS = [(world, workers, batch_size, drop_last)
          for world, workers, batch_size in [(2, 0, 3), (3, 0, 2), (2, 2, 3), (3, 2, 2),
                                             (2, 3, 1), (2, 2, None), (3, 0, None)]
          for drop_last in ([False] if batch_size is None else [False, True])]


@pytest.mark.parametrize("world, workers, batch_size, drop_last", SPLITS)
def test_equal_batches_every_rank_stops_at_the_smallest_ranks_full_batches(
        world, workers, batch_size, drop_last):
    kinds = set()
    for n in lengths_around_the_boundaries(world, workers, batch_size):
        counts = [full_batches_of_rank(n, rank, world, workers, batch_size)
                  for rank in range(world)]
        kinds.add(max(counts) - min(counts))
        seen = []
        for rank in range(world):
            loader = DataLoader(shard(range(n), rank, world), batch_size=batch_size,
                                num_workers=workers, drop_last=drop_last, equal_batches=True,
                                worker_type="thread")
            assert len(loader) == min(counts), (n, rank)
            for epoch in range(2):  # the limit holds epoch after epoch
                batches = [batch.tolist() if batch_size else [int(batch)] for batch in loader]
                assert len(batches) == min(counts), (n, rank, epoch)
                if batch_size is not None:
                    assert all(len(batch) == batch_size for batch in batches), (n, rank)
                items = list(chain.from_iterable(batches))
                assert all(item % world == rank for item in items)
                assert len(items) == len(set(items)), (n, rank)
                if epoch == 0:
                    seen += items
            loader.close()
        assert len(seen) == len(set(seen)) == world * min(counts) * (batch_size or 1)
    # The lengths swept reach equal counts and counts a batch apart.
    assert {0, 1} <= kinds


@pytest.mark.parametrize("n", [23, 24, 25, 27, 28])
def test_equal_batches_on_worker_processes_at_the_boundary(n):
    # 2 ranks x 2 workers x batches of 3: 24 items fill two batches per worker.
    counts = [full_batches_of_rank(n, rank, 2, 2, 3) for rank in range(2)]
    seen = []
    for rank in range(2):
        with DataLoader(shard(range(n), rank, 2), batch_size=3, num_workers=2,
                        equal_batches=True, worker_type="process", timeout=120) as loader:
            for epoch in range(2):
                batches = [batch.tolist() for batch in loader]
                assert len(batches) == len(loader) == min(counts), (rank, epoch)
                assert all(len(batch) == 3 for batch in batches)
                if epoch == 0:
                    seen += chain.from_iterable(batches)
    assert len(seen) == len(set(seen)) == 2 * 3 * min(counts)


class UnsizedRange(IterableDataset):
    """``range(n)`` without a length: the ranks must agree on the count as they go."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


@pytest.mark.parametrize("lengths", [(24, 24), (24, 23), (24, 22), (25, 24), (12, 30),
                                     (5, 40), (0, 9)])
@pytest.mark.parametrize("workers", [0, 2])
def test_equal_batches_agreed_by_ranks_stop_together_at_the_boundary(
        monkeypatch, lengths, workers):
    # Each rank streams a source of its own length (files of uneven sizes); the
    # ranks, threads here, agree through the loader's own group (its all_reduce
    # stood in for by a barrier). Rank r keeps its own positions of its source.
    world = len(lengths)
    ranks = ThreadRanks(world)
    monkeypatch.setattr(RankGroup, "ready", lambda self: True)
    monkeypatch.setattr(RankGroup, "min", lambda self, value: ranks.min(value))
    delivered = [None] * world

    def run(rank):
        loader = DataLoader(shard(UnsizedRange(lengths[rank]), rank, world), batch_size=3,
                            num_workers=workers, equal_batches=True, worker_type="thread",
                            timeout=60)
        delivered[rank] = [[batch.tolist() for batch in loader] for _ in range(2)]
        loader.close()

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    expected = min(full_batches_of_rank(lengths[rank], rank, world, workers, 3)
                   for rank in range(world))
    for epoch in range(2):
        for rank in range(world):
            batches = delivered[rank][epoch]
            assert len(batches) == expected, (rank, epoch)
            assert all(len(batch) == 3 for batch in batches)
            items = list(chain.from_iterable(batches))
            assert len(items) == len(set(items))
            assert all(item % world == rank for item in items)
