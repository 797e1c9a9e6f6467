"""A Hugging Face datasets.Dataset in a DataLoader: whole batches out of its Arrow table."""

import subprocess
import sys

import numpy as np
import pytest

from dataloader import DataLoader, Subset
from dataloader._datasets.hooks import batch_fetch

# The arrow extra (not installed beside a free-threaded build).
datasets = pytest.importorskip("datasets")

WORKER_KINDS = [
    pytest.param((0, "thread"), id="direct"),
    pytest.param((2, "thread"), id="threads"),
    pytest.param((2, "process"), id="processes"),
]
ROWS = 60


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    return datasets.Dataset.from_dict({
        "input_ids": [rng.integers(0, 30_000, rng.integers(1, 20)).tolist() for _ in range(ROWS)],
        "label": rng.integers(0, 3, ROWS).tolist(),
        "text": [f"sentence {i}" for i in range(ROWS)],
        "score": rng.random(ROWS).tolist(),
    })


def rows(batch):
    """A collate function keeping the batch's rows as they were fetched."""
    return batch


def loaded_rows(dataset, kind, order):
    num_workers, worker_type = kind
    loader = DataLoader(dataset, batch_size=7, sampler=order, collate_fn=rows,
                        num_workers=num_workers, worker_type=worker_type)
    out = []
    for batch in loader:  # each batch dropped before the next is taken
        out += batch
    return out


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_batches_are_the_rows_indexing_gives(table, kind):
    order = np.random.default_rng(1).permutation(ROWS).tolist()
    assert loaded_rows(table, kind, order) == [table[i] for i in order]


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_shuffled_selected_and_column_formatted_datasets_map_their_indices(table, kind):
    dataset = table.shuffle(seed=3).select(range(5, 45)).select_columns(["label", "input_ids"])
    dataset.set_format(columns=["input_ids"])
    order = list(range(len(dataset)))[::-1]
    assert loaded_rows(dataset, kind, order) == [dataset[i] for i in order]


def test_the_batch_is_read_from_the_table_not_through_indexing(table, monkeypatch):
    fetch = batch_fetch(table)
    assert fetch is not None and fetch != table.__getitems__

    def refuse(self, key):
        raise AssertionError("indexed row by row")

    monkeypatch.setattr(datasets.Dataset, "__getitem__", refuse)
    monkeypatch.setattr(datasets.Dataset, "__getitems__", refuse)
    batch = next(iter(DataLoader(table, batch_size=4, collate_fn=rows)))
    assert [row["text"] for row in batch] == [f"sentence {i}" for i in range(4)]


def test_wrappers_keep_the_table_reads(table):
    subset = Subset(table, [9, 3, 3])
    assert [row["text"] for row in subset.__getitems__([0, 1, 2])] == [
        "sentence 9", "sentence 3", "sentence 3"]


def test_formatted_and_decoded_datasets_keep_their_own_indexing(table):
    numpy_rows = table.with_format("numpy")
    assert batch_fetch(numpy_rows) == numpy_rows.__getitems__
    loader = DataLoader(numpy_rows.select_columns(["label", "score"]), batch_size=10)
    batch = next(iter(loader))
    np.testing.assert_array_equal(batch["label"], table["label"][:10])
    transformed = table.with_transform(lambda batch: {"n": [len(t) for t in batch["text"]]})
    assert batch_fetch(transformed) == transformed.__getitems__
    images = datasets.Dataset.from_dict({"image": [None]}, features=datasets.Features(
        {"image": datasets.Image()}))
    assert batch_fetch(images) == images.__getitems__


def test_out_of_range_indices_raise_index_error(table):
    fetch = batch_fetch(table)
    with pytest.raises(IndexError, match=f"index {ROWS} out of range for {ROWS} rows"):
        fetch([0, ROWS])
    with pytest.raises(IndexError):
        fetch([-ROWS - 1])


def test_the_loader_does_not_import_datasets_itself():
    code = ("import sys; from dataloader import DataLoader; "
            "list(DataLoader(list(range(10)), batch_size=3)); "
            "print('datasets' in sys.modules, 'pyarrow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.split() == ["False", "False"]


def test_every_kind_of_value_is_the_one_indexing_gives():
    features = datasets.Features({
        "half": datasets.Value("float16"), "single": datasets.Value("float32"),
        "flag": datasets.Value("bool"), "maybe": datasets.Value("int64"),
        "words": datasets.Sequence(datasets.Value("string")),
        "nested": {"x": datasets.Value("int8"), "y": datasets.List(datasets.Value("float32"))},
    })
    table = datasets.Dataset.from_dict({
        "half": [0.1, 2.5, -3.0], "single": [0.1, 2.5, -3.0], "flag": [True, False, True],
        "maybe": [1, None, 3], "words": [["a", "b"], [], ["ü"]],
        "nested": [{"x": 1, "y": [0.5]}, {"x": -2, "y": []}, {"x": 3, "y": [1.0, 2.0]}],
    }, features=features)
    order = [2, 0, 1, 1]
    assert loaded_rows(table, (0, "thread"), order) == [table[i] for i in order]
