"""default_collate and default_convert: torch's structure rules, numpy leaves."""

import collections
import collections.abc

import numpy as np
import pytest

from dataloader import default_collate, default_convert

Point = collections.namedtuple("Point", ["x", "y"])


def assert_array(actual, expected, dtype):
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == dtype
    np.testing.assert_array_equal(actual, expected)


def test_ints_floats_bools():
    assert_array(default_collate([1, 2, 3]), [1, 2, 3], np.int64)
    assert_array(default_collate([1.5, 2.0]), [1.5, 2.0], np.float64)
    assert_array(default_collate([True, False]), [True, False], np.bool_)


def test_ints_mixed_with_floats_are_not_truncated():
    assert_array(default_collate([1, 2.5]), [1.0, 2.5], np.float64)


def test_numpy_scalars_keep_their_dtype():
    assert_array(default_collate([np.float32(1), np.float32(2)]), [1, 2], np.float32)
    assert_array(default_collate([np.uint8(3), np.uint8(4)]), [3, 4], np.uint8)


def test_arrays_are_stacked_with_a_new_leading_axis():
    items = [np.full((2, 3), i, dtype=np.float32) for i in range(4)]
    batch = default_collate(items)
    assert_array(batch, np.stack(items), np.float32)
    assert batch.shape == (4, 2, 3)
    assert batch.flags.c_contiguous


def test_non_contiguous_arrays_are_stacked_correctly():
    base = np.arange(60, dtype=np.int16).reshape(3, 4, 5)
    items = [base[i, :, ::2] for i in range(3)]
    assert_array(default_collate(items), np.stack(items), np.int16)


def test_zero_dimensional_arrays():
    assert_array(default_collate([np.array(1.0), np.array(2.0)]), [1.0, 2.0], np.float64)


def test_arrays_of_mixed_dtypes_are_promoted():
    batch = default_collate([np.zeros(2, np.uint8), np.ones(2, np.float32)])
    assert_array(batch, [[0, 0], [1, 1]], np.float32)


def test_arrays_of_different_shapes_raise():
    with pytest.raises(ValueError, match=r"item 1 has shape \(3,\)"):
        default_collate([np.zeros(2), np.zeros(3)])


@pytest.mark.parametrize("dtype", [object, "U3", "S3"])
def test_object_and_string_arrays_raise(dtype):
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        default_collate([np.array(["a"], dtype=dtype)] * 2)


def test_strings_and_bytes_stay_lists():
    assert default_collate(["a", "b"]) == ["a", "b"]
    assert default_collate([b"a", b"b"]) == [b"a", b"b"]


def test_dicts_are_collated_by_key():
    batch = default_collate([{"x": 1, "name": "a"}, {"x": 2, "name": "b"}])
    assert set(batch) == {"x", "name"}
    assert_array(batch["x"], [1, 2], np.int64)
    assert batch["name"] == ["a", "b"]


def test_mapping_type_is_kept():
    items = [collections.OrderedDict(a=1), collections.OrderedDict(a=2)]
    batch = default_collate(items)
    assert type(batch) is collections.OrderedDict
    assert_array(batch["a"], [1, 2], np.int64)


def test_namedtuples_are_collated_by_field():
    batch = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert type(batch) is Point
    assert_array(batch.x, [1, 3], np.int64)
    assert_array(batch.y, [2.0, 4.0], np.float64)


def test_tuples_become_lists_position_by_position():
    batch = default_collate([(1, "a"), (2, "b")])
    assert type(batch) is list
    assert_array(batch[0], [1, 2], np.int64)
    assert batch[1] == ["a", "b"]


def test_lists_position_by_position():
    batch = default_collate([[1, 2], [3, 4], [5, 6]])
    assert type(batch) is list
    assert_array(batch[0], [1, 3, 5], np.int64)
    assert_array(batch[1], [2, 4, 6], np.int64)


def test_sequences_of_unequal_length_raise_torchs_error():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [3]])


def test_nested_structures():
    items = [{"img": np.zeros((2, 2)), "meta": (i, {"id": str(i)})} for i in range(3)]
    batch = default_collate(items)
    assert batch["img"].shape == (3, 2, 2)
    assert_array(batch["meta"][0], [0, 1, 2], np.int64)
    assert batch["meta"][1] == {"id": ["0", "1", "2"]}


def test_unsupported_type_raises_naming_it():
    class Thing:
        pass

    with pytest.raises(TypeError, match="Thing"):
        default_collate([Thing(), Thing()])
    with pytest.raises(TypeError, match="NoneType"):
        default_collate([None])


def test_torch_tensors_are_stacked_with_torch():
    torch = pytest.importorskip("torch")
    batch = default_collate([torch.ones(2), torch.zeros(2)])
    assert isinstance(batch, torch.Tensor)
    assert batch.tolist() == [[1.0, 1.0], [0.0, 0.0]]


def test_default_convert():
    converted = default_convert({"a": np.int64(3), "b": (np.float32(1.5), "s"), "c": [1]})
    assert isinstance(converted["a"], np.ndarray) and converted["a"].shape == ()
    assert type(converted["b"]) is list and converted["b"][1] == "s"
    assert converted["c"] == [1]
    assert default_convert(Point(1, 2)) == Point(1, 2)
    array = np.zeros(3)
    assert default_convert(array) is array


class Record(collections.abc.Mapping):
    """A read-only mapping type built from a dict, as user item types often are."""

    def __init__(self, data):
        self._data = dict(data)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


class Strict(collections.abc.Mapping):
    """A mapping whose constructor takes no dict: converted into a plain dict."""

    def __init__(self):
        self._data = {"label": np.int64(5)}

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


def test_default_convert_keeps_the_mapping_type_and_converts_its_values():
    ordered = default_convert(collections.OrderedDict([("b", np.float32(2.5)), ("a", [1])]))
    assert type(ordered) is collections.OrderedDict
    assert list(ordered) == ["b", "a"]
    assert_array(ordered["b"], 2.5, np.float32)
    assert ordered["b"].shape == ()
    assert ordered["a"] == [1]
    record = default_convert(Record({"label": np.int64(3), "name": "cat"}))
    assert type(record) is Record
    assert_array(record["label"], 3, np.int64)
    assert record["label"].shape == () and record["name"] == "cat"
    strict = default_convert(Strict())
    assert type(strict) is dict
    assert_array(strict["label"], 5, np.int64)


def test_collate_keeps_a_custom_mapping_type():
    batch = default_collate([Record({"x": 1}), Record({"x": 2})])
    assert type(batch) is Record
    assert_array(batch["x"], [1, 2], np.int64)


def test_numbers_in_a_tuple_batch_are_collated_like_a_list():
    assert_array(default_collate((1, 2, 3)), [1, 2, 3], np.int64)
    assert_array(default_collate((1.5, 2.5)), [1.5, 2.5], np.float64)
    assert_array(default_collate((True, False)), [True, False], np.bool_)


def test_numpy_scalars_take_the_first_items_dtype():
    assert_array(default_collate([np.int16(1), np.int32(2)]), [1, 2], np.int16)


class ArraySubclass(np.ndarray):
    """An ndarray subclass (as np.memmap or a user's array type)."""


def test_ndarray_subclasses_are_stacked_into_plain_arrays():
    scalars = [np.array(5).view(ArraySubclass), np.array(6).view(ArraySubclass)]
    assert_array(default_collate(scalars), [5, 6], np.int64)
    rows = [np.zeros(2).view(ArraySubclass), np.ones(2).view(ArraySubclass)]
    assert_array(default_collate(rows), [[0, 0], [1, 1]], np.float64)
    ragged = [np.zeros(2).view(ArraySubclass), np.ones(3).view(ArraySubclass)]
    with pytest.raises(ValueError, match="cannot stack arrays of different shapes"):
        default_collate(ragged)


def test_an_array_batch_with_a_list_in_it_is_a_type_error():
    with pytest.raises(TypeError, match="cannot stack a list with numpy arrays"):
        default_collate([np.zeros(2), [1, 2]])


def test_containers_whose_constructor_refuses_the_columns_become_dict_and_list():
    batch = default_collate([Strict(), Strict()])
    assert type(batch) is dict
    assert_array(batch["label"], [5, 5], np.int64)
    columns = default_collate([range(2), range(10, 12)])
    assert type(columns) is list
    assert_array(columns[0], [0, 10], np.int64)
    assert_array(columns[1], [1, 11], np.int64)


def test_images_collate_into_one_nchw_batch():
    from dataloader._core.image import Image, ImageBatch

    images = [Image.from_array(np.full((2, 3, 3), value, np.uint8)) for value in (1, 7)]
    batch = default_collate(images)
    assert type(batch) is ImageBatch
    assert_array(np.asarray(batch), np.stack([np.full((3, 2, 3), v) for v in (1, 7)]), np.uint8)


def test_subclasses_of_numbers_and_strings_collate_like_their_base():
    import enum

    class Label(enum.IntEnum):
        CAT = 1
        DOG = 2

    class Meters(float):
        pass

    class Name(str):
        pass

    assert_array(default_collate([Label.CAT, Label.DOG]), [1, 2], np.int64)
    assert_array(default_collate([Meters(1.5), Meters(2.0)]), [1.5, 2.0], np.float64)
    names = [Name("a"), Name("b")]
    assert default_collate(names) == names


def test_tuple_subclasses_that_are_not_namedtuples_become_lists():
    class Pair(tuple):
        pass

    batch = default_collate([Pair((1, 2)), Pair((3, 4))])
    assert type(batch) is list
    assert_array(batch[0], [1, 3], np.int64)
    assert_array(batch[1], [2, 4], np.int64)


def test_dict_keys_come_from_the_first_item():
    batch = default_collate([{"a": 1, "b": 2}, {"a": 3, "b": 4, "extra": 5}])
    assert list(batch) == ["a", "b"]
    assert_array(batch["b"], [2, 4], np.int64)


def test_default_convert_turns_sequences_it_cannot_rebuild_into_lists():
    converted = default_convert(range(3))
    assert type(converted) is list and converted == [0, 1, 2]
    assert type(default_convert((np.int64(1), 2))) is list


@pytest.mark.parametrize("batch", [[2**63], [2**63, 1], [1, -2**63 - 1], [2**70, 1]])
def test_ints_past_int64_raise_torchs_value_error(batch):
    # numpy alone makes a uint64 batch of [2**63], a float64 one of
    # [2**63, 1] (rounding), an object one of [2**70, 1].
    with pytest.raises(ValueError, match="does not fit in int64"):
        default_collate(batch)


def test_ints_at_the_ends_of_int64_collate_to_int64():
    assert_array(default_collate([2**63 - 1, -2**63]), [2**63 - 1, -2**63], np.int64)
    # A bool among them: numpy's general path, past the fast one.
    assert_array(default_collate([2**63 - 1, True, -2**63]), [2**63 - 1, 1, -2**63], np.int64)
    assert_array(default_collate([2**63 - 1, np.int64(1)]), [2**63 - 1, 1], np.int64)


def test_int_subclasses_and_numbers_after_the_first_take_the_general_path():
    class Label(int):
        pass

    assert_array(default_collate([1, Label(2)]), [1, 2], np.int64)
    assert_array(default_collate([1.0, 2]), [1.0, 2.0], np.float64)
    assert_array(default_collate([True, 1]), [1, 1], np.int64)


def test_contiguous_and_strided_arrays_mixed_in_one_batch():
    base = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    items = [base[0], base[1].T.copy().T, np.ascontiguousarray(base[1]), base[0][::-1]]
    assert_array(default_collate(items), np.stack(items), np.float32)


def test_a_namedtuple_batch_with_an_item_of_another_length_raises_instead_of_truncating():
    for other in [(1, 2.0, "extra"), (1,)]:
        with pytest.raises(ValueError, match="zip"):
            default_collate([Point(1, 2.0), other])


def test_a_batch_allocator_serves_every_thread_unless_set_for_one():
    import threading

    from dataloader._loading.collate import batch_allocator

    used = []

    def empty(shape, dtype):
        used.append(threading.get_ident())
        return np.empty(shape, dtype)

    def collate_on_a_thread():
        thread = threading.Thread(target=default_collate, args=([np.ones(3), np.ones(3)],))
        thread.start()
        thread.join()
        return thread.ident

    batch_allocator(empty)
    try:
        assert used == [collate_on_a_thread()]
    finally:
        batch_allocator(None)
    batch_allocator(empty, this_thread=True)
    try:
        collate_on_a_thread()
        default_collate([np.ones(3), np.ones(3)])
        assert used[1:] == [threading.get_ident()]
    finally:
        batch_allocator(None, this_thread=True)


def test_tensors_are_stacked_in_batch_memory_however_small_and_by_torch_without_it():
    torch = pytest.importorskip("torch")
    from dataloader._loading.collate import batch_allocator

    shapes = []

    def empty(shape, dtype):
        shapes.append(shape)
        return np.zeros(shape, dtype)

    batch_allocator(empty)
    try:
        one = default_collate([torch.tensor([7], dtype=torch.int8)])
        none = default_collate([torch.zeros(0, 3), torch.zeros(0, 3)])
    finally:
        batch_allocator(None)
    assert shapes == [(1,)] and one.tolist() == [[7]]
    assert none.shape == (2, 0, 3)  # no bytes: torch's own empty tensor
    # Without an allocator the batch is torch.stack's, in storage torch owns
    # (and may resize), as with torch's default_collate.
    batch = default_collate([torch.ones(2), torch.zeros(2)])
    assert batch.untyped_storage().resizable()


def test_a_registered_collate_takes_the_subclasses_of_its_type_too():
    from dataloader._loading.collate import register_collate

    class Box:
        pass

    class SmallBox(Box):
        pass

    register_collate(Box, lambda batch: f"{len(batch)} boxes")
    assert default_collate([Box(), Box()]) == "2 boxes"
    assert default_collate([SmallBox(), SmallBox(), SmallBox()]) == "3 boxes"
