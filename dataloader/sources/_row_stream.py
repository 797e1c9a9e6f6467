"""``RowGroupStream``: a columnar dataset's rows streamed a group at a time.

Each stream (one per loader worker) reads its own groups front to back:

    all groups --seeded permutation (seed, epoch)--> order
    order[rank::world_size]        -> this rank's groups
    rank's[worker::num_workers]    -> this worker's groups

and, shuffled, yields each group's rows in a seeded permutation of their
own (seed, epoch, group). Every row comes exactly once an epoch, and a
position is three numbers (epoch, group, row): ``load_state_dict``
continues from it by drawing the same permutations again, with nothing
read twice. Memory is one decoded group per stream.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from dataloader._datasets.dataset import IterableDataset

if TYPE_CHECKING:
    from dataloader.sources._columnar import ColumnarDataset, GroupColumns

__all__ = ["RowGroupStream"]

# Rows made at once from a group's columns: one numpy gather per column each.
ROWS_AT_ONCE = 256


class RowGroupStream(IterableDataset[dict]):
    """The rows of a ``ParquetDataset`` or ``ArrowDataset``, streamed group by group.

    Made by the dataset's ``stream()``. Iterated by a ``DataLoader`` with
    ``num_workers = n``, each worker reads every ``n``-th group of its
    rank's share; :meth:`shard` splits the groups among ranks. With
    ``shuffle=True`` the groups come in a seeded random order and the rows
    of each in a seeded random order, both new every epoch (the loader
    sets it, :meth:`set_epoch`). A loader's ``state_dict`` resumes the
    stream exactly mid-epoch. Its ``len`` is the rows of this rank's share
    in the epoch, so that ``DataLoader(..., equal_batches=True)`` gives
    every rank the same number of batches.

    Parameters
    ----------
    dataset : ParquetDataset or ArrowDataset
        The rows, with their ``columns``.
    shuffle : bool, default False
        Shuffle the groups' order and the rows within each group.
    seed : int, default 0
        Seeds both shuffles; every rank must use the same.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> from dataloader import DataLoader
    >>> from dataloader.sources import ParquetDataset
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "n.parquet"
    >>> pq.write_table(pa.table({"n": range(8)}), path, row_group_size=2)
    >>> stream = ParquetDataset(path).stream(shuffle=True, seed=1)
    >>> rows = [int(row["n"]) for row in stream]
    >>> sorted(rows) == list(range(8)), rows != list(range(8))
    (True, True)
    >>> [int(row["n"]) for row in stream.shard(rank=1, world_size=2)]
    [2, 3, 6, 7]
    >>> loader = DataLoader(stream, batch_size=4)
    >>> sorted(n for batch in loader for n in batch["n"].tolist())
    [0, 1, 2, 3, 4, 5, 6, 7]
    """

    # pyarrow reads and decodes without the interpreter: worker_type="auto" keeps threads.
    native_loading = True

    def __init__(self, dataset: ColumnarDataset, *, shuffle: bool = False, seed: int = 0) -> None:
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed should be a non-negative int, got seed={seed!r}")
        self.dataset = dataset
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.rank = 0
        self.world_size = 1
        self.epoch = 0

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.dataset!r}, shuffle={self.shuffle}, "
                f"rank={self.rank}/{self.world_size})")

    def shard(self, rank: int | None = None, world_size: int | None = None) -> RowGroupStream:
        """This rank's share: every ``world_size``-th group of the epoch's order, from ``rank``.

        Groups, not rows, are split, so no two ranks read the same group;
        ``rank`` and ``world_size`` default to torch.distributed's, else to
        the ``RANK`` and ``WORLD_SIZE`` environment variables.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> from dataloader.sources import ParquetDataset
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "n.parquet"
        >>> pq.write_table(pa.table({"n": range(6)}), path, row_group_size=2)
        >>> half = ParquetDataset(path).stream().shard(rank=1, world_size=2)
        >>> half.rank, half.world_size, [int(row["n"]) for row in half]
        (1, 2, [2, 3])
        """
        from dataloader._sampling.distributed import world

        world_size, rank = world(world_size, rank)
        groups = len(self.dataset.groups)
        if groups < world_size:
            raise ValueError(
                f"{groups} group(s) cannot be split among world_size={world_size} ranks")
        share = object.__new__(type(self))
        share.__dict__.update(self.__dict__)
        share.rank, share.world_size = int(rank), int(world_size)
        return share

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose shuffles the next iterators draw; a loader sets it itself.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> from dataloader.sources import ParquetDataset
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "n.parquet"
        >>> pq.write_table(pa.table({"n": range(2)}), path)
        >>> stream = ParquetDataset(path).stream()
        >>> stream.set_epoch(3)
        >>> stream.epoch
        3
        """
        self.epoch = int(epoch)

    def groups_of(self, epoch: int, worker: int, workers: int,
                  rank: int | None = None) -> list[int]:
        """The groups one stream reads in an epoch, in order (see the module docstring);
        of this rank's share, or of ``rank``'s."""
        count = len(self.dataset.groups)
        order = np.arange(count)
        if self.shuffle:
            order = np.random.default_rng([self.seed, epoch]).permutation(count)
        rank = self.rank if rank is None else rank
        return order[rank::self.world_size][worker::workers].tolist()

    def __len__(self) -> int:
        """The rows this rank reads in the current epoch (:meth:`set_epoch`), every worker's.

        Groups, not rows, are split among ranks, so ranks' counts differ by
        the sizes of their groups, and, shuffled, from epoch to epoch. A
        loader with ``equal_batches=True`` stops every rank at the smallest
        rank's batch count (:meth:`stream_length`).

        Examples
        --------
        >>> import pathlib, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> from dataloader.sources import ParquetDataset
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "n.parquet"
        >>> pq.write_table(pa.table({"n": range(5)}), path, row_group_size=2)
        >>> stream = ParquetDataset(path).stream()
        >>> len(stream), [len(stream.shard(rank, 2)) for rank in (0, 1)]
        (5, [3, 2])
        """
        return self.stream_length(0, 1)

    def stream_length(self, worker: int, workers: int, rank: int | None = None) -> int:
        """The rows worker ``worker`` of ``workers`` reads on this rank (or ``rank``) in
        the current epoch.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> from dataloader.sources import ParquetDataset
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "n.parquet"
        >>> pq.write_table(pa.table({"n": range(5)}), path, row_group_size=2)
        >>> [ParquetDataset(path).stream().stream_length(w, 2) for w in (0, 1)]
        [3, 2]
        """
        rows = np.diff(self.dataset.group_ends, prepend=0)
        return int(rows[self.groups_of(self.epoch, worker, workers, rank)].sum())

    def rows_of(self, epoch: int, group: int) -> np.ndarray:
        """The order in which a group's rows are yielded in an epoch."""
        count = self.dataset.group_rows(group)
        if not self.shuffle:
            return np.arange(count)
        return np.random.default_rng([self.seed, epoch, group]).permutation(count)

    def __iter__(self) -> _RowGroupIterator:
        from dataloader._datasets.worker_info import get_worker_info

        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        return _RowGroupIterator(self, worker, workers)


class _RowGroupIterator:
    """One stream of a ``RowGroupStream``; its position is ``state_dict()``."""

    def __init__(self, stream: RowGroupStream, worker: int, workers: int) -> None:
        self._stream = stream
        self._worker = worker
        self._workers = workers
        self._start(stream.epoch, 0, 0)

    def _start(self, epoch: int, position: int, row: int) -> None:
        self._epoch = epoch
        self._groups = self._stream.groups_of(epoch, self._worker, self._workers)
        self._position = position  # index in self._groups of the group being read
        self._row = row  # rows of that group already yielded
        # The open group's columns and row order, read when its first row is taken.
        self._columns: GroupColumns | None = None
        self._order = np.empty(0, np.int64)
        # The next rows of the group, made a chunk at a time (self._row counts them once taken).
        self._ready: deque[dict[str, Any]] = deque()

    def __iter__(self) -> _RowGroupIterator:
        return self

    def __next__(self) -> dict[str, Any]:
        while self._position < len(self._groups):
            group = self._groups[self._position]
            if self._columns is None:
                self._columns = self._stream.dataset.read_columns(group)
                self._order = self._stream.rows_of(self._epoch, group)
            if not self._ready and self._row < len(self._order):
                chunk = self._order[self._row:self._row + ROWS_AT_ONCE].tolist()
                self._ready = deque(self._columns.rows(chunk))
            if self._ready:
                self._row += 1
                return self._ready.popleft()
            self._position, self._row, self._columns = self._position + 1, 0, None
        raise StopIteration

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self._epoch, "group": self._position, "row": self._row}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue where ``state`` was saved: the same group, past the rows already yielded."""
        self._start(int(state["epoch"]), int(state["group"]), int(state["row"]))
