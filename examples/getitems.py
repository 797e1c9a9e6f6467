"""``__getitems__``: a dataset that loads a whole batch in one call.

When a dataset defines ``__getitems__(indices)``, the loader calls it once
per batch instead of ``__getitem__`` once per item (as torch does): one
fancy-indexing read of a memory-mapped array here, one query or one ranged
read of a remote file elsewhere.
"""

import tempfile
import threading
from pathlib import Path

import numpy as np

from dataloader import DataLoader


class Rows:
    """Rows of a feature matrix stored in a .npy file, read batch by batch."""

    def __init__(self, path: Path) -> None:
        self.rows = np.load(path, mmap_mode="r")
        self.batch_calls = 0
        # Worker threads share this object: the counter needs a lock (``+=``
        # is a read and a write, which free-threaded CPython runs in parallel).
        self._count_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> np.ndarray:
        return np.asarray(self.rows[index])

    def __getitems__(self, indices: list[int]) -> list[np.ndarray]:
        with self._count_lock:
            self.batch_calls += 1
        block = self.rows[np.sort(indices)]             # one sorted read of the file
        order = np.argsort(np.argsort(indices))         # back to the sampler's order
        return list(block[order])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "features.npy"
        np.save(path, np.arange(10_000 * 8, dtype=np.float32).reshape(10_000, 8))
        dataset = Rows(path)
        # numpy reads the rows without the GIL, so threads load in parallel;
        # they also share the dataset, whose call counter is printed below.
        loader = DataLoader(dataset, batch_size=500, shuffle=True, num_workers=2, seed=0,
                            worker_type="thread")
        total = 0.0
        for batch in loader:
            assert batch.shape[1:] == (8,) and np.all(batch[:, 0] % 8 == 0)
            total += float(batch[:, 0].sum())
        loader.close()
        print(f"{len(loader)} batches from {dataset.batch_calls} __getitems__ calls")
        print(f"sum of first column: {total:.0f}")


if __name__ == "__main__":
    main()
