"""Epoch semantics, identical in every execution mode."""

import operator
import warnings
from itertools import chain

import numpy as np
import pytest

from dataloader import BatchSampler, DataLoader, Dataset, SequentialSampler


class Items(Dataset):
    """Items 0..n-1; indices in ``failing`` raise ``KeyError``."""

    def __init__(self, n, failing=()):
        self.n = n
        self.failing = set(failing)

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if index in self.failing:
            raise KeyError(f"item {index} is broken")
        return index


def batches_as_lists(loader):
    return [batch.tolist() for batch in loader]


def test_batches_in_sampler_order(make_loader):
    assert batches_as_lists(make_loader(list(range(10)), batch_size=4)) == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [8, 9],
    ]


def test_empty_dataset_gives_no_batches(make_loader):
    loader = make_loader([], batch_size=4)
    assert len(loader) == 0
    assert list(loader) == []


@pytest.mark.parametrize("drop_last, expected", [(False, [[0, 1, 2]]), (True, [])])
def test_batch_larger_than_dataset(make_loader, drop_last, expected):
    loader = make_loader([0, 1, 2], batch_size=5, drop_last=drop_last)
    assert batches_as_lists(loader) == expected
    assert len(loader) == len(expected)


def test_prime_batch_size(make_loader):
    batches = batches_as_lists(make_loader(list(range(100)), batch_size=7))
    assert [len(b) for b in batches] == [7] * 14 + [2]
    assert list(chain.from_iterable(batches)) == list(range(100))


@pytest.mark.parametrize("n, batch_size, drop_last", [(10, 3, False), (10, 3, True), (9, 3, True)])
def test_len_of_loader_and_epoch(make_loader, n, batch_size, drop_last):
    loader = make_loader(list(range(n)), batch_size=batch_size, drop_last=drop_last)
    expected = n // batch_size if drop_last else -(-n // batch_size)
    assert len(loader) == expected
    it = iter(loader)
    assert iter(it) is it
    for remaining in range(expected, 0, -1):
        assert len(it) == remaining
        next(it)
    assert len(it) == 0


def test_every_iter_starts_a_new_independent_epoch(make_loader):
    loader = make_loader(list(range(6)), batch_size=2)
    first = iter(loader)
    assert next(first).tolist() == [0, 1]
    second = iter(loader)
    assert batches_as_lists(second) == [[0, 1], [2, 3], [4, 5]]
    assert batches_as_lists(first) == [[2, 3], [4, 5]]


def test_next_after_the_end_raises_stop_iteration_every_time(make_loader):
    it = iter(make_loader([1, 2], batch_size=2))
    next(it)
    for _ in range(3):
        with pytest.raises(StopIteration):
            next(it)


def test_seeded_shuffle_is_reproducible_and_differs_across_epochs(make_loader):
    def epochs(loader, n):
        return [list(chain.from_iterable(batches_as_lists(loader))) for _ in range(n)]

    first = epochs(make_loader(list(range(50)), batch_size=8, shuffle=True, seed=7), 3)
    second = epochs(make_loader(list(range(50)), batch_size=8, shuffle=True, seed=7), 3)
    other_seed = epochs(make_loader(list(range(50)), batch_size=8, shuffle=True, seed=8), 3)
    assert first == second
    assert len({tuple(epoch) for epoch in first}) == 3  # every two epochs differ
    assert first != other_seed
    assert all(sorted(epoch) == list(range(50)) for epoch in first)


@pytest.mark.parametrize("make_generator", [
    lambda: np.random.default_rng(3),
    lambda: pytest.importorskip("torch").Generator().manual_seed(3),
], ids=["numpy", "torch"])
def test_generator_makes_shuffle_reproducible(make_loader, make_generator):
    def order():
        loader = make_loader(list(range(30)), batch_size=30, shuffle=True,
                             generator=make_generator())
        return [next(iter(loader)).tolist() for _ in range(2)]

    assert order() == order()
    assert order()[0] != order()[1]


@pytest.mark.parametrize("failing", [[3], [8], [3, 8]])
def test_item_error_is_raised_from_its_own_batch_and_the_epoch_continues(make_loader, failing):
    it = iter(make_loader(Items(12, failing), batch_size=4))
    for batch_number, expected in enumerate([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]):
        if any(index in expected for index in failing):
            first = failing[0] if batch_number == 0 else expected[0]
            with pytest.raises(KeyError, match=f"item {first}") as info:
                next(it)
            assert any(f"batch {batch_number}" in note for note in info.value.__notes__)
        else:
            assert next(it).tolist() == expected
    with pytest.raises(StopIteration):
        next(it)


@pytest.mark.parametrize(("num_workers", "worker_type"),
                         [(0, "thread"), (2, "thread"), (2, "process")])
def test_a_resumed_epoch_names_its_failing_batch_by_its_number_in_the_epoch(num_workers,
                                                                           worker_type):
    def loader(failing=()):
        return DataLoader(Items(24, failing), batch_size=4, num_workers=num_workers,
                          worker_type=worker_type)

    interrupted = loader()
    it = iter(interrupted)
    next(it), next(it)
    state = interrupted.state_dict()
    del it
    for resumed_at in (2, 3):  # resumed twice: numbers stay the epoch's
        resumed = loader(failing=[17])
        resumed.load_state_dict(state)
        it = iter(resumed)
        for batch in range(resumed_at, 4):
            assert next(it).tolist() == list(range(4 * batch, 4 * batch + 4))
            if batch == resumed_at:
                state = resumed.state_dict()
        with pytest.raises(KeyError, match="item 17") as info:
            next(it)
        assert any("batch 4" in note for note in info.value.__notes__), info.value.__notes__
        assert next(it).tolist() == [20, 21, 22, 23]
        del it
        resumed.close()
    interrupted.close()


def test_transform_and_collate_errors_keep_their_type(make_loader):
    def transform(index, item):
        if index == 5:
            raise ArithmeticError("bad transform")
        return item * 10

    def collate(items):
        if 0 in items:
            raise LookupError("bad collate")
        return items

    it = iter(make_loader(list(range(9)), batch_size=3, transform=transform, collate_fn=collate))
    with pytest.raises(LookupError, match="bad collate"):
        next(it)
    with pytest.raises(ArithmeticError, match="bad transform"):
        next(it)
    assert next(it) == [60, 70, 80]


def test_collate_fn_not_called_when_fetch_failed(make_loader):
    calls = []

    def collate(items):
        calls.append(list(items))
        return items

    it = iter(make_loader(Items(4, failing=[1]), batch_size=2, collate_fn=collate))
    with pytest.raises(KeyError):
        next(it)
    assert next(it) == [2, 3]
    assert calls == [[2, 3]]


def test_transform_receives_index_and_item(make_loader):
    loader = make_loader(["a", "b", "c"], batch_size=3, transform=lambda i, item: f"{i}{item}")
    assert next(iter(loader)) == ["0a", "1b", "2c"]


class WithGetItems(Dataset):
    def __init__(self, n, wrong_length=False):
        self.n = n
        self.calls = []
        self.wrong_length = wrong_length

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        raise AssertionError("__getitem__ must not be called when __getitems__ exists")

    def __getitems__(self, indices):
        self.calls.append(list(indices))
        items = [index * 2 for index in indices]
        return items[:-1] if self.wrong_length else items


def test_getitems_called_exactly_once_per_batch():
    dataset = WithGetItems(7)
    assert batches_as_lists(DataLoader(dataset, batch_size=3)) == [[0, 2, 4], [6, 8, 10], [12]]
    assert dataset.calls == [[0, 1, 2], [3, 4, 5], [6]]


def test_getitems_wrong_length_names_both_counts():
    it = iter(DataLoader(WithGetItems(6, wrong_length=True), batch_size=3))
    with pytest.raises(ValueError, match="returned 2 items for 3 indices"):
        next(it)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_getitems_returning_no_list_says_so(num_workers):
    class ReturnsNone(WithGetItems):
        def __getitems__(self, indices):
            self.calls.append(list(indices))

    it = iter(DataLoader(ReturnsNone(6), batch_size=3, num_workers=num_workers))
    with pytest.raises(TypeError, match=r"__getitems__ returned NoneType; it must return a list"):
        next(it)


def test_falsy_getitems_falls_back_to_getitem():
    class Falsy(Items):
        __getitems__ = None

    assert batches_as_lists(DataLoader(Falsy(4), batch_size=2)) == [[0, 1], [2, 3]]


def test_batch_size_none_converts_each_item(make_loader):
    loader = make_loader([np.int64(1), np.float32(2.5)], batch_size=None)
    items = list(loader)
    assert len(loader) == 2
    assert [type(item) for item in items] == [np.ndarray, np.ndarray]
    assert [item.tolist() for item in items] == [1, 2.5]


def test_a_list_is_a_dataset(make_loader):
    assert batches_as_lists(make_loader([5, 6, 7], batch_size=2)) == [[5, 6], [7]]


def test_custom_batch_sampler(make_loader):
    batch_sampler = [[4, 0], [2], [1, 3]]
    loader = make_loader(list(range(10, 15)), batch_sampler=batch_sampler)
    assert batches_as_lists(loader) == [[14, 10], [12], [11, 13]]
    assert len(loader) == 3


class RaisingLen(Dataset):
    def __len__(self):
        raise OSError("length unavailable")

    def __getitem__(self, index):
        return index


def test_raising_len_of_dataset_raises_from_iter(make_loader):
    loader = make_loader(RaisingLen(), batch_size=2)
    with pytest.raises(OSError, match="length unavailable"):
        len(loader)
    with pytest.raises(OSError, match="length unavailable"):
        iter(loader)


def test_sampler_that_raises_ends_the_epoch_with_its_error(make_loader):
    def sampler():
        yield 0
        yield 1
        raise RuntimeError("sampler broke")

    class Sampler:
        def __iter__(self):
            return sampler()

    it = iter(make_loader(list(range(4)), batch_size=1, sampler=Sampler()))
    assert [next(it).tolist(), next(it).tolist()] == [[0], [1]]
    with pytest.raises(RuntimeError, match="sampler broke"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


def test_sampler_yielding_a_negative_index_raises(make_loader):
    it = iter(make_loader(list(range(4)), batch_size=2, sampler=[0, 1, -1, 3]))
    assert next(it).tolist() == [0, 1]
    with pytest.raises(ValueError, match="non-negative int"):
        next(it)


@pytest.mark.parametrize("key", ["a", 1.5])
def test_a_key_that_is_not_an_int_goes_to_the_dataset(make_loader, key):
    # As in torch: the dataset's own error names the key (a list's TypeError here).
    it = iter(make_loader(list(range(4)), batch_size=2, sampler=[0, 1, key, 3]))
    assert next(it).tolist() == [0, 1]
    with pytest.raises(TypeError, match="list indices must be integers"):
        next(it)


class Labels:
    """A dict-backed dataset: its keys are strings."""

    def __init__(self) -> None:
        self.rows = {"cat": 0, "dog": 1, "owl": 2}

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: str) -> int:
        return self.rows[key]


def test_string_keys_of_a_dict_backed_dataset(make_loader):
    loader = make_loader(Labels(), batch_size=2, sampler=["owl", "cat", "dog"])
    for _ in range(2):  # epoch after epoch
        assert batches_as_lists(loader) == [[2, 0], [1]]


class BulkRows:
    """Loads several rows per key, as torch's bulk-loading tests do (``batch_size=None``)."""

    def __len__(self) -> int:
        return 10

    def __getitem__(self, keys: list[int]) -> np.ndarray:
        return np.asarray(keys) * 10


def test_lists_of_indices_as_keys_with_batch_size_none(make_loader):
    loader = make_loader(BulkRows(), batch_size=None, sampler=[[0, 1], [2, 3], [9]])
    assert batches_as_lists(loader) == [[0, 10], [20, 30], [90]]


def test_batch_sampler_yielding_a_non_sequence_raises(make_loader):
    it = iter(make_loader(list(range(4)), batch_sampler=[[0], 7]))
    assert next(it).tolist() == [0]
    with pytest.raises(TypeError, match="sequence of indices"):
        next(it)


def test_numpy_integer_indices_are_accepted(make_loader):
    loader = make_loader(list(range(5)), batch_size=2, sampler=np.array([4, 3, 2]))
    assert batches_as_lists(loader) == [[4, 3], [2]]


def test_sampler_without_len_makes_len_raise_type_error(make_loader):
    loader = make_loader(list(range(5)), batch_size=2, sampler=iter_only([0, 1, 2]))
    with pytest.raises(TypeError):
        len(loader)
    it = iter(loader)
    with pytest.raises(TypeError):
        len(it)
    assert batches_as_lists(it) == [[0, 1], [2]]


class iter_only:
    def __init__(self, values):
        self.values = values

    def __iter__(self):
        return iter(self.values)


def test_explicit_batch_sampler_over_sequential(make_loader):
    batch_sampler = BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=True)
    loader = make_loader(list("abcde"), batch_sampler=batch_sampler)
    assert list(loader) == [["a", "b"], ["c", "d"]]


def test_dataset_items_are_fetched_once_each(make_loader):
    calls = []

    class Recording(Items):
        def __getitem__(self, index):
            calls.append(index)
            return index

    list(make_loader(Recording(10), batch_size=3))
    assert sorted(calls) == list(range(10))
    assert sorted(map(operator.index, calls)) == list(range(10))


@pytest.mark.parametrize("name", ["sampler", "batch_sampler"])
def test_an_iterator_as_sampler_warns_that_later_epochs_are_empty(name):
    indices = [0, 1, 2, 3] if name == "sampler" else [[0, 1], [2, 3]]
    options = {} if name == "batch_sampler" else {"batch_size": 2}
    with pytest.warns(UserWarning, match=f"{name} is an iterator .* every later epoch will be "
                                         "empty"):
        loader = DataLoader(list(range(4)), **{name: iter(indices)}, **options)
    assert [len(batches_as_lists(loader)) for _ in range(2)] == [2, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a list starts afresh each epoch: no warning
        DataLoader(list(range(4)), **{name: indices}, **options)
