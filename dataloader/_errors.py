"""The library's own exceptions, in one place.

Bad arguments and bad input raise the built-in types a torch user already
catches (``TypeError``, ``ValueError``, ``IndexError``, ``OSError`` and
its subclasses), with a message naming what was wrong. A few situations
have a class of their own, each a subclass of the built-in type it refines,
so that code catching the built-in type keeps working; where torch raises
another type than Python's convention would, the class is both, so that
code written for either catches it::

    RuntimeError
    ├── EpochClosedError    the loader was closed while a batch was loading
    ├── BatchTimeoutError   a batch took longer than ``timeout`` (also a TimeoutError)
    └── WorkerDied          a worker process ended while the loader needed it
    Exception
    ├── RemoteTraceback     the traceback of an error raised in a worker process, as the
    │                       ``__cause__`` of that error re-raised in the consumer
    ├── UsageError          the command line cannot be acted on as written (exit status 2)
    └── CommandError        a command's work failed (exit status 1)
    ValueError
    ├── ShardError          a tar shard is corrupt or truncated (url, offset)
    └── DatasetValueError   a dataset utility's bad argument (also an AssertionError)
    TypeError
    └── DatasetTypeError    a dataset of the wrong style (also an AssertionError)

An error raised while loading a batch is the dataset's or the transform's
own exception, re-raised from that batch's ``next()`` with a note naming
the batch and the item. The same facts travel as data: the error's
``dataloader_context`` attribute is a :class:`LoadingContext` (which batch,
which indices, which item, which worker or stream), set by
:func:`add_context` together with the note, so that code handling the
error (the command line) reads fields instead of parsing the note.
"""

from __future__ import annotations

import difflib
import os
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "BatchTimeoutError", "CommandError", "DatasetTypeError", "DatasetValueError",
    "EpochClosedError", "LoadingContext", "RemoteTraceback", "ShardError", "UsageError",
    "WorkerDied", "add_context", "check_same_process", "context_of", "did_you_mean",
    "warn_at_caller",
]

# The stages an error can be raised in, as ``LoadingContext.stage`` names them.
CHECK, BATCH, ITEM, COLLATE = "check", "batch", "item", "collate"
STREAM_START, STREAM_ITERATOR, STREAM_BATCH = "stream start", "stream iterator", "stream batch"


class EpochClosedError(RuntimeError):
    """The loader was closed while this batch was loading.

    Examples
    --------
    >>> from dataloader._errors import EpochClosedError
    >>> issubclass(EpochClosedError, RuntimeError)
    True
    """


class BatchTimeoutError(RuntimeError, TimeoutError):
    """A batch took longer than the loader's ``timeout`` to arrive.

    torch raises ``RuntimeError`` here, and Python's convention is
    ``TimeoutError``: this is both, so a handler written for either catches it.

    Examples
    --------
    >>> from dataloader._errors import BatchTimeoutError
    >>> issubclass(BatchTimeoutError, RuntimeError), issubclass(BatchTimeoutError, TimeoutError)
    (True, True)
    """


class WorkerDied(RuntimeError):
    """A worker process ended (killed, crashed, exited) while the loader still needed it.

    ``worker_id`` says which; the message says how it ended (the signal, or
    its exit code) and which batch was loading.

    Examples
    --------
    >>> from dataloader._errors import WorkerDied
    >>> error = WorkerDied("DataLoader worker 1 (pid 42) was killed by signal 9 (SIGKILL)", 1)
    >>> isinstance(error, RuntimeError), error.worker_id
    (True, 1)
    """

    def __init__(self, message: str, worker_id: int) -> None:
        super().__init__(message)
        self.worker_id = worker_id


class RemoteTraceback(Exception):
    """The traceback of an error raised in a worker process, as its text.

    The error itself is re-raised in the consumer with this as its
    ``__cause__``, so the worker's traceback is printed above the
    consumer's.

    Examples
    --------
    >>> from dataloader._errors import RemoteTraceback
    >>> str(RemoteTraceback("Traceback (most recent call last): ..."))
    'Traceback (most recent call last): ...'
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


class UsageError(Exception):
    """The command line cannot be acted on as written (exit status 2).

    Examples
    --------
    >>> from dataloader._errors import UsageError
    >>> str(UsageError("--out must name a .png file"))
    '--out must name a .png file'
    """


class CommandError(Exception):
    """The work failed (exit status 1).

    Examples
    --------
    >>> from dataloader._errors import CommandError
    >>> str(CommandError("no images in train/"))
    'no images in train/'
    """


class DatasetValueError(ValueError, AssertionError):
    """A bad argument to a dataset utility (``TensorDataset``'s tensors of different
    lengths, no datasets for ``ConcatDataset``), which torch checks by assertion.

    Examples
    --------
    >>> from dataloader import TensorDataset
    >>> import numpy as np
    >>> try:
    ...     TensorDataset(np.zeros(3), np.zeros(4))
    ... except AssertionError as error:  # torch's type; ValueError works too
    ...     print(error)
    Size mismatch between tensors: first dimensions [3, 4]
    """


class DatasetTypeError(TypeError, AssertionError):
    """A dataset of the wrong style for a dataset utility (a stream in ``ConcatDataset``,
    a map-style dataset in ``ChainDataset``), which torch checks by assertion.

    Examples
    --------
    >>> from dataloader._errors import DatasetTypeError
    >>> issubclass(DatasetTypeError, TypeError), issubclass(DatasetTypeError, AssertionError)
    (True, True)
    """


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` for the closest of ``names`` to a mistyped ``name``, or ``""``.

    Examples
    --------
    >>> from dataloader._errors import did_you_mean
    >>> did_you_mean("RandomHFlp", ["RandomHFlip", "Resize"])
    " (did you mean 'RandomHFlip'?)"
    >>> did_you_mean("Blur", ["Resize"])
    ''
    """
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def warn_at_caller(message: str) -> None:
    """A ``UserWarning`` shown at the line that called into this package.

    The loader reaches a warning through a different number of its own
    frames depending on the epoch's kind; the user's line is the one that
    says where to look.

    Examples
    --------
    >>> import warnings
    >>> from dataloader._errors import warn_at_caller
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_at_caller("look here")
    >>> caught[0].category.__name__, str(caught[0].message)
    ('UserWarning', 'look here')
    """
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and _in_package(frame):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


def _in_package(frame: Any) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == "dataloader" or name.startswith("dataloader.")


# What every kind of epoch raises when a forked child iterates it.
STARTED_BEFORE_FORK = ("this DataLoader epoch was started before os.fork(); its workers do not "
                       "exist in the child process: start a new epoch with iter(loader)")


def check_same_process(started_in: int) -> None:
    """Refuse to go on, in a forked child, with an epoch its parent started.

    ``started_in`` is the process id the epoch was started in: its workers
    (threads, processes and their pipes) belong to that process alone.

    Examples
    --------
    >>> import os
    >>> from dataloader._errors import check_same_process
    >>> check_same_process(os.getpid())
    """
    if os.getpid() != started_in:
        raise RuntimeError(STARTED_BEFORE_FORK)


class ShardError(ValueError):
    """A tar shard that cannot be parsed: corrupt or truncated.

    ``url`` is the shard (without credentials or query) and ``offset`` the
    byte offset of the header at fault.

    Examples
    --------
    >>> from dataloader.sources import ShardError
    >>> error = ShardError("train-0.tar", 1024, "bad header checksum")
    >>> error.offset, str(error)
    (1024, 'train-0.tar: bad header checksum at byte 1024')
    >>> isinstance(error, ValueError)
    True
    """

    def __init__(self, url: str, offset: int, reason: str) -> None:
        super().__init__(f"{url}: {reason} at byte {offset}")
        self.url = url
        self.offset = offset


@dataclass(frozen=True, slots=True)
class LoadingContext:
    """Where an error of the loading was raised: the facts of its note, as data.

    Attributes
    ----------
    stage : str
        ``"check"`` (the sampler's indices), ``"batch"`` (a whole batch on
        one thread), ``"item"`` (one item of a batch loaded by lanes),
        ``"collate"`` (a lane-loaded batch's collation), or for streams
        ``"stream start"``, ``"stream iterator"``, ``"stream batch"``.
    batch : int or None
        The batch's position in this run of the epoch (map-style datasets).
    indices : object
        Every index of the batch (a list, or one index without batching);
        for a stream batch, the positions of its items in the stream.
    index : object
        The index of the item that raised, when one is known.
    worker : int or None
        The pool thread that raised; ``None`` on the consumer thread.
    stream : int or None
        The stream (iterable-style datasets).

    Examples
    --------
    >>> from dataloader._errors import LoadingContext, add_context, context_of
    >>> error = add_context(ValueError("bad"), LoadingContext("batch", batch=3, indices=[6, 7]))
    >>> context_of(error).indices
    [6, 7]
    >>> error.__notes__
    ['dataloader: raised while loading batch 3 (indices [6, 7])']
    """

    stage: str
    batch: int | None = None
    indices: Any = None
    index: Any = None
    worker: int | None = None
    stream: int | None = None

    def note(self) -> str:
        """The human-readable note added to the error (the one formatter of it)."""
        stage, batch = self.stage, self.batch
        if stage == CHECK:
            return f"dataloader: raised while checking batch {batch}"
        if stage == STREAM_START:
            return f"dataloader: raised while starting stream {self.stream}"
        if stage == STREAM_ITERATOR:
            return f"dataloader: raised by the iterator of stream {self.stream}"
        if stage == STREAM_BATCH:
            start = self.indices[0] if isinstance(self.indices, list) else self.indices
            return (
                f"dataloader: raised while loading the batch of stream {self.stream} "
                f"starting at its item {start}"
            )
        # The item an error of the whole batch names (by its position in the batch).
        item = "" if self.index is None or stage == ITEM else f"; the item of index {self.index!r}"
        if self.worker is None:
            indices = _shorten(self.indices)
            return f"dataloader: raised while loading batch {batch} (indices {indices}){item}"
        if stage == ITEM:
            what = f"index {self.index!r}"
        elif stage == COLLATE:
            what = "the collation"
        else:
            what = f"indices {_shorten(self.indices)}"
        return (f"dataloader: raised on worker {self.worker} while loading {what} of batch "
                f"{batch}{item}")


def add_context(error: BaseException, context: LoadingContext) -> BaseException:
    """Attach ``context`` to ``error`` (as ``dataloader_context``) and add its note.

    Only an ``Exception`` is annotated: a ``KeyboardInterrupt`` or
    ``SystemExit`` passes through as it is. Returns ``error``.
    """
    if isinstance(error, Exception):
        position = getattr(error, "batch_position", None)
        if context.index is None and position is not None and isinstance(context.indices, list):
            # default_collate names an item by its position; the note names its index.
            context = replace(context, index=context.indices[position])
        error.dataloader_context = context  # type: ignore[attr-defined]
        error.add_note(context.note())
    return error


def context_of(error: BaseException) -> LoadingContext | None:
    """The :class:`LoadingContext` of an error raised while loading, or ``None``."""
    context = getattr(error, "dataloader_context", None)
    return context if isinstance(context, LoadingContext) else None


def _shorten(indices: Any) -> str:
    """Indices for a note: at most eight of a long batch, and the batch's size."""
    if isinstance(indices, list) and len(indices) > 8:
        return f"[{', '.join(map(str, indices[:8]))}, ...] ({len(indices)} indices)"
    return repr(indices)
