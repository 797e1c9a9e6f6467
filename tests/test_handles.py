"""Datasets holding an open file: found, warned about once, and read right on threads."""

import io
import os
import sys
import threading
import time
import types
import warnings

import numpy as np
import pytest

from dataloader import ConcatDataset, DataLoader, Dataset, Subset
from dataloader._loading.handles import open_files

RECORD_SIZE = 16  # each record: its index, twice, as little-endian int64
RECORDS = 6000


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    path = tmp_path_factory.mktemp("handles") / "records.bin"
    indices = np.arange(RECORDS, dtype="<i8")
    path.write_bytes(np.column_stack([indices, indices]).tobytes())
    return path


def read_record(file, index):
    """``(index, the index its record holds)``, by a seek then a read of ``file``."""
    file.seek(index * RECORD_SIZE)
    time.sleep(0)  # another worker runs between the seek and the read, if it may
    return index, int(np.frombuffer(file.read(RECORD_SIZE), "<i8")[0])


class SharedFile(Dataset):
    """The research pattern: a file opened in ``__init__``, read with seek + read."""

    def __init__(self, path):
        self.file = open(path, "rb")  # noqa: SIM115 - closed by the test

    def __len__(self):
        return RECORDS

    def __getitem__(self, index):
        return read_record(self.file, index)


class SharedFileBatches(SharedFile):
    """The same, reading a whole batch in one ``__getitems__`` call."""

    def __getitems__(self, indices):
        return [read_record(self.file, index) for index in indices]


class FileOfEachWorker(Dataset):
    """The remedy: each worker opens its own handle on first use (docs/execution.md)."""

    def __init__(self, path):
        self.path = path
        self.opened = threading.local()

    def __len__(self):
        return RECORDS

    def __getitem__(self, index):
        if getattr(self.opened, "pid", None) != os.getpid():
            self.opened.file = open(self.path, "rb")  # noqa: SIM115 - the worker's, for its life
            self.opened.pid = os.getpid()
        return read_record(self.opened.file, index)


def check_two_epochs(loader):
    """Every batch's records are its indices' own, over two epochs taken batch by batch."""
    for _epoch in range(2):
        seen = 0
        for indices, found in loader:
            np.testing.assert_array_equal(found, indices)
            seen += len(indices)
        assert seen == RECORDS


def open_file_warnings(epochs, loader):
    """The open-file warnings ``epochs(loader)`` gives, each given once (never filtered out)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        epochs(loader)
    return [str(warning.message) for warning in caught if "holds an open" in str(warning.message)]


def run_two_epochs(loader):
    for _epoch in range(2):
        for _batch in loader:
            pass


@pytest.mark.parametrize("kind", [SharedFile, SharedFileBatches])
@pytest.mark.parametrize("workers", [(4, 1), (2, 4), (0, 4)], ids=["workers", "workers+lanes",
                                                                     "lanes"])
def test_a_shared_file_gives_right_records_on_worker_threads(records, kind, workers):
    num_workers, item_concurrency = workers
    dataset = kind(records)
    loader = DataLoader(dataset, batch_size=32, shuffle=True, seed=3, num_workers=num_workers,
                        item_concurrency=item_concurrency, worker_type="thread")
    (message,) = open_file_warnings(check_two_epochs, loader)
    assert "one at a time" in message
    loader.close()
    dataset.file.close()


class Overlaps(Dataset):
    """Counts how many of its fetches run at once; holds an open (in-memory) file."""

    def __init__(self):
        self.buffer = io.BytesIO(b"records")
        self._lock = threading.Lock()
        self.inside = self.most_inside = 0

    def __len__(self):
        return 400

    def __getitem__(self, index):
        with self._lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        time.sleep(0)
        with self._lock:
            self.inside -= 1
        return index


@pytest.mark.parametrize("workers", [(4, 1), (2, 4)], ids=["workers", "workers+lanes"])
def test_worker_threads_never_fetch_from_a_dataset_holding_a_file_at_once(workers):
    num_workers, item_concurrency = workers
    dataset = Overlaps()
    loader = DataLoader(dataset, batch_size=8, num_workers=num_workers,
                        item_concurrency=item_concurrency, worker_type="thread")
    assert len(open_file_warnings(run_two_epochs, loader)) == 1
    assert dataset.most_inside == 1
    loader.close()


def test_the_warning_names_the_attribute_and_its_file_once_per_loader(records):
    dataset = SharedFile(records)
    loader = DataLoader(dataset, batch_size=100, num_workers=2, worker_type="thread")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_two_epochs(loader)
    (warning,) = [warning for warning in caught if "holds an open" in str(warning.message)]
    message = str(warning.message)
    assert message.startswith(f"dataset.file holds an open file ({str(records)!r}). ")
    assert "one at a time" in message and "os.pread" in message
    assert 'docs/execution.md, "Open files and workers"' in message
    assert warning.filename == __file__  # the loop that started the epoch
    # Another loader over the same dataset looks again, and warns again.
    other = DataLoader(dataset, batch_size=100, num_workers=2, worker_type="thread")
    assert len(open_file_warnings(run_two_epochs, other)) == 1
    loader.close()
    other.close()
    dataset.file.close()


def test_worker_processes_are_warned_about_the_shared_offset(records):
    dataset = SharedFile(records)
    loader = DataLoader(dataset, batch_size=100, num_workers=2, worker_type="process")
    (message,) = open_file_warnings(lambda loader: next(iter(loader)), loader)
    assert message.startswith("dataset.file holds an open file")
    assert "started by fork" in message and "worker_init_fn" in message
    loader.close()
    dataset.file.close()


@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_a_file_opened_by_each_worker_gives_right_records_without_a_warning(records,
                                                                            worker_type):
    loader = DataLoader(FileOfEachWorker(records), batch_size=32, shuffle=True, seed=5,
                        num_workers=2, worker_type=worker_type)
    assert open_file_warnings(check_two_epochs, loader) == []
    loader.close()


def test_no_warning_without_workers(records):
    dataset = SharedFile(records)
    loader = DataLoader(dataset, batch_size=64, shuffle=True, seed=1)
    assert open_file_warnings(check_two_epochs, loader) == []
    dataset.file.close()


class Holder(Dataset):
    """A dataset whose attributes are given: ``Holder(file=..., files=[...])``."""

    def __init__(self, **attributes):
        vars(self).update(attributes)

    def __len__(self):
        return 1

    def __getitem__(self, index):
        return index


class Reader:
    """Not a dataset: what it holds is not looked into."""

    def __init__(self):
        self.file = io.BytesIO()


def test_open_files_looks_into_attributes_containers_and_wrapped_datasets():
    closed = io.BytesIO()
    closed.close()
    holder = Holder(file=io.BytesIO(), shards=[b"", io.BytesIO()], by_name={"train": io.BytesIO()},
                    closed=closed, reader=Reader(), descriptor=0)
    assert open_files(holder) == [
        "dataset.file holds an open file (BytesIO)",
        "dataset.shards[1] holds an open file (BytesIO)",
        "dataset.by_name['train'] holds an open file (BytesIO)",
    ]
    wrapped = Subset(ConcatDataset([Holder(), Holder(file=io.BytesIO())]), [0, 1])
    assert open_files(wrapped) == ["dataset.dataset.datasets[1].file holds an open file (BytesIO)"]
    assert open_files(list(range(4))) == [] and open_files(Holder(itself=holder.file)) != []


def test_the_warning_names_three_files_and_counts_the_rest():
    dataset = Holder(files=[io.BytesIO() for _ in range(5)])
    loader = DataLoader(dataset, batch_size=None, num_workers=2, worker_type="thread")
    (message,) = open_file_warnings(run_two_epochs, loader)
    assert message.startswith("dataset.files[0] holds an open file (BytesIO), dataset.files[1] ")
    assert "dataset.files[2] holds an open file (BytesIO), and 2 more. " in message
    loader.close()


def test_h5py_objects_are_open_files_when_h5py_is_imported(monkeypatch):
    class Group:
        def __init__(self, filename, is_open=True):
            self.file = types.SimpleNamespace(filename=filename)
            self.is_open = is_open

        def __bool__(self):  # h5py: whether the object's identifier is still valid
            return self.is_open

    class File(Group):
        pass

    class H5Dataset(Group):
        pass

    dataset = Holder(h5=File("a.h5"), images=H5Dataset("b.h5"), closed=File("c.h5", False))
    assert open_files(dataset) == []  # h5py not imported: never looked for
    h5py = types.ModuleType("h5py")
    h5py.Group, h5py.File, h5py.Dataset = Group, File, H5Dataset
    monkeypatch.setitem(sys.modules, "h5py", h5py)
    assert open_files(dataset) == ["dataset.h5 holds an open HDF5 file ('a.h5')",
                                   "dataset.images holds an open HDF5 file ('b.h5')"]
