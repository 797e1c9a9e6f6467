"""RowGroupStream: columnar rows streamed a group at a time, sharded, shuffled, resumed."""

import json

import numpy as np
import pytest

from dataloader import DataLoader
from dataloader.sources import ArrowDataset, ParquetDataset, RowGroupStream

# The arrow extra (not installed beside a free-threaded build).
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROWS = 53
GROUP_ROWS = 6  # nine groups, the last of five rows
WORKER_KINDS = [
    pytest.param((0, "thread"), id="direct"),
    pytest.param((2, "thread"), id="threads"),
    pytest.param((2, "process"), id="processes"),
]


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "rows.parquet"
    table = pa.table({"id": range(ROWS), "tokens": [[i] * (i % 5) for i in range(ROWS)]})
    pq.write_table(table, path, row_group_size=GROUP_ROWS)
    return ParquetDataset(path)


def ids(rows):
    return [int(row["id"]) for row in rows]


def batch_ids(batch):
    """A collate function: the batch's row ids."""
    return ids(batch)


def test_unshuffled_the_stream_is_the_files_order(dataset):
    assert ids(dataset.stream()) == list(range(ROWS))
    assert isinstance(dataset.stream(), RowGroupStream)


def test_the_shuffle_is_an_exact_permutation_seeded_and_new_each_epoch(dataset):
    def epoch_ids(epoch, seed=7):
        stream = dataset.stream(shuffle=True, seed=seed)
        stream.set_epoch(epoch)
        return ids(stream)

    first = epoch_ids(0)
    assert sorted(first) == list(range(ROWS)) and first != list(range(ROWS))
    assert epoch_ids(0) == first
    assert epoch_ids(1) != first and sorted(epoch_ids(1)) == list(range(ROWS))
    assert epoch_ids(0, seed=8) != first
    # The first group read comes whole, its rows shuffled too.
    group = first[0] // GROUP_ROWS
    rows = [i for i in range(ROWS) if i // GROUP_ROWS == group]
    assert sorted(first[:len(rows)]) == rows and first[:len(rows)] != rows


def test_ranks_and_workers_read_every_row_once(dataset):
    stream = dataset.stream(shuffle=True, seed=1)
    seen = []
    for rank in range(3):
        share = stream.shard(rank=rank, world_size=3)
        loader = DataLoader(share, batch_size=4, num_workers=2, collate_fn=batch_ids)
        seen += [i for batch in loader for i in batch]
    assert sorted(seen) == list(range(ROWS))


@pytest.mark.parametrize("stop", [0, 1, 5, 6, 7, 30, ROWS])
def test_an_iterator_resumes_exactly_from_its_state(dataset, stop):
    stream = dataset.stream(shuffle=True, seed=3)
    whole = ids(stream)
    iterator = iter(stream)
    head = [int(next(iterator)["id"]) for _ in range(stop)]
    state = json.loads(json.dumps(iterator.state_dict()))
    resumed = iter(dataset.stream(shuffle=True, seed=3))
    resumed.load_state_dict(state)
    assert head + ids(resumed) == whole


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_a_loader_resumes_mid_epoch_twice(dataset, kind):
    num_workers, worker_type = kind

    def loader():
        return DataLoader(dataset.stream(shuffle=True, seed=5), batch_size=4,
                          num_workers=num_workers, worker_type=worker_type, collate_fn=batch_ids)

    with loader() as uninterrupted:
        whole = list(uninterrupted)
    delivered, state = [], None
    for steps in (3, 4):  # stop after 3 batches, resume, stop after 4 more, resume to the end
        with loader() as run:
            if state is not None:
                run.load_state_dict(state)
            iterator = iter(run)
            for _ in range(steps):
                delivered.append(next(iterator))
            state = run.state_dict()
    with loader() as last:
        last.load_state_dict(state)
        for batch in last:
            delivered.append(batch)
    assert delivered == whole
    assert sorted(i for batch in whole for i in batch) == list(range(ROWS))


def test_the_next_epoch_after_a_resumed_one_is_shuffled_anew(dataset):
    with DataLoader(dataset.stream(shuffle=True, seed=5), batch_size=10,
                    collate_fn=batch_ids) as loader:
        first = [i for batch in loader for i in batch]
        second = [i for batch in loader for i in batch]
    assert sorted(first) == sorted(second) == list(range(ROWS)) and first != second


def test_arrow_record_batches_stream_too(tmp_path):
    path = tmp_path / "rows.arrow"
    with pa.OSFile(str(path), "wb") as sink:
        table = pa.table({"id": np.arange(20)})
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=3)
    stream = ArrowDataset(path).stream(shuffle=True, seed=2)
    assert len(stream.dataset.groups) == 7
    assert sorted(ids(stream)) == list(range(20))


def test_bad_arguments_name_themselves(dataset):
    with pytest.raises(ValueError, match="9 group\\(s\\) cannot be split among world_size=10"):
        dataset.stream().shard(rank=0, world_size=10)
    with pytest.raises(ValueError, match="seed should be a non-negative int"):
        dataset.stream(seed=-1)


@pytest.fixture
def uneven(tmp_path):
    """Groups of 1 to 12 rows: ranks' shares differ, and change with the shuffle."""
    path = tmp_path / "uneven.parquet"
    sizes = [5, 12, 1, 7, 3, 9, 2, 11, 4, 8, 6]
    with pq.ParquetWriter(path, pa.schema({"id": pa.int64()})) as writer:
        start = 0
        for size in sizes:
            writer.write_table(pa.table({"id": range(start, start + size)}))
            start += size
    return ParquetDataset(path), sum(sizes)


def test_len_is_the_rows_of_this_ranks_groups_in_the_epoch(uneven):
    dataset, rows = uneven
    stream = dataset.stream(shuffle=True, seed=2)
    assert len(stream) == rows
    for epoch in (0, 1):
        stream.set_epoch(epoch)
        shares = [stream.shard(rank=rank, world_size=3) for rank in range(3)]
        assert [len(share) for share in shares] == [len(ids(share)) for share in shares]
        assert sum(len(share) for share in shares) == rows
        for share in shares:
            assert sum(share.stream_length(w, 2) for w in range(2)) == len(share)
    stream.set_epoch(0)
    first = [len(stream.shard(rank=rank, world_size=3)) for rank in range(3)]
    stream.set_epoch(1)
    assert [len(stream.shard(rank=rank, world_size=3)) for rank in range(3)] != first


@pytest.mark.parametrize("kind", [*WORKER_KINDS, pytest.param((2, "auto"), id="auto")])
def test_equal_batches_gives_every_rank_the_same_count_epoch_after_epoch(uneven, kind):
    num_workers, worker_type = kind
    dataset, rows = uneven
    stream = dataset.stream(shuffle=True, seed=2)
    loaders = [DataLoader(stream.shard(rank=rank, world_size=3), batch_size=2,
                          equal_batches=True, num_workers=num_workers, worker_type=worker_type,
                          collate_fn=batch_ids) for rank in range(3)]
    counts_by_epoch = []
    for _ in range(3):
        epoch = [[len(batch) for batch in loader] for loader in loaders]
        counts = [len(batches) for batches in epoch]
        assert len(set(counts)) == 1 and counts[0] > 0
        assert all(size == 2 for batches in epoch for size in batches)  # partial ones dropped
        assert [len(loader) for loader in loaders] == counts
        counts_by_epoch.append(counts[0])
    # The fewest any rank could deliver: its workers' full batches of this epoch.
    for loader in loaders:
        loader.close()
    assert max(counts_by_epoch) <= rows // 2 // 3
