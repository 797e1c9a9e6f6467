"""What torch's ``default_collate`` makes of items, and what ours must make of them.

Batches are compared in a hashable form (``canonical``): containers by
type, arrays and tensors by kind (numpy or torch), dtype, shape and bytes.
A batch that cannot be made is compared by the family of its error.
``Expected`` gives the form of each batch of items of a structure
(``differential_items``) from torch's batch, with the documented
differences (``docs/from-torch.md``) applied and nothing else, and checks
our own ``default_collate`` (or ``default_convert``) against it on the way.
"""

import dataclasses

import numpy as np
import torch
from differential_items import make_item
from hypothesis import event
from torch.utils.data import default_collate as torch_collate
from torch.utils.data import default_convert as torch_convert

from dataloader import default_collate, default_convert

# What collating or loading a batch may raise, for the structure's sake.
BATCH_ERRORS = (TypeError, ValueError, RuntimeError)


def family(error):
    """A type without a rule (``TypeError``), or values that do not fit together
    (torch's ``RuntimeError`` for stacked shapes is our ``ValueError``, as
    ``default_collate``'s docstring says)."""
    return ("raises", "no rule" if isinstance(error, TypeError) else "mismatch")


class Failure:
    """A batch whose ``next()`` raised, by the family of its error (not the error:
    its traceback would keep the consumer's frames, and their batches, alive)."""

    def __init__(self, error):
        self.form = family(error)


def torch_ready(value):
    """``value`` with the documented differences taken out of torch's way.

    Our ``default_collate`` takes arrays with negative strides (torch's
    ``as_tensor`` refuses them) and numpy ``uint64`` scalars (torch's
    ``as_tensor`` of a list of them raises): torch is given a copy and a
    0-d array, which it collates into what ours makes of the originals.
    """
    if isinstance(value, np.ndarray):
        return value.copy() if any(stride < 0 for stride in value.strides) else value
    if isinstance(value, np.uint64):
        return np.asarray(value)
    if isinstance(value, dict):
        return {key: torch_ready(part) for key, part in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(torch_ready(part) for part in value))
    if isinstance(value, (tuple, list)):
        return type(value)(torch_ready(part) for part in value)
    return value


def canonical(value):
    """A hashable form of a batch (or an item)."""
    if isinstance(value, np.ndarray):
        return ("array", "numpy", value.dtype.name, value.shape, value.tobytes())
    if isinstance(value, torch.Tensor):
        flat = torch.empty(value.numel(), dtype=value.dtype).copy_(value.detach().reshape(-1))
        data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        return ("array", "torch", str(value.dtype).removeprefix("torch."), tuple(value.shape),
                data)
    if isinstance(value, dict):
        return ("dict", type(value).__name__,
                tuple((key, canonical(part)) for key, part in value.items()))
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return ("namedtuple", type(value).__name__, tuple(canonical(part) for part in value))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(canonical(part) for part in value))
    if dataclasses.is_dataclass(value):
        return ("dataclass", type(value).__name__, tuple(
            canonical(getattr(value, field.name)) for field in dataclasses.fields(value)))
    if isinstance(value, np.generic):
        return ("numpy scalar", value.dtype.name, value.tobytes())
    return ("python", type(value).__name__, repr(value))


def ours_from_torch(node, ref, pinned):
    """The form our batch must have, from torch's batch ``ref`` of items of ``node``.

    A tensor torch made of numbers or numpy arrays is a numpy array in ours,
    unless the batch was pinned (a torch tensor then, as torch's
    ``pin_memory`` makes); torch tensors in items stay tensors. Strings and
    bytes collate to the list of items (torch's is a tuple when they sit in
    a tuple, list or namedtuple).
    """
    kind = node[0]
    if kind in ("str", "bytes") and type(ref) is tuple:
        return canonical(list(ref))
    if isinstance(ref, torch.Tensor):
        form = canonical(ref)
        return form if kind == "tensor" or pinned else ("array", "numpy", *form[2:])
    if kind == "dict" and isinstance(ref, dict):
        children = dict(node[1])
        return ("dict", type(ref).__name__, tuple(
            (key, ours_from_torch(children[key], part, pinned)) for key, part in ref.items()))
    if kind in ("tuple", "list", "namedtuple") and isinstance(ref, (tuple, list)):
        parts = tuple(ours_from_torch(child, part, pinned)  # a ragged list is one short
                      for child, part in zip(node[1], ref, strict=False))
        if kind == "namedtuple":
            return ("namedtuple", type(ref).__name__, parts)
        return (type(ref).__name__, parts)
    return canonical(ref)


def outcome_of(make):
    """``canonical(make())``, or the family of the error it raises."""
    try:
        value = make()
    except BATCH_ERRORS as error:
        return family(error)
    return canonical(value)


class Expected:
    """The form of each batch of items of ``structure``, made once per batch of indices.

    ``batched=False`` is ``batch_size=None``: each item converted on its own
    (``default_convert``). ``pinned``: as ``pin_memory`` delivers them.
    """

    def __init__(self, structure, batched, pinned):
        self.structure, self.batched, self.pinned = structure, batched, pinned
        self._known = {}

    def __call__(self, indices):
        indices = tuple(indices)
        if indices not in self._known:
            self._known[indices] = self._expect(indices)
        return self._known[indices]

    def _expect(self, indices):
        items = [make_item(self.structure, index) for index in indices]
        if self.batched:
            ours = outcome_of(lambda: default_collate(items))
            event(f"a batch {'raises' if ours[0] == 'raises' else 'is made'}")
            reference, ready = torch_collate, [torch_ready(item) for item in items]
        else:
            ours = outcome_of(lambda: default_convert(items[0]))
            reference, ready = torch_convert, torch_ready(items[0])
        try:
            ref = reference(ready)
        except BATCH_ERRORS as error:
            assert ours == family(error), (self.structure, indices)
            return ours
        # Our own default_collate, on the consumer's thread as the direct path runs it.
        assert ours == ours_from_torch(self.structure, ref, False), (self.structure, indices)
        return ours_from_torch(self.structure, ref, self.pinned)


def leaf_forms(form):
    """The arrays and tensors of a batch's form, in order, without their kind."""
    if form[0] == "array":
        return [form[2:]]
    if form[0] == "dict":
        return [leaf for _, part in form[2] for leaf in leaf_forms(part)]
    if form[0] in ("namedtuple", "dataclass"):
        return [leaf for part in form[2] for leaf in leaf_forms(part)]
    if form[0] in ("list", "tuple"):
        return [leaf for part in form[1] for leaf in leaf_forms(part)]
    return []


def array_leaves(value):
    """The arrays and tensors of a batch, in the order of ``leaf_forms``."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return [value]
    if isinstance(value, dict):
        return [leaf for part in value.values() for leaf in array_leaves(part)]
    if dataclasses.is_dataclass(value):
        return [leaf for field in dataclasses.fields(value)
                for leaf in array_leaves(getattr(value, field.name))]
    if isinstance(value, (tuple, list)):
        return [leaf for part in value for leaf in array_leaves(part)]
    return []
