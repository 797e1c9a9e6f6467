"""Open files a dataset holds, which its workers would share.

A dataset that opens a file in ``__init__`` and reads records with
``seek`` then ``read`` gets wrong records, without an error, when its
workers interleave those calls: worker threads share the file object, and
worker processes started by ``fork`` share its offset. When a loader whose
fetches run concurrently starts its first epoch, ``open_files`` looks for
such files, and the loader warns once. Its epochs on worker threads then
fetch through a ``SerialisedDataset``, one fetch at a time, so the records
are right; worker processes cannot be serialised, and the warning's advice
is the remedy there (see ``docs/execution.md``, "Open files and workers").
"""

from __future__ import annotations

import io
import os
import sys
import threading
import weakref
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

from dataloader._datasets.hooks import batch_fetch
from dataloader._errors import warn_at_caller

__all__ = ["SerialisedDataset", "guarded_dataset", "open_files"]

# How far ``open_files`` looks: datasets held by datasets (a Subset of a
# ConcatDataset of yours is 3 deep), and the first items of each list,
# tuple or dict an attribute holds (a dataset holding files holds them early).
MAX_DEPTH = 4
MAX_CONTAINER_ITEMS = 1000
# Files a warning names one by one; it counts the rest.
NAMED_FILES = 3

_REMEDY = (
    "or read with os.pread or numpy.memmap, which take no shared offset. "
    'See docs/execution.md, "Open files and workers"'
)
_ON_THREADS = (
    "The loader's worker threads share the dataset, so one worker's seek could move the "
    "offset under another's read: they call its __getitem__ (and __getitems__) one at a "
    "time instead, which keeps every record right but serialises loading. To load in "
    "parallel, give each worker its own handle, opened on first use in __getitem__ and kept "
    "per (os.getpid(), threading.get_ident()), "
)
_ON_PROCESSES = (
    "Worker processes started by fork (the default) share an open file's offset with the "
    "parent and with each other, so one worker's seek moves it under another's read and "
    "records come back wrong, without an error. Open the file in each worker instead: on "
    "first use in __getitem__, one handle per process (keep os.getpid() beside it, and "
    "threading.get_ident() with item_concurrency > 1), or in worker_init_fn through "
    "get_worker_info().dataset, the process's own copy; "
)


def open_files(dataset: Any) -> list[str]:
    """Where ``dataset`` holds an open file: ``"dataset.f holds an open file ('path')"`` each.

    The look is bounded: the dataset's attributes, one level into the
    lists, tuples and dicts among them, and the same in the datasets they
    hold (``Subset.dataset``, ``ConcatDataset.datasets``, a wrapper of
    yours), at most ``MAX_DEPTH`` datasets deep; never into other objects.
    An open file is an ``io`` object not closed, or, when h5py is imported
    (it is never imported here), an h5py file, group or dataset still open.

    Examples
    --------
    >>> import io
    >>> class Records:
    ...     def __init__(self):
    ...         self.shards = [io.BytesIO(b"records"), io.BytesIO()]
    ...         self.shards[1].close()
    ...     def __getitem__(self, index): ...
    ...     def __len__(self): ...
    >>> open_files(Records())
    ['dataset.shards[0] holds an open file (BytesIO)']
    >>> from dataloader import Subset
    >>> open_files(Subset(Records(), [0]))
    ['dataset.dataset.shards[0] holds an open file (BytesIO)']
    """
    found: list[str] = []
    _look_into(dataset, "dataset", 1, found, {id(dataset)})
    return found


def _look_into(dataset: Any, path: str, depth: int, found: list[str], seen: set[int]) -> None:
    """Append to ``found`` the open files among ``dataset``'s members, then in its datasets."""
    for name, value in _members(dataset, path):
        described = _described_if_open(value)
        if described is not None:
            found.append(f"{name} holds {described}")
        elif depth < MAX_DEPTH and id(value) not in seen and _is_dataset(value):
            seen.add(id(value))
            _look_into(value, name, depth + 1, found, seen)


def _members(dataset: Any, path: str) -> Iterator[tuple[str, Any]]:
    """The dataset's attributes, each with the first items of the list, tuple or dict it is."""
    for attribute, value in _attributes(dataset):
        name = f"{path}.{attribute}"
        yield name, value
        # Copied in one step: a worker thread may be changing the container.
        if isinstance(value, (list, tuple)):
            items: Sequence[Any] = tuple(islice(value, MAX_CONTAINER_ITEMS))
            yield from ((f"{name}[{index}]", item) for index, item in enumerate(items))
        elif isinstance(value, dict):
            pairs = tuple(islice(value.items(), MAX_CONTAINER_ITEMS))
            yield from ((f"{name}[{key!r}]", item) for key, item in pairs)


def _attributes(obj: Any) -> Iterator[tuple[str, Any]]:
    """``vars(obj)``'s items, then the values of the ``__slots__`` set on ``obj``."""
    yield from tuple(getattr(obj, "__dict__", {}).items())
    for cls in type(obj).__mro__:
        slots = getattr(cls, "__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                yield slot, getattr(obj, slot)


def _is_dataset(value: Any) -> bool:
    """Whether ``open_files`` looks into ``value``: a map-style dataset with attributes."""
    kind = type(value)
    has_attributes = hasattr(value, "__dict__") or hasattr(kind, "__slots__")
    return has_attributes and hasattr(kind, "__getitem__") and hasattr(kind, "__len__")


def _described_if_open(value: Any) -> str | None:
    """``"an open file ('path')"`` when ``value`` is an open file, else ``None``."""
    if isinstance(value, io.IOBase):
        try:
            if value.closed:
                return None
        except ValueError:  # a wrapper detached from its file
            return None
        name = getattr(value, "name", None)
        shown = repr(name) if isinstance(name, (str, bytes)) else type(value).__name__
        return f"an open file ({shown})"
    h5py = sys.modules.get("h5py")
    if h5py is not None and isinstance(value, (h5py.Group, h5py.Dataset)) and value:
        return f"an open HDF5 file ({value.file.filename!r})"
    return None


class SerialisedDataset:
    """A dataset whose fetches run one at a time: ``__getitem__`` and ``__getitems__`` under a lock.

    What an epoch on worker threads fetches from when its dataset holds an
    open file (``guarded_dataset``). The lock is the loader's, shared by all
    its epochs: the batches of a dropped epoch still loading do not fetch
    beside the next epoch's. ``__getitems__`` is ``None`` when the dataset
    has none, as the loader's recipe expects (``fetch.dataset_recipe``).

    Examples
    --------
    >>> import threading
    >>> serialised = SerialisedDataset(["a", "b", "c"], threading.Lock())
    >>> serialised[1], len(serialised), serialised.__getitems__ is None
    ('b', 3, True)
    """

    def __init__(self, dataset: Any, lock: threading.Lock) -> None:
        self._getitem = dataset.__getitem__
        self._length = dataset.__len__
        self._lock = lock
        getitems = batch_fetch(dataset)
        if getitems is not None:
            self._getitems = getitems
        else:
            self.__getitems__ = None  # type: ignore[method-assign, assignment]

    def __getitem__(self, index: Any) -> Any:
        with self._lock:
            return self._getitem(index)

    def __getitems__(self, indices: list[int]) -> Any:
        with self._lock:
            return self._getitems(indices)

    def __len__(self) -> int:
        return self._length()


class _Checked:
    """What ``open_files`` found for one loader, and the lock its epochs on threads share."""

    __slots__ = ("files", "lock")

    def __init__(self, files: list[str]) -> None:
        self.files = files
        self.lock = threading.Lock()


# Each loader's look, made once. A child of fork() starts afresh: a lock a
# parent's thread held when it forked would stay held in the child.
_checked: weakref.WeakKeyDictionary[Any, _Checked] = weakref.WeakKeyDictionary()
_checked_lock = threading.Lock()


def _forget_after_fork() -> None:
    global _checked, _checked_lock
    _checked, _checked_lock = weakref.WeakKeyDictionary(), threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def guarded_dataset(loader: Any, processes: bool) -> Any:
    """What an epoch of ``loader`` fetches from: its dataset, serialised when it holds open files.

    A loader whose fetches run concurrently (``num_workers > 0``, or
    ``item_concurrency > 1``) looks for open files in its dataset at its
    first such epoch (``open_files``), and warns once when it finds any.
    Its epochs on threads then fetch through a ``SerialisedDataset``; its
    epochs on worker ``processes`` fetch from the dataset (the warning says
    how to open the file in each worker). Called by ``DataLoader``'s
    ``_plan_epoch``, for map-style epochs; the warning points at the user's
    ``iter(loader)``.

    Examples
    --------
    >>> import io, warnings
    >>> from dataloader import DataLoader
    >>> class Records:
    ...     def __init__(self):
    ...         self.file = io.BytesIO(bytes(range(8)))
    ...     def __len__(self):
    ...         return 8
    ...     def __getitem__(self, index):
    ...         self.file.seek(index)
    ...         return self.file.read(1)[0]
    >>> loader = DataLoader(Records(), batch_size=4, num_workers=2, worker_type="thread")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     source = guarded_dataset(loader, processes=False)
    ...     again = guarded_dataset(loader, processes=False)  # the next epoch's
    >>> [str(warning.message)[:46] for warning in caught]  # once per loader
    ['dataset.file holds an open file (BytesIO). The']
    >>> type(source).__name__, [source[index] for index in range(4)]
    ('SerialisedDataset', [0, 1, 2, 3])
    """
    dataset = loader.dataset
    if loader.num_workers == 0 and loader.item_concurrency == 1:
        return dataset
    with _checked_lock:
        checked = _checked.get(loader)
        first = checked is None
        if checked is None:
            checked = _checked[loader] = _Checked(open_files(dataset))
    if first and checked.files:
        warn_at_caller(_warning(checked.files, processes))
    if processes or not checked.files:
        return dataset
    return SerialisedDataset(dataset, checked.lock)


def _warning(files: list[str], processes: bool) -> str:
    """The message naming ``files`` and what to do: for worker processes, or threads."""
    named = ", ".join(files[:NAMED_FILES])
    if len(files) > NAMED_FILES:
        named += f", and {len(files) - NAMED_FILES} more"
    return f"{named}. {_ON_PROCESSES if processes else _ON_THREADS}{_REMEDY}"
