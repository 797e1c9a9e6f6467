"""ParquetDataset(cache_dir=...): row groups decoded once, kept as Arrow files, mapped after."""

import errno
import os
import pickle

import numpy as np
import pytest

from dataloader import BucketBatchSampler, DataLoader, PadCollator
from dataloader.sources import ParquetDataset

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

WORKER_KINDS = [
    pytest.param((0, "thread"), id="direct"),
    pytest.param((2, "thread"), id="threads"),
    pytest.param((2, "process"), id="processes"),
]
GROUP_ROWS = 16


def _table(rows, seed=0):
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "tokens": pa.array([rng.integers(0, 1000, rng.integers(1, 9)).tolist()
                            for _ in range(rows)], pa.list_(pa.int32())),
        "text": pa.array([f"row {i} of seed {seed}" if i % 5 else None for i in range(rows)]),
    })


@pytest.fixture
def parquet(tmp_path):
    """``(path, reference rows)``: a file of 100 rows in row groups of 16."""
    path = tmp_path / "rows.parquet"
    table = _table(100)
    pq.write_table(table, path, row_group_size=GROUP_ROWS)
    return path, table.to_pylist()


def as_lists(row):
    return {name: value.tolist() if isinstance(value, np.ndarray | np.generic) else value
            for name, value in row.items()}


def count_decodes(dataset, monkeypatch):
    """The row groups ``dataset`` decodes from Parquet from now on, in a list."""
    decoded = []
    read_group = dataset._read_group
    monkeypatch.setattr(dataset, "_read_group",
                        lambda handle, group: decoded.append(group) or read_group(handle, group))
    return decoded


def test_rows_read_back_from_the_cache_are_pyarrows(parquet, tmp_path, monkeypatch):
    path, reference = parquet
    first = ParquetDataset(path, cache_dir=tmp_path / "decoded")
    assert [as_lists(first[i]) for i in range(len(first))] == reference
    # Another dataset (a later run, another loader) decodes nothing: it maps the files.
    again = ParquetDataset(path, cache_dir=tmp_path / "decoded", max_cached_bytes=0)
    decoded = count_decodes(again, monkeypatch)
    assert [as_lists(row) for row in again.__getitems__(range(100))] == reference
    assert decoded == []
    row = again[3]
    assert isinstance(row["tokens"], np.ndarray) and not row["tokens"].flags.owndata


def test_fill_cache_decodes_each_missing_group_once(parquet, tmp_path, monkeypatch):
    path, _ = parquet
    dataset = ParquetDataset(path, cache_dir=tmp_path / "decoded")
    dataset[40]  # group 2, decoded and kept by this batch
    decoded = count_decodes(dataset, monkeypatch)
    assert dataset.fill_cache() == 6 and sorted(decoded) == [0, 1, 3, 4, 5, 6]
    assert dataset.fill_cache() == 0 and len(decoded) == 6
    assert len(list((tmp_path / "decoded").glob("*.arrows"))) == 7
    assert not list((tmp_path / "decoded").glob("*.partial"))
    with pytest.raises(ValueError, match="cache_dir"):
        ParquetDataset(path).fill_cache()


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_loader_batches_equal_the_uncached_datasets_epoch_after_epoch(parquet, tmp_path, kind):
    path, _ = parquet
    num_workers, worker_type = kind

    def epochs(dataset):
        collator = PadCollator(lengths=True)
        lengths = [len(row) for row in pq.read_table(path)["tokens"].to_pylist()]
        sampler = BucketBatchSampler(lengths, max_tokens=40, padding=collator, seed=3)
        loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collator,
                            num_workers=num_workers, worker_type=worker_type)
        seen = []
        for _ in range(2):
            for batch in loader:  # each batch dropped before the next is taken
                seen.append({name: value.copy() for name, value in batch.items()})
        return seen

    cached = ParquetDataset(path, columns=["tokens"], cache_dir=tmp_path / "decoded")
    expected = epochs(ParquetDataset(path, columns=["tokens"]))
    for _ in range(2):  # the first run fills the cache (in the workers), the second maps it
        got = epochs(cached)
        assert len(got) == len(expected)
        for mine, theirs in zip(got, expected, strict=True):
            assert mine.keys() == theirs.keys()
            for name in mine:
                np.testing.assert_array_equal(mine[name], theirs[name])
    assert len(list((tmp_path / "decoded").glob("*.arrows"))) == 7


def test_a_changed_file_or_other_columns_are_decoded_again(parquet, tmp_path, monkeypatch):
    path, _ = parquet
    folder = tmp_path / "decoded"
    ParquetDataset(path, cache_dir=folder).fill_cache()
    tokens = ParquetDataset(path, columns=["tokens"], cache_dir=folder)
    decoded = count_decodes(tokens, monkeypatch)
    assert tokens.fill_cache() == 7 and len(decoded) == 7
    assert sorted(tokens[0]) == ["tokens"]
    # Same name, new rows: its size and modification time name other files.
    changed = _table(100, seed=1)
    pq.write_table(changed, path, row_group_size=GROUP_ROWS)
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    dataset = ParquetDataset(path, cache_dir=folder)
    assert [as_lists(dataset[i]) for i in range(100)] == changed.to_pylist()


def schema_alone(kept):
    """The stream's schema without its rows: cut at a message's end."""
    with pa.memory_map(str(kept)) as source:
        schema = pa.ipc.open_stream(source).schema
    sink = pa.BufferOutputStream()
    pa.ipc.new_stream(sink, schema).close()
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("damage", [lambda kept: kept.read_bytes()[:100], schema_alone],
                         ids=["cut in a message", "cut after the schema"])
def test_an_unreadable_cached_file_is_decoded_and_written_again(parquet, tmp_path, monkeypatch,
                                                                damage):
    path, reference = parquet
    dataset = ParquetDataset(path, cache_dir=tmp_path / "decoded", max_cached_bytes=0)
    dataset.fill_cache()
    kept = dataset.decoded.path(0, 1)
    kept.write_bytes(damage(kept))  # as by a full disk, or a copy cut short
    decoded = count_decodes(dataset, monkeypatch)
    assert [as_lists(dataset[i]) for i in range(16, 32)] == reference[16:32]
    assert decoded == [1]
    assert [as_lists(dataset[i]) for i in range(16, 32)] == reference[16:32]
    assert decoded == [1]  # written whole this time


def test_a_full_disk_warns_once_and_the_rows_stay_right(parquet, tmp_path, monkeypatch):
    path, reference = parquet

    def full_disk(source, target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr("dataloader.sources._decoded.os.replace", full_disk)
    dataset = ParquetDataset(path, cache_dir=tmp_path / "decoded")
    with pytest.warns(RuntimeWarning, match="cannot keep decoded row groups") as warned:
        rows = [as_lists(row) for row in dataset.__getitems__(range(100))]
    assert rows == reference and len(warned) == 1
    assert not list((tmp_path / "decoded").iterdir())  # no partial file left behind


def test_a_dataset_with_a_cache_travels_to_a_process(parquet, tmp_path):
    path, reference = parquet
    dataset = ParquetDataset(path, cache_dir=tmp_path / "decoded")
    dataset[0]
    copy = pickle.loads(pickle.dumps(dataset))
    assert as_lists(copy[99]) == reference[99]
    assert copy.decoded.folder == tmp_path / "decoded"
