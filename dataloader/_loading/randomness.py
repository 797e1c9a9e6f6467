"""Where a loader's randomness comes from: its seed, its shuffled sampler, its worker seeds.

``LoaderRandomness`` is the part of ``DataLoader`` that decides them.
By default a loader given no ``seed`` draws one from ``generator`` (numpy
or torch), or from OS entropy; every random order and item seed follows
from it, and epoch ``e``'s workers are seeded from ``(seed, e)``.
``dataloader.torch`` overrides the three hooks to follow torch's model
instead (torch's default generator, one base seed drawn per iteration).
"""

from __future__ import annotations

from typing import Any

from dataloader._loading.arguments import seed_from
from dataloader._sampling.sampler import RandomSampler, is_epoch_seeded
from dataloader._sampling.seeding import check_seed, random_seed, worker_base_seed

__all__ = ["LoaderRandomness"]


class LoaderRandomness:
    """The seed of a ``DataLoader`` and what derives from it (a mixin of ``DataLoader``)."""

    _seed: int
    sampler: Any
    batch_sampler: Any
    # The sampler the loader built for shuffle=True: its seed follows the loader's.
    _owned_sampler: Any = None

    @property
    def epoch(self) -> int:
        """The current epoch (the loader's own, read here)."""
        raise NotImplementedError

    @property
    def seed(self) -> int:
        """The seed of every random order and of :func:`item_seed`; saved by ``state_dict``."""
        return self._seed

    @seed.setter
    def seed(self, value: int) -> None:
        self._seed = check_seed(value)
        if self._owned_sampler is not None:
            self._owned_sampler.seed = self._seed

    def _default_seed(self, generator: Any) -> int:
        """The seed of a loader given none: one draw from ``generator``, or OS entropy."""
        return seed_from(generator) if generator is not None else random_seed()

    def _shuffled_sampler(self, dataset: Any, seed: int, generator: Any,
                          user_seeded: bool) -> Any:
        """The sampler of ``shuffle=True`` without one: seeded by the loader's seed."""
        self._owned_sampler = RandomSampler(dataset, seed=seed)
        return self._owned_sampler

    def _begin_iteration(self) -> None:
        """What ``iter(loader)`` does first (``dataloader.torch`` draws its base seed)."""

    def _worker_base_seed(self) -> int:
        """The base of the started epoch's worker seeds (``WorkerInfo.seed`` minus ``id``)."""
        return worker_base_seed(self.seed, self.epoch)

    def _worker_seeds_follow_seed(self) -> bool:
        """Whether every epoch's worker seeds follow from ``(seed, epoch)`` (persistent
        worker processes then reseed for each epoch)."""
        return True

    def _epoch_samplers(self) -> list[Any]:
        """The samplers whose order depends on the epoch number."""
        found: list[Any] = []
        for sampler in (self.sampler, self.batch_sampler,
                        getattr(self.batch_sampler, "sampler", None)):
            if is_epoch_seeded(sampler) and all(sampler is not other for other in found):
                found.append(sampler)
        return found
