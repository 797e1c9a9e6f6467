"""torch's warning for a stream that yields more than its ``__len__`` said, once
``len(loader)`` was asked (``dataloader._loading.reported_length``)."""

import warnings

import pytest
from stream_datasets import Range

from dataloader import DataLoader, IterableDataset
from dataloader._loading.reported_length import stream_length, warn_past_reported_length

# torch's test_iterable_style_dataset matches this.
TORCHS_WORDS = r"but [0-9]+ samples have been fetched\. For multiprocessing data-loading, this"


class Unsplit(IterableDataset):
    """Says 20 items, and yields all 20 on every worker: what the warning is for."""

    def __len__(self):
        return 20

    def __iter__(self):
        return iter(range(20))


def length(loader):
    """``len(loader)``, as DataLoader.__len__ computes it for a stream."""
    return stream_length(loader)


def start(loader):
    """``iter(loader)``, as DataLoader._start_stream starts a streaming epoch."""
    epoch = iter(loader)
    warn_past_reported_length(epoch, loader)
    return epoch


WORKERS = [(0, "thread"), (2, "thread"), (2, "process")]


@pytest.mark.parametrize("num_workers, worker_type", WORKERS)
def test_each_batch_past_the_reported_length_warns(num_workers, worker_type):
    with DataLoader(Unsplit(), num_workers=num_workers, worker_type=worker_type,
                    timeout=60) as loader:
        assert length(loader) == 20
        epoch = start(loader)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            first = [next(epoch) for _ in range(20)]
        assert len(first) == 20
        if num_workers == 0:
            with pytest.raises(StopIteration):  # one stream: no more than it said
                next(epoch)
            return
        for count in range(21, 24):
            with pytest.warns(UserWarning, match=TORCHS_WORDS) as caught:
                next(epoch)
            assert f"reported to be 20 (when accessing len(dataloader)), but {count} samples" \
                in str(caught[0].message)
            assert caught[0].filename == __file__


@pytest.mark.parametrize("num_workers, worker_type", WORKERS)
def test_no_warning_before_the_length_was_asked_nor_for_a_stream_keeping_to_it(num_workers,
                                                                               worker_type):
    with DataLoader(Unsplit(), num_workers=num_workers, worker_type=worker_type,
                    timeout=60) as loader:
        epoch = start(loader)  # started before len(loader): never warns, as torch
        length(loader)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert sum(1 for _ in epoch) == 20 * max(num_workers, 1)
    with DataLoader(Range(20), batch_size=None, num_workers=num_workers,
                    worker_type=worker_type, timeout=60) as loader:  # split: 20 in all
        length(loader)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert sorted(start(loader)) == list(range(20))


def test_batched_epochs_count_batches_so_the_warning_is_never_wrong():
    with DataLoader(Unsplit(), batch_size=7, num_workers=8, worker_type="thread") as loader:
        assert length(loader) == 3
        epoch = start(loader)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            first = [next(epoch) for _ in range(20)]  # 20 batches of 8 * 20 items: no warning
        with pytest.warns(UserWarning, match="but 21 batches, so at least 21 samples, have been "
                                             "fetched. For multiprocessing data-loading"):
            next(epoch)
    assert len(first) == 20
