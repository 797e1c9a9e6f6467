"""The threaded path: workers, lanes, ordering, timeouts and the lifecycle."""

import gc
import math
import os
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import weakref

import numpy as np
import pytest
from conftest import loader_thread_count as thread_count

from dataloader import DataLoader as _DataLoader
from dataloader import Dataset, get_worker_info

# A bound on waits for something that must happen: generous, since the
# machines are shared; reaching it means a hang, never mere slowness.
GENEROUS = 30.0


def DataLoader(*args, **kwargs):
    """These tests are the thread engine's (worker processes: test_processes.py)."""
    kwargs.setdefault("worker_type", "thread")
    return _DataLoader(*args, **kwargs)


class Blocking(Dataset):
    """Items that wait for ``release`` (indices in ``blocked``) or return at once.

    ``entered`` is set when a blocked item starts waiting; ``waiting`` counts
    the items waiting now (guarded by ``changed``).
    """

    def __init__(self, n, blocked=(), wait=30.0):
        self.n = n
        self.blocked = set(blocked)
        self.release = threading.Event()
        self.entered = threading.Event()
        self.changed = threading.Condition()
        self.waiting = 0
        self.wait = wait

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if index in self.blocked:
            release = self.release  # the event of the moment, even if replaced later
            with self.changed:
                self.waiting += 1
                self.changed.notify_all()
            self.entered.set()
            release.wait(self.wait)
            with self.changed:
                self.waiting -= 1
                self.changed.notify_all()
        return index

    def wait_for_waiting(self, count):
        with self.changed:
            return self.changed.wait_for(lambda: self.waiting == count, GENEROUS)


def run_script(code, timeout=60, **kwargs):
    """Run ``code`` in a fresh interpreter; a hang fails the test instead of blocking it."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, **kwargs,
    )


def test_threaded_output_equals_direct_output():
    data = [np.full((3, 2), i, dtype=np.float32) for i in range(37)]
    direct = list(DataLoader(data, batch_size=5, shuffle=True, seed=1))
    for num_workers, lanes in [(2, 1), (0, 4), (2, 4), (3, 2)]:
        loader = DataLoader(data, batch_size=5, shuffle=True, seed=1,
                            num_workers=num_workers, item_concurrency=lanes)
        threaded = list(loader)
        assert len(threaded) == len(direct)
        for a, b in zip(direct, threaded, strict=True):
            np.testing.assert_array_equal(a, b)
        loader.close()


def test_lanes_fetch_the_items_of_one_batch_concurrently():
    barrier = threading.Barrier(4, timeout=20)

    def item(index):
        barrier.wait()  # breaks (and fails the batch) unless 4 items run at once
        return index

    loader = DataLoader(FromFunction(8, item), batch_size=4, item_concurrency=4)
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    loader.close()


def test_workers_load_batches_concurrently():
    barrier = threading.Barrier(2, timeout=20)

    def item(index):
        if index % 2 == 0:
            barrier.wait()  # the first item of each of two batches, at once
        return index

    loader = DataLoader(FromFunction(4, item), batch_size=2, num_workers=2)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]
    loader.close()


def test_the_first_batch_is_loaded_by_every_worker():
    barrier = threading.Barrier(2, timeout=20)

    def item(index):
        if index < 2:
            barrier.wait()  # breaks unless two items of the first batch run at once
        return index

    # Each epoch's first batch: the second epoch's too, on the same workers.
    loader = DataLoader(FromFunction(8, item), batch_size=4, num_workers=2)
    for _ in range(2):
        assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    loader.close()


class FromFunction(Dataset):
    def __init__(self, n, function):
        self.n = n
        self.function = function

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return self.function(index)


def test_getitems_is_used_by_workers_but_not_by_lanes():
    class Both(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            return ("item", index)

        def __getitems__(self, indices):
            return [("items", i) for i in indices]

    with DataLoader(Both(), batch_size=2, num_workers=2, collate_fn=list) as loader:
        assert next(iter(loader)) == [("items", 0), ("items", 1)]
    with DataLoader(Both(), batch_size=2, item_concurrency=2, collate_fn=list) as loader:
        assert next(iter(loader)) == [("item", 0), ("item", 1)]


@pytest.mark.parametrize("lanes", [1, 3])
def test_worker_error_keeps_type_traceback_and_names_the_worker(lanes):
    class Failing(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, index):
            if index == 4:
                raise ZeroDivisionError("broken item 4")
            return index

    with DataLoader(Failing(), batch_size=3, num_workers=2, item_concurrency=lanes) as loader:
        it = iter(loader)
        assert next(it).tolist() == [0, 1, 2]
        with pytest.raises(ZeroDivisionError, match="broken item 4") as info:
            next(it)
        frames = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
        assert "__getitem__" in frames
        assert any("on worker" in note and "batch 1" in note for note in info.value.__notes__)
        with pytest.raises(StopIteration):
            next(it)


def test_lanes_report_the_error_of_the_lowest_failing_item():
    item_2_failing = threading.Event()

    def item(index):
        if index == 2:
            item_2_failing.set()
        elif index == 1:
            # Item 1 fails after item 2 (the lanes run all four at once).
            assert item_2_failing.wait(GENEROUS)
            item_2_failing.clear()
        if index in (1, 2):
            raise ValueError(f"item {index}")
        return index

    with DataLoader(FromFunction(4, item), batch_size=4, item_concurrency=4) as loader:
        for _ in range(5):
            with pytest.raises(ValueError, match="item 1"):
                next(iter(loader))


def test_collate_runs_on_a_worker():
    seen = []

    def collate(items):
        seen.append(threading.get_ident())
        return items

    with DataLoader(list(range(4)), batch_size=2, num_workers=2, collate_fn=collate) as loader:
        list(loader)
    assert seen and threading.get_ident() not in seen


def test_worker_init_fn_runs_once_per_worker_before_its_first_item():
    calls = []
    lock = threading.Lock()

    def init(worker_id):
        with lock:
            calls.append((worker_id, threading.get_ident()))

    def item(index):
        info = get_worker_info()
        return (info.id, info.num_workers, info.seed - info.id, info.dataset is dataset)

    dataset = FromFunction(40, item)
    loader = DataLoader(dataset, batch_size=2, num_workers=2, worker_init_fn=init,
                        collate_fn=list, shuffle=True, seed=5)
    for _ in range(3):
        results = [item for batch in loader for item in batch]
    loader.close()
    ids = [worker_id for worker_id, _ in calls]
    assert len(ids) == len(set(ids)) <= 2
    assert len({ident for _, ident in calls}) == len(calls)
    assert {r[0] for r in results} <= set(ids)
    assert {r[1:] for r in results} == {(2, results[0][2], True)}


def test_get_worker_info_is_none_on_the_consumer_thread():
    with DataLoader(list(range(4)), batch_size=2, num_workers=2) as loader:
        list(loader)
        assert get_worker_info() is None


def test_in_order_false_delivers_in_completion_order():
    dataset = Blocking(6, blocked=[0])
    with DataLoader(dataset, batch_size=1, num_workers=2, in_order=False) as loader:
        it = iter(loader)
        first = [next(it).item() for _ in range(3)]
        assert 0 not in first
        dataset.release.set()
        rest = [batch.item() for batch in it]
    assert sorted(first + rest) == list(range(6))


def test_timeout_raises_naming_the_timeout_and_the_iterator_stays_usable():
    dataset = Blocking(4, blocked=[0])
    with DataLoader(dataset, batch_size=2, num_workers=1, timeout=0.3) as loader:
        it = iter(loader)
        with pytest.raises(TimeoutError, match=r"0\.3") as raised:
            next(it)
        assert isinstance(raised.value, RuntimeError)  # what torch raises
        dataset.release.set()
        assert [b.tolist() for b in it] == [[0, 1], [2, 3]]


def test_window_bounds_batches_loaded_ahead():
    window = 2 * 3  # num_workers * prefetch_factor
    changed = threading.Condition()
    loaded, beyond = [], []
    delivered = 0

    def item(index):
        with changed:
            # Batch ``delivered`` may be on its way to the consumer, not yet
            # counted: index delivered + window is the furthest allowed.
            if index > delivered + window:
                beyond.append((index, delivered))
            loaded.append(index)
            changed.notify_all()
        return index

    with DataLoader(FromFunction(200, item), batch_size=1, num_workers=2,
                    prefetch_factor=3) as loader:
        it = iter(loader)
        for _ in range(60):
            assert next(it).item() == delivered
            with changed:
                delivered += 1
                # The consumer is slow: it waits until the window is full.
                full = delivered + window - 1
                assert changed.wait_for(lambda full=full: len(loaded) >= full, GENEROUS)
                assert beyond == []


def test_two_threads_calling_next_at_once_get_runtime_error():
    dataset = Blocking(2, blocked=[0])
    loader = DataLoader(dataset, batch_size=1, num_workers=1)
    it = iter(loader)
    outcomes = []

    def consume():
        try:
            outcomes.append(next(it).item())
        except RuntimeError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=consume) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while not any(isinstance(o, RuntimeError) for o in outcomes) and time.monotonic() < deadline:
        time.sleep(0.01)
    dataset.release.set()
    for thread in threads:
        thread.join(20)
    errors = [o for o in outcomes if isinstance(o, RuntimeError)]
    assert len(errors) == 1 and "already calling next()" in str(errors[0])
    assert 0 in outcomes
    loader.close()


def test_loader_and_iterators_work_from_any_thread():
    results = {}

    def use(name):
        loader = DataLoader(list(range(10)), batch_size=3, num_workers=2)
        results[name] = [b.tolist() for b in loader]
        del loader

    threads = [threading.Thread(target=use, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert all(r == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]] for r in results.values())
    assert len(results) == 3


def test_dropping_an_iterator_returns_at_once_and_the_next_epoch_is_complete():
    dataset = Blocking(8, blocked=[2, 3], wait=GENEROUS)
    loader = DataLoader(dataset, batch_size=1, num_workers=2)
    for _ in range(2):
        it = iter(loader)
        assert next(it).item() == 0
        assert dataset.wait_for_waiting(2)  # both workers are busy with a blocked item
        del it
        # Dropping the iterator returned without waiting for them.
        assert dataset.waiting == 2
        dataset.release.set()  # frees the workers for the next epoch
        assert dataset.wait_for_waiting(0)
        dataset.release = threading.Event()
    dataset.blocked.clear()
    assert [b.item() for b in loader] == list(range(8))
    loader.close()


def test_partial_epochs_leave_no_threads_and_no_memory_growth():
    def item(index):
        time.sleep(0.002)
        return np.zeros(10_000, dtype=np.uint8)

    loader = DataLoader(FromFunction(1000, item), batch_size=4, num_workers=2, item_concurrency=2)
    for _ in range(3):  # warm-up: the pool exists from here on
        for n, _batch in enumerate(loader):
            if n == 3:
                break
    gc.collect()  # loaders earlier tests left in reference cycles release their pools
    threads, python_threads = thread_count(), threading.active_count()
    rss = resident_bytes()
    for _ in range(20):
        for n, _batch in enumerate(loader):
            if n == 3:
                break
    gc.collect()
    assert thread_count() == threads
    assert threading.active_count() == python_threads
    assert resident_bytes() - rss < 30 * 2**20
    loader.close()


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_many_epochs_and_loaders_leak_no_threads():
    gc.collect()  # loaders earlier tests left in reference cycles release their pools
    baseline_threads, baseline_python = thread_count(), threading.active_count()
    for _ in range(10):
        with DataLoader(list(range(50)), batch_size=4, num_workers=2, item_concurrency=2) as loader:
            for _ in range(5):
                list(loader)
            assert thread_count() == baseline_threads + 4
    assert thread_count() == baseline_threads
    assert threading.active_count() == baseline_python


def test_workers_calling_current_thread_leave_no_dummy_threads():
    def item(index):
        return threading.current_thread().name

    baseline = threading.active_count()
    with DataLoader(FromFunction(4, item), batch_size=2, num_workers=2, collate_fn=list) as loader:
        list(loader)
    assert threading.active_count() == baseline


def test_iterator_keeps_its_loader_alive():
    it = iter(DataLoader(list(range(6)), batch_size=2, num_workers=2))
    gc.collect()
    assert [b.tolist() for b in it] == [[0, 1], [2, 3], [4, 5]]


def test_loader_in_a_reference_cycle_is_collected_with_its_pool():
    class SelfReferring(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            return index

    gc.collect()  # loaders earlier tests left in reference cycles release their pools
    baseline = thread_count()
    dataset = SelfReferring()
    loader = DataLoader(dataset, batch_size=2, num_workers=2)
    dataset.loader = loader
    it = iter(loader)
    next(it)
    dataset.iterator = it  # the iterator is in the cycle too
    alive = weakref.ref(loader)
    del dataset, loader, it
    # A batch still in flight holds the epoch (and through it the cycle)
    # until it finishes: collect until it has.
    deadline = time.monotonic() + GENEROUS
    gc.collect()
    while alive() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
        gc.collect()
    assert alive() is None
    deadline = time.monotonic() + GENEROUS
    while thread_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.01)
    assert thread_count() == baseline


def test_close_stops_the_pool_and_the_loader_stays_usable():
    baseline = thread_count()
    dataset = Blocking(20, blocked=[3], wait=0.5)
    loader = DataLoader(dataset, batch_size=1, num_workers=2)
    it = iter(loader)
    assert next(it).item() == 0
    loader.close()
    assert thread_count() == baseline
    delivered = []
    with pytest.raises(RuntimeError, match="closed"):
        while True:
            delivered.append(next(it).item())
    # Batches loaded before the close are delivered, in order; none after it.
    assert delivered == list(range(1, len(delivered) + 1))
    assert len(delivered) < 19
    dataset.release.set()
    assert [b.item() for b in loader] == list(range(20))
    loader.close()


def test_fork_child_rebuilds_the_pool_and_refuses_an_inherited_epoch():
    result = run_script("""
        import os
        from dataloader import DataLoader
        loader = DataLoader(list(range(6)), batch_size=2, num_workers=2)
        assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
        it = iter(loader)
        next(it)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                next(it)
                code = 3
            except RuntimeError as exc:
                code = 0 if "fork()" in str(exc) else 4
            if code == 0 and [b.tolist() for b in loader] != [[0, 1], [2, 3], [4, 5]]:
                code = 5
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert [b.tolist() for b in it] == [[2, 3], [4, 5]]
        print("child", os.waitstatus_to_exitcode(status))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "child 0"


def test_a_forked_child_leaves_the_parents_pool_alone_from_its_first_instruction():
    # A free-threaded child frees objects the parent's other threads held
    # before any Python fork hook runs; a loader freed then stops its pool.
    # A hook registered before dataloader's import runs first, as that does.
    result = run_script("""
        import os
        held = {}

        def shut_down_in_child():
            os._exit(0 if held["loader"]._worker_kinds["thread"].pool.shutdown(5.0) else 6)

        os.register_at_fork(after_in_child=shut_down_in_child)
        from dataloader import DataLoader
        held["loader"] = loader = DataLoader(list(range(8)), batch_size=2, num_workers=2)
        assert [b.tolist() for b in loader][0] == [0, 1]  # its threads now wait for work
        pid = os.fork()
        if pid == 0:
            os._exit(7)  # the hook did not run
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        assert [b.tolist() for b in loader][-1] == [6, 7]  # the parent's pool serves on
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "child 0"


def test_interpreter_exit_with_live_loaders_and_unfinished_epochs():
    result = run_script("""
        import time
        from dataloader import DataLoader, Dataset

        class Slow(Dataset):
            def __len__(self):
                return 100
            def __getitem__(self, index):
                time.sleep(0.2)
                return index

        loaders = [DataLoader(Slow(), batch_size=2, num_workers=2, item_concurrency=2)
                   for _ in range(3)]
        iterators = [iter(loader) for loader in loaders]
        for it in iterators:
            next(it)
        print("exiting")
    """)
    assert result.returncode == 0, result.stderr
    assert "Fatal Python error" not in result.stderr
    assert result.stdout.strip() == "exiting"


def test_recursion_goes_as_deep_on_a_worker_as_on_the_main_thread():
    result = run_script("""
        import json, sys
        from dataloader import DataLoader
        sys.setrecursionlimit(100_000)
        # The deepest document the main thread decodes (CPython 3.12+ bounds
        # C recursion on its own, below this Python limit).
        for depth in (20_000, 8_000, 2_000):
            document = "[" * depth + "]" * depth
            try:
                json.loads(document)
                break
            except RecursionError:
                pass
        loader = DataLoader([document], batch_size=None, num_workers=1,
                            transform=lambda index, text: type(json.loads(text)).__name__)
        print(list(loader))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['list']"


INTERRUPTIBLE = """
    import itertools, signal, sys, threading, time
    from dataloader import DataLoader, Dataset

    # Ctrl-C raises KeyboardInterrupt even when this process was started with
    # SIGINT ignored (nohup, some CI runners), which Python would inherit.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    release = threading.Event()
    unblocked = threading.Event()

    class Data(Dataset):
        def __len__(self):
            return 10**9
        def __getitem__(self, index):
            if index == {blocked}:
                release.wait(120)
                unblocked.set()
            # Items take a moment, so that the consumer is most likely waiting
            # in next() when Ctrl-C comes.
            time.sleep(0.002)
            return index

    class Endless:
        def __iter__(self):
            return itertools.count()

    loader = DataLoader(Data(), batch_size=1, num_workers=2, sampler=Endless(),
                        worker_type="thread")
    it = iter(loader)
    try:
        for batch in it:
            if batch.item() == 0:
                print("started", flush=True)
    except KeyboardInterrupt:
        # The blocked item still waits: the interrupt did not wait for it.
        print("interrupted", "after the item" if unblocked.is_set() else "at once", flush=True)
    release.set()
    print("next", next(it).item(), flush=True)
"""


@pytest.mark.parametrize("blocked", [-1, 5], ids=["endless-sampler", "waiting-for-a-batch"])
def test_ctrl_c_interrupts_the_consumer_and_the_iterator_stays_usable(blocked):
    import signal

    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(INTERRUPTIBLE.format(blocked=blocked))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    def child_said(expected):
        line = process.stdout.readline().strip()
        if not line.startswith(expected):
            process.kill()
            pytest.fail(f"expected {expected!r}, got {line!r}; stderr:\n{process.stderr.read()}")

    try:
        child_said("started")
        time.sleep(0.2)  # let the consumer reach its wait; not a timing assertion
        process.send_signal(signal.SIGINT)
        child_said("interrupted at once")
        child_said("next")
        assert process.wait(30) == 0
    finally:
        process.kill()
        process.wait()


def test_a_pool_shut_down_without_a_bound_waits_for_its_threads_and_returns():
    from dataloader._core.pool import Pool

    loader = _DataLoader(list(range(8)), batch_size=2, num_workers=2, worker_type="thread")
    assert len(list(loader)) == 4
    pool = loader._worker_kinds["thread"].pool
    assert isinstance(pool, Pool)
    outcome = {}
    stopper = threading.Thread(target=lambda: outcome.update(stopped=pool.shutdown(math.inf)),
                               daemon=True)
    stopper.start()
    stopper.join(60)
    assert outcome == {"stopped": True}
