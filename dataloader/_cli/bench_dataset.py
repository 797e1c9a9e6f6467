"""``dataloader bench --dataset MODULE:CALLABLE``: time your own dataset, and say what auto chose.

The callable (a class or a function) is called without arguments and
returns a dataset; the loader runs it with ``worker_type="auto"`` and
``num_workers="auto"`` (or ``--workers``; torch's loader, with
``--against torch``, gets one worker process per core, or ``--workers``),
and the report gives items/s,
the first batch's time and ``loader.stats()``'s figures: the kind and
count of workers and why, what an item costs, its share in Python code,
and the share of the time spent waiting for batches.
"""

from __future__ import annotations

import importlib
import math
import sys
import time
from collections.abc import Iterable
from typing import Any

from dataloader._auto import usable_cores
from dataloader._cli.common import require
from dataloader._errors import UsageError

__all__ = ["bench_dataset", "load_callable"]


def load_callable(spec: str) -> Any:
    """The object ``spec`` (``"package.module:name"``) names; the current directory is on
    the path, as for ``python -m``.

    Examples
    --------
    >>> load_callable("collections:OrderedDict").__name__
    'OrderedDict'
    """
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise UsageError(f"--dataset should be MODULE:CALLABLE (say, mydata:TrainSet), "
                         f"got {spec!r}")
    # The current directory is searched for this import only: worker processes
    # started later by spawn take this process's path.
    added = "" not in sys.path
    if added:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UsageError(f"--dataset {spec}: cannot import {module_name!r}: {err}") from None
    finally:
        if added:
            sys.path.remove("")
    found: Any = module
    for part in name.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise UsageError(f"--dataset {spec}: {module_name!r} has no {name!r}") from None
    if not callable(found):
        raise UsageError(f"--dataset {spec}: {name!r} is not callable")
    return found


def bench_dataset(spec: str, *, batch_size: int, workers: int | None, epochs: int,
                  against_torch: bool) -> str:
    """Run the dataset ``spec`` names through the loader (and torch's), and report."""
    from dataloader import DataLoader

    dataset = load_callable(spec)()
    loader: DataLoader[Any] = DataLoader(dataset, batch_size=batch_size,
                                         num_workers="auto" if workers is None else workers)
    try:
        items, seconds, first = _time(loader, epochs)
        figures = loader.stats()
    finally:
        loader.close()
    lines = [f"{spec}: {items} items in batches of {batch_size}, {epochs} epoch(s)",
             f"dataloader   {items / seconds:12,.0f} items/s   first batch "
             f"{first * 1e3:8.2f} ms"]
    if against_torch:
        require("torch", "--against torch needs torch: pip install torch")
        import torch.utils.data

        count = usable_cores() if workers is None else workers
        theirs = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=count)
        torch_items, torch_seconds, torch_first = _time(theirs, epochs)
        rate = torch_items / torch_seconds
        lines.append(f"torch ({count} workers) {rate:8,.0f} items/s   first batch "
                     f"{torch_first * 1e3:8.2f} ms   dataloader / torch: "
                     f"{items / seconds / rate:.2f}x items/s")
    lines += _figures(figures)
    return "\n".join(lines)


def _time(loader: Iterable[Any], epochs: int) -> tuple[int, float, float]:
    """Items, wall seconds (iterator creation included), seconds to the first batch."""
    items, first = 0, math.nan
    start = time.perf_counter()
    for _ in range(epochs):
        for batch in loader:
            if items == 0:
                first = time.perf_counter() - start
            items += _batch_length(batch)
    return items, time.perf_counter() - start, first


def _batch_length(batch: Any) -> int:
    """The items in a collated batch: the first dimension of its first leaf."""
    while isinstance(batch, (dict, list, tuple)) and len(batch):
        batch = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
    shape = getattr(batch, "shape", None)
    return int(shape[0]) if shape else 1


def _figures(figures: dict[str, Any]) -> list[str]:
    workers = figures["workers"]
    lines = [f"workers: {workers['count']} x {workers['type']}"
             + (f" -- {workers['why']}" if "why" in workers else "")]
    item = figures["item_seconds"]
    if item is not None:
        lines.append(f"an item costs {item * 1e6:,.1f} us to load, "
                     f"{figures['interpreter_share']:.0%} of it in Python code")
    if figures["wait_share"] is not None:
        lines.append(f"the loop waited for batches {figures['wait_share']:.0%} of its time")
    return lines
