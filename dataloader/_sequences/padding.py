"""``PadCollator``: variable-length fields padded into one batch, with the attention mask.

Each field's batch is allocated once, as ``default_collate``'s are: in a
worker process's shared-memory slot, from a worker thread's pool, or (on
the consumer's thread) from the collator's own ``BufferPool``; then one
``nogil`` pass (``dataloader._core.sequences.pad_into``) writes every item
straight into its row, the padding and the mask with it. A batch fetched
as columns (``collate_columns``, from a ``ParquetDataset`` or
``ArrowDataset``) is padded from its flat values and offsets by the same
kernel (``pad_runs_into``), with no Python object per item.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dataloader._core.buffers import BufferPool, pooled_array
from dataloader._core.sequences import pad_into, pad_runs_into
from dataloader._datasets.column_batch import ColumnBatch, ListValues
from dataloader._loading.collate import (
    PooledCollator,
    allocate,
    default_collate,
    has_batch_memory,
)
from dataloader._sequences.arguments import check_choice, check_optional_positive, check_positive

__all__ = ["LENGTHS_KEY", "MASK_KEY", "PadCollator"]

# The keys a mapping item's batch gets its mask and lengths under (Hugging Face's names).
MASK_KEY = "attention_mask"
LENGTHS_KEY = "lengths"
# The mask's dtype: what Hugging Face's collators give (1 for a token, 0 for padding).
_MASK_DTYPE = np.dtype(np.int64)
# Sample kinds a field may have: bool, signed, unsigned, float, complex.
_PADDABLE_KINDS = "biufc"


class PadCollator(PooledCollator):
    """Collate items with variable-length fields: each field padded to its longest item.

    Items are 1-D numpy arrays, or mappings or tuples whose 1-D array
    fields vary in length (other fields, labels say, are collated by
    :func:`~dataloader.default_collate`). Each padded field becomes one
    ``(batch, length)`` array of its own dtype, ``length`` being its longest
    item's (cut to ``max_length``, rounded up to ``pad_to_multiple_of``).
    The batch also holds the attention mask of the first padded field
    (int64, 1 for a token, 0 for padding) and, with ``lengths=True``, its
    items' lengths: under ``"attention_mask"`` and ``"lengths"`` for a
    mapping, after the fields for a tuple. A mapping that has an
    ``"attention_mask"`` field of its own gets it padded with 0 instead.

    Parameters
    ----------
    pad_value : number or mapping, default 0
        The value of the padding; a mapping gives each field's (by key for
        mapping items, by position for tuples) and must name every padded
        field but ``"attention_mask"``.
    pad_to_multiple_of : int, default 1
        Round the padded length up to a multiple of this (8 or 64 suit
        tensor cores).
    max_length : int, optional
        Keep at most the first ``max_length`` elements of each item; a
        multiple of ``pad_to_multiple_of``.
    padding_side : {"right", "left"}, default "right"
        Where the padding goes ("left" for generation with decoder models).
    mask, lengths : bool, default True, False
        Whether the batch holds the attention mask, the lengths.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import PadCollator
    >>> items = [{"input_ids": np.array([5, 6, 7]), "label": 1},
    ...          {"input_ids": np.array([8]), "label": 0}]
    >>> batch = PadCollator(pad_value={"input_ids": -1})(items)
    >>> batch["input_ids"].tolist(), batch["attention_mask"].tolist(), batch["label"].tolist()
    ([[5, 6, 7], [8, -1, -1]], [[1, 1, 1], [1, 0, 0]], [1, 0])
    >>> PadCollator(padding_side="left", mask=False)([np.array([1, 2]), np.array([3])]).tolist()
    [[1, 2], [0, 3]]
    """

    def __init__(self, pad_value: Any = 0, *, pad_to_multiple_of: int = 1,
                 max_length: int | None = None, padding_side: str = "right",
                 mask: bool = True, lengths: bool = False) -> None:
        self.pad_value = _check_pad_value(pad_value)
        self.pad_to_multiple_of = check_positive("pad_to_multiple_of", pad_to_multiple_of)
        self.max_length = check_optional_positive("max_length", max_length)
        if self.max_length is not None and self.max_length % self.pad_to_multiple_of:
            raise ValueError(f"max_length={self.max_length} should be a multiple of "
                             f"pad_to_multiple_of={self.pad_to_multiple_of}")
        self.padding_side = check_choice("padding_side", padding_side, ("right", "left"))
        self.mask = _check_bool("mask", mask)
        self.lengths = _check_bool("lengths", lengths)
        self.pool = BufferPool()

    def __repr__(self) -> str:
        return (f"PadCollator(pad_value={self.pad_value!r}, pad_to_multiple_of="
                f"{self.pad_to_multiple_of}, max_length={self.max_length}, "
                f"padding_side={self.padding_side!r}, mask={self.mask}, lengths={self.lengths})")

    def padded_length(self, longest: int) -> int:
        """The length of a batch whose longest item has ``longest`` elements.

        Examples
        --------
        >>> from dataloader import PadCollator
        >>> PadCollator(pad_to_multiple_of=8, max_length=16).padded_length(20)
        16
        """
        capped = longest if self.max_length is None else min(longest, self.max_length)
        return self._round_up(capped)

    def padded_lengths(self, lengths: np.ndarray) -> np.ndarray:
        """:meth:`padded_length` of each of ``lengths`` (int64).

        Examples
        --------
        >>> import numpy as np
        >>> from dataloader import PadCollator
        >>> PadCollator(pad_to_multiple_of=4).padded_lengths(np.array([1, 4, 5])).tolist()
        [4, 4, 8]
        """
        capped = lengths if self.max_length is None else np.minimum(lengths, self.max_length)
        return self._round_up(capped)

    def _round_up(self, lengths: Any) -> Any:
        """``lengths`` (an int or an array) rounded up to a multiple of ``pad_to_multiple_of``."""
        multiple = self.pad_to_multiple_of
        return -(-lengths // multiple) * multiple

    def __call__(self, items: Sequence[Any]) -> Any:
        if len(items) == 0:
            raise ValueError("PadCollator got an empty batch")
        first = items[0]
        if isinstance(first, Mapping):
            return self._collate_mappings(items)
        if isinstance(first, (tuple, list)):
            return self._collate_tuples(items)
        if isinstance(first, np.ndarray):
            padded, *extras = self._pad(None, list(items), self.mask, self.lengths)
            extras = [extra for extra in extras if extra is not None]
            return (padded, *extras) if extras else padded
        raise TypeError(f"PadCollator: items should be numpy arrays, mappings or tuples, "
                        f"item 0 is {type(first).__name__}")

    def collate_columns(self, columns: ColumnBatch) -> dict[str, Any]:
        """Collate a batch fetched as columns: the batch ``self(columns.rows())`` makes.

        The loader calls this instead of ``self(rows)`` for a dataset that
        fetches batches as columns (``ParquetDataset``, ``ArrowDataset``):
        each column of lists of numbers is padded straight from its flat
        values and offsets, a column of numbers is already its batch.

        Examples
        --------
        >>> import numpy as np
        >>> from dataloader import PadCollator
        >>> from dataloader._datasets.column_batch import ColumnBatch, ListValues
        >>> ids = ListValues(np.array([0, 3, 4]), np.array([5, 6, 7, 8]))
        >>> batch = PadCollator().collate_columns(ColumnBatch(("input_ids",), [ids]))
        >>> batch["input_ids"].tolist(), batch["attention_mask"].tolist()
        ([[5, 6, 7], [8, 0, 0]], [[1, 1, 1], [1, 0, 0]])
        """
        if len(columns) == 0:
            raise ValueError("PadCollator got an empty batch")
        keys = columns.names
        batch: dict[str, Any] = {}
        first = True
        for key, column in zip(keys, columns.columns, strict=True):
            mask, lengths = first and self.mask and MASK_KEY not in keys, first and self.lengths
            if isinstance(column, ListValues):
                batch[key], mask_batch, lengths_batch = self._pad_runs(key, column, mask, lengths)
            elif isinstance(column, np.ndarray):
                batch[key] = column  # a column of numbers: its rows' default_collate
                continue
            elif _paddable(column[0]):
                batch[key], mask_batch, lengths_batch = self._pad(key, column, mask, lengths)
            else:
                batch[key] = default_collate(column)
                continue
            first = False
            for name, extra in ((MASK_KEY, mask_batch), (LENGTHS_KEY, lengths_batch)):
                if extra is not None:
                    batch[name] = extra
        return batch

    def _collate_mappings(self, items: Sequence[Any]) -> dict[str, Any]:
        keys = list(items[0])
        for position, item in enumerate(items):
            if not isinstance(item, Mapping) or item.keys() != items[0].keys():
                raise ValueError(f"PadCollator: item {position} should be a mapping with the "
                                 f"keys of item 0 ({keys}), got {_describe(item)}")
        batch: dict[str, Any] = {}
        first = True
        for key in keys:
            values = [item[key] for item in items]
            if not _paddable(values[0]):
                batch[key] = default_collate(values)
                continue
            batch[key], mask, lengths = self._pad(
                key, values, first and self.mask and MASK_KEY not in keys, first and self.lengths)
            first = False
            for name, extra in ((MASK_KEY, mask), (LENGTHS_KEY, lengths)):
                if extra is not None:
                    batch[name] = extra
        return batch

    def _collate_tuples(self, items: Sequence[Any]) -> tuple[Any, ...]:
        size = len(items[0])
        for position, item in enumerate(items):
            if not isinstance(item, (tuple, list)) or len(item) != size:
                raise ValueError(f"PadCollator: item {position} should be a tuple of {size} "
                                 f"fields as item 0, got {_describe(item)}")
        fields: list[Any] = []
        extras: list[Any] = []
        first = True
        for index in range(size):
            values = [item[index] for item in items]
            if not _paddable(values[0]):
                fields.append(default_collate(values))
                continue
            padded, mask, lengths = self._pad(index, values, first and self.mask,
                                              first and self.lengths)
            first = False
            fields.append(padded)
            extras += [extra for extra in (mask, lengths) if extra is not None]
        return (*fields, *extras)

    def _pad(self, key: Any, arrays: list[Any], mask: bool,
             lengths: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Field ``key``'s batch, with its mask and its lengths when asked for."""
        dtype = _check_field(key, arrays)
        counts = np.fromiter(map(len, arrays), np.int64, len(arrays))
        padded, mask_batch, pad = self._batch_memory(key, dtype, counts, mask)
        pad_into(arrays, padded, counts, pad, self.padding_side == "left", mask_batch)
        return padded, mask_batch, counts if lengths else None

    def _pad_runs(self, key: Any, column: ListValues, mask: bool,
                  lengths: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``_pad`` of a column of lists held as flat values and offsets."""
        dtype = column.values.dtype
        if dtype.kind not in _PADDABLE_KINDS:
            raise TypeError(f"PadCollator: field {key!r} has dtype {dtype}; only numbers "
                            "(bool, integer, float, complex) can be padded")
        counts = column.lengths()
        padded, mask_batch, pad = self._batch_memory(key, dtype, counts, mask)
        pad_runs_into(np.ascontiguousarray(column.values), column.offsets, padded, counts, pad,
                      self.padding_side == "left", mask_batch)
        return padded, mask_batch, counts if lengths else None

    def _batch_memory(self, key: Any, dtype: np.dtype, counts: np.ndarray,
                      mask: bool) -> tuple[np.ndarray, np.ndarray | None, bytes]:
        """Cut ``counts`` (in place) to ``max_length``; the padded batch, its mask (when
        asked for) and the padding's bytes."""
        if self.max_length is not None:
            np.minimum(counts, self.max_length, out=counts)
        width = self.padded_length(int(counts.max()))
        empty = allocate if has_batch_memory() else functools.partial(pooled_array, self.pool)
        padded = empty((len(counts), width), dtype)
        mask_batch = empty((len(counts), width), _MASK_DTYPE) if mask else None
        return padded, mask_batch, _pad_bytes(key, self._pad_value_of(key), dtype)

    def _pad_value_of(self, key: Any) -> Any:
        if not isinstance(self.pad_value, Mapping):
            return self.pad_value
        if key in self.pad_value:
            return self.pad_value[key]
        if key == MASK_KEY:
            return 0
        raise ValueError(f"PadCollator: pad_value gives no value for field {key!r} "
                         f"(it names {list(self.pad_value)})")


def _paddable(value: Any) -> bool:
    """Whether a field's value is padded (a 1-D array) rather than collated."""
    return isinstance(value, np.ndarray) and value.ndim == 1


def _check_pad_value(pad_value: Any) -> Any:
    values = pad_value.values() if isinstance(pad_value, Mapping) else [pad_value]
    for value in values:
        if not isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
            raise TypeError(f"pad_value should be a number or a mapping of field to number, "
                            f"but got {pad_value!r}")
    return dict(pad_value) if isinstance(pad_value, Mapping) else pad_value


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} should be True or False, but got {name}={value!r}")
    return value


def _check_field(key: Any, arrays: list[Any]) -> np.dtype:
    """The dtype every item's array of field ``key`` has (``TypeError``/``ValueError``)."""
    field = "items" if key is None else f"field {key!r}"
    dtype = arrays[0].dtype
    if dtype.kind not in _PADDABLE_KINDS:
        raise TypeError(f"PadCollator: {field} has dtype {dtype}; only numbers (bool, "
                        "integer, float, complex) can be padded")
    for position, array in enumerate(arrays):
        if not isinstance(array, np.ndarray) or array.ndim != 1 or array.dtype != dtype:
            raise ValueError(f"PadCollator: {field} of item {position} should be a 1-D {dtype} "
                             f"array as in item 0, got {_describe(array)}")
    return dtype


@functools.lru_cache(maxsize=64)  # asked once per batch and field, with the same answer
def _pad_bytes(key: Any, value: Any, dtype: np.dtype) -> bytes:
    """``value`` as one element of ``dtype``, once it is exactly representable there."""
    cast = np.asarray(value).astype(dtype)
    same = cast.item() == value or (cast.item() != cast.item() and value != value)
    if not same:
        field = "" if key is None else f" of field {key!r}"
        raise ValueError(f"PadCollator: pad_value {value!r}{field} does not fit its dtype "
                         f"{dtype}")
    return cast.tobytes()


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    if isinstance(value, Mapping):
        return f"a mapping with keys {list(value)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} fields"
    return type(value).__name__
