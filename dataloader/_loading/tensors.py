"""Batches as torch tensors: the collation of :mod:`dataloader.torch`.

``default_collate`` here is ``torch.utils.data.default_collate``: the same
structure rules as the numpy one (``dataloader._loading.collate``, whose
container rules it shares), with torch's leaves:

========================  =====================================================
item type                 batch
========================  =====================================================
torch.Tensor              ``torch.stack`` (in a worker process, into shared memory)
numpy array               the arrays stacked natively, as a tensor over them (no copy)
numpy number              a 1-d tensor of its dtype
int / bool                ``torch.tensor(batch)``: int64 / bool (a mix with floats: float32)
float                     ``torch.tensor(batch, dtype=torch.float64)``
anything else             as ``dataloader.default_collate``
========================  =====================================================

``default_convert`` (``batch_size=None``) turns numpy arrays and numbers
into tensors, as torch's does. Types given a rule with ``register_collate``
(the image stage's ``ImageBatch``) keep it.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch

from dataloader._core.collate import collate_numbers
from dataloader._loading.collate import (
    collate_arrays,
    collate_container,
    convert_container,
    none_item_error,
    registered_rule,
    stack_tensors,
)

__all__ = ["default_collate", "default_convert"]

# numpy dtype kinds torch has no tensor for: strings, bytes, objects, voids.
_NOT_TENSORS = "SUOV"


def _in_torch_worker() -> bool:
    """Whether this is a worker process of torch's own DataLoader (its batches travel
    to the consumer by shared memory, so they are collated into it, as torch does)."""
    worker = sys.modules.get("torch.utils.data._utils.worker")
    return getattr(worker, "_worker_info", None) is not None


def default_collate(batch: list[Any]) -> Any:
    """Collate a list of items into a batch of torch tensors, as torch's ``default_collate``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.torch import default_collate
    >>> items = [(np.zeros(2, np.float32), 0), (np.ones(2, np.float32), 1)]
    >>> images, labels = default_collate(items)
    >>> images.dtype, labels.tolist()
    (torch.float32, [0, 1])
    """
    try:
        return _collate(batch[0], batch)
    except (TypeError, ValueError, RuntimeError) as error:
        raise none_item_error(batch) or error from error


def _collate(elem: Any, batch: list[Any]) -> Any:
    if isinstance(elem, torch.Tensor):
        if _in_torch_worker() and elem.device.type == "cpu":
            return torch.stack(batch, 0, out=_shared((len(batch), *elem.shape), elem.dtype))
        return stack_tensors(torch, elem, batch)
    registered = registered_rule(elem)
    if registered is not None:
        return registered(batch)
    if isinstance(elem, (np.ndarray, np.generic)) and elem.dtype.kind not in _NOT_TENSORS:
        return _collate_numpy(elem, batch)
    if isinstance(elem, (bool, int, float)):
        return _collate_numbers(elem, batch)
    if isinstance(elem, (str, bytes)):
        return batch
    return collate_container(elem, batch, default_collate)


def _collate_numpy(elem: Any, batch: list[Any]) -> torch.Tensor:
    if not isinstance(elem, np.ndarray):
        return torch.from_numpy(np.array(batch, dtype=elem.dtype))
    if not _in_torch_worker():
        return torch.from_numpy(collate_arrays(batch))
    shared: list[torch.Tensor] = []

    def allocate_shared(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        shared.append(_shared(shape, torch.from_numpy(np.empty(0, dtype)).dtype))
        return shared[-1].numpy()

    collate_arrays(batch, allocate_shared)
    return shared[-1]


def _shared(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype).share_memory_()


def _collate_numbers(elem: Any, batch: list[Any]) -> torch.Tensor:
    """torch's rules: ints (and bools) by ``torch.tensor``, floats as float64."""
    if type(batch) is list and (exact := collate_numbers(batch, type(elem))) is not None:
        return torch.from_numpy(exact)  # every item of elem's own type: the same dtype
    if isinstance(elem, float):
        return torch.tensor(batch, dtype=torch.float64)
    return torch.tensor(batch)


def default_convert(data: Any) -> Any:
    """Convert one item without batching it, as torch's ``default_convert``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.torch import default_convert
    >>> default_convert({"label": np.int64(3), "name": "cat"})
    {'label': tensor(3), 'name': 'cat'}
    """
    if isinstance(data, (np.ndarray, np.generic)):
        return data if data.dtype.kind in _NOT_TENSORS else torch.as_tensor(data)
    if isinstance(data, (str, bytes, torch.Tensor)):
        return data
    return convert_container(data, default_convert)
