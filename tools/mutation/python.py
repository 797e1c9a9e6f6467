"""Mutation testing of the loader's Python modules (``make mutate``).

Each module is paired with the test files that specify it. For every mutant
(``tools/mutation/operators.py``) those tests run in a fork of the runner
(which has imported numpy, pytest, Pillow and torch once, but not the
package), stopping at the first failure, with the mutant injected at import
(``tools/mutation/hook.py``): the mutant is *killed* when a test fails,
errors or hangs (the run outlives ``TIMEOUT_FACTOR`` times the clean run),
and *survives* when every test passes. Survivors are printed; those listed
in ``accepted.toml`` beside this file, each with the reason it cannot be
killed (an equivalent mutant), count as accepted, and the score is

    (killed + accepted) / mutants.

The run fails when a survivor is not accepted or a module scores below
``--min-score``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tools.mutation import hook
from tools.mutation.operators import Mutant, mutants

ROOT = Path(__file__).resolve().parents[2]
ACCEPTED = Path(__file__).with_name("accepted.toml")
TIMEOUT_FACTOR = 4.0

# module -> the pytest arguments selecting the tests that specify it. Tests
# of minutes (a 10^8-item permutation, torchrun jobs) are left out: each
# mutant runs these tests again.
TARGETS: dict[str, list[str]] = {
    "dataloader._sampling.sampler": [
        "tests/test_sampler.py", "tests/test_shuffle.py", "tests/test_resume.py", "--deselect",
        "tests/test_sampler.py::test_large_permutation_is_produced_in_chunks"],
    "dataloader._sampling.state": ["tests/test_resume.py"],
    # Batch memory (batch_allocator, tensor_batch) and own_rule serve the
    # collation into rows and into worker processes' slots.
    "dataloader._loading.collate": ["tests/test_collate.py", "tests/test_rows.py",
                                    "tests/test_transport.py"],
    "dataloader._loading.fetch": ["tests/test_skip.py", "tests/test_loader.py",
                                  "tests/test_epochs.py", "tests/test_rows.py"],
    "dataloader.sources._retry": ["tests/sources/test_retry.py", "tests/sources/test_http.py"],
    "dataloader._sampling.distributed": [
        "tests/test_distributed.py", "tests/test_shuffle.py", "-k", "not torchrun"],
    "dataloader._loading.rows": ["tests/test_rows.py"],
    # spawn and forkserver workers start a fresh interpreter, without the
    # mutant; the descriptor-leak loops and the timeout take seconds each.
    "dataloader._processes.transport": [
        "tests/test_transport.py", "tests/test_process_slots.py", "tests/test_processes.py",
        "-k", "not spawn and not forkserver and not create_and_destroy and not slow_batch"],
}


@dataclass
class Report:
    module: str
    total: int = 0
    killed: int = 0
    survivors: list[Mutant] = field(default_factory=list)
    accepted: list[Mutant] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return (self.killed + len(self.accepted)) / self.total if self.total else 1.0


def module_path(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def accepted_survivors() -> dict[str, dict[str, str]]:
    """``{module: {mutant name: reason}}`` from ``accepted.toml``."""
    with open(ACCEPTED, "rb") as file:
        table = tomllib.load(file)
    return {module: {entry["mutant"]: entry["reason"] for entry in entries}
            for module, entries in table.items()}


def _preload() -> None:
    """Import, once, the libraries every test run imports, but not the package under test.

    Each run is a fork of this process, so it starts with them loaded: the
    cost of a run is then the tests, not an interpreter's start.
    """
    import numpy  # noqa: F401
    import PIL.Image  # noqa: F401
    import pytest  # noqa: F401

    for name in ("hypothesis", "aiohttp", "torch"):
        try:
            __import__(name)
        except ImportError:
            pass
    if any(name == "dataloader" or name.startswith("dataloader.") for name in sys.modules):
        raise RuntimeError("the package under test must not be imported before the fork")


def _child(tests: list[str], mutant: str | None) -> None:
    """The forked run: install the mutant, run the tests, exit with pytest's status."""
    status = 3
    try:
        os.chdir(ROOT)
        # The direct path and the workers' path; the other modes repeat them.
        os.environ["DATALOADER_TEST_MODES"] = "direct,workers"
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        if mutant is not None:
            hook.install(mutant)
        import pytest

        status = int(pytest.main(["-x", "-q", "-m", "not soak", "-p", "no:cacheprovider",
                                  *tests]))
    finally:
        # No interpreter shutdown: a mutant may leave threads that never end.
        os._exit(status)


def _run(tests: list[str], mutants: list[str | None], jobs: int,
         timeout: float | None) -> Iterator[tuple[int, int, float]]:
    """Run ``tests`` once per entry of ``mutants``, ``jobs`` at a time.

    Yields ``(position, status, seconds)`` as runs end; status -1 is a run
    killed after ``timeout`` seconds.
    """
    running: dict[int, tuple[int, float]] = {}
    timed_out: set[int] = set()
    position = 0
    while position < len(mutants) or running:
        while position < len(mutants) and len(running) < jobs:
            pid = os.fork()
            if pid == 0:
                _child(tests, mutants[position])
            running[pid] = (position, time.monotonic())
            position += 1
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for child, (_, started) in running.items():
                if timeout is not None and now - started > timeout and child not in timed_out:
                    timed_out.add(child)
                    os.kill(child, signal.SIGKILL)
            time.sleep(0.02)
            continue
        index, started = running.pop(pid)
        code = -1 if pid in timed_out else os.waitstatus_to_exitcode(status)
        yield index, code, time.monotonic() - started


def test_module(module: str, jobs: int, accepted: dict[str, str], log=print,
                only: set[str] | None = None) -> Report:
    """Run every mutant of ``module`` (or those named in ``only``) against its tests."""
    path = module_path(module)
    tests = TARGETS[module]
    report = Report(module)
    ((_, status, clean),) = _run(tests, [None], 1, None)
    if status != 0:
        raise RuntimeError(f"the tests of {module} fail without any mutant "
                           f"(status {status}): {' '.join(tests)}")
    found = mutants(path.read_text(encoding="utf-8"))
    if only is not None:
        found = [mutant for mutant in found if mutant.name in only]
    report.total = len(found)
    timeout = TIMEOUT_FACTOR * clean + 10
    started = time.monotonic()
    log(f"  {len(found)} mutants; the clean run takes {clean:.0f} s")
    names = [f"{module}:{path}:{mutant.index}" for mutant in found]
    for index, status, _ in _run(tests, names, jobs, timeout):
        mutant = found[index]
        if status == 0:
            if mutant.name in accepted:
                report.accepted.append(mutant)
            else:
                report.survivors.append(mutant)
                log(f"  survived  {path.relative_to(ROOT)}:{mutant.line}  {mutant.name}")
        elif status == 5:
            raise RuntimeError(f"no test of {module} ran: {' '.join(tests)}")
        else:
            report.killed += 1
    report.survivors.sort(key=lambda mutant: mutant.index)
    report.seconds = time.monotonic() - started
    return report


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tools.mutation python",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", default=sorted(TARGETS),
                        help="modules to mutate (default: all of them)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once")
    parser.add_argument("--min-score", type=float, default=0.9)
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--json", help="write the per-module results to this file")
    parser.add_argument("--only", help="test only the mutants that survived in this --json "
                        "file of an earlier run (after adding tests)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.modules) - set(TARGETS))
    if unknown:
        parser.error(f"unknown modules {unknown}; choose from {sorted(TARGETS)}")
    if args.list:
        for module in args.modules:
            for mutant in mutants(module_path(module).read_text(encoding="utf-8")):
                print(f"{module}:{mutant.line}  {mutant.name}")
        return 0
    accepted = accepted_survivors()
    _preload()
    earlier = None
    if args.only:
        earlier = {entry["module"]: set(entry["survived"])
                   for entry in json.loads(Path(args.only).read_text())}
    reports = []
    for module in args.modules:
        print(f"{module}: {' '.join(TARGETS[module])}", flush=True)
        report = test_module(module, args.jobs, accepted.get(module, {}),
                             log=lambda line: print(line, flush=True),
                             only=None if earlier is None else earlier.get(module, set()))
        reports.append(report)
        if earlier is not None:
            continue
        stale = set(accepted.get(module, {})) - {m.name for m in report.accepted}
        for name in sorted(stale):
            print(f"  accepted survivor no longer found or now killed: {name}")
    print(f"\n{'module':30} {'mutants':>7} {'killed':>7} {'accepted':>8} {'survived':>8} "
          f"{'score':>6} {'seconds':>7}")
    for r in reports:
        print(f"{r.module:30} {r.total:7} {r.killed:7} {len(r.accepted):8} "
              f"{len(r.survivors):8} {r.score:6.1%} {r.seconds:7.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps([{
            "module": r.module, "mutants": r.total, "killed": r.killed,
            "accepted": len(r.accepted), "survived": [m.name for m in r.survivors],
            "score": round(r.score, 4), "seconds": round(r.seconds),
        } for r in reports], indent=2) + "\n")
    failed = [r for r in reports if r.survivors or r.score < args.min_score]
    return 1 if failed else 0
