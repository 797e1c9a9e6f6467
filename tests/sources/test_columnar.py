"""ParquetDataset and ArrowDataset: rows by index and in batches, against pyarrow's own reading."""

import pickle
import threading
import time
from concurrent.futures import Future

import numpy as np
import pytest

from dataloader import DataLoader
from dataloader._datasets.row_groups import GroupColumns
from dataloader._processes.choice import resolve_worker_type
from dataloader.sources import ArrowDataset, ParquetDataset
from dataloader.sources._columnar import GroupCache

# The arrow extra (not installed beside a free-threaded build).
pa = pytest.importorskip("pyarrow")
feather = pytest.importorskip("pyarrow.feather")
pq = pytest.importorskip("pyarrow.parquet")

# (num_workers, worker_type): the consumer alone, worker threads, worker processes.
WORKER_KINDS = [
    pytest.param((0, "thread"), id="direct"),
    pytest.param((2, "thread"), id="threads"),
    pytest.param((2, "process"), id="processes"),
]
# Rows per file, split into groups of GROUP_ROWS (the last group of each shorter).
FILE_ROWS = (30, 17)
GROUP_ROWS = 7


def _table(start, rows):
    rng = np.random.default_rng(start)
    tokens = [rng.integers(0, 50_000, rng.integers(0, 12)).astype(np.int32) for _ in range(rows)]
    return pa.table({
        "id": pa.array(range(start, start + rows), pa.int64()),
        "tokens": pa.array([t.tolist() for t in tokens], pa.list_(pa.int32())),
        "score": pa.array(rng.random(rows), pa.float32()),
        "text": pa.array([f"row {start + i}" for i in range(rows)]),
    })


def _write(table, path, layout):
    if layout == "parquet":
        pq.write_table(table, path, row_group_size=GROUP_ROWS)
    elif layout == "arrow-file":
        feather.write_feather(table, path, chunksize=GROUP_ROWS, compression="uncompressed")
    else:  # the IPC stream format, as Hugging Face datasets caches tables
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=GROUP_ROWS)


@pytest.fixture(params=["parquet", "arrow-file", "arrow-stream"])
def files(request, tmp_path):
    """``(dataset class, paths, reference rows)``: two files, every row as pyarrow reads it."""
    layout = request.param
    kind = ParquetDataset if layout == "parquet" else ArrowDataset
    paths, tables, start = [], [], 0
    for number, rows in enumerate(FILE_ROWS):
        table = _table(start, rows)
        path = tmp_path / f"part-{number}.{layout}"
        _write(table, path, layout)
        paths.append(path)
        tables.append(table)
        start += rows
    return kind, paths, pa.concat_tables(tables).to_pylist()


def as_lists(row):
    return {name: value.tolist() if isinstance(value, np.ndarray | np.generic) else value
            for name, value in row.items()}


def rows_of(batch):
    """A collate function keeping the rows, as plain values."""
    return [as_lists(row) for row in batch]


def test_every_row_by_index_is_pyarrows(files):
    kind, paths, reference = files
    dataset = kind(paths)
    assert len(dataset) == len(reference) == sum(FILE_ROWS)
    assert [as_lists(dataset[i]) for i in range(len(dataset))] == reference
    assert as_lists(dataset[-1]) == reference[-1]
    assert isinstance(dataset[3]["tokens"], np.ndarray) and dataset[3]["tokens"].dtype == np.int32


def test_numbers_and_token_lists_are_views_of_the_group(files):
    kind, paths, _ = files
    dataset = kind(paths)
    first, second = dataset.__getitems__([0, 1])
    assert not first["tokens"].flags.owndata and not second["tokens"].flags.owndata
    # Both rows cut out of the same buffer of their group.
    assert first["tokens"].base is second["tokens"].base


def test_a_batch_reads_each_group_it_touches_once(files, monkeypatch):
    kind, paths, reference = files
    dataset = kind(paths, max_cached_bytes=0)
    reads = []
    read_group = dataset._read_group
    monkeypatch.setattr(dataset, "_read_group",
                        lambda handle, group: reads.append(group) or read_group(handle, group))
    indices = [40, 2, 3, 0, 41, 8, 1]  # groups (file 1, 1), (0, 0) and (0, 1)
    assert [as_lists(row) for row in dataset.__getitems__(indices)] == [
        reference[i] for i in indices]
    assert sorted(reads) == [0, 1, 1]


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_loader_batches_are_pyarrows_rows_in_the_samplers_order(files, kind):
    dataset_kind, paths, reference = files
    num_workers, worker_type = kind
    order = np.random.default_rng(0).permutation(len(reference)).tolist()
    loader = DataLoader(dataset_kind(paths), batch_size=5, sampler=order, collate_fn=rows_of,
                        num_workers=num_workers, worker_type=worker_type)
    seen = []
    for batch in loader:  # each batch dropped before the next is taken
        seen += batch
    assert seen == [reference[i] for i in order]


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_default_collate_of_selected_columns_is_pyarrows_take(files, kind):
    dataset_kind, paths, reference = files
    num_workers, worker_type = kind
    table = pa.Table.from_pylist(reference)
    loader = DataLoader(dataset_kind(paths, columns=["score", "id"]), batch_size=8,
                        shuffle=True, seed=4, num_workers=num_workers, worker_type=worker_type)
    ids = []
    for batch in loader:
        assert sorted(batch) == ["id", "score"] and batch["score"].dtype == np.float32
        expected = table.take(pa.array(batch["id"]))
        np.testing.assert_array_equal(batch["score"], expected.column("score").to_numpy())
        ids += batch["id"].tolist()
    assert sorted(ids) == list(range(len(reference))) and ids != sorted(ids)


def test_a_dataset_travels_to_a_process_without_its_readers(files):
    kind, paths, reference = files
    dataset = kind(paths)
    dataset[0]  # opens this thread's readers and fills the cache
    copy = pickle.loads(pickle.dumps(dataset))
    assert as_lists(copy[20]) == reference[20]


def test_strings_and_nulls_come_as_python_values(tmp_path):
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"n": [1, None, 3], "tags": [["a"], [], None]}), path)
    dataset = ParquetDataset(path)
    assert [dataset[i] for i in range(3)] == [
        {"n": 1, "tags": ["a"]}, {"n": None, "tags": []}, {"n": 3, "tags": None}]


def test_bad_input_raises_naming_it(files, tmp_path):
    kind, paths, _ = files
    with pytest.raises(FileNotFoundError):
        kind([paths[0], tmp_path / "missing"])
    with pytest.raises(KeyError, match=r"'label'.*its columns: \['id', 'tokens'"):
        kind(paths, columns=["id", "label"])
    with pytest.raises(TypeError, match="columns should be a sequence"):
        kind(paths, columns="id")
    with pytest.raises(ValueError, match="at least one file"):
        kind([])
    with pytest.raises(ValueError, match="max_cached_bytes"):
        kind(paths, max_cached_bytes=-1)
    dataset = kind(paths)
    with pytest.raises(IndexError, match="out of range"):
        dataset[len(dataset)]
    not_columnar = tmp_path / "text.txt"
    not_columnar.write_text("hello, not a columnar file\n" * 10)
    with pytest.raises(ValueError):
        kind(not_columnar)


def test_a_group_two_threads_want_at_once_is_read_once():
    cache = GroupCache(max_bytes=1 << 20)
    reads, waiting = [], threading.Event()

    def read():
        # Hold the read until the other thread is waiting for it.
        assert waiting.wait(10)
        reads.append(1)
        return GroupColumns(pa.table({"n": [1, 2]}))

    results = []
    first = threading.Thread(target=lambda: results.append(cache.get((0, 0), read)))
    first.start()
    while (0, 0) not in cache._reading:
        time.sleep(0.001)
    pending = cache._reading[(0, 0)]
    second = threading.Thread(target=lambda: results.append(cache.get((0, 0), read)))
    second.start()
    while not pending._condition._waiters:  # the second thread waits on the first's read
        time.sleep(0.001)
    waiting.set()
    first.join()
    second.join()
    assert len(reads) == 1 and results[0] is results[1]
    assert cache.get((0, 0), read) is results[0]


def test_reading_ahead_passes_over_groups_kept_or_being_read_and_stops_when_full():
    table = pa.table({"n": range(100)})
    cache = GroupCache(max_bytes=2 * table.nbytes)
    cache.get((0, 0), lambda: GroupColumns(table))
    cache._reading[(0, 1)] = Future()  # another thread is reading it
    reads = []

    def reader(key):
        return lambda: reads.append(key) or GroupColumns(table)

    cache.read_absent({(0, k): reader((0, k)) for k in range(5)})
    assert reads == [(0, 2)]  # then the cache was full
    assert list(cache._groups) == [(0, 0), (0, 2)]


def test_groups_all_kept_are_found_together_and_become_the_most_recent():
    tables = {key: GroupColumns(pa.table({"n": [key[1]]})) for key in [(0, 0), (0, 1), (0, 2)]}
    cache = GroupCache(max_bytes=1 << 20)
    for key, group in tables.items():
        cache.get(key, lambda group=group: group)
    assert cache.kept([(0, 1), (0, 3)]) is None  # one of them was never read
    assert cache.kept([(0, 1), (0, 0)]) == [tables[(0, 1)], tables[(0, 0)]]
    assert list(cache._groups) == [(0, 2), (0, 1), (0, 0)]  # the least recent is evicted first


def test_a_failed_read_raises_and_the_next_request_reads_again():
    cache = GroupCache(max_bytes=1 << 20)

    def fail():
        raise OSError("disk")

    with pytest.raises(OSError, match="disk"):
        cache.get((0, 0), fail)
    assert cache.get((0, 0), lambda: GroupColumns(pa.table({"n": [1]}))).rows(
        [0]) == [{"n": 1}]


def test_the_cache_keeps_the_recently_used_groups_within_its_bytes(files):
    kind, paths, reference = files
    dataset = kind(paths, max_cached_bytes=1)  # one group at a time
    for index in (0, 8, 0, 40):
        assert as_lists(dataset[index]) == reference[index]
    assert list(dataset._cache._groups) == [(1, 1)]


def test_auto_workers_are_threads_as_pyarrow_decodes_without_the_interpreter(files):
    kind, paths, _ = files
    dataset = kind(paths)
    assert resolve_worker_type("auto", dataset, num_workers=2) == "thread"
    assert resolve_worker_type("auto", dataset.stream(), num_workers=2) == "thread"
