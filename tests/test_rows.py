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
from dataloader._loading.collate import own_rule, register_collate
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


def assert_loads_as_default_collate(items):
    """Loading ``items`` gives ``default_collate``'s batch, or its error."""
    try:
        expected = default_collate(items)
    except Exception as error:  # noqa: BLE001 -- the same error is the expected result
        with pytest.raises(type(error)) as raised:
            load(items)
        assert str(raised.value) == str(error)
    else:
        assert_same(load(items), expected)


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
    assert_loads_as_default_collate(items)


def test_small_items_and_types_with_rules_of_their_own_collate_at_the_end():
    assert start_rows((np.zeros(8), 1), 4) is None  # too small to pay
    assert start_rows(np.zeros(ROW_MIN_BYTES // 8), 1) is None  # a batch of one
    assert start_rows(np.zeros(ROW_MIN_BYTES // 8), 4) is not None

    class Marked(np.ndarray):
        pass

    assert own_rule(Marked) is True
    register_collate(Marked, lambda batch: "marked")
    assert own_rule(Marked) is False and own_rule(np.ndarray) is True
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


def test_items_of_64_kib_of_arrays_or_more_are_collated_item_by_item():
    # The threshold counts every stacked array of the item, and nothing else.
    assert ROW_MIN_BYTES == 64 * 1024  # the figure docs/architecture.md gives
    assert start_rows((np.zeros(64 * 1024, np.uint8), 0, "name"), 2) is not None
    assert start_rows((np.zeros(64 * 1024 - 1, np.uint8), 0, "name"), 2) is None
    half = np.zeros(32 * 1024, np.uint8)
    assert start_rows({"a": half, "b": [half]}, 2) is not None
    assert start_rows({"a": half, "b": [half[1:]]}, 2) is None
    # Numbers, 0-d arrays among them, and strings do not count.
    assert start_rows([np.zeros(64 * 1024 - 1, np.uint8), np.float64(1.0), np.array(2.0), 3,
                       b"x"], 2) is None
    assert start_rows(np.zeros(64 * 1024, np.uint8), 2) is not None  # a batch of two


@pytest.mark.parametrize(("first", "other"), [
    ((big(0), 0), (big(1), 1, 2)),                       # a longer tuple
    ((big(0), 0), [big(1), 1]),                          # another sequence type
    ((big(0), 0), (big(1, np.float64), 1)),              # another dtype
    ((big(0), 0), (big(1, shape=(8, 8)), 1)),            # another shape
    ((big(0), 0), (big(1).tolist(), 1)),                 # not an array
    ({"a": big(0), "b": 0}, {"a": big(1), "b": 1, "c": 2}),  # another key
    ({"a": big(0), "b": 0}, {"a": big(1)}),              # a missing key
    ({"a": big(0), "b": 0}, collections.OrderedDict(a=big(1), b=1)),  # another mapping type
    ({"a": big(0), "b": 0}, [big(1), 1]),                # not a mapping
    ({"a": (big(0), 0)}, {"a": (big(1), 1, 2)}),         # a mismatch deeper down
])
def test_add_returns_false_for_an_item_of_another_structure_and_keeps_the_earlier_ones(
        first, other):
    rows = start_rows(first, 3)
    assert rows is not None
    assert rows.add(first) is True
    assert rows.add(other) is False
    assert_same(rows.items(), [first, first])


@pytest.mark.parametrize("change", [
    lambda i: {"image": big(i), "label": i, "extra": "x"},   # default_collate ignores it
    lambda i: {"image": big(i)},                             # default_collate's KeyError
    lambda i: [big(i), i],                                   # default_collate's TypeError
    lambda i: {"image": big(i, np.float64), "label": i},     # numpy's promotion
])
def test_a_dict_item_of_another_structure_gets_default_collates_result_or_error(change):
    items = [{"image": big(i), "label": i} for i in range(3)] + [change(3)] + [
        {"image": big(4), "label": 4}]
    assert_loads_as_default_collate(items)


def test_tensors_are_taken_item_by_item_unless_one_needs_its_graph():
    torch = pytest.importorskip("torch")
    first = torch.full(BIG, 0.0)
    rows = start_rows((first, 0), 3)
    assert rows is not None and rows.add((torch.full(BIG, 1.0), 1)) is True
    assert start_rows(first.to_sparse(), 3) is None  # torch stacks sparse tensors
    # An item that needs gradients, after the first: torch.stack builds the
    # batch, with its graph back to that item.
    items = [torch.full(BIG, float(i), requires_grad=i == 1) for i in range(3)]
    rows = start_rows(items[0], 3)
    assert rows.add(items[1]) is False
    batch, expected = load(items), default_collate(items)
    assert_same(batch, expected)
    assert type(batch.grad_fn) is type(expected.grad_fn)
    batch.sum().backward()
    assert bool((items[1].grad == 1).all())
