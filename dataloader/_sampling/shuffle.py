"""Shuffled orders of any length, with random access: position -> index in O(1).

Every sampler that permutes (``RandomSampler`` without replacement,
``SubsetRandomSampler``, ``DistributedSampler`` with ``shuffle=True``) takes
its order from here. An epoch draws one 128-bit key from its generator
(:func:`draw_key`); pass ``p`` over ``[0, n)`` (a ``RandomSampler`` with
``num_samples > n`` makes several) is then a fixed function of
``(key, p, n)``:

* below :data:`EXACT_BELOW` items, numpy's exact, uniform permutation
  (Fisher-Yates), drawn from a Philox generator keyed by ``key``: held as
  an array of at most 4 MiB. The passes come in blocks, one generator per
  block (its number in the generator's counter): one pass per block, or,
  when a sampler makes many passes over a small dataset, up to
  ``CHUNK // n`` of them, so that they cost one numpy call per block, not
  one each;
* from :data:`EXACT_BELOW` items up, a keyed bijection of ``[0, n)`` (a
  Feistel network with cycle-walking, ``_core/src/dl_shuffle.c``) that
  computes the index at any position in constant time and memory, natively
  and without the GIL, so an order of 10^10 items costs nothing to start
  and resumes at any position directly.

Why the switch, and the guarantees of each side: ``docs/datasets.md``,
"How shuffled orders are made".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from dataloader._core.shuffle import Permutation

__all__ = ["EXACT_BELOW", "Order", "chunk_sizes", "draw_key", "pass_chunks", "strided_indices"]

# Below this many items an order is numpy's exact permutation, above it the
# Feistel bijection. Feistel networks are weakest on small domains: NIST SP
# 800-38G (rev. 1) allows its format-preserving ones only on domains of at
# least 10^6, which 2^20 just exceeds; below it an exact permutation costs
# little (an array of 2^20 int32 is 4 MiB and shuffles in milliseconds).
EXACT_BELOW = 1 << 20

# Indices are produced this many at a time (one numpy chunk), after a first
# chunk of FIRST_CHUNK doubling up to it: the first batch of an epoch waits
# for FIRST_CHUNK indices to become Python ints, not CHUNK.
CHUNK = 1 << 16
FIRST_CHUNK = 1 << 10

_U64 = 1 << 64


def chunk_sizes() -> Iterator[int]:
    """FIRST_CHUNK, twice that, ... up to CHUNK, then CHUNK forever."""
    size = FIRST_CHUNK
    while True:
        yield size
        size = min(2 * size, CHUNK)


def draw_key(rng: np.random.Generator) -> tuple[int, int]:
    """The 128-bit key of one epoch's order: two draws from ``rng``."""
    key0, key1 = rng.bit_generator.random_raw(2).tolist()
    return key0, key1


class Order:
    """Pass ``stream`` of a key's order over ``[0, n)`` (``n >= 1``).

    Examples
    --------
    >>> from dataloader._sampling.shuffle import Order
    >>> order = Order(5, (1, 2))
    >>> sorted(order.take(0, 1, 5).tolist())
    [0, 1, 2, 3, 4]
    >>> order.take(2, 1, 1).tolist() == order.take(0, 1, 5)[2:3].tolist()
    True
    """

    __slots__ = ("_array", "_native", "n")

    def __init__(self, n: int, key: tuple[int, int], stream: int = 0) -> None:
        self.n = n
        self._array: np.ndarray | None = None
        self._native: Any = None
        if n < EXACT_BELOW:
            self._array = _exact_block(n, key, stream, 1)[0]
        else:
            self._native = Permutation(n, key[0], key[1], stream % _U64)

    def take(self, start: int, step: int, count: int) -> np.ndarray:
        """The indices at positions ``(start + i * step) % n`` for ``i < count`` (int64).

        Positions past ``n`` wrap around to the start of the order, as
        ``DistributedSampler`` pads its shares.
        """
        array = self._array
        if array is None:
            out = np.empty(count, dtype=np.int64)
            self._native.fill_into(start, step, out)
            return out
        if step == 1 and start + count <= self.n:
            return array[start : start + count].astype(np.int64)
        positions = start + step * np.arange(count, dtype=np.int64)
        return array[positions % self.n].astype(np.int64)

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The indices at ``positions`` (each in ``[0, n)``), as int64.

        On the native side each run of evenly spaced positions is one
        :meth:`take` (an elastic deal's positions are such runs but for a
        few at the start, ``dataloader._sampling.remainder``).
        """
        if self._array is not None:
            return self._array[positions].astype(np.int64)
        if len(positions) > 1:
            steps = np.diff(positions)
            if steps[0] > 0 and (steps == steps[0]).all():
                return self.take(int(positions[0]), int(steps[0]), len(positions))
        out = np.empty(len(positions), dtype=np.int64)
        i = 0
        while i < len(positions):
            j = i + 1
            if j < len(positions):
                step = int(positions[j] - positions[i])
                while j + 1 < len(positions) and positions[j + 1] - positions[j] == step:
                    j += 1
                j += 1
            else:
                step = 1
            if step <= 0:  # not a run the native fill can take: one position alone
                j, step = i + 1, 1
            out[i:j] = self.take(int(positions[i]), step, j - i)
            i = j
        return out


def _exact_block(n: int, key: tuple[int, int], block: int, passes: int) -> np.ndarray:
    """Exact passes ``block * passes`` to ``block * passes + passes - 1`` over ``[0, n)``.

    One per row, each an independent uniform permutation (int32).
    """
    counter = np.array([0, 0, 0, block % _U64], dtype=np.uint64)
    bits = np.random.Philox(key=np.array(key, dtype=np.uint64), counter=counter)
    rng = np.random.Generator(bits)
    if passes == 1:
        order = np.arange(n, dtype=np.int32)
        rng.shuffle(order)
        return order.reshape(1, n)
    return rng.permuted(np.tile(np.arange(n, dtype=np.int32), (passes, 1)), axis=1)


def pass_chunks(n: int, key: tuple[int, int], start: int, stop: int) -> Iterator[np.ndarray]:
    """Positions ``[start, stop)`` of back-to-back passes over ``[0, n)``, in chunks.

    Position ``q`` is position ``q % n`` of pass ``q // n``; each pass is
    its own permutation. Starting at ``start`` costs nothing on the
    Feistel side: the passes and positions before it are never computed
    (on the exact side, only the current block of passes is). The blocks
    depend on ``stop``: a sampler asks with the same ``stop`` from any
    ``start``.
    """
    if n < EXACT_BELOW:
        yield from _exact_pass_chunks(n, key, start, stop)
        return
    order: Order | None = None
    current = -1
    position = start
    sizes = chunk_sizes()
    while position < stop:
        stream, offset = divmod(position, n)
        if order is None or stream != current:
            order, current = Order(n, key, stream), stream
        count = min(next(sizes), n - offset, stop - position)
        yield order.take(offset, 1, count)
        position += count


def _exact_pass_chunks(n: int, key: tuple[int, int], start: int, stop: int) -> Iterator[np.ndarray]:
    # A block's passes are consecutive positions: its rows, end to end.
    passes = max(1, min(CHUNK // n, -(-stop // n)))
    span = passes * n
    current, flat = -1, np.empty(0, dtype=np.int32)
    position = start
    sizes = chunk_sizes()
    while position < stop:
        block, offset = divmod(position, span)
        if block != current:
            current, flat = block, _exact_block(n, key, block, passes).ravel()
        count = min(next(sizes), span - offset, stop - position)
        yield flat[offset : offset + count].astype(np.int64)
        position += count


def strided_indices(
    order: Order | None, n: int, first: int, step: int, count: int
) -> Iterator[np.ndarray]:
    """The indices at positions ``first + i * step`` (``i < count``), wrapping past ``n``.

    ``order`` of ``None`` is the identity (an unshuffled order).
    """
    done = 0
    for size in chunk_sizes():
        if done >= count:
            return
        size = min(size, count - done)
        start = first + done * step
        if order is not None:
            yield order.take(start, step, size)
        else:
            yield (start + step * np.arange(size, dtype=np.int64)) % n
        done += size
