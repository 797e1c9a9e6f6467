"""What loading a batch needs from Python: the recipe, the skip policy, index checks.

The loading itself (fetch, transform, skip policy, collate) is the
engine's, one routine for every path (``dataloader._core.load``). This
module builds its ``Recipe`` once per epoch (which fetch method, which
collate function), so the per-batch code does no lookups; ``SkipBudget``
is the ``on_error="skip"`` budget that routine spends from.
:func:`bind_map_epoch` is the one place an epoch over a map-style dataset
is bound, on the consumer's side and in each worker process alike.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dataloader._core.load import Recipe
from dataloader._datasets.event_loop import EpochItems, EventLoop
from dataloader._datasets.hooks import batch_fetch
from dataloader._loading.collate import default_collate
from dataloader._loading.plugins import bind_epoch, column_path, item_source
from dataloader._loading.rows import start_rows

__all__ = [
    "BoundEpoch", "SkipBudget", "bind_map_epoch", "check_batch_indices", "check_index",
    "check_skip_policy", "dataset_recipe",
]

ON_ERROR_CHOICES = ("raise", "skip")


def check_index(index: Any) -> Any:
    """Return an integer ``index`` as an int (a negative one raises), any other key unchanged.

    A key that is not an integer (a string for a dict-backed dataset, a list
    for a dataset that loads several items at once) goes to the dataset as
    it is, as torch passes it.
    """
    try:
        value = operator.index(index)
    except TypeError:
        return index
    if value < 0:
        raise ValueError(f"sampler yielded {value}, expected a non-negative int")
    return value


def check_batch_indices(indices: Any) -> list[Any]:
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


def dataset_recipe(
    dataset: Any,
    *,
    transform: Callable[[int, Any], Any] | None,
    collate: Callable[[Any], Any],
    batched: bool,
    assemble: Callable[[list[int], Sequence[Any]], Any] | None = None,
    skip: SkipBudget | None = None,
    raw_item: Callable[[int], Any] | None = None,
    columns: bool = False,
) -> Recipe:
    """The ``Recipe`` of an epoch over a map-style ``dataset``.

    A truthy ``__getitems__`` fetches a whole batch in one call; without
    one (or without batching), ``__getitem__`` fetches each item.
    ``raw_item`` (from ``plugins.item_source``) replaces both: the items
    before the dataset's own transform, which the loader runs instead.
    ``assemble`` applies to whole batches only. ``default_collate`` takes
    each item of a batch fetched item by item as soon as it is made
    (``dataloader._loading.rows``). With ``columns`` (no item is loaded on
    its own), a batch is fetched and collated as columns when the dataset
    and ``collate`` both offer it (``plugins.column_path``).
    """
    getitems = batch_fetch(dataset) if raw_item is None else None
    fused = None
    if columns and batched and transform is None and assemble is None and skip is None \
            and raw_item is None:
        fused = column_path(dataset, collate)
    if fused is not None:
        getitems, collate = fused
    return Recipe(
        getitems if batched else None,
        raw_item if raw_item is not None else dataset.__getitem__,
        transform,
        collate,
        batched,
        assemble,
        skip,
        start_rows if collate is default_collate else None,
    )


@dataclass(frozen=True, slots=True)
class BoundEpoch:
    """One epoch over a map-style dataset, bound: what its batches are loaded with.

    Attributes
    ----------
    recipe : Recipe
        The fetch, transform, collate function and skip budget of the epoch.
    item_lanes : bool
        The items are an async dataset's, fetched on its event loop one
        item per lane (an async ``__getitems__`` takes whole batches: False).
    on_cancel : callable or None
        Cancels the epoch's pending coroutines (an async dataset's).
    """

    recipe: Recipe
    item_lanes: bool
    on_cancel: Callable[[], None] | None


def bind_map_epoch(
    dataset: Any,
    *,
    transform: Any,
    collate: Callable[[Any], Any],
    batched: bool,
    seed: int,
    epoch: int,
    lanes: bool,
    skip: SkipBudget | None,
    event_loop: EventLoop | None = None,
    fetch_from: Any = None,
) -> BoundEpoch:
    """Bind epoch ``epoch`` of ``dataset`` for the loader's ``seed``.

    A dataset's own native transform is run by the loader
    (``plugins.item_source``); a native chain is bound to the seed and the
    epoch, with a batch assembler for an ``ImageCollator`` unless items load
    on ``lanes`` (``plugins.bind_epoch``); with an ``event_loop``, the items
    are the dataset's coroutines run on it. ``fetch_from`` is what
    ``__getitem__`` is called on, when not ``dataset`` itself (a dataset
    fetched one item at a time, ``handles.guarded_dataset``).

    Examples
    --------
    >>> from dataloader._loading.collate import default_collate
    >>> from dataloader._loading.fetch import bind_map_epoch
    >>> bound = bind_map_epoch([10, 20], transform=None, collate=default_collate,
    ...                        batched=True, seed=0, epoch=0, lanes=False, skip=None)
    >>> bound.recipe.fetch_items([1, 0]), bound.item_lanes
    ([20, 10], False)
    """
    raw_item, unbound = item_source(None if event_loop else dataset, transform)
    bound, assemble = bind_epoch(unbound, collate, seed=seed, epoch=epoch, lanes=lanes)
    source = dataset if fetch_from is None else fetch_from
    item_lanes, on_cancel = False, None
    if event_loop is not None:
        items = EpochItems(dataset, event_loop)
        source, item_lanes, on_cancel = items, items.item_lanes, items.cancel
        assemble = None  # async items are collated as they come
    recipe = dataset_recipe(source, transform=bound, collate=collate, batched=batched,
                            assemble=assemble, skip=skip, raw_item=raw_item,
                            columns=not lanes and not item_lanes)
    return BoundEpoch(recipe, item_lanes, on_cancel)
