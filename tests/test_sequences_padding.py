"""``PadCollator``: against a padding loop in Python and Hugging Face's collator's output."""

import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataloader import DataLoader, Dataset, PadCollator

WORKER_KINDS = {
    "direct": {"num_workers": 0},
    "threads": {"num_workers": 2, "worker_type": "thread"},
    "processes": {"num_workers": 2, "worker_type": "process"},
}
DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32,
          np.float64, np.complex64]


def reference_pad(arrays, pad_value, multiple=1, max_length=None, left=False):
    """The padded batch and mask, one element at a time."""
    kept = [list(array[:max_length]) for array in arrays]
    width = max(len(tokens) for tokens in kept)
    width = -(-width // multiple) * multiple
    rows, masks = [], []
    for tokens in kept:
        padding = [pad_value] * (width - len(tokens))
        rows.append(padding + tokens if left else tokens + padding)
        ones, zeros = [1] * len(tokens), [0] * (width - len(tokens))
        masks.append(zeros + ones if left else ones + zeros)
    return rows, masks


def hf_collate_with_padding(features, pad_token_id, pad_to_multiple_of=None,
                            padding_side="right"):
    """What ``transformers.DataCollatorWithPadding(tokenizer, padding=True)`` returns for
    features of ``input_ids`` (and ``token_type_ids``, ``label``): its tokenizer's ``pad``
    pads input_ids with the pad token, creates the attention mask and pads it with 0,
    pads token_type_ids with 0, and renames ``label`` to ``labels``."""
    longest = max(len(feature["input_ids"]) for feature in features)
    if pad_to_multiple_of:
        longest = -(-longest // pad_to_multiple_of) * pad_to_multiple_of
    batch = {"input_ids": [], "token_type_ids": [], "attention_mask": [], "labels": []}
    for feature in features:
        difference = longest - len(feature["input_ids"])
        for name, value in (("input_ids", pad_token_id), ("token_type_ids", 0)):
            padding = [value] * difference
            tokens = list(feature[name])
            batch[name].append(padding + tokens if padding_side == "left" else tokens + padding)
        ones, zeros = [1] * len(feature["input_ids"]), [0] * difference
        batch["attention_mask"].append(zeros + ones if padding_side == "left" else ones + zeros)
        batch["labels"].append(feature["label"])
    return {name: np.array(value, dtype=np.int64) for name, value in batch.items()}


def random_arrays(rng, dtype, count, longest=40):
    arrays = []
    for _ in range(count):
        values = rng.integers(-50, 50, size=int(rng.integers(0, longest)) * 2)
        array = values.astype(dtype)
        # Contiguous, strided and reversed items: each read in place.
        arrays.append([array, array[::2], array[::-1]][int(rng.integers(0, 3))])
    arrays[0] = np.ones(3, dtype)  # at least one item is not empty
    return arrays


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("multiple,max_length", [(1, None), (8, None), (4, 12), (1, 5)])
def test_padding_matches_the_python_reference(dtype, side, multiple, max_length):
    rng = np.random.default_rng([DTYPES.index(dtype), multiple, side == "left"])
    arrays = random_arrays(rng, dtype, 13)
    pad_value = 1 if dtype is np.bool_ else 7
    collator = PadCollator(pad_value, pad_to_multiple_of=multiple, max_length=max_length,
                           padding_side=side, lengths=True)
    padded, mask, lengths = collator(arrays)
    rows, masks = reference_pad(arrays, pad_value, multiple, max_length, side == "left")
    assert padded.dtype == dtype and padded.flags.c_contiguous
    np.testing.assert_array_equal(padded, np.array(rows, dtype=dtype))
    np.testing.assert_array_equal(mask, np.array(masks, dtype=np.int64))
    assert lengths.tolist() == [min(len(a), max_length or len(a)) for a in arrays]


@st.composite
def batches(draw):
    """A batch of 1-D arrays of one dtype, any lengths (empty included), any steps."""
    dtype = draw(st.sampled_from([np.uint8, np.int16, np.int64, np.float32, np.bool_]))
    arrays = []
    for _ in range(draw(st.integers(1, 6))):
        array = draw(hnp.arrays(dtype, draw(st.integers(0, 30))))
        arrays.append(array[::draw(st.sampled_from([1, 2, -1, -3]))])
    return arrays


@given(batches(), st.integers(1, 9), st.one_of(st.none(), st.integers(1, 4)),
       st.booleans())
def test_any_batch_is_padded_as_the_reference_pads_it(arrays, multiple, cut, left):
    max_length = None if cut is None else cut * multiple
    collator = PadCollator(1, pad_to_multiple_of=multiple, max_length=max_length,
                           padding_side="left" if left else "right")
    padded, mask = collator(arrays)
    rows, masks = reference_pad(arrays, 1, multiple, max_length, left)
    np.testing.assert_array_equal(padded, np.array(rows, dtype=arrays[0].dtype).reshape(
        padded.shape))
    np.testing.assert_array_equal(mask, np.array(masks, dtype=np.int64).reshape(mask.shape))


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("multiple", [None, 8])
def test_the_batch_is_what_hugging_faces_collator_gives(side, multiple):
    rng = np.random.default_rng(5)
    features = []
    for label in range(9):
        length = int(rng.integers(1, 30))
        features.append({"input_ids": rng.integers(1, 30000, length),
                         "token_type_ids": np.zeros(length, np.int64), "label": label % 2})
    expected = hf_collate_with_padding(features, 3, multiple, side)
    collator = PadCollator({"input_ids": 3, "token_type_ids": 0},
                           pad_to_multiple_of=multiple or 1, padding_side=side)
    batch = collator(features)
    assert list(batch) == ["input_ids", "attention_mask", "token_type_ids", "label"]
    for name in ("input_ids", "token_type_ids", "attention_mask"):
        assert batch[name].dtype == expected[name].dtype
        np.testing.assert_array_equal(batch[name], expected[name])
    np.testing.assert_array_equal(batch["label"], expected["labels"])


def test_an_items_own_attention_mask_is_padded_with_zero_and_no_other_is_added():
    items = [{"input_ids": np.array([4, 5, 6]), "attention_mask": np.array([1, 1, 0])},
             {"input_ids": np.array([7]), "attention_mask": np.array([1])}]
    batch = PadCollator({"input_ids": 9})(items)
    assert list(batch) == ["input_ids", "attention_mask"]
    assert batch["attention_mask"].tolist() == [[1, 1, 0], [1, 0, 0]]


def test_tuples_keep_their_fields_and_get_the_mask_and_lengths_after_them():
    items = [(np.array([1, 2], np.int32), np.array([5.0]), 0),
             (np.array([3], np.int32), np.array([6.0, 7.0, 8.0]), 1)]
    tokens, values, labels, mask, lengths = PadCollator({0: 0, 1: -1.0}, lengths=True)(items)
    assert tokens.tolist() == [[1, 2], [3, 0]] and tokens.dtype == np.int32
    assert values.tolist() == [[5.0, -1.0, -1.0], [6.0, 7.0, 8.0]]  # each field its own length
    assert labels.tolist() == [0, 1]
    assert mask.tolist() == [[1, 1], [1, 0]] and lengths.tolist() == [2, 1]


def test_batch_memory_is_reused_once_a_batch_is_dropped():
    collator = PadCollator()
    items = [np.arange(5), np.arange(3)]
    first, _ = collator(items)
    address = first.__array_interface__["data"][0]
    del first, _
    again, mask = collator(items)
    assert address in (again.__array_interface__["data"][0], mask.__array_interface__["data"][0])


def test_a_pickled_collator_pads_alike_with_a_pool_of_its_own():
    collator = PadCollator({"ids": -1}, pad_to_multiple_of=4, padding_side="left",
                           lengths=True)
    copy = pickle.loads(pickle.dumps(collator))
    assert repr(copy) == repr(collator) and copy.pool is not collator.pool
    items = [{"ids": np.arange(5)}, {"ids": np.arange(2)}]
    for name, value in collator(items).items():
        np.testing.assert_array_equal(copy(items)[name], value)


@pytest.mark.parametrize("arguments,error,message", [
    ({"pad_value": "0"}, TypeError, "pad_value should be a number"),
    ({"pad_to_multiple_of": 0}, ValueError, "pad_to_multiple_of should be a positive"),
    ({"max_length": 10, "pad_to_multiple_of": 4}, ValueError, "multiple of pad_to_multiple_of"),
    ({"padding_side": "top"}, ValueError, "padding_side should be one of 'right', 'left'"),
    ({"mask": 1}, TypeError, "mask should be True or False"),
])
def test_bad_arguments_are_named(arguments, error, message):
    with pytest.raises(error, match=message):
        PadCollator(**arguments)


@pytest.mark.parametrize("collator,items,error,message", [
    (PadCollator(), [], ValueError, "empty batch"),
    (PadCollator(-100), [np.arange(3, dtype=np.uint16)], ValueError,
     "pad_value -100 does not fit its dtype uint16"),
    (PadCollator(0.5), [np.arange(3)], ValueError, "does not fit its dtype int64"),
    (PadCollator(), [np.arange(3), np.arange(2, dtype=np.int32)], ValueError,
     "item 1 should be a 1-D int64 array as in item 0, got a int32 array"),
    (PadCollator(), [np.array(["a", "b"])], TypeError, "only numbers"),
    (PadCollator({"ids": 0}), [{"ids": np.arange(2), "labels": np.arange(2)}], ValueError,
     "pad_value gives no value for field 'labels'"),
    (PadCollator(), [{"ids": np.arange(2)}, {"tokens": np.arange(2)}], ValueError,
     "item 1 should be a mapping with the keys of item 0"),
    (PadCollator(), [(np.arange(2), 1), (np.arange(2),)], ValueError,
     "item 1 should be a tuple of 2 fields"),
    (PadCollator(), ["text"], TypeError, "items should be numpy arrays, mappings or tuples"),
])
def test_bad_batches_are_named(collator, items, error, message):
    with pytest.raises(error, match=message):
        collator(items)


class Sentences(Dataset):
    """Token ids of varying length with a label; the same on every worker."""

    def __init__(self, count):
        rng = np.random.default_rng(0)
        self.tokens = [rng.integers(1, 1000, int(n), dtype=np.int32)
                       for n in rng.integers(1, 60, count)]

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, index):
        return {"input_ids": self.tokens[index], "label": index}


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_batches_through_the_loader_on_every_worker_kind(kind):
    dataset = Sentences(200)
    collator = PadCollator(pad_to_multiple_of=8, padding_side="left")
    held = []
    with DataLoader(dataset, batch_size=16, shuffle=True, seed=3, collate_fn=collator,
                    timeout=120, **WORKER_KINDS[kind]) as loader:
        for _ in range(2):
            for number, batch in enumerate(loader):
                indices = batch["label"].tolist()
                rows, masks = reference_pad([dataset.tokens[i] for i in indices], 0, 8, None,
                                            left=True)
                np.testing.assert_array_equal(batch["input_ids"], np.array(rows, np.int32))
                np.testing.assert_array_equal(batch["attention_mask"], np.array(masks))
                if number % 5 == 0:
                    held.append((indices, batch))  # some batches kept past others' reuse
                del batch
    for indices, batch in held:
        rows, _ = reference_pad([dataset.tokens[i] for i in indices], 0, 8, None, left=True)
        np.testing.assert_array_equal(batch["input_ids"], np.array(rows, np.int32))


def test_spawned_worker_processes_take_the_collator_pickled():
    dataset = Sentences(40)
    with DataLoader(dataset, batch_size=8, collate_fn=PadCollator(-1), num_workers=2,
                    worker_type="process", multiprocessing_context="spawn",
                    timeout=120) as loader:
        for batch in loader:
            indices = batch["label"].tolist()
            rows, _ = reference_pad([dataset.tokens[i] for i in indices], -1)
            np.testing.assert_array_equal(batch["input_ids"], np.array(rows, np.int32))
            del batch


@given(batches(), st.integers(1, 9), st.one_of(st.none(), st.integers(1, 4)), st.booleans(),
       st.booleans())
def test_a_batch_of_flat_values_and_offsets_is_padded_as_its_rows_are(arrays, multiple, cut,
                                                                       left, lengths):
    from dataloader._datasets.column_batch import ColumnBatch, ListValues

    max_length = None if cut is None else cut * multiple
    options = {"pad_to_multiple_of": multiple, "max_length": max_length, "lengths": lengths,
               "padding_side": "left" if left else "right", "pad_value": {"ids": 1}}
    offsets = np.cumsum([0] + [len(array) for array in arrays])
    values = np.concatenate(arrays) if arrays else np.empty(0)
    labels = np.arange(len(arrays), dtype=np.int16)
    columns = ColumnBatch(("ids", "label"), [ListValues(offsets, values), labels])
    fused = PadCollator(**options).collate_columns(columns)
    rowwise = PadCollator(**options)([{"ids": array, "label": label}
                                      for array, label in zip(arrays, labels, strict=True)])
    assert list(fused) == list(rowwise)
    for key, value in rowwise.items():
        assert fused[key].dtype == value.dtype and fused[key].tobytes() == value.tobytes()
    rows, _ = reference_pad(arrays, 1, multiple, max_length, left)
    np.testing.assert_array_equal(fused["ids"], np.array(rows, arrays[0].dtype).reshape(
        fused["ids"].shape))
