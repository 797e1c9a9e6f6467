"""Loading one batch: fetch its items, transform them, collate them.

This is the work of one step of an epoch, whichever thread runs it: the
consumer thread on the direct path, a pool thread on the threaded path.
``BatchRecipe`` is resolved once per epoch (which fetch method, which
collate function), so the per-batch code does no lookups.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dataloader._core.stats import Row, load_batch

__all__ = ["BatchRecipe", "SkipBudget", "check_batch_indices", "check_index", "check_skip_policy"]

ON_ERROR_CHOICES = ("raise", "skip")


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


def check_skip_policy(on_error: Any, max_skipped: Any) -> None:
    """Validate ``DataLoader``'s ``on_error`` and ``max_skipped``."""
    if on_error not in ON_ERROR_CHOICES:
        raise ValueError(f"on_error should be 'raise' or 'skip', but got on_error={on_error!r}")
    if max_skipped is None:
        return
    if on_error != "skip":
        raise ValueError("max_skipped applies with on_error='skip'; pass on_error='skip' with it")
    if isinstance(max_skipped, bool) or not isinstance(max_skipped, (int, float)):
        valid = False
    elif isinstance(max_skipped, int):
        valid = max_skipped >= 0
    else:
        valid = math.isfinite(max_skipped) and 0.0 <= max_skipped <= 1.0
    if not valid:
        raise ValueError(
            "max_skipped should be a non-negative int (items) or a float in [0, 1] (a fraction "
            f"of the epoch's items), but got max_skipped={max_skipped!r}"
        )


class SkipBudget:
    """How many failing items one epoch may drop (``on_error="skip"``).

    Every thread loading the epoch spends from the same budget, so the count
    is guarded by a lock (pool threads run in parallel on free-threaded
    builds). Once the budget is exceeded, every further failing item raises
    its error, as with ``on_error="raise"``.
    """

    __slots__ = ("limit", "skipped", "_described", "_lock")

    def __init__(self, limit: int | None, described: str = "None") -> None:
        self.limit = limit
        self.skipped = 0
        self._described = described
        self._lock = threading.Lock()

    @classmethod
    def for_epoch(cls, on_error: str, max_skipped: Any, sampler: Any) -> SkipBudget | None:
        """The budget of an epoch over ``sampler``, or ``None`` with ``on_error="raise"``."""
        if on_error != "skip":
            return None
        if max_skipped is None or isinstance(max_skipped, int):
            return cls(max_skipped, repr(max_skipped))
        try:
            n_items = len(sampler)
        except TypeError:
            raise ValueError(
                f"max_skipped={max_skipped!r} is a fraction of the epoch's items, but the "
                "sampler has no __len__: pass an int"
            ) from None
        return cls(math.floor(max_skipped * n_items), f"{max_skipped!r} of {n_items} items")

    def spend(self, error: BaseException, index: Any) -> bool:
        """Count one failing item; ``False`` (the error is to be raised) beyond the budget."""
        with self._lock:
            self.skipped += 1
            skipped = self.skipped
        if self.limit is None or skipped <= self.limit:
            return True
        error.add_note(
            f"dataloader: {skipped} items of this epoch failed, more than "
            f"max_skipped={self._described}; item {index!r} raised this"
        )
        return False


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
    skip : SkipBudget or None
        With ``on_error="skip"``, the epoch's budget of items to drop
        (``dataloader._core.stats.load_item``); ``None`` raises every error.
    """

    fetch: Callable[[list[int]], Sequence[Any]] | None
    getitem: Callable[[int], Any]
    transform: Callable[[int, Any], Any] | None
    collate: Callable[[Any], Any]
    batched: bool
    assemble: Callable[[list[int], Sequence[Any]], Any] | None = None
    skip: SkipBudget | None = None

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
        skip: SkipBudget | None = None,
    ) -> BatchRecipe:
        getitems = getattr(dataset, "__getitems__", None) if use_getitems else None
        return cls(
            fetch=getitems if getitems and batched else None,
            getitem=dataset.__getitem__,
            transform=transform,
            collate=collate,
            batched=batched,
            assemble=assemble if batched else None,
            skip=skip,
        )

    def load(self, indices: Any, row: Row | None = None) -> Any:
        """Fetch, transform and collate one batch (or one item when not batched).

        Each stage is timed into ``row``, the calling thread's counters
        (``dataloader._loading.stats``), when one is given.
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
