"""The messages between the consumer and its worker processes, in one place.

Each message is a class (a ``NamedTuple``: typed fields, pickled as
cheaply as a tuple) and is matched by its class. Over each worker's pipe:

Requests, consumer to worker, answered in order:

* :class:`BeginEpoch` -- bind an epoch (and start a worker's stream afresh);
* :class:`Load` -- load a batch (``indices``), or a streaming worker's next
  batch (``indices is None``), and answer with :class:`Loaded`,
  :class:`Failed` or :class:`Streamed`;
* :class:`GiveBack` -- whenever it comes: slots free again (not answered);
* :class:`Stop` -- exit.

Replies, worker to consumer:

* :class:`Ready` once started (or :class:`InitFailed` when
  ``worker_init_fn`` raised);
* :class:`Loaded`, :class:`Failed`, :class:`Streamed`, one per
  :class:`Load`, each carrying the epoch's ``token`` (replies to an
  abandoned epoch are told apart by it) and the batch's ``position``;
* :class:`SlotShared` before the first batch in a new slot, followed on the
  socket by the slot's file descriptor.

An error crosses the pipe as a :class:`RemoteError`: the pickled exception
(or a ``RuntimeError`` standing in for one that cannot be pickled) and its
traceback's text, restored in the consumer with the traceback as
``__cause__`` (:class:`dataloader._errors.RemoteTraceback`).

Examples
--------
>>> import pickle
>>> from dataloader._processes.protocol import Load, RemoteError
>>> request = pickle.loads(pickle.dumps(Load(token=3, position=0, indices=[4, 5])))
>>> isinstance(request, Load), request.indices
(True, [4, 5])
>>> error = RemoteError.of(ValueError("bad item")).restore()
>>> type(error).__name__, str(error), type(error.__cause__).__name__
('ValueError', 'bad item', 'RemoteTraceback')
"""

from __future__ import annotations

import pickle
import traceback
from typing import Any, NamedTuple

from dataloader._errors import RemoteTraceback

__all__ = [
    "BeginEpoch", "Failed", "GiveBack", "InitFailed", "Load", "Loaded", "Ready", "RemoteError",
    "SlotShared", "Stop", "Streamed",
]


class RemoteError(NamedTuple):
    """An error and its traceback's text, in a form that crosses the pipe."""

    pickled: bytes
    traceback: str

    @classmethod
    def of(cls, error: BaseException) -> RemoteError:
        """``error`` made portable; one that cannot be pickled becomes a
        ``RuntimeError`` naming its type and carrying its message and notes."""
        text = "".join(traceback.format_exception(error))
        try:
            pickled = pickle.dumps(error, protocol=5)
            pickle.loads(pickled)
        except Exception:  # noqa: BLE001 -- whatever pickling raises, the text goes
            name = f"{type(error).__module__}.{type(error).__qualname__}"
            replacement = RuntimeError(
                f"{name}: {error} (the original error could not be pickled)")
            replacement.__notes__ = list(getattr(error, "__notes__", ()))
            pickled = pickle.dumps(replacement, protocol=5)
        return cls(pickled, text)

    def restore(self) -> BaseException:
        """The error, its traceback's text attached as its cause."""
        error = pickle.loads(self.pickled)
        error.__cause__ = RemoteTraceback(self.traceback)
        return error


# -- requests ---------------------------------------------------------------------


class BeginEpoch(NamedTuple):
    """Bind epoch ``epoch`` of the loader's ``seed`` for the batches of ``token``.

    A persistent worker whose seeds follow the loader's seed reseeds
    ``random``, numpy and torch for it; a streaming worker starts its
    stream afresh, from ``stream_state`` when the epoch resumes. Position
    ``p`` of ``token`` is the epoch's batch ``first + p``, as errors name it.
    """

    token: int
    seed: int
    epoch: int
    stream_state: Any
    first: int = 0


class Load(NamedTuple):
    """Load the batch at ``position``: ``indices``, or (``None``) the stream's next."""

    token: int
    position: int
    indices: Any


class GiveBack(NamedTuple):
    """``slots`` of this worker hold no batch the consumer uses any more."""

    slots: list[int]


class Stop(NamedTuple):
    """Exit."""


# -- replies ----------------------------------------------------------------------


class Ready(NamedTuple):
    """The worker started (``worker_init_fn`` returned) and waits for requests."""

    pid: int


class InitFailed(NamedTuple):
    """``worker_init_fn`` raised ``error``; the worker has exited."""

    error: RemoteError


class Loaded(NamedTuple):
    """The batch at ``position``, packed in a slot (``packed``), or ``None`` when every
    item was skipped; ``stats`` the worker's counts since its last reply, ``skipped``
    the ``(index, error)`` of each item ``on_error="skip"`` dropped (when the
    consumer keeps a budget)."""

    token: int
    position: int
    packed: Any
    stats: tuple[int, ...]
    skipped: list[tuple[Any, RemoteError]]


class Failed(NamedTuple):
    """Loading the batch at ``position`` raised ``error``."""

    token: int
    position: int
    error: RemoteError
    stats: tuple[int, ...]


class Streamed(NamedTuple):
    """A streaming worker's batch at ``position``: ``packed`` (``None`` after an error or
    at the end), ``error`` (its iterator's or its batch's), ``state`` the stream's
    state after the batch, ``ended`` whether the stream is over."""

    token: int
    position: int
    packed: Any
    stats: tuple[int, ...]
    error: RemoteError | None
    state: Any
    ended: bool


class SlotShared(NamedTuple):
    """The next message on the socket is the descriptor of the worker's new ``slot``."""

    slot: int
