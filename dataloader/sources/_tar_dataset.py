"""``TarDataset``: webdataset-layout tar shards streamed as samples.

Each stream (one per loader worker) reads its own shards front to back:

    all shards --seeded permutation (seed, epoch)--> order
    order[rank::world_size]          -> this rank's shards
    rank's[worker::num_workers]      -> this worker's shards

and passes their samples through a seeded shuffle buffer (seed, epoch,
rank, worker). Memory is the buffer plus one member being read, whatever
the shard size.

Exact resume: an iterator's ``state_dict`` names the shard it reads, the
byte offset of the next sample in it, the buffered samples by location
(shard, offset) and the buffer's generator state; ``load_state_dict``
re-reads the buffered samples from those locations (one ranged read
each) and continues the shard at the offset. The state is small and
JSON-serialisable.

Elastic resume: an epoch stopped on N ranks continues on M with the
shards no stream started dealt to the new streams, and the rest of each
open shard and each buffered sample dealt as pieces
(``dataloader.sources._tar_work``, ``elastic_work``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from dataloader._datasets.dataset import IterableDataset
from dataloader._errors import ShardError
from dataloader.sources._limits import ShardLimits
from dataloader.sources._retry import Retry
from dataloader.sources._shards import ShardOptions, expand_shards, open_shard, shard_name
from dataloader.sources._tar import shard_samples
from dataloader.sources._tar_work import Read, TarWork, shard_order

__all__ = ["TarDataset"]

_ON_ERROR = ("raise", "skip")
# webdataset's basic decoders of small text members, by extension.
_INTEGERS = frozenset({"cls", "cls2", "class", "count", "index", "inx", "id"})
_TEXTS = frozenset({"txt", "text"})
_JSONS = frozenset({"json", "jsn"})


class TarDataset(IterableDataset[dict]):
    """Samples of tar shards in the webdataset layout, streamed.

    Members sharing a key (the name up to the first dot of its basename)
    form one sample, as webdataset groups them: ``{"__key__": "000123",
    "__url__": shard, "jpg": b"...", "cls": b"3"}`` with lowercased
    extensions. Iterated by a ``DataLoader`` with ``num_workers = n``, each
    worker streams every ``n``-th shard of its rank; :meth:`shard` splits
    the shards among ranks. The loader sets the epoch (:meth:`set_epoch`),
    which reseeds both shuffles, and resumes mid-epoch exactly through
    ``loader.state_dict()``.

    Parameters
    ----------
    shards : str, path or sequence of str
        Local paths, ``http(s)://`` URLs or object-store URLs (``s3://``,
        ``gs://``, ``az://``, ``file://``), or one brace pattern
        (``"train-{000000..000999}.tar"``).
    shuffle_buffer : int, default 0
        Samples held and drawn from at random; 0 keeps the shards' order.
    shuffle_shards : bool, default False
        Read the shards in a seeded random order, new every epoch.
    seed : int, default 0
        Seeds both shuffles; every rank must use the same.
    fields : sequence of str, optional
        Yield tuples of these members instead of dicts, as webdataset's
        ``to_tuple``: ``("jpg;png", "cls")`` gives ``(image bytes, class)``
        (``a;b`` takes the first member present). Class-like members
        (``cls``, ``id``, ``index``...) become ``int``, ``txt`` ``str`` and
        ``json`` parsed values; others stay ``bytes``. A native transform
        chain given to the loader then decodes and transforms the first
        field, as for ``ImageFolder``'s ``(bytes, class)`` items.
    on_error : {"raise", "skip"}, default "raise"
        A corrupt, truncated or unreadable shard raises (``ShardError``,
        a ``ValueError`` naming the shard and the byte offset, or the
        ``OSError`` of the read); with ``"skip"`` the rest of that shard
        is passed over and counted in :meth:`stats`.
    headers, timeout, retry, store_options
        For remote shards: HTTP request headers (sent to the shard's origin
        only, as :class:`HttpDataset` sends them) and seconds per attempt
        (connecting, and each wait for bytes), which failures are retried
        (:class:`Retry`), and the options of ``obstore.store.from_url``
        (``endpoint``, ``region``, ...).
    limits : ShardLimits, default ShardLimits()
        Bounds on what a shard may make the reader do: the largest member
        and metadata headers held in memory, and the slowest transfer
        accepted (:class:`ShardLimits`; the defaults are far beyond real
        shards).

    Examples
    --------
    >>> import io, pathlib, tarfile, tempfile
    >>> from dataloader import DataLoader
    >>> from dataloader.sources import TarDataset
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "shard-0.tar"
    >>> with tarfile.open(path, "w") as tar:
    ...     for key, label in [("a", b"0"), ("b", b"1")]:
    ...         for extension, data in [("txt", key.encode()), ("cls", label)]:
    ...             info = tarfile.TarInfo(f"{key}.{extension}")
    ...             info.size = len(data)
    ...             tar.addfile(info, io.BytesIO(data))
    >>> [(s["__key__"], s["txt"], s["cls"]) for s in TarDataset(str(path))]
    [('a', b'a', b'0'), ('b', b'b', b'1')]
    >>> loader = DataLoader(TarDataset(str(path)), batch_size=None,
    ...                     transform=lambda position, sample: int(sample["cls"]))
    >>> [int(label) for label in loader]
    [0, 1]
    """

    # Read by native code, in parallel on threads: worker_type="auto" keeps threads.
    native_loading = True

    def __init__(
        self,
        shards: str | Iterable[str],
        *,
        shuffle_buffer: int = 0,
        shuffle_shards: bool = False,
        seed: int = 0,
        fields: Sequence[str] | None = None,
        on_error: str = "raise",
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        retry: Retry = Retry(),  # noqa: B008 -- frozen, so sharing it is safe
        store_options: Mapping[str, Any] | None = None,
        limits: ShardLimits | None = None,
    ) -> None:
        if not isinstance(shuffle_buffer, int) or isinstance(shuffle_buffer, bool) \
                or shuffle_buffer < 0:
            raise ValueError(
                "shuffle_buffer should be a non-negative int, "
                f"got shuffle_buffer={shuffle_buffer!r}"
            )
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed should be a non-negative int, got seed={seed!r}")
        if on_error not in _ON_ERROR:
            raise ValueError(f"on_error should be 'raise' or 'skip', got on_error={on_error!r}")
        self.shards = expand_shards(shards)
        self.shuffle_buffer = shuffle_buffer
        self.shuffle_shards = bool(shuffle_shards)
        self.seed = int(seed)
        self.on_error = on_error
        self.fields = _check_fields(fields)
        self.rank = 0
        self.world_size = 1
        self.epoch = 0
        # (epoch, work): what remained of that epoch when a job on other ranks (or
        # workers) stopped in its middle, dealt to this job's streams
        # (dataloader._loading.elastic).
        self.elastic_work: tuple[int, TarWork] | None = None
        self._options = ShardOptions(headers, timeout, retry, store_options, limits)
        self._counts = _Counts()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({len(self.shards)} shards, "
            f"shuffle_buffer={self.shuffle_buffer}, rank={self.rank}/{self.world_size})"
        )

    def shard(self, rank: int | None = None, world_size: int | None = None) -> TarDataset:
        """This rank's share: every ``world_size``-th shard of the epoch's order, from ``rank``.

        Shards, not samples, are split, so no rank reads another's data;
        ``rank`` and ``world_size`` default to torch.distributed's, else to
        the ``RANK`` and ``WORLD_SIZE`` environment variables. Ranks with
        fewer shards than workers leave workers idle. An epoch stopped on
        some ranks resumes on any number (``merge_states``).

        Examples
        --------
        >>> from dataloader.sources import TarDataset
        >>> half = TarDataset("s-{0..3}.tar").shard(rank=1, world_size=2)
        >>> half.rank, half.world_size
        (1, 2)
        """
        from dataloader._sampling.distributed import world

        world_size, rank = world(world_size, rank)
        if len(self.shards) < world_size:
            raise ValueError(
                f"{len(self.shards)} shard(s) cannot be split among world_size={world_size} ranks"
            )
        share = object.__new__(type(self))
        share.__dict__.update(self.__dict__)
        share.rank, share.world_size = int(rank), int(world_size)
        share._counts = _Counts()
        return share

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose shuffles the next iterators draw; a loader sets it itself.

        Examples
        --------
        >>> from dataloader.sources import TarDataset
        >>> dataset = TarDataset("s.tar")
        >>> dataset.set_epoch(3)
        >>> dataset.epoch
        3
        """
        self.epoch = int(epoch)

    def stats(self) -> dict[str, int]:
        """Counts over this dataset's iterators: samples, shards read and shards skipped.

        Examples
        --------
        >>> from dataloader.sources import TarDataset
        >>> TarDataset("s.tar").stats()
        {'samples': 0, 'shards': 0, 'skipped_shards': 0}
        """
        return self._counts.snapshot()

    def __iter__(self) -> _TarIterator:
        from dataloader._datasets.worker_info import get_worker_info

        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        return _TarIterator(self, worker, workers)

    def shards_of(self, epoch: int, worker: int, workers: int) -> list[str]:
        """The shards one stream reads in an epoch, in order (see the module docstring).

        Examples
        --------
        >>> from dataloader.sources import TarDataset
        >>> TarDataset("s-{0..5}.tar").shard(1, 2).shards_of(0, worker=0, workers=2)
        ['s-1.tar', 's-5.tar']
        """
        return [self.shards[shard] for shard, _, _ in self.reads_of(epoch, worker, workers)]

    def reads_of(self, epoch: int, worker: int, workers: int) -> list[Read]:
        """What one stream reads in an epoch: ``(shard index, offset, one sample only)``,
        whole shards but in an epoch dealt again after an interruption
        (``dataloader.sources._tar_work``).

        Examples
        --------
        >>> from dataloader.sources import TarDataset
        >>> TarDataset("s-{0..5}.tar").shard(1, 2).reads_of(0, worker=0, workers=2)
        [(1, 0, False), (5, 0, False)]
        """
        order = shard_order(len(self.shards), self.shuffle_shards, self.seed, epoch)
        owner, owners = self.rank + self.world_size * worker, self.world_size * workers
        if self.elastic_work is not None and self.elastic_work[0] == epoch:
            return self.elastic_work[1].reads(order, owner, owners)
        return [(int(shard), 0, False) for shard in order[owner::owners].tolist()]


def _check_fields(fields: Any) -> tuple[tuple[str, ...], ...] | None:
    if fields is None:
        return None
    if isinstance(fields, str) or not all(isinstance(field, str) and field for field in fields):
        raise TypeError(f"fields should be a sequence of member names, got fields={fields!r}")
    return tuple(tuple(field.lower().split(";")) for field in fields)


def _decoded(extension: str, data: bytes) -> Any:
    if extension in _INTEGERS:
        return int(data)
    if extension in _TEXTS:
        return data.decode()
    if extension in _JSONS:
        return json.loads(data)
    return data


def as_tuple(sample: dict, fields: tuple[tuple[str, ...], ...]) -> tuple:
    """The sample's ``fields``, decoded (see ``TarDataset``'s ``fields``)."""
    values = []
    for choices in fields:
        for extension in choices:
            if extension in sample:
                values.append(_decoded(extension, sample[extension]))
                break
        else:
            raise ValueError(
                f"{sample['__url__']}: sample {sample['__key__']!r} has no member "
                f"{';'.join(choices)!r} (it has {sorted(k for k in sample if k[:2] != '__')})"
            )
    return tuple(values)


class _Counts:
    """Counters shared by a dataset's iterators (one per worker thread).

    Samples are counted by each live iterator in its own tally, written by
    that iterator's thread only, so that counting one costs no lock; a
    snapshot adds the tallies up, and an iterator's tally is folded into
    the totals when it is collected.
    """

    __slots__ = ("_lock", "_tallies", "_values")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = {"samples": 0, "shards": 0, "skipped_shards": 0}
        self._tallies: list[list[int]] = []

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._values[name] += n

    def tally(self) -> list[int]:
        """A new live tally of samples, ``[count]``."""
        tally = [0]
        with self._lock:
            self._tallies.append(tally)
        return tally

    def retire(self, tally: list[int]) -> None:
        """Fold a tally into the totals; it is no longer live."""
        with self._lock:
            self._tallies = [live for live in self._tallies if live is not tally]
            self._values["samples"] += tally[0]

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            values = dict(self._values)
            values["samples"] += sum(tally[0] for tally in self._tallies)
        return values


class _TarIterator:
    """One stream of a ``TarDataset``; its position is ``state_dict()``."""

    def __init__(self, dataset: TarDataset, worker: int, workers: int) -> None:
        self._dataset = dataset
        self._worker = worker
        self._workers = workers
        # This iterator's count of samples, in the dataset's stats (see _Counts).
        self._tally = dataset._counts.tally()
        self._start(dataset.epoch)

    def _start(self, epoch: int) -> None:
        dataset = self._dataset
        self._epoch = epoch
        self._reads = dataset.reads_of(epoch, self._worker, self._workers)
        self._rng = np.random.default_rng([dataset.seed, epoch, dataset.rank, self._worker, 1])
        self._position = 0  # index in self._reads of the shard being read
        # Where the next sample of that shard starts.
        self._offset = self._reads[0][1] if self._reads else 0
        self._samples: Any = None  # the open shard's sample generator
        self._stream: Any = None
        # (sample, read position, offset): the samples drawn from at random.
        self._buffer: list[tuple[dict, int, int]] = []

    def __iter__(self) -> _TarIterator:
        return self

    def __next__(self) -> dict:
        dataset = self._dataset
        capacity = dataset.shuffle_buffer
        if capacity == 0:
            entry = self._read()
            if entry is None:
                raise StopIteration
        else:
            buffer = self._buffer
            while len(buffer) < capacity:
                found = self._read()
                if found is None:
                    break
                buffer.append(found)
            if not buffer:
                raise StopIteration
            j = int(self._rng.integers(len(buffer)))
            buffer[j], buffer[-1] = buffer[-1], buffer[j]
            entry = buffer.pop()
        self._tally[0] += 1
        fields = dataset.fields
        # A dict, or a tuple of its fields (typed as the dataset's dict items).
        item: Any = entry[0] if fields is None else as_tuple(entry[0], fields)
        return item

    def _read(self) -> tuple[dict, int, int] | None:
        """The next sample of this stream's shards, with its location; ``None`` at the end."""
        while self._position < len(self._reads):
            position = self._position
            try:
                samples = self._samples
                if samples is None:
                    samples = self._open(position, self._offset)
                found = next(samples, None)
            except (ShardError, OSError):
                self._close()
                if self._dataset.on_error == "raise":
                    raise
                self._dataset._counts.add("skipped_shards")
                self._next_shard()
                continue
            if found is None:
                self._close()
                self._dataset._counts.add("shards")
                self._next_shard()
                continue
            sample, start, resume = found
            # The shard's last sample, or a read of one sample: the state names the next.
            if resume is None or self._reads[position][2]:
                self._close()
                if not self._reads[position][2]:
                    self._dataset._counts.add("shards")
                self._next_shard()
            else:
                self._offset = resume
            return sample, position, start
        return None

    def _open(self, position: int, offset: int) -> Any:
        location = self._dataset.shards[self._reads[position][0]]
        name = shard_name(location)
        self._stream = open_shard(location, offset, self._dataset._options)
        self._samples = shard_samples(self._stream, name, offset, self._dataset._options.limits)
        return self._samples

    def _next_shard(self) -> None:
        self._position += 1
        self._offset = self._reads[self._position][1] if self._position < len(self._reads) else 0

    def _close(self) -> None:
        self._samples = None
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self._epoch,
            "shard": self._position,
            "offset": self._offset,
            "buffer": [[position, start] for _, position, start in self._buffer],
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue where ``state`` was saved: re-read the buffered samples, then the shard."""
        self._close()
        self._start(int(state["epoch"]))
        buffer = []
        for position, start in state["buffer"]:
            location = self._dataset.shards[self._reads[position][0]]
            name = shard_name(location)
            stream = open_shard(location, start, self._dataset._options)
            try:
                sample, _, _ = next(
                    shard_samples(stream, name, start, self._dataset._options.limits))
            finally:
                stream.close()
            buffer.append((sample, position, start))
        self._buffer = buffer
        self._rng.bit_generator.state = state["rng"]
        self._position = int(state["shard"])
        self._offset = int(state["offset"])

    def __del__(self) -> None:
        tally = getattr(self, "_tally", None)
        if tally is not None:
            self._dataset._counts.retire(tally)
        stream = getattr(self, "_stream", None)
        if stream is not None:
            stream.close()
