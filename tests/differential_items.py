"""Items for the differential tests (``test_differential.py``).

An item is a function of a *structure* and an index, so every execution
mode can be fed the same items and compared. A structure is a tree of
plain tuples (picklable, for ``spawn`` workers):

- ``("int", range)``: a Python int, ``"small"``, of the whole ``"int64"``
  range, or ``"huge"`` (past int64 when ``i % 4 == 3``);
- ``("float",)``, ``("bool",)``: a Python float (NaN, infinities and -0.0
  among them), a bool;
- ``("str",)``, ``("bytes",)``, ``("none",)``: a str (not only ASCII),
  bytes, ``None``;
- ``("scalar", dtype)``: a numpy scalar;
- ``("array", dtype, shape, layout, ragged)``: a numpy array, ``layout``
  C, F (Fortran order), sliced (every other row) or reversed (negative
  strides); ``ragged``: a row more when ``i % 4 == 2``;
- ``("tensor", dtype, shape, layout)``: a torch tensor, contiguous (C) or
  transposed (T);
- ``("dict", ((key, node), ...), shuffled)``: a dict; ``shuffled``: its
  key order depends on ``i``;
- ``("tuple", nodes, to_list)``: a tuple; ``to_list``: a list when
  ``i % 3 == 1``;
- ``("list", nodes, ragged)``: a list; ``ragged``: one element short when
  ``i % 3 == 1``;
- ``("namedtuple", nodes)``, ``("dataclass", nodes)``: ``Record<n>``,
  ``Box<n>`` of ``n = len(nodes)`` fields.

The datasets are importable from here, so worker processes started by
``spawn`` can unpickle them: ``Items`` (map-style) and ``ItemStream`` (an
``IterableDataset`` whose iterators save their position).
"""

import collections
import dataclasses

import numpy as np

from dataloader import IterableDataset, get_worker_info

# Module-level types: batches holding them are pickled between processes.
Record0 = collections.namedtuple("Record0", [])
Record1 = collections.namedtuple("Record1", ["a"])
Record2 = collections.namedtuple("Record2", ["a", "b"])
Record3 = collections.namedtuple("Record3", ["a", "b", "c"])
RECORDS = [Record0, Record1, Record2, Record3]


@dataclasses.dataclass
class Box1:
    a: object


@dataclasses.dataclass
class Box2:
    a: object
    b: object


BOXES = {1: Box1, 2: Box2}

ARRAY_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]
TENSOR_DTYPES = [
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2",
]
# The dtypes numpy has no name for (their size): made as float32, converted by torch.
_TORCH_ONLY = {"bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
_TEXT = "ab\u00e9\u4e2d\U0001f600 \x00"


def itemsize(dtype):
    """The bytes of one element of ``dtype`` (a name of ``ARRAY_DTYPES`` or ``TENSOR_DTYPES``)."""
    return _TORCH_ONLY.get(dtype) or np.dtype(dtype).itemsize


def make_item(structure, index):
    """The item at ``index`` of ``structure`` (see the module documentation)."""
    return _make(structure, index, [0])


def _rng(index, leaf):
    return np.random.default_rng([index, leaf[0], 7919])


def _make(node, index, leaf):
    kind = node[0]
    if kind in ("dict", "tuple", "list", "namedtuple", "dataclass"):
        return _make_container(node, index, leaf)
    leaf[0] += 1
    rng = _rng(index, leaf)
    if kind == "int":
        return _int(rng, node[1], index)
    if kind == "float":
        return _float(rng)
    if kind == "bool":
        return bool(rng.integers(2))
    if kind == "str":
        return "".join(_TEXT[k] for k in rng.integers(len(_TEXT), size=rng.integers(9)))
    if kind == "bytes":
        return rng.bytes(int(rng.integers(9)))
    if kind == "none":
        return None
    if kind == "scalar":
        return _values(rng, node[1], ())[()]
    if kind == "array":
        _, dtype, shape, layout, ragged = node
        if ragged and index % 4 == 2:
            shape = (shape[0] + 1, *shape[1:]) if shape else (1,)
        return _laid_out(rng, dtype, shape, layout)
    if kind == "tensor":
        return _tensor(rng, *node[1:])
    raise ValueError(f"unknown node {node!r}")


def _make_container(node, index, leaf):
    kind = node[0]
    if kind == "dict":
        parts = {key: _make(child, index, leaf) for key, child in node[1]}
        if node[2]:  # the key order depends on the index
            keys = list(parts)
            order = np.random.default_rng([index, 104729]).permutation(len(keys))
            parts = {keys[k]: parts[keys[k]] for k in order}
        return parts
    parts = [_make(child, index, leaf) for child in node[1]]
    if kind == "tuple":
        return parts if node[2] and index % 3 == 1 else tuple(parts)
    if kind == "list":
        return parts[:-1] if node[2] and parts and index % 3 == 1 else parts
    if kind == "namedtuple":
        return RECORDS[len(parts)](*parts)
    return BOXES[len(parts)](*parts)


def _int(rng, value_range, index):
    if value_range == "int64":
        return int(rng.integers(-2**63, 2**63 - 1, endpoint=True))
    if value_range == "huge" and index % 4 == 3:
        return 2**63 + index if index % 8 == 3 else -2**63 - 1 - index
    return int(rng.integers(-1000, 1000))


def _float(rng):
    special = rng.integers(12)
    if special < 4:
        return [float("nan"), float("inf"), float("-inf"), -0.0][special]
    return float(rng.standard_normal() * 10.0 ** rng.integers(-6, 7))


def _values(rng, dtype, shape):
    """Values of ``dtype`` over its whole range (NaN, infinities, -0.0 among floats)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.asarray(rng.integers(2, size=shape)).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(rng.integers(info.min, info.max, size=shape, dtype=dtype,
                                       endpoint=True))
    if dtype.kind == "c":
        parts = rng.standard_normal((2, *shape))
        return np.asarray(parts[0] + 1j * parts[1]).astype(dtype)
    values = np.asarray(rng.standard_normal(shape) * 100)
    flat = values.reshape(-1)
    for position, special in zip(rng.integers(max(flat.size, 1), size=3),
                                 [np.nan, np.inf, -0.0], strict=True):
        if flat.size:
            flat[position] = special
    return values.astype(dtype)


def _laid_out(rng, dtype, shape, layout):
    if layout == "F" and shape:
        return np.asfortranarray(_values(rng, dtype, shape))
    if layout == "sliced" and shape:
        return _values(rng, dtype, (2 * shape[0], *shape[1:]))[::2]
    if layout == "reversed" and shape:
        return _values(rng, dtype, shape)[::-1]
    return _values(rng, dtype, shape)


def _tensor(rng, dtype, shape, layout):
    import torch

    made = shape
    if layout == "T" and len(shape) >= 2:
        made = (shape[1], shape[0], *shape[2:])
    base = _values(rng, "float32" if dtype in _TORCH_ONLY else dtype, made)
    tensor = torch.from_numpy(base).to(getattr(torch, dtype))
    return tensor.transpose(0, 1) if made != shape else tensor


class Items:
    """Map-style: item ``i`` of ``structure``, for ``i`` in ``range(n)``."""

    def __init__(self, structure, n):
        self.structure, self.n = structure, n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if not 0 <= index < self.n:
            raise IndexError(index)
        return make_item(self.structure, index)


class ItemStream(IterableDataset):
    """Items ``0 .. n - 1`` of ``structure`` as a stream.

    With ``split`` (a torch user's way) each worker streams the indices
    ``i`` with ``i % num_workers == id``; without, every iterator streams all
    of them (for ``shard``, which splits by itself). Iterators save and
    restore their position.
    """

    def __init__(self, structure, n, split=True):
        self.structure, self.n, self.split = structure, n, split

    def __iter__(self):
        info = get_worker_info() if self.split else None
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return _Positions(self.structure, range(start, self.n, step))


class _Positions:
    def __init__(self, structure, indices):
        self.structure, self.indices, self.next = structure, indices, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.next >= len(self.indices):
            raise StopIteration
        self.next += 1
        return make_item(self.structure, self.indices[self.next - 1])

    def state_dict(self):
        return {"next": self.next}

    def load_state_dict(self, state):
        self.next = state["next"]
