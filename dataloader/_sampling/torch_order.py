"""Orders drawn by torch's own algorithms, for samplers that draw from torch.

A sampler given a ``torch.Generator`` (or, in :mod:`dataloader.torch`,
given no randomness at all, which in torch means torch's default
generator) draws its epoch exactly as ``torch.utils.data``'s sampler of
the same name does: the same torch calls, in the same order, with the same
sizes, so the same generator state gives the same indices and leaves the
generator in the same state. A seeded sampler (``seed=``) keeps the
native, position-by-position order instead (``dataloader._sampling.shuffle``).

Such an order is a running draw, so it is computed whole, as torch
computes it, and an interrupted epoch cannot be recomputed from a seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["permutations", "subset_permutation", "uniform_draws", "weighted_draws"]

# torch's RandomSampler draws with replacement in blocks of this many.
_REPLACEMENT_BLOCK = 32


def _torch() -> Any:
    import torch

    return torch


def _own_generator(torch: Any) -> Any:
    """torch's RandomSampler without a generator: a fresh one, seeded from the default one."""
    seed = int(torch.empty((), dtype=torch.int64).random_().item())
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def permutations(n: int, total: int, generator: Any) -> Iterator[np.ndarray]:
    """``RandomSampler(replacement=False)``: whole permutations, the last one cut.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from dataloader._sampling.torch_order import permutations
    >>> ours = np.concatenate(list(permutations(5, 5, torch.Generator().manual_seed(1))))
    >>> ours.tolist() == torch.randperm(5, generator=torch.Generator().manual_seed(1)).tolist()
    True
    """
    torch = _torch()
    generator = generator if generator is not None else _own_generator(torch)
    for _ in range(total // n):
        yield torch.randperm(n, generator=generator).numpy()
    # torch draws this last permutation even when nothing of it is used.
    yield torch.randperm(n, generator=generator).numpy()[: total % n]


def uniform_draws(n: int, total: int, generator: Any) -> Iterator[np.ndarray]:
    """``RandomSampler(replacement=True)``: draws in torch's blocks of 32."""
    torch = _torch()
    generator = generator if generator is not None else _own_generator(torch)
    for _ in range(total // _REPLACEMENT_BLOCK):
        yield torch.randint(high=n, size=(_REPLACEMENT_BLOCK,), dtype=torch.int64,
                            generator=generator).numpy()
    yield torch.randint(high=n, size=(total % _REPLACEMENT_BLOCK,), dtype=torch.int64,
                        generator=generator).numpy()


def subset_permutation(n: int, generator: Any) -> np.ndarray:
    """``SubsetRandomSampler``'s order of the positions ``0 .. n - 1``."""
    torch = _torch()
    return torch.randperm(n, generator=generator).numpy()


def weighted_draws(weights: np.ndarray, total: int, replacement: bool,
                   generator: Any) -> np.ndarray:
    """``WeightedRandomSampler``: ``torch.multinomial`` over the weights as doubles."""
    torch = _torch()
    drawn = torch.multinomial(torch.as_tensor(weights, dtype=torch.double), total,
                              replacement, generator=generator)
    return drawn.numpy()
