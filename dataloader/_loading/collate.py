"""Collation: turning a list of items into one batch.

``default_collate`` follows ``torch.utils.data.default_collate``'s structure
rules, but its leaves are numpy arrays (torch tensors stay torch tensors):

========================  =====================================================
item type                 batch
========================  =====================================================
numpy array               one array with a new leading axis (native stacking)
numpy scalar              a 1-d array of the scalar's dtype
bool / int / float        a 1-d array of bool / int64 / float64
str / bytes               the list of items, unchanged
mapping                   the same mapping type, each key collated
namedtuple                the same namedtuple, each field collated
tuple / list / sequence   a list (or the same sequence type), position by position
torch.Tensor              ``torch.stack`` (torch is imported only when items are tensors)
a registered type         what its registered function returns
========================  =====================================================

Other stages add leaf types with :func:`register_collate`, as torch's
``default_collate_fn_map`` does: the image stage registers ``Image`` (one
pooled ``ImageBatch``, NCHW, as ``ImageCollator`` makes) and ``ImageBatch``.

Stacked arrays and tensors are allocated with ``numpy.empty``, except in
a worker process, whose batches are allocated in the shared memory they
travel in (:func:`batch_allocator`), as torch's workers allocate theirs.
"""

from __future__ import annotations

import collections.abc
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from dataloader._core.buffers import BufferPool
from dataloader._core.collate import collate_numbers, stack_arrays

__all__ = [
    "PooledCollator", "allocate", "batch_allocator", "collate_arrays", "collate_container",
    "convert_container", "default_collate", "default_collate_fn_map", "default_convert",
    "has_batch_memory", "own_rule", "register_collate",
    "registered_rule", "stack_tensors", "tensor_batch",
]

Allocator = Callable[[tuple[int, ...], Any], np.ndarray]


class PooledCollator:
    """Base of the collators whose batches come from a ``BufferPool`` of their own.

    The pool's memory stays in its process: a collator pickled to a
    spawned worker process takes a new pool of the same capacity there.

    Examples
    --------
    >>> import pickle
    >>> from dataloader import ImageCollator
    >>> collator = ImageCollator(pool_capacity=4)
    >>> copy = pickle.loads(pickle.dumps(collator))
    >>> copy.pool is collator.pool, copy.pool.capacity
    (False, 4)
    """

    pool: BufferPool

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "pool": self.pool.capacity}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.pool = BufferPool(state["pool"])

# Where this process allocates stacked batches: numpy.empty, or a worker
# process's shared-memory slot while it loads a batch.
_empty: Allocator = np.empty
# A thread's own allocator, over the process's: a worker thread's pool.
_local = threading.local()


def batch_allocator(empty: Allocator | None, *, this_thread: bool = False) -> None:
    """Allocate stacked batches with ``empty(shape, dtype)`` from now on (``None``: numpy).

    With ``this_thread=True``, only on the calling thread (``None`` then
    returns it to the process's allocator): a worker thread takes its
    batches from its loader's ``BufferPool``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader._loading.collate import batch_allocator, default_collate
    >>> batch_allocator(lambda shape, dtype: np.zeros(shape, dtype))
    >>> default_collate([np.ones(2), np.ones(2)]).shape
    (2, 2)
    >>> batch_allocator(None)
    """
    global _empty
    if this_thread:
        _local.empty = empty
    else:
        _empty = np.empty if empty is None else empty


def _allocator() -> Allocator:
    return getattr(_local, "empty", None) or _empty


def has_batch_memory() -> bool:
    """Whether this thread or process has batch memory of its own (a worker thread's pool,
    a worker process's slot), where batches are not allocated with ``numpy.empty``."""
    return _allocator() is not np.empty


def allocate(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Uninitialised memory for a stacked batch, from this thread's or process's allocator."""
    return _allocator()(shape, dtype)


def tensor_batch(torch: Any, elem: Any, count: int) -> Any:
    """An uninitialised tensor for ``count`` stacked tensors like ``elem``, in batch memory."""
    nbytes = count * elem.numel() * elem.element_size()
    if nbytes == 0:
        return torch.empty((count, *elem.shape), dtype=elem.dtype)
    memory = torch.frombuffer(allocate((nbytes,), np.uint8), dtype=torch.uint8)
    return memory.view(elem.dtype).view(count, *elem.shape)

_UNSUPPORTED = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def default_collate(batch: list[Any]) -> Any:
    """Collate a list of items into a batch, following the item's structure.

    Parameters
    ----------
    batch : list
        The items of one batch, all of the same structure.

    Returns
    -------
    The batch: numpy arrays where the items hold numbers or arrays, the same
    containers around them (see the module documentation for each rule).

    Raises
    ------
    TypeError
        When an item's type has no collation rule.
    RuntimeError
        When sequences in the batch differ in length (torch's error).
    ValueError
        When arrays in the batch differ in shape, or a batch of Python ints
        holds one that int64 cannot (torch's error).

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import default_collate
    >>> default_collate([1, 2, 3])
    array([1, 2, 3])
    >>> batch = default_collate([{"x": np.zeros(2), "y": 0}, {"x": np.ones(2), "y": 1}])
    >>> batch["x"].shape, batch["y"].tolist()
    ((2, 2), [0, 1])
    """
    elem = batch[0]
    try:
        collate = default_collate_fn_map.get(type(elem))
        if collate is not None:
            return collate(batch)
        return _collate_by_isinstance(elem, batch)
    except (TypeError, ValueError, RuntimeError) as error:
        raise none_item_error(batch) or error from error


def none_item_error(batch: list[Any]) -> TypeError | None:
    """The error to raise when a failed batch holds ``None`` beside other values.

    A ``__getitem__`` that falls off its end returns ``None``; the rule of
    the first item then fails on it with a message about something else
    (``object of type 'NoneType' has no len()``). This one names the
    item, and its position travels as ``batch_position`` for the loader's
    note to name its index.
    """
    positions = [position for position, item in enumerate(batch) if item is None]
    if not positions or len(positions) == len(batch):
        return None
    first = positions[0]
    other = next(position for position, item in enumerate(batch) if item is not None)
    error = TypeError(
        f"default_collate: item {first} of the batch is None where item {other} is a "
        f"{type(batch[other]).__name__} (did __getitem__ or the transform return nothing "
        "for it?)"
    )
    error.batch_position = first  # type: ignore[attr-defined]
    return error


def collate_arrays(batch: list[Any], empty: Allocator | None = None) -> np.ndarray:
    """Numpy arrays stacked on a new leading axis (0-d numpy scalars: their 1-d array).

    ``empty(shape, dtype)`` allocates the stack; by default this thread's allocator.
    """
    elem = batch[0]
    if elem.dtype.kind in "OSUV":
        raise TypeError(_UNSUPPORTED.format(f"numpy array of dtype {elem.dtype}"))
    if elem.shape == () and type(elem) is not np.ndarray:
        return np.array(batch)
    for item in batch:
        if not isinstance(item, np.ndarray):
            raise TypeError(
                f"default_collate: cannot stack a {type(item).__name__} with numpy arrays"
            )
    return stack_arrays(batch, empty or allocate)


def _collate_numpy_scalars(batch: list[Any]) -> np.ndarray:
    return np.array(batch, dtype=batch[0].dtype)


def _collate_bools(batch: list[Any]) -> np.ndarray:
    fast = collate_numbers(batch, bool) if type(batch) is list else None
    return _checked_numbers(batch, np.bool_) if fast is None else fast


def _collate_ints(batch: list[Any]) -> np.ndarray:
    fast = collate_numbers(batch, int) if type(batch) is list else None
    if fast is not None:
        return fast
    _check_int64(batch)
    return _checked_numbers(batch, np.int64)


_INT64 = np.iinfo(np.int64)


def _check_int64(batch: list[Any]) -> None:
    """Raise torch's ``ValueError`` for a batch of ints that int64 cannot hold.

    numpy would make a uint64 array of ints up to 2**64 - 1, a float64 one
    (rounded) of those mixed with smaller ones, an object one of larger
    ints: never the int64 batch ints collate to.
    """
    if not all(isinstance(item, int) for item in batch):
        return  # a mix with floats collates to float64
    for item in batch:
        if not _INT64.min <= item <= _INT64.max:
            raise ValueError(f"default_collate: the int {item!r} does not fit in int64")


def _collate_floats(batch: list[Any]) -> np.ndarray:
    fast = collate_numbers(batch, float) if type(batch) is list else None
    return _checked_numbers(batch, np.float64) if fast is None else fast


def _checked_numbers(batch: list[Any], dtype: type) -> np.ndarray:
    try:
        array = np.array(batch)
    except (ValueError, OverflowError) as exc:
        raise TypeError(
            f"default_collate: cannot collate {batch[0]!r} with the rest: {exc}") from exc
    if array.dtype.kind not in "biuf" or array.ndim != 1:
        raise TypeError(_UNSUPPORTED.format(f"a mix of numbers and {array.dtype} values"))
    # A batch mixing ints and floats stays float, never truncated to int.
    if np.can_cast(array.dtype, dtype, casting="safe"):
        return array.astype(dtype, copy=False)
    return array


def _collate_strings(batch: list[Any]) -> list[Any]:
    return batch


def _collate_mapping(elem: collections.abc.Mapping, batch: list[Any],
                     collate: Callable[[list[Any]], Any]) -> Any:
    collated = {key: collate([item[key] for item in batch]) for key in elem}
    # The concrete type, whose constructor may take the items (the abstract
    # ``Mapping``'s takes none); a ``TypeError`` says it does not.
    mapping_type: Callable[..., Any] = type(elem)
    try:
        return mapping_type(collated)
    except TypeError:
        # The mapping type's constructor takes no dict: fall back to dict.
        return collated


def _collate_namedtuple(elem: tuple, batch: list[Any], collate: Callable[[list[Any]], Any]) -> Any:
    return type(elem)(*(collate(list(field)) for field in zip(*batch, strict=True)))


def _collate_sequence(elem: collections.abc.Sequence, batch: list[Any],
                      collate: Callable[[list[Any]], Any]) -> Any:
    size = len(elem)
    if any(len(item) != size for item in batch):
        raise RuntimeError("each element in list of batch should be of equal size")
    columns = [collate(list(column)) for column in zip(*batch, strict=True)]
    if isinstance(elem, tuple):
        return columns
    sequence_type: Callable[..., Any] = type(elem)  # as in _collate_mapping
    try:
        return sequence_type(columns)
    except TypeError:
        return columns


def stack_tensors(torch: Any, elem: Any, batch: list[Any]) -> Any:
    """``torch.stack`` of ``batch``, into batch memory (a worker process's shared slot)."""
    if _allocator() is np.empty or elem.device.type != "cpu":
        return torch.stack(batch, 0)
    return torch.stack(batch, 0, out=tensor_batch(torch, elem, len(batch)))


def _collate_by_isinstance(elem: Any, batch: list[Any]) -> Any:
    registered = registered_rule(elem)
    if registered is not None:
        return registered(batch)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(elem, torch.Tensor):
        return stack_tensors(torch, elem, batch)
    if isinstance(elem, np.ndarray):
        return collate_arrays(batch)
    if isinstance(elem, np.generic):
        return _collate_numpy_scalars(batch)
    if isinstance(elem, bool):
        return _collate_bools(batch)
    if isinstance(elem, int):
        return _collate_ints(batch)
    if isinstance(elem, float):
        return _collate_floats(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    return collate_container(elem, batch, default_collate)


def collate_container(elem: Any, batch: list[Any], collate: Callable[[list[Any]], Any]) -> Any:
    """The batch of mappings, namedtuples or sequences like ``elem``, each field by ``collate``.

    Raises ``TypeError`` for any other item: no rule collates it.
    """
    if isinstance(elem, collections.abc.Mapping):
        return _collate_mapping(elem, batch, collate)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return _collate_namedtuple(elem, batch, collate)
    if isinstance(elem, collections.abc.Sequence):
        return _collate_sequence(elem, batch, collate)
    raise TypeError(_UNSUPPORTED.format(type(elem)))


def registered_rule(elem: Any) -> Callable[[list[Any]], Any] | None:
    """The function :func:`register_collate` gave ``elem``'s type (or a base of it), if any."""
    for registered, collate in _REGISTERED.items():
        if isinstance(elem, registered):
            return collate
    return None


# Exact-type fast paths for the common leaves; everything else (subclasses,
# containers, tensors) goes through the isinstance chain above.
default_collate_fn_map: dict[type, Callable[[list[Any]], Any]] = {
    np.ndarray: collate_arrays,
    bool: _collate_bools,
    int: _collate_ints,
    float: _collate_floats,
    str: _collate_strings,
    bytes: _collate_strings,
    dict: lambda batch: _collate_mapping(batch[0], batch, default_collate),
    tuple: lambda batch: _collate_sequence(batch[0], batch, default_collate),
    list: lambda batch: _collate_sequence(batch[0], batch, default_collate),
}
# The types added by register_collate, also matched by isinstance.
_REGISTERED: dict[type, Callable[[list[Any]], Any]] = {}
# The rules above, before any change to ``default_collate_fn_map``.
_OWN_RULES = dict(default_collate_fn_map)


def own_rule(kind: type) -> bool:
    """Whether ``default_collate`` collates items of exactly ``kind`` by its own rule.

    ``False`` once a rule was registered for the type (or a base of it) or
    ``default_collate_fn_map`` was changed for it.
    """
    if default_collate_fn_map.get(kind) is not _OWN_RULES.get(kind):
        return False
    return not any(issubclass(kind, registered) for registered in _REGISTERED)


def register_collate(item_type: type, collate: Callable[[list[Any]], Any]) -> None:
    """Make :func:`default_collate` collate ``item_type`` (and subclasses) with ``collate``.

    ``collate`` receives the list of items and returns the batch. A type
    registered again replaces its earlier function.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dataloader import default_collate
    >>> from dataloader._loading.collate import register_collate
    >>> register_collate(Fraction, lambda items: sum(items))
    >>> default_collate([Fraction(1, 2), Fraction(1, 3)])
    Fraction(5, 6)
    """
    if not isinstance(item_type, type):
        raise TypeError(f"register_collate: item_type must be a type, got {item_type!r}")
    if not callable(collate):
        raise TypeError(f"register_collate: collate must be callable, got {collate!r}")
    default_collate_fn_map[item_type] = collate
    _REGISTERED[item_type] = collate


def default_convert(data: Any) -> Any:
    """Convert one item without batching it (the collation of ``batch_size=None``).

    Numpy scalars become 0-d arrays, containers are converted element by
    element, and everything else is returned unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import default_convert
    >>> default_convert({"label": np.int64(3), "name": "cat"})
    {'label': array(3), 'name': 'cat'}
    """
    if isinstance(data, np.generic):
        return np.asarray(data)
    if isinstance(data, (str, bytes, np.ndarray)):
        return data
    return convert_container(data, default_convert)


def convert_container(data: Any, convert: Callable[[Any], Any]) -> Any:
    """``data``'s mapping, namedtuple or sequence with each value through ``convert``.

    Anything else is returned unchanged.
    """
    if isinstance(data, collections.abc.Mapping):
        converted = {key: convert(value) for key, value in data.items()}
        mapping_type: Callable[..., Any] = type(data)  # as in _collate_mapping
        try:
            return mapping_type(converted)
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(convert(value) for value in data))
    if isinstance(data, tuple):
        return [convert(value) for value in data]
    if isinstance(data, collections.abc.Sequence):
        converted_items = [convert(value) for value in data]
        sequence_type: Callable[..., Any] = type(data)  # as in _collate_mapping
        try:
            return sequence_type(converted_items)
        except TypeError:
            return converted_items
    return data
