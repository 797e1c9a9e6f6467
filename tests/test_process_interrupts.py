"""Ctrl-C with worker processes: the consumer is interrupted at once, the
workers (which ignore SIGINT, as torch's do) stop with the loader, and
streams also start under spawn and forkserver."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from stream_datasets import Range

from dataloader import DataLoader, Dataset

INTERRUPTED = """
    import os, signal, sys, time
    from dataloader import DataLoader, Dataset, IterableDataset, get_worker_info

    signal.signal(signal.SIGINT, signal.default_int_handler)

    class Slow(Dataset):
        def __len__(self):
            return 10**6
        def __getitem__(self, index):
            time.sleep(0 if index == 0 else 600)  # stuck after the first batch
            return os.getpid()

    class SlowStream(IterableDataset):
        def __iter__(self):
            yield os.getpid()
            time.sleep(600)
            yield 0

    dataset = Slow() if sys.argv[1] == "map" else SlowStream()
    loader = DataLoader(dataset, batch_size=None, num_workers=2, worker_type="process",
                        timeout=300)
    it = iter(loader)
    pids = {{int(next(it))}}
    try:
        print("started", flush=True)
        next(it)
        next(it)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    loader.close()
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
                os.waitpid(pid, os.WNOHANG)
            except (ProcessLookupError, ChildProcessError):
                break
            time.sleep(0.05)
        else:
            print("worker", pid, "still running", flush=True)
    print("closed", flush=True)
"""


@pytest.mark.parametrize("kind", ["map", "stream"])
def test_ctrl_c_interrupts_the_consumer_and_the_workers_stop_with_the_loader(kind):
    # As a terminal sends it: to the whole process group, workers included.
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(INTERRUPTED.format()), kind],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )

    def child_said(expected):
        line = process.stdout.readline().strip()
        if line != expected:
            process.kill()
            pytest.fail(f"expected {expected!r}, got {line!r}; stderr:\n{process.stderr.read()}")

    # A child that ignored the interrupt would block the reads below: a
    # minute later it is killed, and the test fails instead of hanging.
    guard = threading.Timer(60, lambda: os.killpg(process.pid, signal.SIGKILL))
    guard.start()
    try:
        child_said("started")
        os.killpg(process.pid, signal.SIGINT)
        child_said("interrupted")
        child_said("closed")
        assert process.wait(60) == 0
    finally:
        guard.cancel()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class Arrays(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        return {"label": index, "image": np.full((4, 4), index, np.uint8)}


def test_dropping_a_batch_runs_no_python_code_in_which_a_ctrl_c_would_be_lost():
    # A batch's slot goes back to its worker when the batch is freed, wherever
    # the consumer's code drops it. A Ctrl-C landing in Python code run from
    # there (a finalizer) is printed and lost, and the training loop goes on,
    # so the release is done in C: the signal is raised after it, in the loop.
    with DataLoader(Arrays(), batch_size=2, num_workers=1, worker_type="process",
                    timeout=120) as loader:
        batches = iter(loader)
        batch = next(batches)
        assert batch["image"].base is not None  # a view of the worker's slot
        python_calls = []

        def profile(frame, event, arg):
            if event == "call":
                python_calls.append(frame.f_code.co_qualname)

        gc.collect()
        gc.disable()  # no unrelated finalizer may run meanwhile
        sys.setprofile(profile)
        try:
            del batch
        finally:
            sys.setprofile(None)
            gc.enable()
        assert python_calls == []
        assert [batch["label"].tolist() for batch in batches] == [[2, 3], [4, 5], [6, 7]]


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_process_streams_start_under_spawn_and_forkserver(method):
    with DataLoader(Range(10), batch_size=2, num_workers=2, worker_type="process",
                    multiprocessing_context=method, timeout=120) as loader:
        items = [item for batch in loader for item in batch.tolist()]
    assert sorted(items) == list(range(10))
