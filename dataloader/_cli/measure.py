"""Timing, result tables and result files, for ``dataloader bench`` and the benchmark scripts.

The scripts in ``benchmarks/`` run as plain files (``python
benchmarks/kernels.py``, by ``make bench``), under any installed build of
the package, the free-threaded one included; what they share lives here, so
that none of them imports another by path.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dataloader._cli.bench import format_table

__all__ = ["Indices", "machine", "median_seconds", "print_table", "write_json"]


class Indices:
    """A map-style dataset whose item ``i`` is ``i``: only the loader's work is left.

    Examples
    --------
    >>> from dataloader._cli.measure import Indices
    >>> len(Indices(3)), Indices(3)[2]
    (3, 2)
    """

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return index


def median_seconds(run: Callable[[], Any], *, repeats: int = 5, warmup: int = 1) -> float:
    """The median wall time of ``run()`` over ``repeats`` runs after ``warmup`` runs.

    Examples
    --------
    >>> from dataloader._cli.measure import median_seconds
    >>> median_seconds(lambda: None, repeats=3) >= 0
    True
    """
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def machine() -> dict[str, Any]:
    """The interpreter and machine a result was measured on.

    Examples
    --------
    >>> from dataloader._cli.measure import machine
    >>> sorted(machine())
    ['cpus', 'machine', 'platform', 'python']
    """
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }


def write_json(folder: Path, name: str, payload: dict[str, Any]) -> Path:
    """Write ``payload`` and :func:`machine` to ``folder/name.json``; return the path.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from dataloader._cli.measure import write_json
    >>> path = write_json(Path(tempfile.mkdtemp()), "demo", {"rate": 1.5})
    >>> json.loads(path.read_text())["rate"]
    1.5
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2))
    return path


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print right-aligned columns under a rule; floats with two decimals below 100.

    Examples
    --------
    >>> from dataloader._cli.measure import print_table
    >>> print_table(["name", "rate"], [["a", 1.5], ["b", 1234.5]])
    name   rate
    ----  -----
       a   1.50
       b  1,234
    """
    cells = [[_format(value) for value in row] for row in rows]
    widths = [max(len(str(row[i])) for row in [headers, *cells]) for i in range(len(headers))]
    rule = ["-" * width for width in widths]
    print(format_table(headers, [rule, *cells], align="r" * len(headers)))


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    return str(value)
