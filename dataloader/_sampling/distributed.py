"""Many processes, one epoch: ``DistributedSampler`` and the rank helpers.

A distributed job runs one training process (rank) per accelerator. Each
rank builds its own loader; for map-style datasets, a
:class:`DistributedSampler` gives every rank a disjoint, equally long share
of each epoch, computed from ``(seed, epoch)`` on every rank alone. For
streaming datasets, ``shard`` (``dataloader._loading.streaming``) splits by item
position instead. See ``docs/distributed.md``.

``torch.distributed`` is used only when it is already initialised by the
program: this module never requires torch.
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Iterator, Sized
from typing import Any

import numpy as np

from dataloader._sampling.remainder import Deal
from dataloader._sampling.sampler import _ChunkedSampler
from dataloader._sampling.seeding import EpochSeeded, check_seed, epoch_generator
from dataloader._sampling.shuffle import Order, chunk_sizes, draw_key, strided_indices

__all__ = [
    "AgreedBatches", "DistributedSampler", "RankGroup", "check_rank", "in_distributed_job", "world",
]


def _torch_distributed() -> Any:
    """``torch.distributed`` when it is initialised in this process, else ``None``."""
    if "torch" not in sys.modules:
        try:
            import torch  # noqa: F401
        except ImportError:
            return None
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist
    return None


def world(num_replicas: int | None = None, rank: int | None = None) -> tuple[int, int]:
    """``(world_size, rank)``: the arguments, else torch.distributed's, else the environment.

    Raises ``ValueError`` when neither is given and nothing defines them,
    and when the rank is outside ``[0, world_size)``.
    """
    if num_replicas is None or rank is None:
        dist = _torch_distributed()
        found: tuple[int, int] | None
        if dist is not None:
            found = dist.get_world_size(), dist.get_rank()
        else:
            found = _from_environment()
        if found is None:
            raise ValueError(
                "cannot tell this process's rank: pass num_replicas= and rank=, initialise "
                "torch.distributed, or set the WORLD_SIZE and RANK environment variables "
                "(torchrun sets them)"
            )
        num_replicas = found[0] if num_replicas is None else num_replicas
        rank = found[1] if rank is None else rank
    return check_rank(num_replicas, rank)


def in_distributed_job() -> bool:
    """Whether torch.distributed or the environment (``WORLD_SIZE``, ``RANK``) defines ranks."""
    return _torch_distributed() is not None or _from_environment() is not None


def check_rank(size: Any, rank: Any, size_name: str = "num_replicas") -> tuple[int, int]:
    """``(size, rank)`` as ints, once both are integers with ``0 <= rank < size``.

    Raises ``ValueError`` (torch's type for these) naming ``size_name`` or
    ``rank`` otherwise.
    """
    for name, value in ((size_name, size), ("rank", rank)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise ValueError(f"{name} should be an integer, but got {name}={value!r}")
    if size < 1:
        raise ValueError(f"{size_name} should be at least 1, but got {size_name}={size}")
    if not 0 <= rank < size:
        raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {size - 1}]")
    return int(size), int(rank)


def _from_environment() -> tuple[int, int] | None:
    size, rank = os.environ.get("WORLD_SIZE"), os.environ.get("RANK")
    if size is None or rank is None:
        return None
    try:
        return int(size), int(rank)
    except ValueError:
        raise ValueError(
            f"WORLD_SIZE={size!r} and RANK={rank!r} should be integers"
        ) from None


class RankGroup:
    """A loader's own process group, for the ranks to agree on batch counts.

    The training job's default group carries its own collectives (a
    ``DistributedDataParallel`` all-reduce per step, say), issued in the
    order the job chooses; a loader's collectives mixed into the same group
    could meet another rank's in a different order. So a loader that must
    communicate gets a gloo group of its own, made by ``new_group`` when the
    first epoch that needs it starts (every rank must call ``new_group``, in
    the same order relative to its other ``new_group`` calls: torch names
    groups by that order, so it is called at one point of the program,
    ``iter(loader)`` of that loader's first such epoch). A group made under a default group
    that has since been destroyed is replaced by a new one. The group lives
    until ``torch.distributed.destroy_process_group()``.
    """

    __slots__ = ("_group", "_world")

    def __init__(self) -> None:
        self._group: Any = None
        self._world: Any = None

    def ready(self) -> bool:
        """Make the group if it is missing; ``False`` when torch.distributed is not initialised."""
        dist = _torch_distributed()
        if dist is None:
            return False
        world = dist.group.WORLD
        if self._group is None or self._world is not world:
            self._group = dist.new_group(backend="gloo")
            self._world = world
        return True

    def gather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` (picklable), in rank order (``all_gather_object``)."""
        import torch.distributed as dist

        values: list[Any] = [None] * dist.get_world_size(self._group)
        dist.all_gather_object(values, value, group=self._group)
        return values

    def min(self, value: int) -> int:
        """The minimum of ``value`` over all ranks (``all_reduce(MIN)`` on this group)."""
        import torch
        import torch.distributed as dist

        tensor = torch.tensor([int(value)], dtype=torch.int64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MIN, group=self._group)
        return int(tensor.item())


class _Raised:
    """An exception taken from an epoch ahead of its turn, raised when its turn comes."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class AgreedBatches:
    """The batches of one rank's epoch, delivered as far as every rank has them.

    Before delivering batches it has not agreed on, a rank takes up to
    ``chunk`` batches from its epoch (``next_batch``), and the ranks
    exchange how many they hold: every rank then delivers the minimum
    without communicating again. The chunk starts at one batch, so the
    first batch waits for nothing more than itself, and doubles up to
    ``max_chunk`` (the loader's prefetch window, which workers keep full
    while the consumer trains: a larger chunk would make the consumer wait
    for batches beyond it). An error raised by the epoch counts as a batch,
    raised in its turn. The epoch ends on every rank when the minimum is 0.
    """

    __slots__ = (
        "_agreed",
        "_ahead",
        "_chunk",
        "_exhausted",
        "_group",
        "_max_chunk",
        "_next_batch",
        "exchanges",
    )

    def __init__(self, next_batch: Any, group: RankGroup, max_chunk: int) -> None:
        self._next_batch = next_batch
        self._group = group
        self._ahead: collections.deque[Any] = collections.deque()
        self._agreed = 0  # batches at the head of _ahead that every rank holds too
        self._chunk = 1
        self._max_chunk = max(max_chunk, 1)
        self._exhausted = False
        self.exchanges = 0

    def next(self) -> Any:
        if self._agreed == 0:
            self._agreed = self._agree()
            if self._agreed == 0:
                self._ahead.clear()
                raise StopIteration
        self._agreed -= 1
        batch = self._ahead.popleft()
        if isinstance(batch, _Raised):
            raise batch.error
        return batch

    def _agree(self) -> int:
        while len(self._ahead) < self._chunk and not self._exhausted:
            try:
                self._ahead.append(self._next_batch())
            except StopIteration:
                self._exhausted = True
            except Exception as exc:  # noqa: BLE001 -- re-raised in its turn
                self._ahead.append(_Raised(exc))
        self._chunk = min(self._chunk * 2, self._max_chunk)
        self.exchanges += 1
        return self._group.min(len(self._ahead))


class DistributedSampler(_ChunkedSampler, EpochSeeded):
    """This rank's share of the dataset: torch's ``DistributedSampler``.

    Every rank gets ``ceil(N / num_replicas)`` indices (the last ones wrap
    around to the start of the epoch's order to make the shares equal), or
    ``floor(N / num_replicas)`` with ``drop_last``. Apart from that padding,
    the ranks' shares are disjoint and together cover the dataset. The
    order is a function of ``(seed, epoch)``: every rank computes the same
    partition without communicating, and only its own positions of the
    order (``docs/datasets.md``, "How shuffled orders are made"), so its
    first index comes at once whatever the dataset's length.

    Parameters
    ----------
    dataset : sized
        Only its length is used.
    num_replicas : int, optional
        The number of ranks; defaults to ``torch.distributed``'s world size
        when it is initialised, else to the ``WORLD_SIZE`` environment
        variable.
    rank : int, optional
        This process's rank, defaulting likewise (``RANK``).
    shuffle : bool, default True
        Visit the dataset in a new order each epoch.
    seed : int, default 0
        Must be the same on every rank.
    drop_last : bool, default False
        Drop the tail instead of padding.

    Notes
    -----
    Call ``set_epoch(e)`` before each epoch, as with torch; a loader using
    the sampler also advances the epoch itself on every ``iter(loader)``
    when ``set_epoch`` was not called since the loader's last epoch.

    Examples
    --------
    >>> from dataloader import DistributedSampler
    >>> shares = [list(DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False))
    ...           for r in range(3)]
    >>> shares
    [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    >>> sampler = DistributedSampler(range(10), num_replicas=2, rank=0, seed=1)
    >>> sampler.set_epoch(1)
    >>> len(sampler)
    5
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.num_replicas, self.rank = world(num_replicas, rank)
        self.dataset = dataset
        self.shuffle = bool(shuffle)
        self.seed = check_seed(seed)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        # (epoch, deal): that epoch's remaining positions dealt to these ranks, after a
        # job on another number of ranks stopped in its middle (dataloader._loading.elastic).
        self.elastic_deal: tuple[int, Deal] | None = None

    def active_deal(self) -> Deal | None:
        """The elastic deal of the current epoch, if it resumes one on other ranks."""
        if self.elastic_deal is not None and self.elastic_deal[0] == self.epoch:
            return self.elastic_deal[1]
        return None

    @property
    def num_samples(self) -> int:
        """How many indices this rank gets per epoch."""
        deal = self.active_deal()
        if deal is not None:
            return deal.count(self.rank)
        n = len(self.dataset)
        if self.drop_last:
            return n // self.num_replicas
        return -(-n // self.num_replicas)

    @property
    def total_size(self) -> int:
        return self.num_samples * self.num_replicas

    def __len__(self) -> int:
        return self.num_samples

    def _index_chunks(self, start: int = 0) -> Iterator[np.ndarray]:
        n = len(self.dataset)
        count = self.num_samples - start
        if n == 0 or count <= 0:
            return
        order = None
        if self.shuffle:
            order = Order(n, draw_key(epoch_generator(self.seed, self.epoch)))
        deal = self.active_deal()
        if deal is not None:
            yield from _dealt_indices(deal, order, n, self.rank, start, count)
            return
        # This rank's positions of the epoch's order: rank, rank + R, ...;
        # past n (padding) they wrap around to its start, as torch's do.
        first = self.rank + start * self.num_replicas
        yield from strided_indices(order, n, first, self.num_replicas, count)

    def state_dict(self) -> dict[str, Any]:
        """The seed, the epoch and the number of ranks (the same on every rank)."""
        return {"seed": self.seed, "epoch": self.epoch, "num_replicas": self.num_replicas}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; the number of ranks must not have changed."""
        saved = state.get("num_replicas", self.num_replicas)
        if saved != self.num_replicas:
            raise ValueError(
                f"the state was saved with num_replicas={saved}, this sampler has "
                f"num_replicas={self.num_replicas}: to resume on another number of ranks, "
                "load the merge of every rank's loader state (dataloader.merge_states)"
            )
        super().load_state_dict(state)


def _dealt_indices(deal: Deal, order: Order | None, n: int, rank: int, start: int,
                   count: int) -> Iterator[np.ndarray]:
    """The indices of a deal's entries ``start`` to ``start + count - 1`` of ``rank``: its
    first-level entries are positions of the epoch's (padded) order."""
    done = 0
    for size in chunk_sizes():
        if done >= count:
            return
        size = min(size, count - done)
        positions = deal.entries(rank, start + done, size) % n
        yield positions if order is None else order.at(positions)
        done += size
