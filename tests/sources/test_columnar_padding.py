"""Columnar rows padded as columns: the loader's fused path against the per-row path and numpy.

A ``ParquetDataset`` or ``ArrowDataset`` with a ``PadCollator`` fetches
each batch as columns and pads it from the flat values and offsets; the
batches must be the very ones the rows give (``PadCollator`` called on
``__getitems__``'s rows) and what a padding loop in numpy makes, on every
worker kind, epoch after epoch and resumed.
"""

import numpy as np
import pytest
from resuming import run_in_pieces

from dataloader import BucketBatchSampler, DataLoader, PadCollator
from dataloader.sources import ArrowDataset, ParquetDataset

# The arrow extra (not installed beside a free-threaded build).
pa = pytest.importorskip("pyarrow")
feather = pytest.importorskip("pyarrow.feather")
pq = pytest.importorskip("pyarrow.parquet")

WORKER_KINDS = {
    "direct": {"num_workers": 0},
    "threads": {"num_workers": 2, "worker_type": "thread"},
    "processes": {"num_workers": 2, "worker_type": "process"},
    "auto": {"num_workers": 2, "worker_type": "auto"},
}
FILE_ROWS = (61, 40)
GROUP_ROWS = 9
COLLATORS = {
    "plain": {},
    "lengths": {"lengths": True, "pad_value": {"input_ids": -1, "labels": -100}},
    "cut-left": {"max_length": 8, "pad_to_multiple_of": 4, "padding_side": "left"},
    "no-mask": {"mask": False, "lengths": True},
}


def _table(start, rows, ids_type=None):
    ids_type = pa.int32() if ids_type is None else ids_type
    rng = np.random.default_rng(start)
    ids = [rng.integers(0, 30_000, rng.integers(0, 14)).tolist() for _ in range(rows)]
    return pa.table({
        "input_ids": pa.array(ids, pa.list_(ids_type)),
        "labels": pa.array([row[::-1] for row in ids], pa.large_list(pa.int64())),
        "id": pa.array(range(start, start + rows), pa.int64()),
        "score": pa.array(rng.random(rows), pa.float32()),
        "text": pa.array([f"row {start + i}" for i in range(rows)]),
    })


@pytest.fixture(params=["parquet", "arrow-file", "arrow-stream"])
def files(request, tmp_path):
    """``(dataset class, paths, the rows' token lists)`` of two files of several groups."""
    layout = request.param
    paths, tables, start = [], [], 0
    for number, rows in enumerate(FILE_ROWS):
        table = _table(start, rows)
        path = tmp_path / f"part-{number}.{layout}"
        if layout == "parquet":
            pq.write_table(table, path, row_group_size=GROUP_ROWS)
        elif layout == "arrow-file":
            feather.write_feather(table, path, chunksize=GROUP_ROWS, compression="uncompressed")
        else:
            with pa.OSFile(str(path), "wb") as sink, \
                    pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table, max_chunksize=GROUP_ROWS)
        paths.append(path)
        tables.append(table)
        start += rows
    kind = ParquetDataset if layout == "parquet" else ArrowDataset
    return kind, paths, pa.concat_tables(tables).to_pylist()


def per_row(collator):
    """The same collator behind a plain function: the loader then fetches rows."""
    return lambda rows: collator(rows)


def numpy_reference(rows, options):
    """The batch of ``rows`` (pyarrow's) as a padding loop in numpy makes it."""
    cut, multiple = options.get("max_length"), options.get("pad_to_multiple_of", 1)
    pads = options.get("pad_value", {})
    left = options.get("padding_side") == "left"
    batch = {}
    for key, dtype in (("input_ids", np.int32), ("labels", np.int64)):
        kept = [row[key][:cut] for row in rows]
        width = -(-max(map(len, kept)) // multiple) * multiple
        out = np.full((len(rows), width), pads.get(key, 0), dtype)
        mask = np.zeros((len(rows), width), np.int64)
        for i, tokens in enumerate(kept):
            where = slice(width - len(tokens), width) if left else slice(0, len(tokens))
            out[i, where] = tokens
            mask[i, where] = 1
        batch[key] = out
        if key == "input_ids":
            if options.get("mask", True):
                batch["attention_mask"] = mask
            if options.get("lengths"):
                batch["lengths"] = np.array([len(tokens) for tokens in kept], np.int64)
    batch["id"] = np.array([row["id"] for row in rows], np.int64)
    batch["score"] = np.array([row["score"] for row in rows], np.float32)
    batch["text"] = [row["text"] for row in rows]
    return batch


def assert_same_batch(batch, expected):
    assert list(batch) == list(expected)
    for key, value in expected.items():
        if isinstance(value, np.ndarray):
            assert isinstance(batch[key], np.ndarray), key
            assert batch[key].dtype == value.dtype and batch[key].shape == value.shape, key
            assert batch[key].tobytes() == value.tobytes(), key  # bit for bit
        else:
            assert batch[key] == value, key


def _batches(sampler_seed, size):
    order = np.random.default_rng(sampler_seed).permutation(size).tolist()
    return [order[i:i + 13] for i in range(0, size, 13)]


@pytest.mark.parametrize("kind", WORKER_KINDS)
@pytest.mark.parametrize("options", COLLATORS.values(), ids=COLLATORS.keys())
def test_fused_batches_are_the_per_row_paths_and_numpys(files, kind, options):
    dataset_type, paths, rows = files
    batches = _batches(3, len(rows))
    collator = PadCollator(**options)
    fused = DataLoader(dataset_type(paths), batch_sampler=batches, collate_fn=collator,
                       **WORKER_KINDS[kind])
    rowwise = DataLoader(dataset_type(paths), batch_sampler=batches,
                         collate_fn=per_row(PadCollator(**options)))
    held = []
    for number, (batch, expected) in enumerate(zip(fused, rowwise, strict=True)):
        assert_same_batch(batch, expected)
        assert_same_batch(batch, numpy_reference([rows[i] for i in batches[number]], options))
        if number % 3 == 0:
            held.append((number, batch))  # kept while later batches reuse the memory
        del batch, expected
    for number, batch in held:
        assert_same_batch(batch, numpy_reference([rows[i] for i in batches[number]], options))


def test_the_loader_fetches_columns_only_when_nothing_needs_rows(files, monkeypatch):
    dataset_type, paths, _ = files
    calls = {"fetch_columns": 0, "__getitems__": 0}
    for name in calls:
        original = getattr(dataset_type, name)

        def counted(self, indices, original=original, name=name):
            calls[name] += 1
            return original(self, indices)

        monkeypatch.setattr(dataset_type, name, counted)
    dataset = dataset_type(paths)
    collator = PadCollator()
    assert len(list(DataLoader(dataset, batch_size=16, collate_fn=collator))) == 7
    assert calls == {"fetch_columns": 7, "__getitems__": 0}

    # A transform works on rows, and so does a plain collate function: rows are fetched.
    def drop_text(index, row):
        return {key: value for key, value in row.items() if key != "text"}

    transformed = list(DataLoader(dataset, batch_size=16, collate_fn=collator,
                                  transform=drop_text))
    assert calls == {"fetch_columns": 7, "__getitems__": 7}
    assert "text" not in transformed[0] and transformed[0]["input_ids"].shape[0] == 16
    list(DataLoader(dataset, batch_size=16, collate_fn=per_row(collator)))
    assert calls == {"fetch_columns": 7, "__getitems__": 14}


@pytest.mark.parametrize("kind", ["direct", "threads", "processes"])
@pytest.mark.parametrize("cached", [1, 1 << 20], ids=["one-group-cached", "all-groups-cached"])
def test_bucketed_batches_resume_mid_epoch_twice_and_go_on_epoch_after_epoch(files, kind,
                                                                             cached):
    dataset_type, paths, rows = files
    lengths = [len(row["input_ids"]) for row in rows]

    def make(collate, max_cached_bytes=1 << 20):
        collator = PadCollator(lengths=True)
        sampler = BucketBatchSampler(lengths, max_tokens=64, padding=collator, seed=4)
        dataset = dataset_type(paths, max_cached_bytes=max_cached_bytes)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate(collator),
                          **WORKER_KINDS[kind])

    def record(batch):
        return {key: value.tolist() if isinstance(value, np.ndarray) else value
                for key, value in batch.items()}

    whole = run_in_pieces(lambda: make(per_row), [], epochs=3, record=record)
    # Fused, each batch's groups found in the cache at once or read again (one kept).
    resumed = run_in_pieces(lambda: make(lambda collator: collator, cached), [4, 7], epochs=3,
                            record=record)
    assert resumed == whole
    assert whole[0] != whole[1]
    for epoch in whole:
        assert sorted(i for batch in epoch for i in batch["id"]) == list(range(len(rows)))
        assert all(len(batch["id"]) * len(batch["input_ids"][0]) <= 64 or len(batch["id"]) == 1
                   for batch in epoch)


def test_files_that_disagree_on_a_dtype_fall_back_to_rows_and_raise_alike(tmp_path):
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    pq.write_table(_table(0, 10), paths[0])
    pq.write_table(_table(10, 10, ids_type=pa.int64()), paths[1])
    dataset = ParquetDataset(paths, columns=["input_ids"])
    mixed = [0, 15]
    message = "field 'input_ids' of item 1 should be a 1-D int32"
    with pytest.raises(ValueError, match=message):
        PadCollator().collate_columns(dataset.fetch_columns(mixed))
    with pytest.raises(ValueError, match=message):
        PadCollator()(dataset.__getitems__(mixed))
    same = dataset.fetch_columns([0, 5])
    assert PadCollator().collate_columns(same)["input_ids"].dtype == np.int32


def test_files_with_different_columns_raise_naming_them(tmp_path):
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    pq.write_table(_table(0, 5), paths[0])
    pq.write_table(_table(5, 5).drop_columns(["text"]), paths[1])
    dataset = ParquetDataset(paths)
    with pytest.raises(ValueError, match="different columns"):
        dataset.fetch_columns([0, 7])
    assert len(dataset.fetch_columns([5, 7])) == 2
    with pytest.raises(IndexError, match="index 10 out of range"):
        dataset.fetch_columns([10])
