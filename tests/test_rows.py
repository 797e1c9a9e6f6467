"""Collating item by item (``dataloader._loading.rows``): the same batches as
``default_collate``, each item's arrays freed before the next item is made,
and batch memory reused from the loader's pool on worker threads."""

import collections
import gc
import threading
import weakref

import numpy as np
import pytest

from dataloader import DataLoader, default_collate
from dataloader._core.load import Recipe, load_batch
from dataloader._core.stats import Row
from dataloader._loading.collate import register_collate
from dataloader._loading.rows import ROW_MIN_BYTES, start_rows

BIG = (32, 32, 32)  # 32 KiB of float32: over ROW_MIN_BYTES with any second array


def big(value, dtype=np.float32, shape=BIG):
    return np.full(shape, value, dtype)


def load(items):
    """``items`` through the loading path, as a batch of a map-style dataset."""
    recipe = Recipe(None, items.__getitem__, None, default_collate, True, rows=start_rows)
    return load_batch(recipe, list(range(len(items))), Row())


def assert_same(ours, expected):
    assert type(ours) is type(expected)
    if isinstance(expected, dict):
        assert list(ours) == list(expected)
        for key in expected:
            assert_same(ours[key], expected[key])
    elif isinstance(expected, (list, tuple)):
        assert len(ours) == len(expected)
        for mine, theirs in zip(ours, expected, strict=True):
            assert_same(mine, theirs)
    elif isinstance(expected, np.ndarray):
        assert ours.dtype == expected.dtype and ours.shape == expected.shape
        np.testing.assert_array_equal(ours, expected)
    elif type(expected).__module__.startswith("torch"):
        assert ours.dtype == expected.dtype and ours.shape == expected.shape
        assert bool((ours == expected).all())
    else:
        assert ours == expected


Point = collections.namedtuple("Point", "x y")

STRUCTURES = {
    "array": lambda i: big(i),
    "image and label": lambda i: (big(i), i),
    "list with strings": lambda i: [big(i), str(i), float(i)],
    "dict": lambda i: {"image": big(i, np.uint8, (64, 64, 3)), "mask": big(i % 2, np.bool_),
                       "meta": {"id": i}},
    "nested": lambda i: ({"a": big(i)}, [np.int64(i), (big(-i), b"x")]),
    "namedtuple": lambda i: Point(big(i), i),
    "strided": lambda i: (big(i, shape=(64, 64, 8))[:, ::2].transpose(1, 0, 2), i),
}


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_the_batch_is_default_collates(name):
    items = [STRUCTURES[name](i) for i in range(5)]
    assert_same(load(items), default_collate(items))


@pytest.mark.parametrize("change", [
    lambda i: (big(i), i, "extra"),            # a longer tuple
    lambda i: [big(i), i],                     # another sequence type
    lambda i: (big(i, np.float64), i),         # another dtype: numpy's promotion
    lambda i: (big(i).astype(np.float32).reshape(-1), i),  # another shape: default_collate's error
    lambda i: (i, i),                          # a number where the array was
])
def test_an_item_of_another_structure_gets_default_collates_result_or_error(change):
    items = [(big(i), i) for i in range(4)] + [change(4)] + [(big(5), 5)]
    try:
        expected = default_collate(items)
    except Exception as error:  # noqa: BLE001 -- the same error is the expected result
        with pytest.raises(type(error)) as raised:
            load(items)
        assert str(raised.value) == str(error)
    else:
        assert_same(load(items), expected)


def test_small_items_and_types_with_rules_of_their_own_collate_at_the_end():
    assert start_rows((np.zeros(8), 1), 4) is None  # too small to pay
    assert start_rows(np.zeros(ROW_MIN_BYTES // 8), 1) is None  # a batch of one
    assert start_rows(np.zeros(ROW_MIN_BYTES // 8), 4) is not None

    class Marked(np.ndarray):
        pass

    register_collate(Marked, lambda batch: "marked")
    marked = [(np.zeros(ROW_MIN_BYTES).view(Marked), 0) for _ in range(3)]
    assert start_rows(marked[0], 3) is None
    assert load(marked)[0] == "marked"


def test_once_a_batch_declines_rows_the_epoch_collates_at_the_end():
    checked = []

    def rows(first, count):
        checked.append(first)
        return start_rows(first, count)

    recipe = Recipe(None, [(i, str(i)) for i in range(8)].__getitem__, lambda i, item: item,
                    default_collate, True, rows=rows)
    first = load_batch(recipe, [0, 1, 2, 3], Row())
    assert_same(first, default_collate([(i, str(i)) for i in range(4)]))
    assert_same(load_batch(recipe, [4, 5], Row()), [np.array([4, 5]), ["4", "5"]])
    assert checked == [(0, "0")]  # small items: the later batch skipped the check


def test_a_changed_rule_for_arrays_is_followed(monkeypatch):
    from dataloader._loading.collate import default_collate_fn_map

    monkeypatch.setitem(default_collate_fn_map, np.ndarray, lambda batch: len(batch))
    items = [(big(i), i) for i in range(3)]
    assert start_rows(items[0], 3) is None
    assert load(items)[0] == 3


def test_each_item_is_freed_before_the_next_is_made():
    alive_at_next = []

    class Tracked:
        last = None

        def __len__(self):
            return 16

        def __getitem__(self, index):
            alive_at_next.append(self.last is not None and self.last() is not None)
            image = big(index)
            self.last = weakref.ref(image)
            return image, index

    loader = DataLoader(Tracked(), batch_size=8, num_workers=0)
    for images, labels in loader:
        np.testing.assert_array_equal(images[:, 0, 0, 0], labels)
    # The first item of each batch follows the previous batch's end.
    assert alive_at_next.count(True) == 0, alive_at_next


class Images:
    def __len__(self):
        return 48

    def __getitem__(self, index):
        return big(index), index


def test_worker_threads_reuse_the_memory_of_released_batches():
    loader = DataLoader(Images(), batch_size=8, num_workers=2, prefetch_factor=1,
                        worker_type="thread")
    addresses = set()
    for _ in range(3):
        for images, labels in loader:
            np.testing.assert_array_equal(images[:, 0, 0, 0], labels)
            addresses.add(images.__array_interface__["data"][0])
            del images
            gc.collect()
    # 18 batches from a few blocks: the in-flight window and the consumer's.
    assert len(addresses) <= 2 * 1 + 2


@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_a_batch_kept_by_the_consumer_is_never_reused(worker_type):
    loader = DataLoader(Images(), batch_size=8, num_workers=2, prefetch_factor=1,
                        worker_type=worker_type)
    kept = [images for images, _ in loader]
    for position, images in enumerate(kept):
        np.testing.assert_array_equal(images[:, 0, 0, 0], np.arange(8) + 8 * position)


def test_worker_threads_run_torch_on_one_thread_and_leave_the_consumers_alone():
    torch = pytest.importorskip("torch")
    consumer_threads = torch.get_num_threads()
    seen = []

    class Counting:
        def __len__(self):
            return 8

        def __getitem__(self, index):
            seen.append((threading.get_ident(), torch.get_num_threads()))
            return index

    for _ in DataLoader(Counting(), batch_size=2, num_workers=2, worker_type="thread"):
        pass
    assert {threads for _, threads in seen} == {1}
    assert threading.get_ident() not in {ident for ident, _ in seen}
    assert torch.get_num_threads() == consumer_threads


def test_tensor_items_stream_into_one_tensor_per_leaf():
    torch = pytest.importorskip("torch")
    items = [(torch.full(BIG, float(i)), {"id": torch.tensor(i)}) for i in range(4)]
    assert_same(load(items), default_collate(items))
    grads = [torch.full(BIG, float(i), requires_grad=True) for i in range(3)]
    assert start_rows(grads[0], 3) is None  # stacked by torch, with its graph
