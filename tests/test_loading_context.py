"""The one loading path: an error's context as data, and the same stage counts on every path."""

import importlib

import numpy as np
import pytest
from test_epochs import Items
from test_streaming import Range

from dataloader import DataLoader
from dataloader._cli.common import named_error
from dataloader._errors import LoadingContext, add_context, context_of
from dataloader._loading.stats import STAGES


def raised(loader, batch):
    """The error raised by batch number ``batch`` of one epoch of ``loader``."""
    it = iter(loader)
    for _ in range(batch):
        next(it)
    with pytest.raises(Exception) as info:
        next(it)
    return info.value


def epoch_errors(loader, kind):
    """The errors of type ``kind`` raised by one epoch of ``loader``, which goes on after each."""
    errors = []
    it = iter(loader)
    while True:
        try:
            next(it)
        except kind as error:
            errors.append(error)
        except StopIteration:
            return errors


def test_direct_batch_error_carries_every_index_of_its_batch():
    error = raised(DataLoader(Items(40, failing=[29]), batch_size=10), 2)
    context = context_of(error)
    assert context == LoadingContext("batch", batch=2, indices=list(range(20, 30)))
    # The note shows eight indices of a long batch; the context has them all.
    assert "(10 indices)" in error.__notes__[-1] and context.note() == error.__notes__[-1]


def test_threaded_batch_error_names_its_worker():
    with DataLoader(Items(40, failing=[15]), batch_size=10, num_workers=2) as loader:
        error = raised(loader, 1)
    context = context_of(error)
    assert (context.stage, context.batch, context.indices) == ("batch", 1, list(range(10, 20)))
    assert context.worker in (0, 1)
    assert f"on worker {context.worker}" in error.__notes__[-1]


def test_lane_error_names_the_failing_item():
    with DataLoader(Items(12, failing=[6]), batch_size=4, item_concurrency=3) as loader:
        error = raised(loader, 1)
    context = context_of(error)
    assert (context.stage, context.batch, context.index) == ("item", 1, 6)
    assert context.indices == [4, 5, 6, 7]
    assert "index 6 of batch 1" in error.__notes__[-1]


def test_lane_collation_error_is_the_collate_stage():
    def collate(items):
        if 5 in items:
            raise TypeError("cannot collate 5")
        return items

    with DataLoader(Items(8), batch_size=4, item_concurrency=2, collate_fn=collate) as loader:
        error = raised(loader, 1)
    assert isinstance(error, TypeError)
    context = context_of(error)
    assert (context.stage, context.batch, context.index) == ("collate", 1, None)


class MissingReturn:
    """A ``__getitem__`` that falls off its end for one index: that item is None."""

    def __init__(self, item, missing):
        self.item, self.missing = item, missing

    def __len__(self):
        return 12

    def __getitem__(self, index):
        if index != self.missing:
            return self.item(index)


@pytest.mark.parametrize("namespace", ["dataloader", "dataloader.torch"])
@pytest.mark.parametrize("options", [
    {}, {"item_concurrency": 3}, {"num_workers": 2, "worker_type": "thread"},
    {"num_workers": 2, "worker_type": "process"},
])
@pytest.mark.parametrize("item", [
    lambda i: (i, f"x{i}"), lambda i: {"x": np.full(3, i), "y": i}, lambda i: np.zeros(20_000),
], ids=["tuple", "dict", "big array"])
@pytest.mark.parametrize("missing", [4, 6])  # first in its batch, then third
def test_an_item_that_is_none_is_named_by_its_index(namespace, options, item, missing):
    if namespace == "dataloader.torch":
        pytest.importorskip("torch")
    loader_type = importlib.import_module(namespace).DataLoader
    with loader_type(MissingReturn(item, missing), batch_size=4, **options) as loader:
        error = raised(loader, 1)
    assert isinstance(error, TypeError)
    position, other = missing - 4, 5 if missing == 4 else 4
    assert str(error).startswith(
        f"default_collate: item {position} of the batch is None where item {other - 4} is a ")
    assert "did __getitem__ or the transform return nothing" in str(error)
    assert context_of(error).index == missing
    assert error.__notes__[-1].endswith(f"; the item of index {missing}")


def test_a_batch_of_nones_is_left_to_the_collation_rule():
    # No item to tell apart: the rule's own error (torch's), unchanged.
    with pytest.raises(TypeError, match="found <class 'NoneType'>"):
        next(iter(DataLoader([None] * 4, batch_size=4)))


def test_sampler_check_error_is_the_check_stage():
    with DataLoader(list(range(6)), batch_sampler=[[0, 1], [2, -1]], num_workers=1) as loader:
        error = raised(loader, 1)
    assert isinstance(error, ValueError)
    context = context_of(error)
    assert (context.stage, context.batch, context.indices) == ("check", 1, [2, -1])


@pytest.mark.parametrize("num_workers, item_concurrency", [(0, 1), (0, 2), (2, 1)])
def test_stream_batch_error_carries_its_stream_and_positions(num_workers, item_concurrency):
    def transform(index, item):
        if item == 4:
            raise ValueError("bad item 4")
        return item

    loader = DataLoader(Range(8), batch_size=2, num_workers=num_workers,
                        item_concurrency=item_concurrency, transform=transform)
    with loader:
        errors = epoch_errors(loader, ValueError)
    [error] = errors
    context = context_of(error)
    assert context.stage == "stream batch"
    # One stream reads items 0..7 (item 4 at its position 4); two workers'
    # streams read the even and the odd items (item 4 at stream 0's position 2).
    start = 4 if num_workers == 0 else 2
    assert (context.stream, context.indices) == (0, [start, start + 1])
    assert f"stream 0 starting at its item {start}" in error.__notes__[-1]


def test_stream_iterator_error_is_the_iterator_stage():
    with DataLoader(Range(8, failing_at=3), batch_size=2, num_workers=2) as loader:
        [error] = epoch_errors(loader, KeyError)
    context = context_of(error)
    assert (context.stage, context.stream) == ("stream iterator", 1)
    assert "iterator of stream 1" in error.__notes__[-1]


def test_context_is_replaced_not_stacked_and_only_exceptions_are_annotated():
    error = ValueError("bad")
    add_context(error, LoadingContext("batch", batch=0, indices=[0]))
    add_context(error, LoadingContext("batch", batch=3, indices=[3]))
    assert context_of(error).batch == 3 and len(error.__notes__) == 2
    interrupt = KeyboardInterrupt()
    add_context(interrupt, LoadingContext("batch", batch=0, indices=[0]))
    assert context_of(interrupt) is None and not hasattr(interrupt, "__notes__")
    assert context_of(ValueError("plain")) is None


class Files:
    """What the command line's error naming reads: samples (paths) and items."""

    def __init__(self):
        self.samples = [(f"image-{index}.jpg", 0) for index in range(20)]

    def __getitem__(self, index):
        return index, 0


def test_command_line_names_the_file_from_the_context_fields():
    def chain(item, seed):
        if item == 13:
            raise ValueError("cannot decode")
        return item

    error = ValueError("batch failed")
    # No note at all: the command line reads the fields only.
    error.dataloader_context = LoadingContext("batch", batch=1, indices=list(range(10, 20)))
    assert str(named_error(error, Files(), chain)) == "image-13.jpg: cannot decode"
    # The failing item named by the context is tried first.
    tried = []

    def recording(item, seed):
        tried.append(item)
        return chain(item, seed)

    error.dataloader_context = LoadingContext("item", batch=1, indices=list(range(10, 20)),
                                              index=13, worker=0)
    assert str(named_error(error, Files(), recording)) == "image-13.jpg: cannot decode"
    assert tried == [13]


def test_command_line_without_context_gives_the_message():
    assert str(named_error(OSError("disk gone"), Files(), lambda item, seed: item)) \
        == "disk gone"


def test_command_line_names_the_batch_when_no_item_fails_again():
    error = ValueError("collate failed")
    error.dataloader_context = LoadingContext("collate", batch=0, indices=[0, 1, 2, 3, 4],
                                              worker=1)
    message = str(named_error(error, Files(), lambda item, seed: item))
    assert message == "collate failed (in a batch with image-0.jpg, image-1.jpg, image-2.jpg, " \
                      "image-3.jpg, ...)"


def double(index, item):
    return 2 * item


@pytest.mark.parametrize("options", [
    {},
    {"num_workers": 2},
    {"item_concurrency": 3},
    {"num_workers": 1, "item_concurrency": 2},
], ids=["direct", "batches", "lanes", "worker-lanes"])
def test_every_map_style_path_counts_the_same_stages(options):
    with DataLoader(list(range(10)), batch_size=4, transform=double, **options) as loader:
        assert [batch.tolist() for batch in loader] == [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18]]
        counts = {stage: loader.stats()[stage]["count"] for stage in STAGES}
    del counts["wait"]  # the direct path does not count the next() that ends the epoch
    assert counts == {"fetch": 10, "transform": 10, "collate": 3, "skipped": 0}


@pytest.mark.parametrize("options", [
    {},
    {"num_workers": 2},
    {"item_concurrency": 2},
], ids=["direct", "workers", "consumer-stream-on-pool"])
def test_every_stream_path_counts_the_same_stages(options):
    with DataLoader(Range(10), batch_size=5, transform=double, **options) as loader:
        batches = sorted(sorted(batch.tolist()) for batch in loader)
        counts = {stage: loader.stats()[stage]["count"] for stage in STAGES}
    if options.get("num_workers"):
        # Two streams of five items: one batch each.
        assert batches == [[0, 4, 8, 12, 16], [2, 6, 10, 14, 18]]
    else:
        assert batches == [[0, 2, 4, 6, 8], [10, 12, 14, 16, 18]]
    assert (counts["fetch"], counts["transform"], counts["collate"]) == (10, 10, 2)


@pytest.mark.parametrize("options", [{}, {"num_workers": 2}, {"item_concurrency": 2}],
                         ids=["direct", "batches", "lanes"])
def test_every_path_skips_failing_items_the_same_way(options):
    dataset = Items(12, failing=[1, 4, 5, 6, 7])
    with DataLoader(dataset, batch_size=4, on_error="skip", **options) as loader:
        assert [batch.tolist() for batch in loader] == [[0, 2, 3], [8, 9, 10, 11]]
        assert loader.stats()["skipped"]["count"] == 5


class FetchFails(list):
    """Items 0..n-1 whose fetch fails at the indices given (KeyError)."""

    def __init__(self, n, failing):
        super().__init__(range(n))
        self.failing = set(failing)

    def __getitem__(self, index):
        if index in self.failing:
            raise KeyError(f"fetch of {index}")
        return super().__getitem__(index)


def transform_fails_at_multiples_of_four(index, item):
    if index % 4 == 0:
        raise RuntimeError(f"transform of {index}")
    return item


@pytest.mark.parametrize("options", [
    {},
    {"num_workers": 2, "worker_type": "thread"},
    {"item_concurrency": 3},
    {"num_workers": 2, "worker_type": "process"},
], ids=["direct", "threads", "lanes", "processes"])
def test_every_path_raises_the_error_of_the_lowest_failing_item(options):
    """Item 0 fails in its transform, item 1 in its fetch: item 0's error is the batch's,
    in an epoch's first batch (shared out among threads) and in later ones alike."""
    dataset = FetchFails(12, failing=[1, 5, 9])
    # A collate_fn of its own: items are not collated into rows as they come.
    with DataLoader(dataset, batch_size=4, transform=transform_fails_at_multiples_of_four,
                    collate_fn=list, **options) as loader:
        for _ in range(2):  # every epoch
            errors = epoch_errors(loader, (KeyError, RuntimeError))
            assert [str(error) for error in errors] == [
                "transform of 0", "transform of 4", "transform of 8"]
