"""A consumer process for test_parent_death.py (not collected by pytest).

Usage: python parent_death_consumer.py STATE HOW FOLDER

It builds a loader on two worker processes, brings them into STATE and
waits, on its standard input, to be killed. Whoever knows first that a
worker is in STATE -- the worker itself, or this process -- creates
``FOLDER/ready-<worker pid>``.

STATE is one of

* ``item``: each worker is loading an item (a ``__getitem__`` that sleeps);
* ``init``: each worker is in its ``worker_init_fn`` (sleeping);
* ``idle``: persistent workers wait for a request, the epoch consumed;
* ``held``: the consumer holds two batches and takes no more, every batch
  of the epoch loaded and waiting (``FOLDER/item-<index>`` for each item);
* ``send``: each worker has collated a large batch whose bytes go through
  its pipe; it waits for ``FOLDER/go-<pid>`` (a FIFO) to be opened, so
  that the consumer can be stopped before it sends;
* ``stream``: each worker is in its stream's ``__iter__`` (sleeping).

HOW is the start method (``fork``, ``spawn``, ``forkserver``), optionally
with ``+thread``: the loader is iterated on a thread of its own, not the
main thread. With ``PARENT_DEATH_NO_PIDFD`` set in the environment,
``os.pidfd_open`` fails as on a kernel without it, in this process and in
its workers (which import this module under every start method).
"""

import errno
import functools
import os
import sys
import threading
import time

import numpy as np

from dataloader import DataLoader, Dataset, IterableDataset

WORKERS = 2
BATCH_SIZE = 4
PREFETCH = 2
# The ``held`` epoch: the batches the consumer holds, and the window after them.
HELD = 2
HELD_BATCHES = HELD + PREFETCH * WORKERS
# An item of the ``send`` batches: eight of them are far more than a pipe holds.
SEND_ITEM_BYTES = 1 << 18


def mark(folder, name):
    """Create the empty file ``folder/name`` (its name appears at once, whole)."""
    os.close(os.open(os.path.join(folder, name), os.O_CREAT | os.O_WRONLY, 0o644))


class Sleeping(Dataset):
    """Each worker's first item says the worker is loading it, and never comes."""

    def __init__(self, folder):
        self.folder = folder

    def __len__(self):
        return 1000

    def __getitem__(self, index):
        mark(self.folder, f"ready-{os.getpid()}")
        time.sleep(3600)


class Numbered(Dataset):
    """Arrays (they go through the workers' slots), each item marking it was loaded."""

    def __init__(self, folder, n):
        self.folder, self.n = folder, n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if self.folder is not None:
            mark(self.folder, f"item-{index}")
        return np.full(1024, index, np.int64)


class Big(Dataset):
    """Bytes: pickled with the batch, through the pipe, not the slots."""

    def __len__(self):
        return 1000

    def __getitem__(self, index):
        return bytes(SEND_ITEM_BYTES)


class SleepingStream(IterableDataset):
    """Each worker's stream says the worker is in it, and never yields."""

    def __init__(self, folder):
        self.folder = folder

    def __iter__(self):
        mark(self.folder, f"ready-{os.getpid()}")
        time.sleep(3600)
        yield 0


def sleep_in_init(folder, worker_id):
    mark(folder, f"ready-{os.getpid()}")
    time.sleep(3600)


def collate_then_wait(folder, items):
    """The batch as it is (its bytes go in band), once ``go-<pid>`` is opened."""
    pid = os.getpid()
    go = os.path.join(folder, f"go-{pid}")
    os.mkfifo(go)
    mark(folder, f"ready-{pid}")
    with open(go, "rb"):  # returns once the test opens it for writing
        pass
    return items


def consume(state, method, folder):
    """Bring the workers into ``state``; then wait on stdin, whatever happens."""
    common = dict(num_workers=WORKERS, worker_type="process", multiprocessing_context=method,
                  prefetch_factor=PREFETCH)
    if state == "item":
        loader = DataLoader(Sleeping(folder), batch_size=BATCH_SIZE, **common)
        next(iter(loader))  # never returns
    elif state == "init":
        loader = DataLoader(Numbered(None, 8), batch_size=BATCH_SIZE,
                            worker_init_fn=functools.partial(sleep_in_init, folder), **common)
        next(iter(loader))
    elif state == "stream":
        loader = DataLoader(SleepingStream(folder), batch_size=BATCH_SIZE, **common)
        next(iter(loader))
    elif state == "send":
        loader = DataLoader(Big(), batch_size=8, collate_fn=functools.partial(
            collate_then_wait, folder), **common)
        next(iter(loader))
    elif state == "idle":
        loader = DataLoader(Numbered(None, 8 * BATCH_SIZE), batch_size=BATCH_SIZE,
                            persistent_workers=True, **common)
        for batch in loader:
            del batch
        for pid in loader._worker_kinds["process"].group.pids:
            mark(folder, f"ready-{pid}")
        sys.stdin.read()
    elif state == "held":
        loader = DataLoader(Numbered(folder, HELD_BATCHES * BATCH_SIZE), batch_size=BATCH_SIZE,
                            persistent_workers=True, **common)
        it = iter(loader)
        held = [next(it) for _ in range(HELD)]
        for pid in loader._worker_kinds["process"].group.pids:
            mark(folder, f"ready-{pid}")
        sys.stdin.read()
        del held
    else:
        raise ValueError(f"no state {state!r}")
    sys.stdin.read()


def no_pidfd(pid, flags=0):
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))


if os.environ.get("PARENT_DEATH_NO_PIDFD"):
    os.pidfd_open = no_pidfd


def main():
    state, how, folder = sys.argv[1:]
    method, *options = how.split("+")
    if "thread" in options:
        # Not the main thread: a thread that outlives the epoch, as long as the process.
        runner = threading.Thread(target=consume, args=(state, method, folder))
        runner.start()
        runner.join()
    else:
        consume(state, method, folder)


if __name__ == "__main__":
    main()
