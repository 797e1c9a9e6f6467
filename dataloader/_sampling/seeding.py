"""Randomness as a function of ``(seed, epoch)``, never of a running state.

An epoch's order, and the seed of each item's random transform, are derived
from the loader's seed and the epoch number alone (through numpy's
``SeedSequence``). Any process can therefore recompute them: every rank of
a distributed job agrees on a partition without communicating, and a
resumed job repeats exactly the epoch it was interrupted in.

:class:`EpochSeeded` is the protocol samplers follow to take part: an
``epoch`` attribute, ``set_epoch`` (which records that the user chose the
epoch, so the loader does not overrule it), and a ``state_dict``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataloader._core.pipeline import item_seed as native_item_seed

__all__ = ["EpochSeeded", "epoch_generator", "item_seed", "random_seed", "worker_base_seed"]

# Seeds are non-negative and fit in a signed 64-bit integer (a torch seed).
_SEED_BOUND = 2**63
# Mixed into the worker seeds' entropy, apart from the epoch orders'.
_WORKER_SEEDS = 0x776F726B


def random_seed() -> int:
    """A fresh seed from OS entropy, for a loader given none."""
    return int(np.random.SeedSequence().generate_state(2, np.uint64)[0] % _SEED_BOUND)


def check_seed(seed: Any, name: str = "seed") -> int:
    """Return ``seed`` as an int, or raise ``TypeError``/``ValueError`` naming it."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"{name} should be an int, but got {name}={seed!r}")
    if seed < 0:
        raise ValueError(f"{name} should be non-negative, but got {name}={seed!r}")
    return int(seed)


def epoch_generator(seed: int, epoch: int) -> np.random.Generator:
    """The numpy generator of one epoch: a function of ``(seed, epoch)`` only.

    Examples
    --------
    >>> from dataloader._sampling.seeding import epoch_generator
    >>> a = epoch_generator(7, 2).permutation(5)
    >>> b = epoch_generator(7, 2).permutation(5)
    >>> a.tolist() == b.tolist()
    True
    """
    return np.random.default_rng(np.random.SeedSequence([seed, epoch]))


def worker_base_seed(seed: int, epoch: int) -> int:
    """The base of epoch ``epoch``'s worker seeds: worker ``w``'s seed is the base plus ``w``.

    Below ``2**62``, so that every worker's seed fits torch's int64 seed.

    Examples
    --------
    >>> from dataloader._sampling.seeding import worker_base_seed
    >>> worker_base_seed(0, 1) == worker_base_seed(0, 1) != worker_base_seed(0, 2)
    True
    """
    state = np.random.SeedSequence([seed, epoch, _WORKER_SEEDS]).generate_state(2, np.uint32)
    return (int(state[0]) << 32 | int(state[1])) % 2**62


def item_seed(seed: int, epoch: int, index: int) -> int:
    """The seed of one item's random transform in one epoch.

    A stable mix of ``(seed, epoch, index)`` (splitmix64, computed natively:
    the native transforms seed each item's draws with it), the same on every
    thread, process and machine: a random augmentation
    seeded with it gives the same result whichever worker runs it, and a
    resumed epoch repeats it exactly. ``seed`` is ``loader.seed`` and
    ``epoch`` is ``loader.epoch``.

    Parameters
    ----------
    seed : int
        The loader's seed (non-negative).
    epoch : int
        The epoch number.
    index : int
        The item's dataset index.

    Returns
    -------
    int
        A seed in ``[0, 2**63)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import item_seed
    >>> item_seed(0, 1, 5) == item_seed(0, 1, 5)
    True
    >>> item_seed(0, 1, 5) != item_seed(0, 2, 5)
    True
    >>> rng = np.random.default_rng(item_seed(0, 1, 5))  # seeds an augmentation
    """
    return native_item_seed(check_seed(seed), epoch, index) % _SEED_BOUND


class EpochSeeded:
    """Mixin of samplers whose order is a function of ``(seed, epoch)``.

    The loader advances ``epoch`` itself on every ``iter(loader)`` unless
    the user called :meth:`set_epoch` since the loader last did.
    """

    seed: int
    epoch: int = 0
    # Whether set_epoch was called since the loader last started an epoch.
    _epoch_chosen_by_user: bool = False

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next pass follows."""
        if not isinstance(epoch, (int, np.integer)) or isinstance(epoch, bool) or epoch < 0:
            raise ValueError(f"epoch should be a non-negative integer, but got epoch={epoch!r}")
        self.epoch = int(epoch)
        self._epoch_chosen_by_user = True

    def state_dict(self) -> dict[str, Any]:
        """``{"seed": ..., "epoch": ...}``: what the order of any epoch depends on."""
        return {"seed": self.seed, "epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.seed = check_seed(state["seed"])
        self.epoch = int(state["epoch"])
        self._epoch_chosen_by_user = False


def claim_epoch(sampler: Any, proposed: int) -> int:
    """Start an epoch on an :class:`EpochSeeded` sampler; return its number.

    The user's ``set_epoch`` wins over the loader's ``proposed`` number.
    """
    if sampler._epoch_chosen_by_user:
        sampler._epoch_chosen_by_user = False
        return sampler.epoch
    sampler.epoch = proposed
    return proposed
