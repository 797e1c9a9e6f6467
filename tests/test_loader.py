"""DataLoader's arguments: validation, defaults, frozen attributes."""

import pytest

from dataloader import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    default_collate,
    default_convert,
)
from dataloader._loading.arguments import (
    MAX_PREFETCH_FACTOR,
    MAX_THREADS,
    check_process_options,
    epoch_window,
)

DATA = list(range(10))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"batch_size": -3}, ValueError, "batch_size"),
        ({"batch_size": 2.0}, ValueError, "batch_size"),
        ({"num_workers": -1}, ValueError, "num_workers option should be non-negative"),
        ({"num_workers": MAX_THREADS + 1}, ValueError,
         f"num_workers.*at most|from 0 to {MAX_THREADS}"),
        ({"num_workers": 2.0}, TypeError, "num_workers"),
        ({"num_workers": "2"}, TypeError, "num_workers"),
        ({"num_workers": True}, TypeError, "num_workers"),
        ({"prefetch_factor": -1}, ValueError, "prefetch_factor"),
        ({"prefetch_factor": 0}, ValueError, "prefetch_factor"),
        ({"prefetch_factor": 10**12}, ValueError, f"prefetch_factor.*1 to {MAX_PREFETCH_FACTOR}"),
        ({"prefetch_factor": MAX_PREFETCH_FACTOR + 1}, ValueError, "prefetch_factor"),
        ({"prefetch_factor": 2.5}, TypeError, "prefetch_factor"),
        ({"prefetch_factor": 2}, ValueError,
         r"prefetch_factor option could only be specified when batches load ahead"),
        ({"timeout": -0.5}, ValueError, "timeout option should be non-negative"),
        ({"timeout": float("nan")}, ValueError, "timeout"),
        ({"timeout": "5"}, TypeError, "timeout"),
        ({"item_concurrency": 0}, ValueError, "item_concurrency"),
        ({"item_concurrency": MAX_THREADS + 1}, ValueError, "item_concurrency"),
        ({"item_concurrency": 1.5}, TypeError, "item_concurrency"),
        ({"num_workers": 1024, "item_concurrency": 1024}, ValueError,
         r"num_workers=1024 and item_concurrency=1024 \(1048576 threads\)"),
        ({"num_workers": 33, "item_concurrency": 32}, ValueError, f"at most {MAX_THREADS}"),
        ({"shuffle": True, "sampler": [0, 1]}, ValueError, "sampler option is mutually exclusive"),
        ({"batch_sampler": [[0]], "batch_size": 2}, ValueError, "batch_sampler option"),
        ({"batch_sampler": [[0]], "shuffle": True}, ValueError, "batch_sampler option"),
        ({"batch_sampler": [[0]], "sampler": [0]}, ValueError, "batch_sampler option"),
        ({"batch_sampler": [[0]], "drop_last": True}, ValueError, "batch_sampler option"),
        ({"batch_size": None, "drop_last": True}, ValueError, "drop_last"),
        ({"seed": 3}, ValueError, "seed"),
        ({"shuffle": True, "seed": "3"}, TypeError, "seed"),
        ({"shuffle": True, "seed": 1, "generator": __import__("numpy").random.default_rng()},
         ValueError, "seed or generator"),
        ({"generator": 42}, TypeError, "generator"),
        ({"sampler": 5}, TypeError, "sampler"),
        ({"batch_sampler": 5, "batch_size": 1}, TypeError, "batch_sampler"),
    ],
)
def test_invalid_arguments_are_rejected_naming_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        DataLoader(DATA, **kwargs)


def test_the_largest_allowed_counts_are_accepted():
    loader = DataLoader(DATA, num_workers=MAX_THREADS // 4, item_concurrency=4,
                        prefetch_factor=MAX_PREFETCH_FACTOR)
    assert loader.num_workers * loader.item_concurrency == MAX_THREADS


def test_a_huge_prefetch_window_is_capped_by_the_epochs_batches():
    # 2 workers * 1024 batches ahead, for an epoch of 5 batches: 5 slots.
    assert epoch_window(2, MAX_PREFETCH_FACTOR, 5) == 5
    assert epoch_window(2, 3, None) == 6
    assert epoch_window(0, 2, 0) == 1
    with DataLoader(DATA, batch_size=2, num_workers=2,
                    prefetch_factor=MAX_PREFETCH_FACTOR) as loader:
        assert [batch.tolist() for batch in loader] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]


def test_a_pool_refuses_more_threads_than_the_limit():
    from dataloader._core.pool import Pool

    with pytest.raises(ValueError, match=f"1 to {MAX_THREADS} threads"):
        Pool(MAX_THREADS + 1)


def test_dataset_without_getitem_or_iter_is_a_type_error():
    with pytest.raises(TypeError, match="dataset should be map-style"):
        DataLoader(42)


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(3))


@pytest.mark.parametrize("kwargs, name", [
    ({"shuffle": True}, "shuffle"),
    ({"sampler": [0, 1]}, "sampler"),
    ({"batch_sampler": [[0]], "batch_size": 1}, "batch_sampler"),
])
def test_iterable_dataset_rejects_sampling_options_as_torch_does(kwargs, name):
    with pytest.raises(ValueError, match=f"expected unspecified {name} option"):
        DataLoader(Stream(), **kwargs)


def test_equal_batches_is_for_iterable_datasets():
    with pytest.raises(ValueError, match="equal_batches"):
        DataLoader(DATA, equal_batches=True)


@pytest.mark.parametrize("name", ["batch_size", "sampler", "batch_sampler", "drop_last", "dataset"])
def test_epoch_defining_attributes_are_frozen(name):
    loader = DataLoader(DATA, batch_size=2)
    with pytest.raises(ValueError, match=f"{name} attribute should not be set"):
        setattr(loader, name, None)


def test_other_attributes_can_be_set():
    loader = DataLoader(DATA, batch_size=5)
    loader.collate_fn = list
    assert next(iter(loader)) == [0, 1, 2, 3, 4]


def test_defaults_build_torchs_samplers():
    loader = DataLoader(DATA)
    assert loader.batch_size == 1
    assert isinstance(loader.sampler, SequentialSampler)
    assert isinstance(loader.batch_sampler, BatchSampler)
    assert loader.collate_fn is default_collate
    assert loader.prefetch_factor == 2
    assert isinstance(DataLoader(DATA, shuffle=True).sampler, RandomSampler)


def test_batch_size_none_has_no_batch_sampler_and_converts():
    loader = DataLoader(DATA, batch_size=None)
    assert loader.batch_sampler is None
    assert loader.collate_fn is default_convert
    assert len(loader) == len(DATA)


def test_batch_sampler_resets_batch_size_and_drop_last():
    loader = DataLoader(DATA, batch_sampler=[[0, 1], [2]])
    assert loader.batch_size is None
    assert loader.drop_last is False
    assert len(loader) == 2


def test_process_only_options_are_accepted_with_worker_threads():
    with DataLoader(DATA, batch_size=5, num_workers=2, worker_type="thread",
                    multiprocessing_context="spawn", persistent_workers=True) as loader:
        assert [batch.tolist() for batch in loader] == [DATA[:5], DATA[5:]]


def test_prefetch_factor_applies_to_the_lanes_of_the_calling_thread():
    with DataLoader(DATA, batch_size=5, item_concurrency=2, prefetch_factor=3) as loader:
        assert [batch.tolist() for batch in loader] == [DATA[:5], DATA[5:]]


@pytest.mark.parametrize(
    "num_workers, context, persistent, error, match",
    [  # torch's checks, types and messages
        (0, "spawn", False, ValueError, r"multi-process loading \(num_workers > 0\), but got"),
        (0, None, True, ValueError, "persistent_workers option needs num_workers > 0"),
        (1, "bad", False, ValueError,
         r"should specify a valid start method in \[.*'spawn'.*\], but got.*'bad'"),
        (1, object(), False, TypeError, "multiprocessing_context option should be a valid "),
    ],
)
def test_worker_process_options_are_checked_as_torch_checks_them(num_workers, context,
                                                                 persistent, error, match):
    with pytest.raises(error, match=match):
        check_process_options(num_workers, context, persistent)


def test_valid_worker_process_options_pass():
    import multiprocessing

    check_process_options(2, multiprocessing.get_context("spawn"), True)
    check_process_options(2, "forkserver", False)
    check_process_options(0, None, False)


def test_subclassing_dataset_is_optional():
    class Plain:
        def __len__(self):
            return 2

        def __getitem__(self, index):
            return index

    assert [b.tolist() for b in DataLoader(Plain(), batch_size=2)] == [[0, 1]]
    assert not isinstance(Plain(), Dataset)


def test_dataset_base_class_requires_getitem():
    with pytest.raises(NotImplementedError, match="__getitem__"):
        Dataset()[0]


def test_positional_arguments_follow_torchs_order():
    loader = DataLoader(DATA, 4, False, None, None, 0, list)
    assert loader.batch_size == 4
    assert next(iter(loader)) == [0, 1, 2, 3]
