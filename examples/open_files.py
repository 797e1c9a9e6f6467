"""Records read with ``seek`` + ``read``: one open file per worker, opened on first use.

A dataset that opens its file in ``__init__`` shares that handle with every
worker: worker threads share the file object, and worker processes started
by fork share its offset, so one worker's ``seek`` moves it under another's
``read``. The loader warns about such a dataset (and, on threads, calls it
one item at a time). Here each worker opens its own handle the first time
it reads, so workers load in parallel and every record is right, on
threads and on processes; ``os.pread`` needs no handle of its own at all.
"""

import os
import tempfile
import threading
from pathlib import Path

import numpy as np

from dataloader import DataLoader, Dataset

RECORD_SIZE = 16  # each record: its index, then its square, as little-endian int64
RECORDS = 6000


class Records(Dataset):
    """The records of a file, read through the calling worker's own handle."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.opened = threading.local()  # each thread's own handle and the process it is of

    def __len__(self) -> int:
        return os.path.getsize(self.path) // RECORD_SIZE

    def __getitem__(self, index: int) -> tuple[int, int]:
        file = self.file()
        file.seek(index * RECORD_SIZE)
        record = np.frombuffer(file.read(RECORD_SIZE), "<i8")
        return int(record[0]), int(record[1])

    def file(self):
        """This worker's handle: opened on its first read, and again in a forked child."""
        if getattr(self.opened, "pid", None) != os.getpid():
            # Kept open for the worker's life: closed when its thread or process ends.
            self.opened.file = open(self.path, "rb")  # noqa: SIM115
            self.opened.pid = os.getpid()
        return self.opened.file


class PositionedRecords(Dataset):
    """The same records through one descriptor: ``os.pread`` takes no shared offset."""

    def __init__(self, path: Path) -> None:
        self.descriptor = os.open(path, os.O_RDONLY)  # closed when the process ends
        self.count = os.path.getsize(path) // RECORD_SIZE

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[int, int]:
        record = np.frombuffer(os.pread(self.descriptor, RECORD_SIZE, index * RECORD_SIZE), "<i8")
        return int(record[0]), int(record[1])


def right_records(dataset: Dataset, worker_type: str) -> int:
    """Records that came back right over two shuffled epochs on two workers."""
    loader = DataLoader(dataset, batch_size=50, shuffle=True, seed=0, num_workers=2,
                        worker_type=worker_type)
    right = 0
    for _epoch in range(2):
        for indices, squares in loader:  # each batch dropped before the next is taken
            right += int(np.sum(squares == indices * indices))
    loader.close()
    return right


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.bin"
        indices = np.arange(RECORDS, dtype="<i8")
        path.write_bytes(np.column_stack([indices, indices * indices]).tobytes())
        for worker_type in ("thread", "process"):
            right = right_records(Records(path), worker_type)
            print(f"{worker_type} workers, a handle each: {right} of {2 * RECORDS} records right")
            right = right_records(PositionedRecords(path), worker_type)
            print(f"{worker_type} workers, os.pread: {right} of {2 * RECORDS} records right")


if __name__ == "__main__":
    main()
