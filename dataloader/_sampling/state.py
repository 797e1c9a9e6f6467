"""Where a loader is in its run of epochs, and exact resumption.

``loader.state_dict()`` records the epoch number, the batches delivered in
it, the loader's seed and the sampler's own state; ``load_state_dict``
makes the next ``iter(loader)`` continue that epoch at the next batch.
Exactness rests on two facts (see ``docs/distributed.md``, "Resume"):

* every random order is a function of ``(seed, epoch)``
  (``dataloader._sampling.seeding``), so the interrupted epoch's order is computed
  again, not replayed from a generator's running state;
* the delivered batches are skipped without loading them: the library's
  samplers start their order at the first index not delivered
  (``_index_chunks(start)``; a shuffled order computes any position
  directly, ``dataloader._sampling.shuffle``), so resuming costs the same whatever
  the epoch's length and position.

For streaming datasets the batches cannot be recomputed: each stream's
iterator must provide ``state_dict``/``load_state_dict``, and the state
recorded is the one of the last batch delivered from that stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

import numpy as np

from dataloader._sampling.sampler import BatchSampler, index_chunks, is_epoch_seeded
from dataloader._sampling.seeding import EpochSeeded, check_seed, claim_epoch

__all__ = ["EpochProgress", "LoaderProgress", "Resume", "check_resumable", "skip_batches"]

_FORMAT = 1


@dataclass(slots=True)
class EpochProgress:
    """How far one epoch got; written by its iterator on the consumer thread.

    Attributes
    ----------
    epoch : int
    delivered : int
        Batches delivered (or raised) so far, skipped ones included.
    total : int or None
        Batches in the whole epoch, when known (see :meth:`batches`).
    length : callable or None
        Where the batch count is asked when it is first needed, for a
        sampler whose ``len()`` plans its whole epoch (``length_plans_epoch``).
    finished : bool
        Whether the iterator reached its end.
    streams : dict or None
        Streaming only: stream number -> its iterator's state after the
        last batch delivered from it (``None`` before its first batch);
        ``None`` as a whole when the iterators cannot save their state.
    """

    epoch: int
    delivered: int = 0
    total: int | None = None
    finished: bool = False
    streams: dict[int, Any] | None = None
    length: Callable[[], int] | None = None

    def batches(self) -> int | None:
        """Batches in the whole epoch, when known; asked of ``length`` the first time."""
        if self.total is None and self.length is not None:
            self.total, self.length = self.length(), None
        return self.total

    @property
    def complete(self) -> bool:
        total = None if self.finished else self.batches()
        return self.finished or (total is not None and self.delivered >= total)


@dataclass(slots=True)
class Resume:
    """The point a loaded ``state_dict`` continues from."""

    epoch: int
    batches: int
    streams: dict[int, Any] | None


class LoaderProgress:
    """A loader's epoch counter, its current epoch, and a pending resumption."""

    __slots__ = ("next_epoch", "current", "resume")

    def __init__(self) -> None:
        self.next_epoch = 0
        self.current: EpochProgress | None = None
        self.resume: Resume | None = None

    @property
    def epoch(self) -> int:
        """The epoch started last, or the one the next ``iter(loader)`` starts."""
        if self.current is not None:
            return self.current.epoch
        if self.resume is not None:
            return self.resume.epoch
        return self.next_epoch

    def start_epoch(self, samplers: Iterable[Any]) -> tuple[EpochProgress, Resume | None]:
        """Number a new epoch, set it on ``samplers``; return it and what to skip."""
        proposed = self.resume.epoch if self.resume is not None else self.next_epoch
        epoch = proposed
        for sampler in samplers:
            epoch = claim_epoch(sampler, proposed)
        resume, self.resume = self.resume, None
        if resume is not None and resume.epoch != epoch:
            resume = None  # the user chose another epoch with set_epoch: start it afresh
        progress = EpochProgress(epoch, delivered=resume.batches if resume else 0)
        self.current = progress
        self.next_epoch = epoch + 1
        return progress, resume

    def state_dict(self, seed: int, sampler: Any, in_order: bool) -> dict[str, Any]:
        resume = self.resume
        current = self.current
        streams: dict[int, Any] | None = None
        if resume is not None:
            epoch, batches, streams = resume.epoch, resume.batches, resume.streams
        elif current is None:
            epoch, batches = self.next_epoch, 0
        elif current.complete:
            epoch, batches = current.epoch + 1, 0
        else:
            epoch, batches, streams = current.epoch, current.delivered, current.streams
        if batches and not in_order:
            raise ValueError(
                "a DataLoader with in_order=False cannot save a position inside an epoch: "
                "its delivered batches are not a prefix of the epoch's order"
            )
        state: dict[str, Any] = {
            "format": _FORMAT, "epoch": epoch, "batches": batches, "seed": seed,
        }
        if streams is not None:
            state["streams"] = {str(key): value for key, value in streams.items()}
        if hasattr(sampler, "state_dict") and (
            not isinstance(sampler, EpochSeeded) or is_epoch_seeded(sampler)
        ):
            state["sampler"] = sampler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> int:
        """Take ``state`` as the point the next epoch continues from; return its seed."""
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise ValueError("not a DataLoader state_dict (or one of another version)")
        epoch, batches = int(state["epoch"]), int(state["batches"])
        if epoch < 0 or batches < 0:
            raise ValueError(f"invalid DataLoader state: epoch={epoch}, batches={batches}")
        streams = state.get("streams")
        if streams is not None:
            streams = {int(key): value for key, value in streams.items()}
        self.resume = Resume(epoch, batches, streams)
        self.current = None
        self.next_epoch = epoch
        return check_seed(state["seed"])


def check_resumable(sampler: Any) -> None:
    """Raise ``ValueError`` when ``sampler``'s epoch order cannot be recomputed."""
    if isinstance(sampler, EpochSeeded) and not is_epoch_seeded(sampler):
        raise ValueError(
            f"{type(sampler).__name__} draws from a generator's running state, so an "
            "interrupted epoch cannot be recomputed: pass seed= to it (or let the "
            "DataLoader build it with shuffle=True)"
        )


def skip_batches(index_sampler: Any, batched: bool, count: int) -> Iterator[Any]:
    """The batches of ``index_sampler`` after the first ``count``, none of them loaded.

    Our samplers start at the first index not skipped (the skipped ones
    are never computed, or for draws from a generator never become Python
    objects); any other sampler is iterated past.
    """
    if count == 0:
        return iter(index_sampler)
    if batched and type(index_sampler) is BatchSampler:
        chunks = index_chunks(index_sampler.sampler, count * index_sampler.batch_size)
        if chunks is not None:
            return index_sampler._batches_of_chunks(chunks)
    elif not batched:
        chunks = index_chunks(index_sampler, count)
        if chunks is not None:
            return chain.from_iterable(map(np.ndarray.tolist, chunks))
    return islice(iter(index_sampler), count, None)
