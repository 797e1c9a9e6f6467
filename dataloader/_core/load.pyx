"""The one loading path: fetch, transform, skip policy and collate of a batch.

Every way a batch is loaded goes through this module (see
``docs/architecture.md``, "One loading path"):

* ``load_batch`` loads a whole batch on one thread: the direct path
  (``load_direct``, from ``dataloader._loading.iterators``), a batch task
  of the threaded engine (``epoch.pyx``), and, with its items already
  fetched, a stream's batch (``load_fetched``, from ``stream.pyx``,
  ``epoch.pyx`` or the consumer thread).
* Lanes (``epoch.pyx``) load a batch item by item: ``load_item`` for each
  item, then ``collate_items`` once, on the lane that finishes last; or,
  with an assembler's ``slots``, each item into its slot of the batch
  (``load_lane_item``, ``collate_lanes``).

Each stage is timed into the calling thread's ``Row`` here and nowhere
else. Under ``on_error="skip"`` (``recipe.skip`` is a ``SkipBudget``), an
item whose fetch or transform raises an ``Exception`` is dropped from its
batch and counted in the ``SKIPPED`` columns; a batch left with no items
is ``EMPTY_BATCH``, which the epochs pass over.
"""
from dataloader._core._typedefs cimport int64_t
from dataloader._core.stats cimport (
    COLLATE_COUNT, FETCH_COUNT, Row, SKIPPED_COUNT, TRANSFORM_COUNT, WAIT_COUNT, now_ns,
    record,
)

from dataloader._errors import STREAM_BATCH, LoadingContext, add_context


# The result of a batch whose every item was skipped: never delivered.
EMPTY_BATCH = object()
# What ``load_item`` returns for an item it skipped.
SKIPPED_ITEM = object()
# The ``items`` of a batch still to be fetched.
cdef object NOT_FETCHED = object()


cdef class Recipe:
    """How one epoch turns indices into a batch; resolved once per epoch.

    Parameters
    ----------
    fetch : callable or None
        The dataset's bound ``__getitems__(indices)`` when it has a truthy
        one, else ``None`` (then ``getitem`` is called per item).
    getitem : callable or None
        The dataset's bound ``__getitem__`` (``None`` for a stream, whose
        items are fetched by its iterator).
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
        With ``on_error="skip"``, the epoch's budget of items to drop;
        ``None`` raises every error.
    rows : callable or None
        ``rows(first_item, batch_size)``: a batch that takes each item into
        its rows as soon as the item is made (``default_collate``'s
        ``start_rows``), or ``None`` when collating at the end pays better.
        Used for batches fetched item by item; ``None`` always collates at
        the end.

    ``split_first`` (read-only) says whether the epoch's first batch may be
    loaded by lanes, item by item, on every pool thread (``epoch.pyx``), and
    ``slots`` (read-only) whether those lanes write their items straight into
    the batch: the assembler's ``slots(count)`` (``_loading/plugins.py``), or
    ``None`` to collate the items at the end.
    """

    def __init__(self, fetch, getitem, transform, collate, bint batched,
                 assemble=None, skip=None, rows=None):
        self.fetch = fetch
        self.getitem = getitem
        self.transform = transform
        self.collate = collate
        self.batched = batched
        self.assemble = assemble if batched else None
        self.skip = skip
        self.rows = rows if batched and fetch is None and self.assemble is None else None
        # Whether a batch may be loaded item by item and collated (lanes) with the
        # same result: no __getitems__, and no assembler, or one that says its
        # batches are collate's (``same_as_collate``, _loading/plugins.py).
        self.split_first = batched and fetch is None and (
            self.assemble is None or getattr(self.assemble, "same_as_collate", False))
        # Items put into their slots as they load; skipped items would leave holes.
        self.slots = (getattr(self.assemble, "slots", None)
                      if self.split_first and skip is None else None)

    def __repr__(self):
        return (f"Recipe(fetch={self.fetch!r}, transform={self.transform!r}, "
                f"collate={self.collate!r}, batched={self.batched}, "
                f"assemble={self.assemble!r}, skip={self.skip!r})")

    cpdef object fetch_items(self, object indices):
        """The items of ``indices``, by one ``__getitems__`` call or one ``__getitem__`` each."""
        if self.fetch is None:
            return list(map(self.getitem, indices))
        items = self.fetch(indices)
        if not hasattr(items, "__len__"):
            raise TypeError(
                f"__getitems__ returned {type(items).__name__}; it must return a list "
                f"of the items, one per index ({len(indices)} indices)"
            )
        if len(items) != len(indices):
            raise ValueError(
                f"__getitems__ returned {len(items)} items for {len(indices)} indices"
            )
        return items


cdef class Fetched:
    """A stream's batch, its items already taken from the stream's iterator.

    ``positions`` are the items' places in the stream (a list, or one
    position without batching), ``items`` the items (a list, or the one
    item), ``state`` the iterator's ``state_dict()`` after the last one.
    """

    def __init__(self, Py_ssize_t stream, positions, items, state):
        self.stream = stream
        self.positions = positions
        self.items = items
        self.state = state


cpdef object load_batch(Recipe recipe, object indices, Row row, object items=NOT_FETCHED):
    """Fetch (unless ``items`` are given), transform and collate one batch.

    Each stage is timed into ``row``, the calling thread's counters.
    Returns the batch, or ``EMPTY_BATCH`` when ``on_error="skip"`` dropped
    every item.
    """
    cdef int64_t stage_end
    cdef Py_ssize_t count
    if recipe.skip is not None:
        return _load_skipping(recipe, indices, row, items)
    if (recipe.rows is not None and not recipe.rows_declined and items is NOT_FETCHED
            and len(indices) > 1):
        return _load_rows(recipe, indices, row)
    count = len(indices) if recipe.batched else 1
    if (items is NOT_FETCHED and recipe.batched and recipe.fetch is None
            and recipe.assemble is None):
        if recipe.transform is None:  # fetched in order: the first failure is the lowest
            stage_end = now_ns()
            getitem = recipe.getitem
            items = [getitem(index) for index in indices]
            stage_end = record(row, FETCH_COUNT, count, stage_end)
        else:
            # Item by item, as lanes load them: the batch raises its lowest failing
            # item's error, whichever way (and on however many threads) it loads.
            items = [_fetch_transform(recipe, index, row, NOT_FETCHED, now_ns())
                     for index in indices]
            stage_end = now_ns()
        batch = recipe.collate(items)
        record(row, COLLATE_COUNT, 1, stage_end)
        return batch
    if items is NOT_FETCHED:
        stage_end = now_ns()
        if recipe.batched:
            items = _fetch_for_assembly(recipe, indices)
        else:
            items = recipe.getitem(indices)
        stage_end = record(row, FETCH_COUNT, count, stage_end)
    else:
        stage_end = now_ns()
    if recipe.assemble is not None:
        # Transform and collation in one step: each item into its batch slot.
        batch = recipe.assemble(indices, items)
        record(row, TRANSFORM_COUNT, count, stage_end)
        return batch
    transform = recipe.transform
    if transform is not None:
        if recipe.batched:
            items = list(map(transform, indices, items))
        else:
            items = transform(indices, items)
        stage_end = record(row, TRANSFORM_COUNT, count, stage_end)
    batch = recipe.collate(items)
    record(row, COLLATE_COUNT, 1, stage_end)
    return batch


cpdef object load_direct(Recipe recipe, object indices, Row row):
    """``load_batch`` on the consumer thread: the load is also the consumer's wait."""
    cdef int64_t started = now_ns()
    batch = load_batch(recipe, indices, row)
    record(row, WAIT_COUNT, 1, started)
    return batch


cpdef object load_item(Recipe recipe, object index, Row row, object value=NOT_FETCHED):
    """Fetch (unless ``value`` is given) and transform one item: a lane's step.

    Under ``on_error="skip"``, returns ``SKIPPED_ITEM`` when the item raised
    an ``Exception`` that ``recipe.skip`` let it drop; an error beyond the
    budget (and any ``BaseException``, such as ``KeyboardInterrupt``)
    propagates.
    """
    cdef int64_t started = now_ns()
    if recipe.skip is None:
        return _fetch_transform(recipe, index, row, value, started)
    try:
        return _fetch_transform(recipe, index, row, value, started)
    except Exception as exc:
        if not recipe.skip.spend(exc, index):
            raise
        record(row, SKIPPED_COUNT, 1, started)
        return SKIPPED_ITEM


cpdef object collate_items(Recipe recipe, list items, Row row):
    """Collate the items of a batch loaded by ``load_item``, skipped ones left out.

    Returns ``EMPTY_BATCH`` when every item was skipped.
    """
    cdef int64_t started = now_ns()
    if recipe.skip is not None:
        items = [value for value in items if value is not SKIPPED_ITEM]
        if not items:
            return EMPTY_BATCH
    batch = recipe.collate(items)
    record(row, COLLATE_COUNT, 1, started)
    return batch


cpdef object load_lane_item(Recipe recipe, object index, Row row, object slots,
                            Py_ssize_t position):
    """A lane's step: ``load_item``, or, given the batch's ``slots`` (``recipe.slots(count)``),
    fetch the item and transform it straight into slot ``position`` (returns ``None``)."""
    if slots is None:
        return load_item(recipe, index, row)
    cdef int64_t started = now_ns()
    value = recipe.getitem(index)
    started = record(row, FETCH_COUNT, 1, started)
    slots.put(position, index, value)
    record(row, TRANSFORM_COUNT, 1, started)
    return None


cpdef object collate_lanes(Recipe recipe, list items, object slots, Row row):
    """The batch its lanes loaded: ``collate_items``, or the finished ``slots``."""
    if slots is None:
        return collate_items(recipe, items, row)
    cdef int64_t started = now_ns()
    batch = slots.finish()
    record(row, COLLATE_COUNT, 1, started)
    return batch


cpdef tuple load_fetched(Recipe recipe, Fetched fetched, Row row):
    """Transform and collate a stream's batch into its delivered entry.

    The entry is ``(payload, failed, stream, state)``: an ``Exception`` of
    ``transform`` or ``collate_fn`` fails this batch only, so it is the
    payload of a failed entry (with its context attached), not raised.
    """
    try:
        batch = load_batch(recipe, fetched.positions, row, fetched.items)
    except Exception as exc:
        add_context(exc, LoadingContext(STREAM_BATCH, indices=fetched.positions,
                                        stream=fetched.stream))
        return exc, True, fetched.stream, fetched.state
    return batch, False, fetched.stream, fetched.state


cdef object _fetch_for_assembly(Recipe recipe, object indices):
    """The items of ``indices`` for an assembler or a ``__getitems__`` fetch.

    When the items are fetched one by one and item ``k`` fails, the items
    before it are transformed first: if one of them fails, its error is the
    batch's, as when items load one by one (fetch, then transform).
    """
    if recipe.fetch is not None:
        return recipe.fetch_items(indices)
    items = []
    for index in indices:
        try:
            items.append(recipe.getitem(index))
        except Exception as error:
            fetch_error = error
            break
    else:
        return items
    if recipe.transform is not None:
        for earlier, item in zip(indices, items):
            recipe.transform(earlier, item)
    raise fetch_error


cdef object _fetch_transform(Recipe recipe, object index, Row row, object value,
                             int64_t started):
    if value is NOT_FETCHED:
        value = recipe.getitem(index)
        started = record(row, FETCH_COUNT, 1, started)
    if recipe.transform is not None:
        value = recipe.transform(index, value)
        record(row, TRANSFORM_COUNT, 1, started)
    return value


cdef object _load_rows(Recipe recipe, object indices, Row row):
    """``load_batch`` with each item collated into its rows as soon as it is made.

    When the first item's rows would not pay (``recipe.rows`` returns
    ``None``), this batch is collated at the end and the epoch's later
    batches go the usual way.
    """
    cdef Py_ssize_t position, count = len(indices)
    first = _fetch_transform(recipe, indices[0], row, NOT_FETCHED, now_ns())
    cdef int64_t started = now_ns()
    batch = recipe.rows(first, count)
    cdef int64_t collating = now_ns() - started
    if batch is None:
        recipe.rows_declined = True  # the epoch's later batches go the usual way
        items = [first]
    first = None  # each item is freed once in its rows, before the next is made
    for position in range(1, count):
        item = _fetch_transform(recipe, indices[position], row, NOT_FETCHED, now_ns())
        if batch is None:
            items.append(item)
            continue
        started = now_ns()
        if not batch.add(item):
            # Not the first item's structure: default_collate decides, as usual.
            items = batch.items()
            items.append(item)
            batch = None
        item = None
        collating += now_ns() - started
    started = now_ns() - collating
    if batch is None:
        batch = recipe.collate(items)
    else:
        batch = batch.finish()
    record(row, COLLATE_COUNT, 1, started)
    return batch


cdef object _load_skipping(Recipe recipe, object indices, Row row, object fetched):
    """``load_batch`` under ``on_error="skip"``: failing items are dropped and counted."""
    cdef int64_t started = now_ns()
    cdef Py_ssize_t position
    if recipe.batched and fetched is NOT_FETCHED and recipe.fetch is not None:
        # One failing item fails a whole __getitems__ call: the items are
        # then fetched one by one, so that only the failing ones are dropped.
        try:
            fetched = recipe.fetch_items(indices)
        except Exception:
            fetched = NOT_FETCHED
        else:
            record(row, FETCH_COUNT, len(indices), started)
    if not recipe.batched:
        item = load_item(recipe, indices, row, fetched)
        if item is SKIPPED_ITEM:
            return EMPTY_BATCH
        started = now_ns()
        batch = recipe.collate(item)
        record(row, COLLATE_COUNT, 1, started)
        return batch
    items = []
    for position in range(len(indices)):
        items.append(load_item(recipe, indices[position], row,
                               NOT_FETCHED if fetched is NOT_FETCHED else fetched[position]))
    return collate_items(recipe, items, row)

