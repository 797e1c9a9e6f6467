"""Parquet and Arrow files over HTTP and in an object store, read by ranges."""

import numpy as np
import pytest

from dataloader import DataLoader, PadCollator
from dataloader.sources import ArrowDataset, HttpDataset, ObjectStoreDataset, ParquetDataset, Retry

# The arrow and http extras (not installed beside a free-threaded build).
pa = pytest.importorskip("pyarrow")
feather = pytest.importorskip("pyarrow.feather")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("aiohttp")

ROWS = 3000
GROUP_ROWS = 300
WORKER_KINDS = {
    "direct": {"num_workers": 0},
    "threads": {"num_workers": 2, "worker_type": "thread"},
    "processes": {"num_workers": 2, "worker_type": "process"},
}
FAST = Retry(max_retries=1, initial_backoff=0.01, max_backoff=0.02)


def _table():
    rng = np.random.default_rng(0)
    ids = [rng.integers(0, 50_000, rng.integers(1, 60)).tolist() for _ in range(ROWS)]
    return pa.table({"input_ids": pa.array(ids, pa.list_(pa.int32())),
                     "id": pa.array(range(ROWS), pa.int64())})


@pytest.fixture(params=["parquet", "arrow"])
def served(request, http_server, tmp_path):
    """``(dataset class, URL, local path)`` of one file the server holds."""
    path = tmp_path / f"rows.{request.param}"
    if request.param == "parquet":
        pq.write_table(_table(), path, row_group_size=GROUP_ROWS)
    else:
        feather.write_feather(_table(), path, chunksize=GROUP_ROWS, compression="uncompressed")
    http_server.bodies[f"/data/{path.name}"] = path.read_bytes()
    kind = ParquetDataset if request.param == "parquet" else ArrowDataset
    return kind, f"{http_server.url}/data/{path.name}", path


def plain(rows):
    return [{key: np.asarray(value).tolist() for key, value in row.items()} for row in rows]


def test_rows_by_index_are_the_local_files(served, http_server):
    kind, url, path = served
    remote, local = kind(url), kind(path)
    assert len(remote) == ROWS and remote.paths == [url]
    wanted = [2999, 0, 301, 300, 7, 1500]
    assert plain(remote.__getitems__(wanted)) == plain(local.__getitems__(wanted))
    # Only ranges are read: the size once (one byte), then parts of the file, never all of it.
    size = len(http_server.bodies[f"/data/{path.name}"])
    assert all(0 < length < size for _, _, length in http_server.ranges)
    assert sum(1 for _, start, length in http_server.ranges if (start, length) == (0, 1)) == 1


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_padded_batches_over_http_are_the_local_files_on_every_worker_kind(served, http_server,
                                                                            kind):
    dataset_type, url, path = served
    remote = dataset_type(HttpDataset([url], headers={"X-Api-Key": "k3y"}, retry=FAST))
    order = np.random.default_rng(1).permutation(ROWS).tolist()
    batches = [order[i:i + 320] for i in range(0, ROWS, 320)]
    collator = PadCollator(lengths=True)
    local = DataLoader(dataset_type(path), batch_sampler=batches, collate_fn=collator)
    loader = DataLoader(remote, batch_sampler=batches, collate_fn=PadCollator(lengths=True),
                        **WORKER_KINDS[kind])
    for got, expected in zip(loader, local, strict=True):
        assert list(got) == list(expected)
        for key in expected:
            assert got[key].tobytes() == expected[key].tobytes()
        del got, expected
    assert http_server.headers[f"/data/{path.name}"]["X-Api-Key"] == "k3y"
    # The size was asked once, when the dataset was made, not again by any worker.
    assert sum(1 for _, start, length in http_server.ranges if (start, length) == (0, 1)) == 1


def test_a_row_group_read_is_one_range_of_it(http_server, tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(_table(), path, row_group_size=GROUP_ROWS)
    http_server.bodies["/rows.parquet"] = path.read_bytes()
    dataset = ParquetDataset(f"{http_server.url}/rows.parquet")
    before = len(http_server.ranges)
    dataset.fetch_columns([345, 350])  # both in the second row group
    read = http_server.ranges[before:]
    group = pq.ParquetFile(path).metadata.row_group(1)
    size = sum(group.column(k).total_compressed_size for k in range(group.num_columns))
    assert len(read) == 1 and read[0][2] == size  # the row group's column chunks, no more
    assert sum(length for _, _, length in read) < len(http_server.bodies["/rows.parquet"]) / 5


def test_a_server_that_ignores_ranges_and_a_missing_file_are_named(http_server, served):
    kind, url, _ = served
    with pytest.raises(FileNotFoundError, match="404"):
        kind(f"{http_server.url}/data/missing")
    http_server.ignore_ranges = True
    with pytest.raises(OSError, match="ignored a Range request"):
        kind(url)


def test_a_range_beyond_max_bytes_raises_naming_it(http_server, tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(_table(), path, row_group_size=GROUP_ROWS)
    http_server.bodies["/rows.parquet"] = path.read_bytes()
    with pytest.raises(ValueError, match="exceeds max_bytes=100"):
        ParquetDataset(HttpDataset([f"{http_server.url}/rows.parquet"], max_bytes=100))


OBJECT_STORE_KINDS = {
    "direct": {"num_workers": 0},
    "threads": {"num_workers": 2, "worker_type": "thread"},
    "spawned": {"num_workers": 1, "worker_type": "process", "multiprocessing_context": "spawn"},
}


@pytest.mark.parametrize("kind", OBJECT_STORE_KINDS)
def test_files_in_an_object_store_are_read_by_ranges(tmp_path, kind):
    pytest.importorskip("obstore")
    from obstore.store import LocalStore

    folder = tmp_path / "bucket"
    folder.mkdir()
    for number in range(2):
        table = _table().slice(number * 1500, 1500)
        pq.write_table(table, folder / f"part-{number}.parquet", row_group_size=GROUP_ROWS)
    store = ObjectStoreDataset(LocalStore(str(folder)), ["part-0.parquet", "part-1.parquet"])
    remote = ParquetDataset(store, columns=["id", "input_ids"])
    local = ParquetDataset(sorted(folder.iterdir()), columns=["id", "input_ids"])
    assert len(remote) == ROWS and "part-1.parquet" in remote.paths[1]
    loader = DataLoader(remote, batch_size=640, shuffle=True, seed=3,
                        collate_fn=PadCollator(), **OBJECT_STORE_KINDS[kind])
    expected = DataLoader(local, batch_size=640, shuffle=True, seed=3, collate_fn=PadCollator())
    for got, want in zip(loader, expected, strict=True):
        assert all(got[key].tobytes() == want[key].tobytes() for key in want)
    with pytest.raises(FileNotFoundError, match="not found"):
        ParquetDataset(ObjectStoreDataset(LocalStore(str(folder)), ["absent.parquet"]))


def test_forked_worker_processes_say_obstore_cannot_run_there(tmp_path):
    pytest.importorskip("obstore")
    from obstore.store import LocalStore

    pq.write_table(_table(), tmp_path / "rows.parquet", row_group_size=GROUP_ROWS)
    remote = ParquetDataset(ObjectStoreDataset(LocalStore(str(tmp_path)), ["rows.parquet"]))
    loader = DataLoader(remote, batch_size=64, collate_fn=PadCollator(), num_workers=1,
                        worker_type="process", multiprocessing_context="fork")
    with pytest.raises(OSError, match="started by fork, where obstore cannot run"):
        next(iter(loader))
    loader.close()
