"""Worker processes (``worker_type="process"``): the same epochs as on threads,
failures that are loud and leave nothing behind, and ``"auto"``'s choice."""

import asyncio
import gc
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
from stream_datasets import Range

from dataloader import DataLoader, Dataset, ImageCollator, TensorDataset, get_worker_info
from dataloader._processes.choice import free_threaded
from dataloader.kernels import ImageBatch
from dataloader.transforms import Compose, Decode, Resize


class Squares(Dataset):
    """Python work per item: what auto sends to processes."""

    def __init__(self, n=40):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return {"x": np.full(3, index), "y": index * index, "name": f"item{index}"}


class WhoLoads(Squares):
    def __getitem__(self, index):
        info = get_worker_info()
        return {"pid": os.getpid(), "worker": info.id, "workers": info.num_workers,
                "draw": np.random.randint(2**31), "index": index}


class Failing(Squares):
    def __getitem__(self, index):
        if index % 7 == 3:
            raise KeyError(f"no item {index}")
        return index


class Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("this error cannot be pickled")


class RaisesUnpicklable(Squares):
    def __getitem__(self, index):
        raise Unpicklable(f"bad {index}")


class KillsItself(Squares):
    def __getitem__(self, index):
        if index == 9:
            os.kill(os.getpid(), signal.SIGKILL)
        return index


class Sleepy(Squares):
    def __getitem__(self, index):
        if index == 5:
            time.sleep(60)
        return index


class SlowFirst(Squares):
    """Item 0 waits for ``release`` (an event the worker processes share); every item
    says which worker loaded it."""

    def __init__(self, n, release):
        super().__init__(n)
        self.release = release

    def __getitem__(self, index):
        if index == 0:
            self.release.wait(GENEROUS)
        return {"index": index, "worker": get_worker_info().id}


# A bound on waits for something that must happen: reaching it means a hang.
GENEROUS = 30.0


def shared_event(is_set=False):
    """An event the consumer sets and forked worker processes wait for."""
    event = multiprocessing.get_context("fork").Event()
    if is_set:
        event.set()
    return event


def process_loader(dataset, **kwargs):
    kwargs.setdefault("num_workers", 2)
    kwargs.setdefault("timeout", 120)  # a hang fails the test instead of the suite
    return DataLoader(dataset, worker_type="process", **kwargs)


def as_lists(batches):
    return [{key: np.asarray(value).tolist() for key, value in batch.items()}
            for batch in batches]


@pytest.mark.parametrize("options", [
    {"batch_size": 4},
    {"batch_size": 4, "shuffle": True, "seed": 3, "drop_last": True},
    {"batch_size": None},
    {"batch_size": 5, "item_concurrency": 3},
    {"batch_size": 4, "prefetch_factor": 1, "num_workers": 3},
])
def test_processes_give_the_same_batches_as_threads(options):
    threads = DataLoader(Squares(), worker_type="thread", **{"num_workers": 2, **options})
    with process_loader(Squares(), **options) as processes:
        assert processes.worker_type == "process"
        got = list(processes)
    expected = list(threads)
    if options.get("batch_size") is None:
        assert [item["y"] for item in got] == [item["y"] for item in expected]
    else:
        assert as_lists(got) == as_lists(expected)


ITEM_SHAPES = {
    "label before image": lambda i: {"label": i, "name": f"x{i}",
                                     "image": np.full((64, 64, 3), i % 256, np.uint8)},
    "tuple": lambda i: (i, np.full((32, 32), i, np.int16), np.arange(5.0) + i),
    "nested": lambda i: {"meta": {"id": i, "w": i / 2},
                         "pixels": {"rgb": np.full((40, 40, 3), i % 256, np.uint8)}},
    "big first": lambda i: (np.full(20_000, i, np.float32), i, np.full(3, i, np.int8)),
}


@pytest.mark.parametrize("shape", ITEM_SHAPES)
def test_batches_dropped_one_at_a_time_stay_right_as_slots_are_reused(shape):
    # A training loop drops each batch before taking the next, so slots are
    # reused from the third batch on; every batch must equal its items collated.
    from dataloader import default_collate

    make = ITEM_SHAPES[shape]
    with process_loader(ItemsOf(make, 96), batch_size=8, persistent_workers=True) as loader:
        for _ in range(2):
            for position, batch in enumerate(loader):
                expected = default_collate([make(i) for i in range(8 * position, 8 * position + 8)])
                assert_same_batch(batch, expected)
                del batch


class ItemsOf(Dataset):
    def __init__(self, make, n):
        self.make, self.n = make, n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return self.make(index)


def assert_same_batch(got, expected):
    if isinstance(expected, dict):
        assert got.keys() == expected.keys()
        for key in expected:
            assert_same_batch(got[key], expected[key])
    elif isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected)
        for left, right in zip(got, expected, strict=True):
            assert_same_batch(left, right)
    else:
        np.testing.assert_array_equal(got, expected, strict=True)


def test_out_of_order_delivery_gives_every_batch_once():
    with process_loader(Squares(), batch_size=3, in_order=False) as loader:
        got = sorted(value for batch in loader for value in batch["y"].tolist())
    assert got == [index * index for index in range(40)]


@pytest.mark.parametrize("persistent", [False, True], ids=["per-epoch", "persistent"])
def test_in_order_batch_p_is_loaded_by_worker_p_mod_num_workers_behind_a_slow_batch(persistent):
    # torch's in-order dispatch: each worker has its own queue, and batch p is
    # worker p % 3's however long another worker takes (here, batch 0's).
    release = shared_event()
    threading.Timer(0.2, release.set).start()
    with process_loader(SlowFirst(30, release), batch_size=2, num_workers=3,
                        persistent_workers=persistent) as loader:
        for _ in range(2):
            delivered = 0
            for position, batch in enumerate(loader):
                assert batch["index"].tolist() == [2 * position, 2 * position + 1]
                assert batch["worker"].tolist() == [position % 3] * 2
                delivered += 1
                del batch  # each batch dropped before the next: slots are reused
            assert delivered == 15


@pytest.mark.parametrize("stop", [1, 4, 8])
def test_a_resumed_epoch_gives_batch_p_to_worker_p_mod_num_workers(stop):
    def make():
        return process_loader(SlowFirst(30, shared_event(is_set=True)), batch_size=2,
                              num_workers=3, shuffle=True, seed=2)

    with make() as loader:
        whole = [batch["index"].tolist() for batch in loader]
    with make() as loader:
        iterator = iter(loader)
        for _ in range(stop):
            batch = next(iterator)
            del batch
        state = loader.state_dict()
    with make() as resumed:
        resumed.load_state_dict(state)
        for epoch in range(2):
            first = stop if epoch == 0 else 0
            for position, batch in enumerate(resumed, start=first):
                assert batch["worker"].tolist() == [position % 3] * 2
                if epoch == 0:
                    assert batch["index"].tolist() == whole[position]
                del batch


def test_in_order_false_sends_batches_past_a_worker_stuck_on_a_slow_one():
    # The fast mode: batches go to the least busy worker, so at most two wait
    # behind batch 0 (the window is 4) and the consumer takes 7 before it ends.
    dataset = SlowFirst(10, None)
    with process_loader(dataset, batch_size=1, in_order=False) as loader:
        for _ in range(2):  # each epoch's processes wait for an event of their own
            dataset.release = shared_event()
            iterator = iter(loader)
            early = []
            for _ in range(7):
                batch = next(iterator)
                early.append((int(batch["index"][0]), int(batch["worker"][0])))
                del batch
            assert 0 not in [index for index, _ in early]
            assert [worker for _, worker in early] == [1] * 7
            dataset.release.set()
            late = [int(batch["index"][0]) for batch in iterator]
            assert sorted(late + [index for index, _ in early]) == list(range(10))


@pytest.mark.parametrize("persistent", [False, True], ids=["per-epoch", "persistent"])
def test_the_epoch_offers_its_worker_processes_as_torchs_iterator_does(persistent):
    # torch's tests read iter(loader)._workers: the multiprocessing.Process objects.
    epochs = []
    with process_loader(WhoLoads(12), batch_size=2, persistent_workers=persistent) as loader:
        for _ in range(2):
            iterator = iter(loader)
            workers = iterator._workers
            assert len(workers) == 2
            assert all(isinstance(w, multiprocessing.process.BaseProcess) for w in workers)
            pids = [worker.pid for worker in workers]
            for batch in iterator:
                assert batch["pid"].tolist() == [pids[w] for w in batch["worker"].tolist()]
                del batch
            del iterator
            # Without persistent_workers the processes end with their epoch.
            assert [worker.is_alive() for worker in workers] == [persistent] * 2
            epochs.append(workers)
    assert (epochs[0] == epochs[1]) == persistent
    for worker in epochs[-1]:
        worker.join(GENEROUS)
        assert not worker.is_alive()


def test_workers_are_processes_with_their_info_and_their_own_seeds():
    def run(seed):
        with process_loader(WhoLoads(), batch_size=2, shuffle=True, seed=seed) as loader:
            return [item for batch in loader for item in zip(
                batch["pid"].tolist(), batch["worker"].tolist(), batch["workers"].tolist(),
                batch["draw"].tolist(), batch["index"].tolist(), strict=True)]

    first = run(5)
    pids = {pid for pid, *_ in first}
    assert len(pids) == 2 and os.getpid() not in pids
    assert {workers for _, _, workers, *_ in first} == {2}
    # Batch p is loaded by worker p % 2, as torch's in-order workers do.
    assert [worker for _, worker, *_ in first] == [position // 2 % 2 for position in range(40)]
    # numpy's global generator differs between the workers...
    draws = {worker: {draw for _, w, _, draw, _ in first if w == worker} for worker in (0, 1)}
    assert not draws[0] & draws[1]
    # ...and repeats for the same seed: each worker loads the same items, and
    # draws the same sequence for them.
    again = run(5)
    assert [item[1:] for item in again] == [item[1:] for item in first]


def test_worker_init_fn_runs_once_in_each_process(tmp_path):
    def init(worker_id):
        (tmp_path / f"{worker_id}-{os.getpid()}").touch()

    with process_loader(Squares(), batch_size=4, worker_init_fn=init) as loader:
        list(loader)
    names = sorted(path.name for path in tmp_path.iterdir())
    assert [name.split("-")[0] for name in names] == ["0", "1"]
    assert all(int(name.split("-")[1]) != os.getpid() for name in names)


def test_a_failing_worker_init_fn_raises_its_error():
    def init(worker_id):
        raise ValueError(f"cannot start {worker_id}")

    loader = process_loader(Squares(), batch_size=4, worker_init_fn=init)
    with pytest.raises(ValueError, match="cannot start"):
        iter(loader)


def test_persistent_workers_keep_their_processes_and_others_end_with_the_epoch():
    with process_loader(WhoLoads(), batch_size=4, persistent_workers=True) as loader:
        first = {pid for batch in loader for pid in batch["pid"].tolist()}
        second = {pid for batch in loader for pid in batch["pid"].tolist()}
    assert first == second
    loader = process_loader(WhoLoads(), batch_size=4)
    first = {pid for batch in loader for pid in batch["pid"].tolist()}
    second = {pid for batch in loader for pid in batch["pid"].tolist()}
    assert not first & second
    assert not any(_alive(pid) for pid in first | second)


def test_an_error_keeps_its_type_note_and_traceback_and_the_epoch_goes_on():
    with process_loader(Failing(21), batch_size=4) as loader:
        results = []
        it = iter(loader)
        for _ in range(6):
            try:
                results.append(next(it).tolist())
            except KeyError as error:
                results.append(error)
        with pytest.raises(StopIteration):
            next(it)
    errors = results[0::2]
    assert results[1::2] == [[4, 5, 6, 7], [12, 13, 14, 15], [20]]
    assert [str(error) for error in errors] == ["'no item 3'", "'no item 10'", "'no item 17'"]
    assert errors[1].__notes__ == [  # batch 2 is worker 0's (2 % 2)
        "dataloader: raised on worker 0 while loading indices [8, 9, 10, 11] of batch 2"
    ]
    assert "in __getitem__" in str(errors[0].__cause__)  # the worker's traceback


def test_an_unpicklable_error_becomes_a_runtime_error_naming_it():
    with process_loader(RaisesUnpicklable(), batch_size=4) as loader:
        with pytest.raises(RuntimeError, match="Unpicklable: bad"):
            next(iter(loader))


def test_a_killed_worker_raises_naming_pid_signal_and_batch():
    with process_loader(KillsItself(), batch_size=4) as loader:
        started = time.monotonic()
        with pytest.raises(RuntimeError, match=r"pid \d+\) was killed by signal 9 "
                                               r"\(SIGKILL\).* while loading batch 2"):
            list(loader)
        assert time.monotonic() - started < 30


def test_a_slow_batch_times_out_with_an_error_both_kinds_of_handler_catch():
    with process_loader(Sleepy(), batch_size=4, timeout=1) as loader:
        it = iter(loader)
        next(it)
        with pytest.raises(TimeoutError, match="timed out after 1 seconds waiting for batch 1") \
                as raised:
            next(it)
        assert isinstance(raised.value, RuntimeError)  # what torch raises


def test_skipping_spends_one_budget_in_delivery_order():
    # Items 3, 10, 17, 24, ... fail; the budget of 3 is spent in delivery
    # order, whichever worker loaded which batch: the fourth failure raises.
    loader = process_loader(Failing(40), batch_size=4, on_error="skip", max_skipped=3)
    got = []
    with pytest.raises(KeyError) as raised:
        for batch in loader:
            got.append(batch.tolist())
    assert got == [[0, 1, 2], [4, 5, 6, 7], [8, 9, 11], [12, 13, 14, 15], [16, 18, 19],
                   [20, 21, 22, 23]]
    assert str(raised.value) == "'no item 24'"
    assert "more than max_skipped=3" in " ".join(raised.value.__notes__)
    # The three skipped (the fourth is raised), and those of batches loaded ahead.
    assert loader.stats()["skipped"]["count"] >= 3


def test_stats_count_the_workers_stages_and_say_the_worker_type():
    with process_loader(Squares(12), batch_size=4, transform=lambda i, item: item) as loader:
        list(loader)
        stats = loader.stats()
    assert stats["workers"] == {"type": "process", "count": 2}
    assert stats["fetch"]["count"] == 12 and stats["transform"]["count"] == 12
    assert stats["collate"]["count"] == 3 and stats["wait"]["count"] == 4


@pytest.mark.parametrize("first, then", [("process", "thread"), ("thread", "process")])
def test_a_run_resumes_on_the_other_worker_type(first, then):
    options = {"batch_size": 3, "shuffle": True, "seed": 11, "num_workers": 2}
    whole = [batch["y"].tolist() for batch in DataLoader(Squares(), **options)]
    loader = DataLoader(Squares(), worker_type=first, **options)
    it = iter(loader)
    head = [next(it)["y"].tolist() for _ in range(4)]
    state = loader.state_dict()
    del it
    resumed = DataLoader(Squares(), worker_type=then, **options)
    resumed.load_state_dict(state)
    assert head + [batch["y"].tolist() for batch in resumed] == whole


def test_image_batches_cross_as_image_batches():
    class Images(Squares):
        def __getitem__(self, index):
            return np.full((3, 4, 5), index, np.uint8)

    def collate(items):
        return ImageBatch.from_array(np.stack(items))

    with process_loader(Images(8), batch_size=4, collate_fn=collate) as loader:
        batches = list(loader)
    assert all(type(batch) is ImageBatch for batch in batches)
    assert np.asarray(batches[1])[:, 0, 0, 0].tolist() == [4, 5, 6, 7]


class LabelledImages(Squares):
    """(uint8 HWC image, label) items (module level: spawned workers import it)."""

    def __getitem__(self, index):
        return np.full((4, 5, 3), index, np.uint8), index


def test_an_image_collator_crosses_to_spawned_workers_with_a_pool_of_its_own():
    collator = ImageCollator(dtype="float32")
    with process_loader(LabelledImages(8), batch_size=4, multiprocessing_context="spawn",
                        collate_fn=collator) as loader:
        for _ in range(2):  # epoch after epoch: slots and pools reused
            for number, (images, labels) in enumerate(loader):  # each dropped before the next
                assert type(images) is ImageBatch
                assert labels.tolist() == list(range(4 * number, 4 * number + 4))
                expected = np.asarray(labels, np.float32)[:, None, None, None] / 255
                np.testing.assert_array_equal(np.asarray(images),
                                              np.broadcast_to(expected, (4, 3, 4, 5)))
    restored = pickle.loads(pickle.dumps(collator))
    assert repr(restored) == repr(collator) and restored.pool is not collator.pool
    assert restored.pool.capacity == collator.pool.capacity


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawn_and_forkserver_pickle_the_dataset_and_name_what_cannot_be(method):
    with process_loader(Squares(8), batch_size=4, multiprocessing_context=method) as loader:
        assert [batch["y"].tolist() for batch in loader] == [[0, 1, 4, 9], [16, 25, 36, 49]]
    loader = process_loader(Squares(8), batch_size=4, multiprocessing_context=method,
                            collate_fn=lambda items: items)
    with pytest.warns(UserWarning, match=f"Got pickle error when starting .* {method!r}"):
        with pytest.raises(TypeError, match=r"collate_fn .*cannot be pickled"):
            iter(loader)


@pytest.fixture
def two_cpus_too_few(monkeypatch):
    """A machine where 2 workers are more than its CPUs (1), whatever this one has."""
    from dataloader._processes import group

    monkeypatch.setattr(group, "_usable_cpus", lambda: 1)


def test_more_worker_processes_than_cpus_warn_at_the_users_line_as_torch_does(two_cpus_too_few):
    loader = process_loader(Squares(4), batch_size=2)
    with pytest.warns(UserWarning, match="excessive worker creation might get DataLoader "
                                         "running slow or even freeze") as caught:
        iterator = iter(loader)
    assert "2 worker processes in total, more than the 1 CPUs" in str(caught[0].message)
    assert caught[0].filename == __file__
    assert [batch["y"].tolist() for batch in iterator] == [[0, 1], [4, 9]]
    loader.close()


def test_more_worker_threads_than_cpus_do_not_warn(two_cpus_too_few):
    # A thread waiting on I/O takes no CPU: more threads than CPUs is legitimate.
    with DataLoader(Squares(4), batch_size=2, num_workers=2, worker_type="thread") as loader:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert [batch["y"].tolist() for batch in loader] == [[0, 1], [4, 9]]


@pytest.fixture
def global_start_method():
    """Set multiprocessing's start method for one test, as a torch user may."""
    previous = multiprocessing.get_start_method(allow_none=True)
    yield lambda method: multiprocessing.set_start_method(method, force=True)
    multiprocessing.set_start_method(previous, force=True)


def test_without_a_context_workers_start_by_the_start_method_the_user_set(global_start_method):
    from dataloader._processes.group import start_method

    assert start_method(None).get_start_method() == "fork"  # none set: torch's default
    global_start_method("spawn")
    assert start_method(None).get_start_method() == "spawn"
    assert start_method("fork").get_start_method() == "fork"  # the loader's own comes first


def test_a_local_worker_init_fn_under_a_forkserver_start_method_warns_and_raises(
        global_start_method):
    def local_init_fn(worker_id):  # a closure: fork needs no pickling, forkserver does
        pass

    global_start_method("forkserver")
    loader = process_loader(Squares(4), batch_size=2, worker_init_fn=local_init_fn)
    with pytest.warns(UserWarning, match="Got pickle error when starting .* 'forkserver'"):
        with pytest.raises(TypeError, match=r"worker_init_fn .*cannot be pickled"):
            next(iter(loader))
    with process_loader(Squares(4), batch_size=2, worker_init_fn=local_init_fn,
                        multiprocessing_context="fork") as loader:
        assert [batch["y"].tolist() for batch in loader] == [[0, 1], [4, 9]]


def slow_second_worker(worker_id):
    if worker_id == 1:
        time.sleep(2.5)


def test_a_forkserver_worker_waits_for_its_first_request_however_long_the_others_start():
    # Worker 0 is ready seconds before worker 1: idle, it must not take its
    # forkserver parent for a dead consumer; and a death before the epoch's
    # first request would fail the epoch, not leave it waiting.
    with process_loader(Squares(8), batch_size=4, multiprocessing_context="forkserver",
                        worker_init_fn=slow_second_worker, timeout=60) as loader:
        assert [batch["y"].tolist() for batch in loader] == [[0, 1, 4, 9], [16, 25, 36, 49]]


def test_forking_is_safe_beside_threads_an_event_loop_and_torch_threads():
    # This library's threads, busy in another loader.
    busy = DataLoader(list(range(10_000)), batch_size=2, num_workers=2, worker_type="thread")
    busy_it = iter(busy)
    next(busy_it)
    # An event loop running on its own thread.
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    try:
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.ones(256, 256) @ torch.ones(256, 256)  # starts intra-op threads

        class Work(Squares):
            def __getitem__(self, index):
                value = float(np.ones((64, 64)).sum())
                if torch is not None:
                    value += float((torch.ones(64, 64) @ torch.ones(64, 64)).sum())
                return value

        with process_loader(Work(8), batch_size=4, timeout=60) as loader:
            assert len(list(loader)) == 2
        assert asyncio.run_coroutine_threadsafe(asyncio.sleep(0, 7), loop).result(10) == 7
        assert next(busy_it).tolist() == [2, 3]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(10)
        busy.close()


def test_auto_chooses_threads_for_native_work_and_items_in_memory():
    # Python work is measured first (tests/test_auto.py), starting on threads.
    assert DataLoader(Squares(), num_workers=2).worker_type == "thread"
    assert DataLoader(Squares(), num_workers=2, worker_init_fn=print).worker_type == (
        "thread" if free_threaded() else "process")
    assert DataLoader(list(range(5)), num_workers=2).worker_type == "thread"
    assert DataLoader(TensorDataset(np.arange(5)), num_workers=2).worker_type == "thread"
    native = Compose([Decode(), Resize(8)])
    assert DataLoader(Squares(), num_workers=2, transform=native).worker_type == "thread"
    assert DataLoader(Squares(), num_workers=0).worker_type == "thread"
    assert DataLoader(Squares(), num_workers=2, item_concurrency=4).worker_type == "thread"
    assert DataLoader(Squares(), num_workers=2, worker_type="thread").worker_type == "thread"


def test_auto_resolves_again_when_an_argument_it_reads_changes():
    loader = DataLoader(Squares(), num_workers=2, worker_init_fn=print)
    assert loader.worker_type == ("thread" if free_threaded() else "process")
    loader.item_concurrency = 4
    assert loader.worker_type == "thread"
    loader.item_concurrency = 1
    loader.transform = Compose([Decode(), Resize(8)])
    assert loader.worker_type == "thread"


def test_bad_worker_types_are_refused():
    with pytest.raises(ValueError, match="worker_type should be one of"):
        DataLoader(Squares(), worker_type="processes")


@pytest.mark.parametrize("make", [lambda: Squares(8), lambda: Range(8)], ids=["map", "stream"])
@pytest.mark.parametrize("cycles", [
    100, pytest.param(1000, marks=pytest.mark.soak, id="1000"),
])
def test_create_and_destroy_leaves_no_process_descriptor_or_segment(cycles, make):
    def census():
        gc.collect()  # earlier tests' garbage (mappings, pipes) is not this loop's
        children = subprocess.run(["ps", "--ppid", str(os.getpid()), "-o", "pid="],
                                  capture_output=True, text=True, check=True).stdout.split()
        return len(os.listdir("/proc/self/fd")), len(children)

    for _ in range(3):  # warm up: imports, lazily opened descriptors
        list(process_loader(make(), batch_size=4, num_workers=1))
    before, shm_before = census(), set(os.listdir("/dev/shm"))
    for cycle in range(cycles):
        loader = process_loader(make(), batch_size=4, num_workers=1,
                                persistent_workers=bool(cycle % 2))
        batches = list(loader)
        del batches
        loader.close()
    assert census() == before
    assert left_in_dev_shm(shm_before) == set()


def left_in_dev_shm(before):
    """Files in /dev/shm that were not there ``before`` and stay: other programs on
    the machine may make and unlink their own meanwhile."""
    deadline = time.monotonic() + 10
    while set(os.listdir("/dev/shm")) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    return set(os.listdir("/dev/shm")) - before


KILL_SCRIPT = """
import sys, time
import numpy as np
from dataloader import DataLoader

class Slow:
    def __len__(self):
        return 10**6
    def __getitem__(self, index):
        time.sleep(0.01)
        return np.zeros(1000)

loader = DataLoader(Slow(), batch_size=4, num_workers=2, worker_type="process")
it = iter(loader)
next(it)
print(" ".join(map(str, loader._worker_kinds['process']._engines.pop()._group.pids)), flush=True)
time.sleep(600)
"""


def test_workers_exit_and_leave_no_shared_memory_when_the_consumer_is_killed():
    shm_before = set(os.listdir("/dev/shm"))
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KILL_SCRIPT)],
                             stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in child.stdout.readline().split()]
        assert len(pids) == 2
        child.kill()
        child.wait(30)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in pids)
        assert left_in_dev_shm(shm_before) == set()
    finally:
        child.kill()


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(") ")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("dataset", ["list(range(12))", "Range(12)"], ids=["map", "stream"])
@pytest.mark.parametrize("persistent", [False, True], ids=["per-epoch", "persistent"])
def test_a_forked_child_refuses_an_inherited_epoch_and_leaves_the_workers_to_the_parent(
        dataset, persistent):
    # The child ends normally (its finalizers run) after refusing the epoch:
    # the parent's workers must go on serving the parent's epoch.
    code = f"""
        import os, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from stream_datasets import Range
        from dataloader import DataLoader
        loader = DataLoader({dataset}, batch_size=2, num_workers=2, worker_type="process",
                            persistent_workers={persistent}, timeout=60)
        it = iter(loader)
        first = next(it).tolist()
        pid = os.fork()
        if pid == 0:
            try:
                next(it)
                sys.exit(3)
            except RuntimeError as exc:
                sys.exit(0 if "fork()" in str(exc) else 4)
        _, status = os.waitpid(pid, 0)
        rest = [value for batch in it for value in batch.tolist()]
        print(os.waitstatus_to_exitcode(status), sorted(first + rest) == list(range(12)))
    """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "True"]


class LockInItem3(Squares):
    def __getitem__(self, index):
        return {"index": index, "lock": threading.Lock() if index == 3 else None}


def test_a_batch_that_cannot_be_pickled_fails_alone_and_the_worker_serves_on():
    with process_loader(LockInItem3(8), batch_size=2, collate_fn=list) as loader:
        it = iter(loader)
        assert [item["index"] for item in next(it)] == [0, 1]
        with pytest.raises(TypeError, match="pickle") as raised:
            next(it)
        assert "of batch 1" in raised.value.__notes__[0]
        assert [[item["index"] for item in batch] for batch in it] == [[4, 5], [6, 7]]


OUT_OF_DESCRIPTORS_SCRIPT = """
    import resource
    import numpy as np
    from dataloader import DataLoader, Dataset

    class Rows(Dataset):
        def __len__(self):
            return 120

        def __getitem__(self, index):
            return np.full(4, index)

    resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))
    kept, delivered, messages = [], 0, []
    iterator = iter(DataLoader(Rows(), num_workers=1, worker_type="process", timeout=60))
    while True:
        try:
            kept.append(next(iterator))  # each kept batch keeps its slot, a descriptor
            delivered += 1
        except StopIteration:
            break
        except RuntimeError as error:
            messages.append(str(error))
            kept.clear()  # the slots go back: the epoch goes on
    print(delivered, len(messages))
    print(messages[0])
"""


def test_running_out_of_descriptors_raises_torchs_runtime_error_and_the_epoch_goes_on():
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(OUT_OF_DESCRIPTORS_SCRIPT)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    counts, message = result.stdout.split("\n", 1)
    delivered, failed = map(int, counts.split())
    assert failed >= 1 and delivered + failed == 120  # a failed batch is that batch alone
    assert message.startswith("DataLoader worker process 0 reached its limit of 100 open files")
    for advice in ("`ulimit -n", "array.copy()", "worker_type='thread'", "set_sharing_strategy"):
        assert advice in message


# -- the global generators of worker processes, epoch after epoch ------------

GENERATORS = ("random", "numpy", "torch")


def global_draws():
    """One draw from each global generator a Python augmentation might use."""
    import random

    import torch

    return {"random": random.getrandbits(31), "numpy": int(np.random.randint(2**31)),
            "torch": int(torch.randint(2**31, ()))}


class GlobalDraws(Squares):
    def __getitem__(self, index):
        return {"worker": get_worker_info().id, **global_draws()}


class GlobalDrawStream(Range):
    """Each worker's stream: 7 items of draws (batches of 2, the last one short)."""

    def __iter__(self):
        worker = get_worker_info().id
        for _ in range(7):
            yield {"worker": worker, **global_draws()}


def draws_by_worker(loader):
    """One epoch's draws: {worker: [(random, numpy, torch) of each item, in its order]}.

    A worker loads its batches in the order of their positions, and the items of
    a batch one after another, so each list is in the order the worker drew.
    """
    drawn = {}
    for batch in loader:
        rows = zip(batch["worker"].tolist(), *(batch[name].tolist() for name in GENERATORS),
                   strict=True)
        for worker, *values in rows:
            drawn.setdefault(worker, []).append(tuple(values))
        del batch
    return drawn


def scramble_parent_generators(seed):
    """What a training script does with its own global generators between runs."""
    import random

    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@pytest.mark.parametrize("persistent", [False, True], ids=["per-epoch", "persistent"])
@pytest.mark.parametrize("dataset", [GlobalDraws, GlobalDrawStream], ids=["map", "stream"])
def test_global_generators_are_reseeded_for_each_epoch_and_worker(dataset, persistent):
    pytest.importorskip("torch")

    def run(seed, epochs=3):
        # A stream takes no shuffle, so no seed= either: it sets loader.seed.
        options = {"shuffle": True, "seed": seed} if dataset is GlobalDraws else {}
        with process_loader(dataset(24), batch_size=2, persistent_workers=persistent,
                            **options) as loader:
            loader.seed = seed
            return [draws_by_worker(loader) for _ in range(epochs)]

    scramble_parent_generators(1)
    runs = run(7)
    assert all(sorted(epoch) == [0, 1] for epoch in runs)  # both workers loaded
    # A worker's first draw of an epoch comes right after the epoch seeded it,
    # whichever batches it was given: new for every epoch and every worker,
    # from each generator.
    for position, name in enumerate(GENERATORS):
        firsts = [epoch[worker][0][position] for epoch in runs for worker in (0, 1)]
        assert len(set(firsts)) == len(firsts), name
    # The same seed gives the same draws, whatever the parent's generators say:
    # each worker loads the same batches every time (batch p is worker p % 2's;
    # a stream's batches are its own), so it draws for the same items.
    scramble_parent_generators(2)
    assert run(7) == runs
    other = run(8, epochs=1)[0]
    assert all(other[worker][0][p] != runs[0][worker][0][p] for worker in (0, 1)
               for p in range(len(GENERATORS)))


@pytest.mark.parametrize("persistent", [False, True], ids=["per-epoch", "persistent"])
def test_a_resumed_job_draws_from_the_global_generators_what_the_whole_run_drew(persistent):
    # Saved at an epoch's end and resumed in a new loader (new processes): the
    # next epochs' workers are seeded as the uninterrupted run's were.
    pytest.importorskip("torch")

    def make(seed=None):
        loader = process_loader(GlobalDrawStream(24), batch_size=2,
                                persistent_workers=persistent)
        if seed is not None:
            loader.seed = seed
        return loader

    with make(seed=5) as loader:
        whole = [draws_by_worker(loader) for _ in range(3)]
    with make(seed=5) as loader:
        assert draws_by_worker(loader) == whole[0]
        state = loader.state_dict()
    with make() as resumed:  # a seed of its own, replaced by the state's
        resumed.load_state_dict(state)
        assert [draws_by_worker(resumed) for _ in range(2)] == whole[1:]

