"""``pin_memory=True``: batches in page-locked memory, as torch's loader gives them.

An accelerator copies from page-locked (pinned) host memory without an
intermediate copy, and asynchronously (``tensor.to(device,
non_blocking=True)``). When torch is installed and an accelerator is
present, every batch goes through :func:`pin_memory` -- torch's own rules:
tensors are copied into pinned memory, numpy arrays become pinned tensors,
mappings, namedtuples and sequences are rebuilt around their pinned leaves,
and any other object with a ``pin_memory()`` method is replaced by what it
returns (torch's protocol for custom batch types). A pooled ``ImageBatch``
uses that protocol to register its buffer with the accelerator once
(``dataloader._core.buffers.host_memory``) instead of being copied for
every batch; this module knows nothing of images.

Who pins (see ``docs/execution.md``, "Pinned memory"):

* with worker threads, a :class:`PinnedIterator` owns one dedicated thread
  that takes each batch from the epoch, pins it and hands it on through a
  small queue, so workers never wait for pinning; its position record is
  the one the loader saves, updated only when a batch is delivered;
* with ``num_workers=0`` (and no item lanes), the calling thread pins each
  batch after loading it, as torch's single-process iterator does.

Without an accelerator, torch's warning is issued and batches stay as they
are.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import os
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from dataloader._core.pool import CLOSE_WAIT_SECONDS, wait_bound
from dataloader._errors import EpochClosedError, check_same_process
from dataloader._loading.worker import use_one_torch_thread

if TYPE_CHECKING:
    from dataloader._sampling.state import EpochProgress

__all__ = [
    "InlinePinnedIterator", "PinnedIterator", "Pinning", "check_pin_memory_device", "pin_memory",
    "pinning",
]

# Batches pinned ahead of the consumer, beyond the loader's window.
_PINNED_AHEAD = 2

_NO_ACCELERATOR = (
    "'pin_memory' argument is set as true but no accelerator is found, "
    "then device pinned memory won't be used."
)
_MPS = (
    "'pin_memory' argument is set as true but not supported on MPS now, "
    "device pinned memory won't be used."
)
_DEVICE_DEPRECATED = (
    "pin_memory_device is deprecated, the current accelerator will be used as the device,"
    " ignore pin_memory_device='{}'."
)


def check_pin_memory_device(pin_memory_device: Any) -> None:
    if not isinstance(pin_memory_device, str):
        raise TypeError(
            "pin_memory_device should be a device name (str), but got "
            f"pin_memory_device={pin_memory_device!r}"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Pinning:
    """An epoch's pinning: the accelerator's device index, set on the pinning thread."""

    device_index: int | None


def pinning(pin_memory: bool, pin_memory_device: str) -> Pinning | None:
    """How an epoch pins its batches, ``None`` when it does not; warns as torch does.

    Called when an epoch starts, as torch decides when its iterator is made.
    """
    if not pin_memory:
        return None
    if pin_memory_device:
        warnings.warn(_DEVICE_DEPRECATED.format(pin_memory_device), stacklevel=3)
    try:
        import torch
    except ImportError:
        warnings.warn(_NO_ACCELERATOR, stacklevel=3)
        return None
    if not torch.accelerator.is_available():
        warnings.warn(_NO_ACCELERATOR, stacklevel=3)
        return None
    accelerator = torch.accelerator.current_accelerator()
    if accelerator is not None and accelerator.type == "mps":
        warnings.warn(_MPS, stacklevel=3)
        return None
    return Pinning(torch.accelerator.current_device_index())


def _enter_pinning_thread(plan: Pinning) -> None:
    import torch

    # As torch's pinning thread: the copies use one thread, and the device
    # of the epoch's consumer.
    use_one_torch_thread()
    if plan.device_index is not None:
        torch.accelerator.set_device_index(plan.device_index)


# -- pinning one batch ---------------------------------------------------------


def pin_memory(data: Any) -> Any:
    """``data`` with every tensor and array in page-locked memory (torch's rules)."""
    import torch

    if isinstance(data, torch.Tensor):
        return data.pin_memory()
    if isinstance(data, np.ndarray):
        if data.dtype.kind in "OSUV":
            return data  # torch has no tensor of these
        return torch.from_numpy(_plain_strides(data)).pin_memory()
    pin = getattr(data, "pin_memory", None)
    if pin is not None:
        return pin()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        # The concrete type, whose constructor may take the items (the abstract
        # ``Mapping``'s takes none); a ``TypeError`` says it does not.
        mapping_type: Callable[..., Any] = type(data)
        try:
            if isinstance(data, collections.abc.MutableMapping):
                # A copy keeps what else the mapping type holds (as torch).
                clone = copy.copy(data)
                clone.update({key: pin_memory(value) for key, value in data.items()})
                return clone
            return mapping_type({key: pin_memory(value) for key, value in data.items()})
        except TypeError:
            return {key: pin_memory(value) for key, value in data.items()}
    if isinstance(data, tuple):
        if hasattr(data, "_fields"):  # namedtuple
            return type(data)(*(pin_memory(sample) for sample in data))
        return type(data)(pin_memory(sample) for sample in data)
    if isinstance(data, collections.abc.Sequence):
        sequence_type: Callable[..., Any] = type(data)  # as for a mapping
        try:
            if isinstance(data, collections.abc.MutableSequence):
                sequence_clone = copy.copy(data)
                for position, sample in enumerate(data):
                    sequence_clone[position] = pin_memory(sample)
                return sequence_clone
            return sequence_type([pin_memory(sample) for sample in data])
        except TypeError:
            return [pin_memory(sample) for sample in data]
    return data


def _plain_strides(array: np.ndarray) -> np.ndarray:
    """``array``, or a C-ordered copy of the same shape when ``torch.from_numpy``
    would refuse it: numpy counts an array with a negative stride on a dimension
    of length 1 as contiguous, and ``ascontiguousarray`` makes a 0-d array 1-d."""
    if array.flags.c_contiguous and min(array.strides, default=0) >= 0:
        return array
    return array.copy(order="C")




# -- the pinning thread ----------------------------------------------------------


class _Handoff:
    """A bounded queue between the pinning thread and the consumer, closable."""

    __slots__ = ("_capacity", "_changed", "_entries", "closed")

    def __init__(self, capacity: int) -> None:
        self._entries: collections.deque[Any] = collections.deque()
        self._capacity = capacity
        self._changed = threading.Condition()
        self.closed = False

    def put(self, entry: Any) -> bool:
        """Wait for room and add ``entry``; ``False`` once closed."""
        with self._changed:
            while len(self._entries) >= self._capacity and not self.closed:
                self._changed.wait()
            if self.closed:
                return False
            self._entries.append(entry)
            self._changed.notify_all()
            return True

    def get(self) -> Any:
        # No timeout here: the epoch's own (``timeout=``) is raised on the
        # pinning thread and arrives as an error, in its turn.
        with self._changed:
            self._changed.wait_for(lambda: self._entries or self.closed)
            if not self._entries:
                raise EpochClosedError("the DataLoader was closed (its pinning thread is stopped)")
            entry = self._entries.popleft()
            self._changed.notify_all()
            return entry

    def close(self) -> None:
        with self._changed:
            self.closed = True
            self._entries.clear()
            self._changed.notify_all()


@dataclasses.dataclass(slots=True)
class _Pinned:
    """One outcome of the epoch: a pinned batch or an error, and the position after it."""

    batch: Any
    error: BaseException | None
    end: bool
    delivered: int
    finished: bool
    streams: dict[int, Any] | None
    remaining: int | None


def _remaining(epoch: Any) -> int | None:
    try:
        return len(epoch)
    except TypeError:
        return None


class _Pinner:
    """The pinning thread's work: epoch -> pin -> handoff.

    It holds no reference to the :class:`PinnedIterator` that owns it, so
    dropping that iterator runs its finalizer, which stops the thread.
    """

    def __init__(self, epoch: Any, progress: EpochProgress, plan: Pinning,
                 pin: Callable[[Any], Any]) -> None:
        self.plan = plan
        self.epoch = epoch
        self.progress = progress  # written by the epoch, on this thread
        self.pin = pin
        self.handoff = _Handoff(_PINNED_AHEAD)
        self.thread = threading.Thread(target=self.run, name="dataloader-pin", daemon=True)

    def _outcome(self, batch: Any, error: BaseException | None, end: bool) -> _Pinned:
        progress = self.progress
        streams = dict(progress.streams) if progress.streams is not None else None
        return _Pinned(batch, error, end, progress.delivered, progress.finished, streams,
                       _remaining(self.epoch))

    def run(self) -> None:
        try:
            _enter_pinning_thread(self.plan)
            self._pin_all()
        except BaseException as exc:  # noqa: BLE001 -- re-raised in the consumer
            # A failure of the thread itself, not of one batch: raised from
            # the consumer's next next(), and the epoch ends there.
            progress = self.progress
            failure = _Pinned(None, exc, False, progress.delivered, progress.finished, None, 0)
            if self.handoff.put(failure):
                self.handoff.put(dataclasses.replace(failure, error=None, end=True))

    def _pin_all(self) -> None:
        while not self.handoff.closed:
            try:
                batch = next(self.epoch)
            except StopIteration:
                self.handoff.put(self._outcome(None, None, True))
                return
            except BaseException as exc:  # noqa: BLE001 -- re-raised in the consumer
                # Raised from its own next(), as without pinning; the epoch goes on.
                if not self.handoff.put(self._outcome(None, exc, False)):
                    return
                continue
            try:
                outcome = self._outcome(self.pin(batch), None, False)
            except BaseException as exc:  # noqa: BLE001 -- re-raised in the consumer
                exc.add_note("dataloader: raised while pinning a batch (pin_memory=True)")
                outcome = self._outcome(None, exc, False)
            del batch
            if not self.handoff.put(outcome):
                return

    def stop(self, join_timeout: float) -> None:
        """Close the handoff, cancel the epoch (waking the thread), then join it.

        The thread ends at once unless it is in user code (a sampler, or the
        ``__iter__`` of a stream read on this thread); at interpreter exit the
        join ends by the exit's deadline (``pool.wait_bound``).
        """
        self.handoff.close()
        self.epoch.cancel()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(wait_bound(join_timeout))


class PinnedIterator:
    """An epoch whose batches are pinned on a dedicated thread (see the module docstring).

    The thread is started here and owned by this object: ``close()``,
    ``break``/``del`` (a finalizer) or the end of the epoch stop it. The
    loader's record of the epoch is a copy that changes only when a batch
    is delivered, so ``state_dict`` never counts batches pinned ahead.
    """

    __slots__ = ("__weakref__", "_done", "_finalizer", "_pid", "_pinner", "_public",
                 "_remaining")

    def __init__(self, epoch: Any, progress_owner: Any, plan: Pinning,
                 join_timeout: float = CLOSE_WAIT_SECONDS) -> None:
        import weakref

        inner = progress_owner.current
        # The epoch keeps writing `inner` as it runs ahead on the pinning
        # thread; the loader reads `public`, updated batch by batch below.
        public = dataclasses.replace(
            inner, streams=dict(inner.streams) if inner.streams is not None else None
        )
        progress_owner.current = public
        self._public = public
        self._remaining = _remaining(epoch)
        self._done = False
        # Its thread runs in this process only (not in a forked child).
        self._pid = os.getpid()
        self._pinner = _Pinner(epoch, inner, plan, pin_memory)
        self._finalizer = weakref.finalize(self, self._pinner.stop, join_timeout)
        # At exit the loader closes it, with its other threads, under one
        # deadline (dataloader._lifetime.close_at_exit).
        self._finalizer.atexit = False
        self._pinner.thread.start()

    @property
    def thread(self) -> threading.Thread:
        return self._pinner.thread

    def __iter__(self) -> PinnedIterator:
        return self

    def __len__(self) -> int:
        if self._remaining is None:
            raise TypeError("this epoch's length is unknown: its sampler has no __len__")
        return self._remaining

    def __next__(self) -> Any:
        check_same_process(self._pid)
        if self._done:
            raise StopIteration
        # Raises EpochClosedError once close() has stopped the thread.
        outcome = self._pinner.handoff.get()
        public = self._public
        public.delivered, public.finished = outcome.delivered, outcome.finished
        public.streams = outcome.streams
        self._remaining = outcome.remaining
        if outcome.end:
            self._done = True
            self._finalizer()
            raise StopIteration
        if outcome.error is not None:
            raise outcome.error
        return outcome.batch

    def close(self, seconds: float | None = None) -> None:
        """Stop the pinning thread and cancel the epoch; batches pinned ahead are dropped.

        Waits for the thread up to ``seconds`` (by default ``join_timeout``).
        The next ``next()`` raises ``EpochClosedError`` (a ``RuntimeError``),
        as an epoch of a closed loader does.
        """
        if seconds is None:
            self._finalizer()
        elif self._finalizer.detach() is not None:
            self._pinner.stop(seconds)


class InlinePinnedIterator:
    """An epoch loaded on the calling thread, each batch pinned there too (as torch)."""

    __slots__ = ("_epoch",)

    def __init__(self, epoch: Any) -> None:
        self._epoch = epoch

    def __iter__(self) -> InlinePinnedIterator:
        return self

    def __len__(self) -> int:
        return len(self._epoch)

    def __next__(self) -> Any:
        batch = next(self._epoch)
        try:
            return pin_memory(batch)
        except Exception as exc:
            exc.add_note("dataloader: raised while pinning a batch (pin_memory=True)")
            raise
