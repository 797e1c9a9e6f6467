"""``torch.utils.data`` with torch's batches and torch's randomness: the drop-in.

Switching from torch is a change of import, the dataset left as it is::

    # from torch.utils.data import DataLoader, Dataset, RandomSampler
    from dataloader.torch import DataLoader, Dataset, RandomSampler

Every name is ``dataloader``'s own (the same engine, the same keyword-only
additions: ``worker_type``, ``seed``, ``transform``, ``state_dict``...),
with torch's behaviour where ``dataloader`` chose numpy:

- batches are torch tensors where torch's are (``default_collate`` and
  ``default_convert`` here are torch's rules, see
  ``dataloader._loading.tensors``); native image batches (``ImageCollator``)
  stay ``ImageBatch``, which ``torch.from_dlpack`` wraps without a copy;
- randomness is torch's: without ``seed=``, ``shuffle=True`` and the
  random samplers draw from ``generator`` or from torch's default generator
  (``torch.manual_seed``) with torch's own algorithms, so the same seed
  gives torch's order; each ``iter(loader)`` draws the workers' base seed
  as torch does (once with ``persistent_workers``), and a worker process
  is seeded from it before ``worker_init_fn`` runs. With ``seed=``, orders
  and worker seeds follow the seed alone, as in ``dataloader``;
- a dataset doing Python work loads on worker processes, as under torch
  (``worker_type="auto"`` does not measure it first on this process's
  threads, as ``dataloader.DataLoader`` does: ``docs/execution.md``,
  "How auto chooses").

torch must be installed. Without torch, ``from dataloader import ...``
gives numpy batches.

Examples
--------
>>> import torch
>>> from dataloader.torch import DataLoader
>>> images, labels = next(iter(DataLoader([(torch.zeros(3), 1), (torch.ones(3), 0)],
...                                       batch_size=2)))
>>> images.shape, labels
(torch.Size([2, 3]), tensor([1, 0]))
"""

from __future__ import annotations

from typing import Any, TypeVar

import torch

from dataloader import (
    AsyncDataset,
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    Dataset,
    DistributedSampler,
    IterableDataset,
    Sampler,
    SequentialSampler,
    StackDataset,
    Subset,
    TensorDataset,
    WorkerInfo,
    get_worker_info,
    random_split,
)
from dataloader import DataLoader as _DataLoader
from dataloader import RandomSampler as _RandomSampler
from dataloader import SubsetRandomSampler as _SubsetRandomSampler
from dataloader import WeightedRandomSampler as _WeightedRandomSampler
from dataloader._loading.tensors import default_collate, default_convert

__all__ = [
    "AsyncDataset",
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "WorkerInfo",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]

T_co = TypeVar("T_co", covariant=True)

# A seed torch's generators accept and dataloader's seed= accepts.
_SEED_BOUND = 2**63


class RandomSampler(_RandomSampler):
    """:class:`dataloader.RandomSampler`; without ``generator`` or ``seed``, torch's draw.

    Examples
    --------
    >>> import torch
    >>> from dataloader.torch import RandomSampler
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> first = list(RandomSampler(range(5)))
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> first == list(RandomSampler(range(5)))
    True
    """

    _torch_by_default = True


class SubsetRandomSampler(_SubsetRandomSampler):
    """:class:`dataloader.SubsetRandomSampler`; without ``generator`` or ``seed``, torch's draw.

    Examples
    --------
    >>> import torch
    >>> from dataloader.torch import SubsetRandomSampler
    >>> sorted(SubsetRandomSampler([7, 3, 5], generator=torch.Generator().manual_seed(1)))
    [3, 5, 7]
    """

    _torch_by_default = True


class WeightedRandomSampler(_WeightedRandomSampler):
    """:class:`dataloader.WeightedRandomSampler`; without ``generator`` or ``seed``, torch's draw.

    Examples
    --------
    >>> from dataloader.torch import WeightedRandomSampler
    >>> list(WeightedRandomSampler([0.0, 1.0], 3))
    [1, 1, 1]
    """

    _torch_by_default = True


def _is_torch_generator(generator: Any) -> bool:
    return isinstance(generator, torch.Generator)


class DataLoader(_DataLoader[T_co]):
    """:class:`dataloader.DataLoader` with torch's batches and torch's randomness.

    See the module documentation for what differs from ``dataloader.DataLoader``.

    Examples
    --------
    >>> import torch
    >>> from dataloader.torch import DataLoader
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> first = [batch.tolist() for batch in DataLoader(range(6), batch_size=3, shuffle=True)]
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> first == [batch.tolist() for batch in DataLoader(range(6), batch_size=3, shuffle=True)]
    True
    """

    _collate = staticmethod(default_collate)
    _convert = staticmethod(default_convert)
    # A dataset doing Python work loads on worker processes, each seeded as
    # torch seeds its workers, never first on this process's threads.
    _measures_python_work = False
    # The base seed torch drew for this iteration's workers (None: follow seed=).
    _drawn_base_seed: int | None = None
    _draws_base_seed = False

    def _default_seed(self, generator: Any) -> int:
        """Without ``seed=``: the seed torch's generator was given (reading it draws nothing)."""
        if generator is None or _is_torch_generator(generator):
            self._draws_base_seed = True
            source = generator if generator is not None else torch.default_generator
            return source.initial_seed() % _SEED_BOUND
        return super()._default_seed(generator)

    def _shuffled_sampler(self, dataset: Any, seed: int, generator: Any,
                          user_seeded: bool) -> Any:
        """Without ``seed=``: torch's ``RandomSampler(dataset, generator=generator)``."""
        if user_seeded or not self._draws_base_seed:
            return super()._shuffled_sampler(dataset, seed, generator, user_seeded)
        return RandomSampler(dataset, generator=generator)

    def _begin_iteration(self) -> None:
        """torch's iterator draws its workers' base seed first (persistent ones: once)."""
        if not self._draws_base_seed:
            return
        if self.persistent_workers and self._drawn_base_seed is not None:
            return
        drawn = torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        self._drawn_base_seed = int(drawn.item())

    def _worker_seeds_follow_seed(self) -> bool:
        return not self._draws_base_seed

    def _worker_base_seed(self) -> int:
        if self._drawn_base_seed is None:
            return super()._worker_base_seed()
        return self._drawn_base_seed
