"""When a loader's threads end: at interpreter exit, on Ctrl-C, and when its epochs end.

The exit tests run a script in a fresh interpreter whose items take a
minute, and time how long the interpreter takes to go once the script is
done with the loader: it abandons the items still loading within a second
(``EXIT_WAIT_SECONDS``), with the exit code Python gives and nothing more
on stderr.
"""

import gc
import signal
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import pytest

from dataloader import DataLoader, Dataset, IterableDataset, get_worker_info

# Far below the 30 s that closing waits for an item, far above the 1 s the
# exit waits: reaching it means the exit waited for the slow items.
EXIT_BOUND = 10.0

SLOW_ITEMS = """
    import itertools, signal, sys, time
    from dataloader import DataLoader, Dataset, IterableDataset

    # Ctrl-C raises KeyboardInterrupt even when this process was started with
    # SIGINT ignored (nohup, some CI runners), which Python would inherit.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    if WORK == "torch":
        # Imported here: a worker importing it after Ctrl-C would call eval()
        # (namedtuple), and any eval() then makes CPython forget that the
        # KeyboardInterrupt was unhandled (exit status 1, not SIGINT's).
        import torch

    def take_a_minute():
        if WORK == "sleep":
            time.sleep(60)
        else:
            # torch operators, each releasing the GIL inside C++ and taking it
            # back in a destructor: still at it when the interpreter finalizes.
            tensor, end = torch.rand(100, 100), time.monotonic() + 60
            while time.monotonic() < end:
                tensor = (tensor @ tensor) / 100.0

    class Slow(Dataset):
        # Two fast items, then items that take a minute.
        def __len__(self):
            return 100
        def __getitem__(self, index):
            if index >= 2:
                take_a_minute()
            return index

    class SlowStream(IterableDataset):
        # Each worker's stream: one fast item, then items that take a minute.
        def __iter__(self):
            for index in itertools.count():
                if index >= 1:
                    take_a_minute()
                yield index

    def make_loader(style, pin):
        dataset = Slow() if style == "map" else SlowStream()
        return DataLoader(dataset, batch_size=1, num_workers=2, worker_type=WORKER_TYPE,
                          persistent_workers=PERSISTENT, pin_memory=pin)
"""

PINNING = """
    # A stand-in accelerator (the machine running the suite has none).
    import torch
    torch.accelerator.is_available = lambda: True
    torch.accelerator.current_accelerator = lambda *args: torch.device("cuda")
    torch.accelerator.current_device_index = lambda: 0
    torch.accelerator.set_device_index = lambda index: None
    torch.Tensor.pin_memory = lambda tensor, *args: tensor.clone()
"""

CASES = {
    # A batch from the fast part, then break out and let the script end.
    "script-ends": """
        loader = make_loader(STYLE, PIN)
        for batch in loader:
            break
        print("done", flush=True)
    """,
    # Two loaders, each with items loading when the script ends.
    "two-loaders": """
        loaders = [make_loader(STYLE, PIN) for _ in range(2)]
        iterators = [iter(loader) for loader in loaders]
        for it in iterators:
            next(it)
        print("done", flush=True)
    """,
    # Ctrl-C while next() waits for a slow batch.
    "ctrl-c-in-next": """
        loader = make_loader(STYLE, PIN)
        it = iter(loader)
        next(it)
        print("waiting", flush=True)
        while True:
            next(it)
    """,
    # Ctrl-C in a with block: the error is not held up by closing.
    "ctrl-c-in-with": """
        with make_loader(STYLE, PIN) as loader:
            it = iter(loader)
            next(it)
            print("waiting", flush=True)
            while True:
                next(it)
    """,
}


def run_until_exit(case, style, pin, work="sleep", worker_type="thread", persistent=False,
                   bound=EXIT_BOUND):
    """Run the case; return (seconds from its cue to the exit, exit code, stderr)."""
    code = textwrap.dedent(SLOW_ITEMS).replace("WORKER_TYPE", repr(worker_type))
    code = code.replace("WORK", repr(work)).replace("PERSISTENT", str(persistent))
    if pin:
        code += textwrap.dedent(PINNING)
    code += textwrap.dedent(CASES[case]).replace("STYLE", repr(style)).replace("PIN", str(pin))
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        cue = process.stdout.readline().strip()
        if cue == "waiting":
            time.sleep(0.3)  # let next() reach its wait; not a timing assertion
            process.send_signal(signal.SIGINT)
        elif cue != "done":
            process.kill()
            pytest.fail(f"the script said {cue!r}; stderr:\n{process.communicate()[1]}")
        started = time.monotonic()
        try:
            _, stderr = process.communicate(timeout=bound)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the interpreter was still there {bound} s after the script "
                        "was done: its exit waited for the items still loading")
        return time.monotonic() - started, process.returncode, stderr
    finally:
        process.kill()
        process.communicate()


@pytest.mark.parametrize("style", ["map", "stream"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_interpreter_exits_without_waiting_for_slow_items(case, style):
    seconds, returncode, stderr = run_until_exit(case, style, pin=False)
    check_exit(case, returncode, stderr)
    assert seconds < EXIT_BOUND


# Stopping a worker process waits 5 s before killing it, outside the exit:
# below that, the exit kept to its own 1 s deadline (it takes about 1.1 s).
PROCESS_EXIT_BOUND = 4.5


@pytest.mark.parametrize("persistent", [False, True], ids=["per-epoch", "persistent"])
@pytest.mark.parametrize("style", ["map", "stream"])
@pytest.mark.parametrize("case", ["script-ends", "two-loaders", "ctrl-c-in-next"])
def test_the_interpreter_exits_without_waiting_for_slow_items_in_worker_processes(
        case, style, persistent):
    _, returncode, stderr = run_until_exit(case, style, pin=False, worker_type="process",
                                           persistent=persistent, bound=PROCESS_EXIT_BOUND)
    check_exit(case, returncode, stderr)


@pytest.mark.parametrize("case", ["script-ends", "two-loaders", "ctrl-c-in-next"])
def test_the_interpreter_exits_without_waiting_for_slow_items_pinned(case):
    pytest.importorskip("torch")
    seconds, returncode, stderr = run_until_exit(case, "map", pin=True)
    check_exit(case, returncode, stderr)
    assert seconds < EXIT_BOUND


@pytest.mark.parametrize("style", ["map", "stream"])
@pytest.mark.parametrize("case", ["script-ends", "ctrl-c-in-next"])
def test_the_interpreter_exits_cleanly_with_workers_in_torch_operators(case, style):
    # Before 3.14 a thread stopped by the finalizing interpreter inside C++
    # code that released the GIL would abort the process (std::terminate).
    pytest.importorskip("torch")
    seconds, returncode, stderr = run_until_exit(case, style, pin=False, work="torch")
    check_exit(case, returncode, stderr)
    assert seconds < EXIT_BOUND


def check_exit(case, returncode, stderr):
    assert "Fatal Python error" not in stderr
    if case.startswith("ctrl-c"):
        # Python's own ending for an uncaught KeyboardInterrupt: its traceback,
        # then the process kills itself with SIGINT (so a shell sees Ctrl-C).
        assert returncode == -signal.SIGINT, stderr
        assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr
        assert stderr.count("Traceback") == 1, stderr
    else:
        assert returncode == 0, stderr
        assert stderr == ""


def test_dropping_a_pinned_epoch_does_not_wait_for_its_slow_batch(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
    monkeypatch.setattr(torch.accelerator, "set_device_index", lambda index: None)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda tensor, *args: tensor.clone())
    release = threading.Event()

    class Blocked(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, index):
            if index >= 1:
                release.wait(60)
            return index

    loader = DataLoader(Blocked(), batch_size=1, num_workers=2, worker_type="thread",
                        pin_memory=True)
    try:
        it = iter(loader)
        assert next(it).item() == 0
        thread = it.thread
        started = time.monotonic()
        del it  # the pinning thread waits in next() for a batch that is not coming
        assert time.monotonic() - started < EXIT_BOUND
        assert not thread.is_alive()
    finally:
        release.set()
        loader.close()


# -- a loader in a reference cycle --------------------------------------------


class Items(Dataset):
    def __len__(self):
        return 20

    def __getitem__(self, index):
        return index


class Stream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        return iter(range(worker, 20, workers))


class Trainer:
    """Holds its loader, whose collate_fn is one of its methods: a reference cycle."""

    def __init__(self, dataset, **options):
        self.loader = DataLoader(dataset, batch_size=4, collate_fn=self.collate, **options)

    def collate(self, items):
        return list(items)


def cycle_by_collate_fn(dataset, **options):
    return Trainer(dataset, **options)


def cycle_by_dataset(dataset, **options):
    """The dataset refers back to its loader."""
    dataset.loader = DataLoader(dataset, batch_size=4, **options)
    return dataset


MODES = [
    pytest.param(dict(num_workers=2, item_concurrency=1), id="workers"),
    pytest.param(dict(num_workers=2, item_concurrency=4), id="workers+lanes"),
    pytest.param(dict(num_workers=0, item_concurrency=4), id="lanes"),
]


def check_collected_after_each_cycle(make_cycle, dataset_type, options, rounds=4, epochs=2):
    for _ in range(rounds):
        owner = make_cycle(dataset_type(), **options)
        alive = weakref.ref(owner.loader)
        for _ in range(epochs):
            it = iter(owner.loader)
            for batch in it:  # each batch dropped before the next, as in training
                del batch
            del it
        del owner
        gc.collect()  # once: the epoch's tasks must have let go already
        assert alive() is None, "the loader outlived its iterators and its owner"


@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("dataset_type", [Items, Stream], ids=["map", "stream"])
@pytest.mark.parametrize("make_cycle", [cycle_by_collate_fn, cycle_by_dataset],
                         ids=["collate_fn", "dataset"])
def test_a_loader_in_a_reference_cycle_is_collected_once_its_epochs_end(
        make_cycle, dataset_type, options):
    check_collected_after_each_cycle(make_cycle, dataset_type,
                                     dict(options, worker_type="thread"))


@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("dataset_type", [Items, Stream], ids=["map", "stream"])
def test_a_loader_in_a_reference_cycle_is_collected_once_its_pinned_epochs_end(
        dataset_type, options, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
    monkeypatch.setattr(torch.accelerator, "set_device_index", lambda index: None)
    check_collected_after_each_cycle(cycle_by_collate_fn, dataset_type,
                                     dict(options, worker_type="thread", pin_memory=True))


@pytest.mark.parametrize("dataset_type", [Items, Stream], ids=["map", "stream"])
def test_a_loader_in_a_reference_cycle_is_collected_with_worker_processes(dataset_type):
    check_collected_after_each_cycle(cycle_by_collate_fn, dataset_type,
                                     dict(num_workers=2, worker_type="process"),
                                     rounds=2, epochs=1)
