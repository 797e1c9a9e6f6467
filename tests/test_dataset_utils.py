"""torch's dataset utilities: behaviour, parity with torch.utils.data, and every loader mode."""

import asyncio
import itertools
import threading
import warnings

import numpy as np
import pytest
from stream_datasets import Range

from dataloader import (
    AsyncDataset,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)


class Items(Dataset):
    """Items ``offset + i`` for i in 0..n-1; ``batched`` adds a logging ``__getitems__``."""

    def __init__(self, n, offset=0):
        self.n = n
        self.offset = offset
        self.calls = []
        self._lock = threading.Lock()

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if not -self.n <= index < self.n:
            raise IndexError(f"index {index} out of range")
        return self.offset + range(self.n)[index]


class BatchedItems(Items):
    def __getitems__(self, indices):
        with self._lock:
            self.calls.append(list(indices))
        return [self[index] for index in indices]


def as_lists(batch):
    """A batch (arrays, tensors, tuples, dicts of them) as plain Python values."""
    if isinstance(batch, dict):
        return {key: as_lists(value) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        return [as_lists(value) for value in batch]
    if hasattr(batch, "tolist"):
        return batch.tolist()
    return batch


def direct_batches(dataset, **kwargs):
    return [as_lists(batch) for batch in DataLoader(dataset, **kwargs)]


# -- Subset ---------------------------------------------------------------------


def test_subset_indexes_through_its_indices():
    subset = Subset(Items(10), [7, 2, 2, 9])
    assert len(subset) == 4
    assert [subset[i] for i in range(4)] == [7, 2, 2, 9]
    assert subset[-1] == 9
    with pytest.raises(IndexError):
        subset[4]


def test_subset_takes_array_and_range_indices():
    assert [Subset(Items(10), np.array([3, 1]))[i] for i in range(2)] == [3, 1]
    assert [Subset(Items(10), range(8, 2, -3))[i] for i in range(2)] == [8, 5]


def test_subset_forwards_getitems_to_its_dataset():
    dataset = BatchedItems(10)
    subset = Subset(dataset, [5, 0, 9])
    assert subset.__getitems__([2, 0]) == [9, 5]
    assert dataset.calls == [[9, 5]]
    # A dataset without __getitems__ is read item by item.
    assert Subset(Items(10), [5, 0, 9]).__getitems__([1, 2]) == [0, 9]


def test_subset_rejects_what_it_cannot_index():
    with pytest.raises(TypeError, match="dataset should be a map-style dataset"):
        Subset(Range(3), [0])
    with pytest.raises(TypeError, match="indices should be a sequence"):
        Subset(Items(3), (i for i in range(2)))


def test_getitems_returning_the_wrong_count_is_an_error():
    class Short(Items):
        def __getitems__(self, indices):
            return [0]

    with pytest.raises(ValueError, match=r"Short\.__getitems__ should return one item per"):
        Subset(Short(5), [0, 1]).__getitems__([0, 1])
    # torch's message, which its StackDataset raises.
    with pytest.raises(ValueError, match=r"Nested dataset's output size mismatch\. Expected 2, "
                                         "got 1"):
        StackDataset(Short(5), Items(5)).__getitems__([0, 1])


def test_subset_subclass_overriding_getitem_alone_is_refused():
    class Doubled(Subset):
        def __getitem__(self, idx):
            return 2 * super().__getitem__(idx)

    with pytest.raises(NotImplementedError, match="overrides __getitem__ but not __getitems__"):
        Doubled(Items(5), [1, 2])

    class DoubledBatches(Doubled):
        def __getitems__(self, indices):
            return [self[idx] for idx in indices]

    assert DoubledBatches(Items(5), [1, 2]).__getitems__([1, 0]) == [4, 2]


def test_subclasses_overriding_getitem_are_loaded_through_it():
    class Negated(ConcatDataset):
        def __getitem__(self, idx):
            return -super().__getitem__(idx)

    class Swapped(StackDataset):
        def __getitem__(self, index):
            return tuple(reversed(super().__getitem__(index)))

    negated = Negated([BatchedItems(2), Items(2, offset=5)])
    assert direct_batches(negated, batch_size=4) == [[0, -1, -5, -6]]
    swapped = Swapped(BatchedItems(2), Items(2, offset=5))
    assert direct_batches(swapped, batch_size=2) == [[[5, 6], [0, 1]]]


# -- ConcatDataset ----------------------------------------------------------------


def test_concat_indexes_across_datasets():
    concat = ConcatDataset([Items(3), Items(0), Items(2, offset=100), [7]])
    assert concat.cumulative_sizes == [3, 3, 5, 6]
    assert len(concat) == 6
    assert [concat[i] for i in range(6)] == [0, 1, 2, 100, 101, 7]
    assert [concat[i] for i in range(-6, 0)] == [0, 1, 2, 100, 101, 7]
    assert concat[np.int64(3)] == 100


def test_concat_out_of_range_indices():
    concat = ConcatDataset([Items(3), Items(2)])
    with pytest.raises(IndexError):
        concat[5]
    with pytest.raises(ValueError, match="absolute value of index should not exceed"):
        concat[-6]
    with pytest.raises(TypeError, match=r"idx=1\.5"):
        concat[1.5]


@pytest.mark.parametrize("error", [ValueError, AssertionError])  # ours, torch's
def test_concat_refuses_no_datasets_with_an_error_both_kinds_of_handler_catch(error):
    with pytest.raises(error, match="datasets should not be an empty iterable"):
        ConcatDataset([])


@pytest.mark.parametrize("error", [TypeError, AssertionError])  # ours, torch's
def test_concat_refuses_streams_with_an_error_both_kinds_of_handler_catch(error):
    with pytest.raises(error, match=r"does not support IterableDataset.*datasets\[1\]"):
        ConcatDataset([Items(2), Range(2)])


def test_concat_getitems_fetches_each_member_once_in_batch_order():
    first, second = BatchedItems(3), BatchedItems(4, offset=10)
    plain = Items(2, offset=20)
    concat = ConcatDataset([first, plain, second])
    assert concat.__getitems__([6, 0, 3, 8, -1, 1]) == [11, 0, 20, 13, 13, 1]
    assert first.calls == [[0, 1]]
    assert second.calls == [[1, 3, 3]]


# -- ChainDataset -----------------------------------------------------------------


def test_chain_iterates_each_dataset_in_turn_every_time():
    chain = ChainDataset(dataset for dataset in (Range(2), Range(3, offset=10)))
    assert list(chain) == [0, 1, 10, 11, 12]
    assert list(chain) == [0, 1, 10, 11, 12]  # a generator of datasets is read once
    assert len(chain) == 5


@pytest.mark.parametrize("error", [TypeError, AssertionError])  # ours, torch's
def test_chain_refuses_map_style_datasets(error):
    with pytest.raises(error, match=r"only supports IterableDataset.*datasets\[0\]"):
        ChainDataset([[1, 2], Range(2)])


def test_chain_len_needs_every_member_len():
    class Unsized(IterableDataset):
        def __iter__(self):
            return iter([1])

    chain = ChainDataset([Range(2), Unsized()])
    assert list(chain) == [0, 1, 1]
    with pytest.raises(TypeError):
        len(chain)


def test_chain_shards_by_position():
    chain = ChainDataset([Range(3), Range(4, offset=10)])
    shards = [list(chain.shard(rank=rank, world_size=3)) for rank in range(3)]
    assert shards == [[0, 10, 13], [1, 11], [2, 12]]
    assert [len(chain.shard(rank=rank, world_size=3)) for rank in range(3)] == [3, 2, 2]


# -- TensorDataset ----------------------------------------------------------------


def test_tensor_dataset_rows():
    x = np.arange(12).reshape(4, 3)
    y = np.array([5, 6, 7, 8])
    dataset = TensorDataset(x, y)
    assert len(dataset) == 4
    row, label = dataset[-1]
    assert row.tolist() == [9, 10, 11] and label == 8
    assert dataset.tensors[0] is x
    with pytest.raises(IndexError):
        dataset[4]


@pytest.mark.parametrize(
    "tensors, error, message",
    [
        ((), ValueError, "at least one tensor"),
        ((np.zeros(3), np.zeros(4)), ValueError, r"Size mismatch between tensors.*\[3, 4\]"),
        ((np.zeros(3), np.zeros(4)), AssertionError, "Size mismatch between tensors"),  # torch's
        ((np.zeros(3), np.array(1.0)), ValueError, r"tensor 1 has none \(shape \(\)\)"),
        ((np.zeros(3), np.float32(1)), TypeError, "tensor 1 is a float32"),
        ((np.zeros(3), [1, 2, 3]), TypeError, "tensor 1 is a list"),
    ],
)
def test_tensor_dataset_rejects(tensors, error, message):
    with pytest.raises(error, match=message):
        TensorDataset(*tensors)


# -- StackDataset -----------------------------------------------------------------


def test_stack_tuple_and_dict_forms():
    pairs = StackDataset(Items(3), Items(3, offset=10))
    assert len(pairs) == 3
    assert pairs[1] == (1, 11)
    named = StackDataset(a=Items(3), b=["x", "y", "z"])
    assert named[2] == {"a": 2, "b": "z"}


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((), {}, "At least one dataset should be passed"),
        (([1],), {"b": [1]}, "but both types are given"),
        (([1, 2], [1]), {}, "Size mismatch between datasets"),
        ((), {"a": [1], "b": [1, 2]}, "Size mismatch between datasets"),
    ],
)
def test_stack_rejects(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        StackDataset(*args, **kwargs)


def test_stack_getitems_forwards_to_members_that_have_it():
    batched = BatchedItems(4)
    pairs = StackDataset(batched, Items(4, offset=10))
    assert pairs.__getitems__([3, 1]) == [(3, 13), (1, 11)]
    named = StackDataset(a=batched, b=Items(4, offset=10))
    assert named.__getitems__([0, 2]) == [{"a": 0, "b": 10}, {"a": 2, "b": 12}]
    assert batched.calls == [[3, 1], [0, 2]]


# -- random_split -----------------------------------------------------------------


def parts(splits):
    return [list(part.indices) for part in splits]


def test_random_split_partitions_the_dataset():
    splits = random_split(Items(20), [5, 0, 15], generator=3)
    assert [len(part) for part in splits] == [5, 0, 15]
    assert sorted(itertools.chain(*parts(splits))) == list(range(20))
    assert all(isinstance(part, Subset) for part in splits)
    assert [splits[0][i] for i in range(5)] == parts(splits)[0]


@pytest.mark.parametrize(
    "n, fractions, expected",
    [
        (10, [1 / 3, 1 / 3, 1 / 3], [4, 3, 3]),
        (5, [0.5, 0.5], [3, 2]),
        (7, [0.1, 0.2, 0.7], [1, 2, 4]),  # floors 0, 1, 4; two left over
        (3, [0.25, 0.25, 0.25, 0.25], [1, 1, 1, 0]),
    ],
)
def test_random_split_fractions_give_remainders_to_the_first_parts(n, fractions, expected):
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        splits = random_split(Items(n), fractions, generator=0)
    assert [len(part) for part in splits] == expected
    empty = [position for position, size in enumerate(expected) if size == 0]
    assert [str(w.message) for w in warned] == [
        f"Length of split at index {position} is 0. This might result in an empty dataset."
        for position in empty
    ]


def test_random_split_is_a_function_of_the_seed():
    assert parts(random_split(Items(50), [0.6, 0.4], generator=7)) == parts(
        random_split(Items(50), [0.6, 0.4], generator=7)
    )
    assert parts(random_split(Items(50), [30, 20], generator=7)) == parts(
        random_split(Items(50), [0.6, 0.4], generator=7)
    )
    assert parts(random_split(Items(50), [0.6, 0.4], generator=7)) != parts(
        random_split(Items(50), [0.6, 0.4], generator=8)
    )


def test_random_split_without_a_generator_partitions_the_dataset():
    splits = random_split(Items(30), [0.5, 0.3, 0.2])
    assert [len(part) for part in splits] == [15, 9, 6]
    assert sorted(itertools.chain(*parts(splits))) == list(range(30))


def test_random_split_with_a_numpy_generator_uses_its_permutation():
    expected = np.random.default_rng(11).permutation(10).tolist()
    splits = random_split(Items(10), [4, 6], generator=np.random.default_rng(11))
    assert parts(splits) == [expected[:4], expected[4:]]


@pytest.mark.parametrize(
    "lengths, generator, error, message",
    [
        ([3, 3], 0, ValueError, r"Sum of input lengths does not equal.*\(6 != 5\)"),
        ([0.5, 0.4], 0, ValueError, r"or fractions summing to 1, but lengths\[0\]=0.5"),
        ([1.5, -0.5], 0, ValueError, "Fraction at index 0 is not between 0 and 1"),
        ([6, -1], 0, ValueError, r"should not be negative.*lengths\[1\]=-1"),
        ([2.5, 2.5], 0, ValueError, r"lengths\[0\]=2.5"),
        ([float("nan"), 5], 0, ValueError, "lengths"),
        (["3", 2], 0, TypeError, r"lengths\[0\]='3'"),
        ([True, 4], 0, TypeError, r"lengths\[0\]=True"),
        (5, 0, TypeError, "lengths should be a sequence"),
        ([5], "seed", TypeError, "generator should be"),
        ([5], -1, ValueError, "generator should be non-negative"),
    ],
)
def test_random_split_rejects(lengths, generator, error, message):
    with pytest.raises(error, match=message):
        random_split(Items(5), lengths, generator=generator)


# -- __add__ ----------------------------------------------------------------------


def test_dataset_add_concatenates():
    joined = Items(2) + Items(3, offset=10) + Items(1, offset=20)
    assert isinstance(joined, ConcatDataset)
    assert joined.cumulative_sizes == [5, 6]  # nested as torch nests it
    assert [joined[i] for i in range(len(joined))] == [0, 1, 10, 11, 12, 20]
    with pytest.raises(TypeError, match="does not support IterableDataset"):
        Items(2) + Range(2)


def test_iterable_dataset_add_chains():
    joined = Range(2) + Range(2, offset=10) + Range(1, offset=20)
    assert isinstance(joined, ChainDataset)
    assert list(joined) == [0, 1, 10, 11, 20]
    with pytest.raises(TypeError, match="only supports IterableDataset"):
        Range(2) + Items(2)


# -- every mode of the loader -----------------------------------------------------


def map_style_cases():
    x = np.arange(26, dtype=np.float32).reshape(13, 2)
    y = np.arange(13) % 3
    train, _ = random_split(BatchedItems(17), [0.7, 0.3], generator=5)
    return {
        "subset": Subset(BatchedItems(20), [19, 3, 3, 0, 7, 11, 12, 5]),
        "concat": ConcatDataset([BatchedItems(5), Items(0), Items(4, offset=50), [90, 91]]),
        "add": Items(3) + BatchedItems(5, offset=30),
        "tensor": TensorDataset(x, y),
        "stack": StackDataset(BatchedItems(9), Items(9, offset=100)),
        "stack_dict": StackDataset(a=Items(9), b=BatchedItems(9, offset=100)),
        "random_split": train,
        "subset_of_concat": Subset(ConcatDataset([BatchedItems(4), Items(4, offset=8)]), [7, 0, 4]),
    }


@pytest.mark.parametrize("case", sorted(map_style_cases()))
@pytest.mark.parametrize("shuffle", [False, True])
def test_map_style_utilities_load_the_same_in_every_mode(make_loader, case, shuffle):
    kwargs = {"batch_size": 3, "shuffle": True, "seed": 1} if shuffle else {"batch_size": 3}
    expected = direct_batches(map_style_cases()[case], **kwargs)
    assert expected  # the cases are non-empty
    batches = [as_lists(batch) for batch in make_loader(map_style_cases()[case], **kwargs)]
    assert batches == expected


def test_wrappers_keep_batched_fetching_in_the_loader(make_loader, mode):
    dataset = BatchedItems(12)
    subset = Subset(dataset, list(range(11, -1, -1)))
    batches = [batch.tolist() for batch in make_loader(subset, batch_size=4)]
    assert batches == [[11, 10, 9, 8], [7, 6, 5, 4], [3, 2, 1, 0]]
    if mode[1] == 1:  # lanes load item by item; other modes fetch whole batches
        assert sorted(dataset.calls) == [[3, 2, 1, 0], [7, 6, 5, 4], [11, 10, 9, 8]]


def test_chain_loads_every_item_once_in_every_mode(make_loader, mode):
    chain = Range(7) + Range(5, offset=100) + Range(3, offset=200)
    batches = [batch.tolist() for batch in make_loader(chain, batch_size=4)]
    items = sorted(itertools.chain(*batches))
    assert items == list(range(7)) + list(range(100, 105)) + list(range(200, 203))
    if mode[0] == 0:  # one stream: exactly the chain's order
        assert batches == direct_batches(chain, batch_size=4)


class Whole(IterableDataset):
    """The same items on every worker: sharding is left to ``shard``."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)


def test_sharded_chain_in_every_mode(make_loader):
    chain = ChainDataset([Whole(range(5)), Whole(range(10, 16))])
    shares = []
    for rank in range(2):
        loader = make_loader(chain.shard(rank=rank, world_size=2), batch_size=2)
        shares.append(sorted(itertools.chain(*(batch.tolist() for batch in loader))))
    assert shares == [[0, 2, 4, 11, 13, 15], [1, 3, 10, 12, 14]]


class Remote(AsyncDataset):
    """Items ``10 * i`` awaited like a request; ``closed`` is set by ``aclose``."""

    def __init__(self, n):
        self.n = n
        self.closed = threading.Event()

    def __len__(self):
        return self.n

    async def __getitem__(self, index):
        await asyncio.sleep(0)
        return 10 * range(self.n)[index]

    async def aclose(self):
        self.closed.set()


def test_subset_of_an_async_dataset_is_async():
    subset = Subset(Remote(6), [5, 1])
    assert isinstance(subset, Subset)
    assert asyncio.run(subset[0]) == 50
    assert subset.__getitems__ is None  # one coroutine per item, on the loader's lanes


def test_random_split_of_an_async_dataset_loads_in_every_mode(make_loader):
    remote = Remote(11)
    splits = random_split(remote, [0.7, 0.3], generator=2)
    for part in splits:
        expected = [[10 * i for i in part.indices[:4]], [10 * i for i in part.indices[4:]]]
        expected = [batch for batch in expected if batch]
        with make_loader(part, batch_size=4) as loader:
            assert [batch.tolist() for batch in loader] == expected
    assert remote.closed.is_set()  # closing the loader closed the wrapped dataset


def test_concat_and_stack_refuse_async_datasets():
    with pytest.raises(TypeError, match=r"cannot hold an async dataset.*datasets\[1\] is a Remote"):
        ConcatDataset([Items(2), Remote(2)])
    with pytest.raises(TypeError, match="cannot hold an async dataset, but b is a Remote"):
        StackDataset(a=Items(2), b=Remote(2))


# -- parity with torch.utils.data -------------------------------------------------


def test_subset_and_concat_match_torch():
    torch_data = pytest.importorskip("torch.utils.data")
    members = [list(range(4)), [], list(range(10, 13)), [20]]
    ours = ConcatDataset(members)
    theirs = torch_data.ConcatDataset(members)
    assert ours.cumulative_sizes == theirs.cumulative_sizes
    assert len(ours) == len(theirs)
    for index in range(-len(ours), len(ours)):
        assert ours[index] == theirs[index]
    for index in (len(ours), len(ours) + 3):
        with pytest.raises(IndexError):
            theirs[index]
        with pytest.raises(IndexError):
            ours[index]
    for dataset in (ours, theirs):
        with pytest.raises(ValueError, match="absolute value of index should not exceed"):
            dataset[-len(ours) - 1]
    indices = [7, 0, 0, 5, -1]
    ours_subset, theirs_subset = Subset(ours, indices), torch_data.Subset(theirs, indices)
    assert [ours_subset[i] for i in range(-5, 5)] == [theirs_subset[i] for i in range(-5, 5)]
    assert ours_subset.__getitems__([4, 1]) == theirs_subset.__getitems__([4, 1])
    # torch's list form: one lookup of the dataset with a list of indices.
    evens = np.arange(0, 20, 2)
    assert Subset(evens, [3, 1, 4])[[0, 2]].tolist() == torch_data.Subset(evens, [3, 1, 4])[
        [0, 2]].tolist()


def test_add_chains_match_torch():
    torch_data = pytest.importorskip("torch.utils.data")

    def torch_items(n, offset):
        class TorchItems(torch_data.Dataset):
            def __len__(self):
                return n

            def __getitem__(self, index):
                return offset + range(n)[index]

        return TorchItems()

    ours = Items(2) + Items(3, offset=10) + (Items(1, offset=20) + Items(2, offset=30))
    theirs = torch_items(2, 0) + torch_items(3, 10) + (torch_items(1, 20) + torch_items(2, 30))
    assert type(theirs).__name__ == type(ours).__name__ == "ConcatDataset"
    assert ours.cumulative_sizes == theirs.cumulative_sizes
    assert ours.datasets[1].cumulative_sizes == theirs.datasets[1].cumulative_sizes
    assert [ours[i] for i in range(-8, 8)] == [theirs[i] for i in range(-8, 8)]

    class TorchStream(torch_data.IterableDataset):
        def __init__(self, n, offset):
            self.n, self.offset = n, offset

        def __iter__(self):
            return iter(range(self.offset, self.offset + self.n))

        def __len__(self):
            return self.n

    chained = TorchStream(2, 0) + TorchStream(3, 10)
    assert type(chained).__name__ == "ChainDataset"
    ours_chain = Range(2) + Range(3, offset=10)
    assert list(ours_chain) == list(chained) and len(ours_chain) == len(chained)


def test_tensor_dataset_matches_torch_for_tensors_and_arrays():
    torch = pytest.importorskip("torch")
    from torch.utils.data import TensorDataset as TorchTensorDataset

    x = torch.arange(15.0).reshape(5, 3)
    y = torch.tensor([1, 0, 1, 1, 0])
    ours, theirs = TensorDataset(x, y), TorchTensorDataset(x, y)
    assert len(ours) == len(theirs)
    for index in range(-5, 5):
        for mine, torchs in zip(ours[index], theirs[index], strict=True):
            assert type(mine) is type(torchs) and torch.equal(mine, torchs)
    # numpy arrays give the same values as the tensors made from them.
    arrays = TensorDataset(x.numpy(), y.numpy())
    for index in range(5):
        assert [v.tolist() for v in arrays[index]] == [v.tolist() for v in theirs[index]]
    with pytest.raises(IndexError):
        ours[5]
    with pytest.raises(ValueError, match="Size mismatch between tensors"):
        TensorDataset(x, y[:4])
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TorchTensorDataset(x, y[:4])
    # Mixed: each row keeps its array's type.
    row, label = TensorDataset(x.numpy(), y)[2]
    assert isinstance(row, np.ndarray) and isinstance(label, torch.Tensor)
    batch = next(iter(DataLoader(ours, batch_size=5)))
    assert torch.equal(batch[0], x) and torch.equal(batch[1], y)


def test_stack_dataset_matches_torch():
    torch_data = pytest.importorskip("torch.utils.data")
    columns = (BatchedItems(6), list("abcdef"))
    ours, theirs = StackDataset(*columns), torch_data.StackDataset(*columns)
    assert len(ours) == len(theirs)
    assert [ours[i] for i in range(6)] == [theirs[i] for i in range(6)]
    assert ours.__getitems__([5, 0, 2]) == theirs.__getitems__([5, 0, 2])
    named_ours = StackDataset(n=columns[0], s=columns[1])
    named_theirs = torch_data.StackDataset(n=columns[0], s=columns[1])
    assert named_ours.__getitems__([1, 4]) == named_theirs.__getitems__([1, 4])
    for args, kwargs in [((), {}), (([1],), {"b": [1]}), (([1, 2], [1]), {})]:
        with pytest.raises(ValueError):
            torch_data.StackDataset(*args, **kwargs)
        with pytest.raises(ValueError):
            StackDataset(*args, **kwargs)


@pytest.mark.parametrize("seed", [0, 1, 12345])
@pytest.mark.parametrize(
    "n, lengths",
    [(10, [3, 7]), (10, [0.8, 0.2]), (100, [1 / 3, 1 / 3, 1 / 3]), (7, [0.1, 0.2, 0.7]),
     (1000, [0.5, 0.25, 0.25])],
)
def test_random_split_with_a_torch_generator_matches_torch(seed, n, lengths):
    torch = pytest.importorskip("torch")
    from torch.utils.data import random_split as torch_random_split

    ours = random_split(Items(n), lengths, generator=torch.Generator().manual_seed(seed))
    theirs = torch_random_split(Items(n), lengths, generator=torch.Generator().manual_seed(seed))
    assert parts(ours) == parts(theirs)


def test_random_split_without_a_generator_follows_torch_manual_seed():
    torch = pytest.importorskip("torch")
    from torch.utils.data import random_split as torch_random_split

    state = torch.get_rng_state()
    try:
        torch.manual_seed(3)
        theirs = parts(torch_random_split(Items(30), [0.5, 0.5]))
        torch.manual_seed(3)
        ours = parts(random_split(Items(30), [0.5, 0.5]))
    finally:
        torch.set_rng_state(state)
    assert ours == theirs


@pytest.mark.parametrize("n", [0, 1, 2, 5, 9, 10, 11, 97])
@pytest.mark.parametrize(
    "fractions",
    [[0.5, 0.5], [1 / 3, 1 / 3, 1 / 3], [0.1, 0.2, 0.7], [0.25] * 4, [0.9, 0.1], [1.0]],
)
def test_fraction_remainders_match_torch(n, fractions):
    torch = pytest.importorskip("torch")
    from torch.utils.data import random_split as torch_random_split

    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = random_split(Items(n), fractions, generator=0)
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = torch_random_split(Items(n), fractions, generator=torch.Generator())
    assert [len(part) for part in ours] == [len(part) for part in theirs]
    assert [str(w.message) for w in ours_warned] == [str(w.message) for w in theirs_warned]


@pytest.mark.parametrize(
    "lengths, message",
    [([3, 3], "Sum of input lengths does not equal"),
     ([1.5, -0.5], "Fraction at index 0 is not between 0 and 1")],
)
def test_random_split_errors_match_torch(lengths, message):
    torch = pytest.importorskip("torch")
    from torch.utils.data import random_split as torch_random_split

    with pytest.raises(ValueError, match=message):
        torch_random_split(Items(5), lengths, generator=torch.Generator())
    with pytest.raises(ValueError, match=message):
        random_split(Items(5), lengths, generator=torch.Generator())
