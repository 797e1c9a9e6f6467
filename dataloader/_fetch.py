"""Loading one batch: fetch its items, transform them, collate them.

This is the work of one step of an epoch, whichever thread runs it: the
consumer thread on the direct path, a pool thread on the threaded path.
``BatchRecipe`` is resolved once per epoch (which fetch method, which
collate function), so the per-batch code does no lookups.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from dataloader._core.stats import Row, load_batch

__all__ = ["BatchRecipe", "check_batch_indices", "check_index"]


def check_index(index: Any) -> int:
    """Return ``index`` as an int, or raise for a value that is not a non-negative int."""
    try:
        value = operator.index(index)
    except TypeError:
        raise TypeError(
            f"sampler yielded {index!r} ({type(index).__name__}), expected a non-negative int"
        ) from None
    if value < 0:
        raise ValueError(f"sampler yielded {value}, expected a non-negative int")
    return value


def check_batch_indices(indices: Any) -> list[int]:
    """Return the batch's indices as a list, checking each of them."""
    try:
        values = list(indices)
    except TypeError:
        raise TypeError(
            f"batch_sampler yielded {indices!r} ({type(indices).__name__}), "
            "expected a sequence of indices"
        ) from None
    return [check_index(index) for index in values]


@dataclass(frozen=True, slots=True)
class BatchRecipe:
    """How one epoch turns indices into a batch.

    Attributes
    ----------
    fetch : callable or None
        The dataset's bound ``__getitems__(indices)`` when it has a truthy
        one, else ``None`` (then ``getitem`` is called per item).
    getitem : callable
        The dataset's bound ``__getitem__``.
    transform : callable or None
        ``transform(index, item)``, applied to each item before collation.
    collate : callable
        ``collate_fn``: a list of items to a batch, or (without batching)
        one item to its converted form.
    batched : bool
        Whether indices come in batches (``batch_size`` or ``batch_sampler``).
    assemble : callable or None
        ``assemble(indices, items)``: transform and collate a batch in one
        step (a native chain writing into its batch slots), replacing
        ``transform`` and ``collate`` for whole batches.
    """

    fetch: Callable[[list[int]], Sequence[Any]] | None
    getitem: Callable[[int], Any]
    transform: Callable[[int, Any], Any] | None
    collate: Callable[[Any], Any]
    batched: bool
    assemble: Callable[[list[int], Sequence[Any]], Any] | None = None

    @classmethod
    def for_dataset(
        cls,
        dataset: Any,
        *,
        transform: Callable[[int, Any], Any] | None,
        collate: Callable[[Any], Any],
        batched: bool,
        use_getitems: bool = True,
        assemble: Callable[[list[int], Sequence[Any]], Any] | None = None,
    ) -> BatchRecipe:
        getitems = getattr(dataset, "__getitems__", None) if use_getitems else None
        return cls(
            fetch=getitems if getitems and batched else None,
            getitem=dataset.__getitem__,
            transform=transform,
            collate=collate,
            batched=batched,
            assemble=assemble if batched else None,
        )

    def load(self, indices: Any, row: Row | None = None) -> Any:
        """Fetch, transform and collate one batch (or one item when not batched).

        Each stage is timed into ``row``, the calling thread's counters
        (``dataloader._stats``), when one is given.
        """
        return load_batch(self, indices, row if row is not None else Row(), False)

    def fetch_items(self, indices: list[int]) -> list[Any]:
        """The items of ``indices``, by one ``__getitems__`` call or one ``__getitem__`` each."""
        if self.fetch is None:
            return list(map(self.getitem, indices))
        items = self.fetch(indices)
        if len(items) != len(indices):
            raise ValueError(
                f"__getitems__ returned {len(items)} items for {len(indices)} indices"
            )
        return items
