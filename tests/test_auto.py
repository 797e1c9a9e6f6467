"""worker_type="auto" measures a Python dataset and chooses threads or processes.

Choices that depend on timing are made unambiguous: items cost either
microseconds (processes would spend longer passing batches back) or many
milliseconds of Python work (a process per core is clearly faster), so a
busy machine does not change them.
"""

import io
import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import warnings
from unittest.mock import ANY

import numpy as np
import pytest

from dataloader import DataLoader, Dataset
from dataloader._auto import MEASUREMENT_EPOCHS, Choice, Measurements, decide, usable_cores
from dataloader._processes.choice import free_threaded

pytestmark = pytest.mark.skipif(free_threaded(), reason="Python code runs on threads here")

needs_two_cores = pytest.mark.skipif(usable_cores() < 2, reason="processes need a core each")


class Cheap(Dataset):
    """Microseconds an item: where it loaded, and the item."""

    def __init__(self, n=256):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return {"index": index, "pid": os.getpid(), "thread": threading.get_ident()}


class Heavy(Cheap):
    """Milliseconds of Python work an item (the interpreter held throughout)."""

    def __getitem__(self, index):
        deadline = time.thread_time() + 0.004
        while time.thread_time() < deadline:
            pass
        return super().__getitem__(index)


def consume(loader, step=0.0):
    """An epoch as a training loop takes it: each batch dropped before the next, after a
    training step of ``step`` seconds."""
    rows = []
    for batch in loader:
        rows += zip(batch["index"].tolist(), batch["pid"].tolist(), batch["thread"].tolist(),
                    strict=True)
        if step:
            time.sleep(step)
    return rows


def test_cheap_items_stay_on_one_thread_and_start_no_process():
    loader = DataLoader(Cheap(), batch_size=16, num_workers=2, shuffle=True, seed=3)
    direct = DataLoader(Cheap(), batch_size=16, shuffle=True, seed=3)
    for _ in range(2):
        # A step of 1 ms: a worker thread loads beside it, which the calling thread cannot.
        rows = consume(loader, step=0.001)
        assert [index for index, *_ in rows] == [index for index, *_ in consume(direct)]
        assert {pid for _, pid, _ in rows} == {os.getpid()}
        # Batch 0 on the calling thread, the rest on one worker thread.
        assert rows[0][2] == threading.get_ident()
        assert len({thread for *_, thread in rows[16:]}) == 1
        assert rows[16][2] != threading.get_ident()
    assert loader.worker_type == "thread"
    assert multiprocessing.active_children() == []
    figures = loader.stats()
    assert "1 worker thread" in figures["workers"]["why"]
    assert figures["workers"]["count"] == 1
    assert figures["interpreter_share"] > 0.5  # __getitem__ is Python code
    loader.close()


@needs_two_cores
def test_python_work_moves_to_processes_after_a_first_batch_on_the_calling_thread():
    loader = DataLoader(Heavy(96), batch_size=4, num_workers=2, shuffle=True, seed=5)
    it = iter(loader)
    first = next(it)
    # The first batch came without waiting for a process to start.
    assert set(first["pid"].tolist()) == {os.getpid()}
    assert set(first["thread"].tolist()) == {threading.get_ident()}
    assert multiprocessing.active_children() == []
    rest = list(it)
    assert {pid for batch in rest for pid in batch["pid"].tolist()} - {os.getpid()}
    assert loader.worker_type == "process"
    indices = [i for batch in [first, *rest] for i in batch["index"].tolist()]
    direct = DataLoader(Heavy(96), batch_size=4, shuffle=True, seed=5)
    assert indices == [i for batch in direct for i in batch["index"].tolist()]
    assert "2 worker processes" in loader.stats()["workers"]["why"]
    loader.close()
    assert multiprocessing.active_children() == []


@needs_two_cores
def test_the_choice_changes_between_epochs_when_the_items_cost_changes():
    class Changing(Heavy):
        heavy = True

        def __getitem__(self, index):
            if type(self).heavy:
                return super().__getitem__(index)
            return Cheap.__getitem__(self, index)

    loader = DataLoader(Changing(96), batch_size=4, num_workers=2)
    kinds = []
    # What an epoch measured holds for the next while items cost about as much;
    # a change of cost is predicted afresh (what processes measure depends on
    # how busy the machine is, a prediction does not). An epoch after one on
    # processes may start them before it measures batch 0: it runs on them,
    # and the next epoch goes by what they measured.
    for heavy in (False, True, False, False):
        Changing.heavy = heavy  # seen by the next epoch's processes: they start with it
        rows = consume(loader)
        assert [index for index, *_ in rows] == list(range(96))
        kinds.append(loader.worker_type)
    assert kinds[:2] == ["thread", "process"]
    assert kinds[3] == "thread"
    loader.close()


class Waits(Cheap):
    """5 ms of waiting an item (as a read from a remote store): on any machine,
    however busy, two processes deliver batches twice as fast as one thread."""

    def __getitem__(self, index):
        time.sleep(0.005)
        row = super().__getitem__(index)
        row["children"] = len(multiprocessing.active_children())  # in this process
        return row


def waits_loader(**options):
    return DataLoader(Waits(128), batch_size=4, num_workers=2, shuffle=True, seed=7, **options)


@needs_two_cores
def test_an_epoch_after_one_on_processes_starts_them_before_its_first_batch():
    loader = waits_loader()
    direct = DataLoader(Waits(128), batch_size=4, shuffle=True, seed=7)
    for epoch in range(3):
        first = None
        indices = []
        for batch in loader:  # each batch dropped before the next
            if first is None:
                first = {key: batch[key].tolist() for key in ("pid", "children")}
            indices += batch["index"].tolist()
        assert indices == [i for batch in direct for i in batch["index"].tolist()]
        assert loader.worker_type == "process"
        # Batch 0 loads on the calling thread every epoch; from the second,
        # the worker processes were started before it.
        assert set(first["pid"]) == {os.getpid()}
        assert set(first["children"]) == ({0} if epoch == 0 else {2})
        assert multiprocessing.active_children() == []  # not persistent: gone with the epoch
    loader.close()


@needs_two_cores
def test_an_epoch_started_ahead_resumes_and_names_its_errors_as_any_other():
    class FailingAt(Waits):
        failing = None

        def __getitem__(self, index):
            if index == type(self).failing:
                raise KeyError(index)
            return super().__getitem__(index)

    def loader_in_second_epoch():
        """A loader whose first epoch ran on processes: the second starts them ahead."""
        loader = DataLoader(FailingAt(64), batch_size=4, num_workers=2, shuffle=True, seed=4)
        for _ in loader:
            pass
        # What a quiet machine measures of waiting items (two processes twice as fast
        # as one thread), so that a load spike in the first epoch cannot move the
        # second to a thread: this test is about an epoch started on processes.
        measured = loader._auto.measured
        measured.add_interval("thread", measured.load_seconds)
        measured.add_interval("process", measured.load_seconds / 2)
        return loader

    reference = loader_in_second_epoch()
    whole = [batch["index"].tolist() for batch in reference]
    first = loader_in_second_epoch()
    it = iter(first)
    head = [next(it)["index"].tolist() for _ in range(5)]
    state = first.state_dict()
    del it
    for _ in range(2):  # resumed twice, each time on processes started ahead
        resumed = loader_in_second_epoch()
        resumed.load_state_dict(state)
        it = iter(resumed)
        head += [next(it)["index"].tolist() for _ in range(3)]
        assert set(multiprocessing.active_children()) >= set(it._workers)
        state = resumed.state_dict()
        del it
        resumed.close()
    assert head == whole[:11]
    failing = loader_in_second_epoch()
    FailingAt.failing = whole[12][1]
    it = iter(failing)
    for _ in range(12):
        next(it)
    with pytest.raises(KeyError) as raised:
        next(it)
    assert any("batch 12" in note for note in raised.value.__notes__), raised.value.__notes__
    assert next(it)["index"].tolist() == whole[13]
    FailingAt.failing = None
    broken_first = loader_in_second_epoch()
    FailingAt.failing = whole[0][0]  # batch 0, loading here beside the started workers
    it = iter(broken_first)
    with pytest.raises(KeyError) as raised:
        next(it)
    assert any("batch 0" in note for note in raised.value.__notes__), raised.value.__notes__
    assert [batch["index"].tolist() for batch in it] == whole[1:]
    FailingAt.failing = None
    dropped = loader_in_second_epoch()
    it = iter(dropped)
    next(it)
    assert len(multiprocessing.active_children()) == 2
    del it  # the loop breaks: the workers started ahead go with the epoch
    assert multiprocessing.active_children() == []
    for loader in (reference, first, failing, broken_first, dropped):
        loader.close()


@needs_two_cores
def test_a_resumed_epoch_gives_the_same_batches_whatever_auto_chose():
    def loader():
        return DataLoader(Heavy(96), batch_size=4, num_workers=2, shuffle=True, seed=9)

    whole = [batch["index"].tolist() for batch in loader()]
    first = loader()
    it = iter(first)
    head = [next(it)["index"].tolist() for _ in range(3)]  # batch 0 inline, 2 on processes
    state = first.state_dict()
    del it
    resumed = loader()
    resumed.load_state_dict(state)
    assert head + [batch["index"].tolist() for batch in resumed] == whole
    first.close()
    resumed.close()


@needs_two_cores
def test_an_error_names_its_batch_in_the_epoch_after_the_hand_over():
    class Failing(Heavy):
        def __getitem__(self, index):
            if index == 9:
                raise KeyError(index)
            return super().__getitem__(index)

    loader = DataLoader(Failing(16), batch_size=4, num_workers=2)
    it = iter(loader)
    assert next(it)["index"].tolist() == [0, 1, 2, 3]
    assert next(it)["index"].tolist() == [4, 5, 6, 7]
    with pytest.raises(KeyError) as raised:
        next(it)
    assert any("batch 2" in note for note in raised.value.__notes__)
    assert next(it)["index"].tolist() == [12, 13, 14, 15]
    loader.close()


@needs_two_cores
def test_a_dataset_that_opens_a_file_while_loading_stays_on_one_thread(tmp_path):
    # Processes forked after the first batch would share the file's offset.
    path = tmp_path / "records"
    path.write_bytes(bytes(range(64)))

    class Records(Heavy):
        file = None

        def __getitem__(self, index):
            if self.file is None:
                self.file = open(path, "rb")  # noqa: SIM115 -- kept open, as such datasets do
            super().__getitem__(index)
            self.file.seek(index)
            return {"index": index, "byte": self.file.read(1)[0]}

    dataset = Records(64)
    loader = DataLoader(dataset, batch_size=4, num_workers=2)
    bytes_read = [byte for batch in loader for byte in batch["byte"].tolist()]
    assert bytes_read == list(range(64))
    assert loader.worker_type == "thread"
    assert "open file" in loader.stats()["workers"]["why"]
    loader.close()
    dataset.file.close()


def test_a_worker_init_fn_keeps_python_work_on_processes():
    loader = DataLoader(Cheap(8), batch_size=4, num_workers=2, worker_init_fn=lambda _: None)
    assert loader.worker_type == "process"
    assert {pid for _, pid, _ in consume(loader)} - {os.getpid()}
    loader.close()


def test_a_timeout_keeps_python_work_on_processes():
    loader = DataLoader(Cheap(8), batch_size=4, num_workers=2, timeout=60)
    assert loader.worker_type == "process"
    assert {pid for _, pid, _ in consume(loader)} - {os.getpid()}
    loader.close()


def test_the_torch_drop_in_keeps_python_work_on_processes_seeded_as_torch_seeds_them():
    torch = pytest.importorskip("torch")
    from dataloader.torch import DataLoader as TorchDropIn

    class Seeds(Cheap):
        def __getitem__(self, index):
            return torch.initial_seed()

    loader = TorchDropIn(Seeds(8), batch_size=1, num_workers=2)
    assert loader.worker_type == "process"
    seeds = [int(batch) for batch in loader]
    assert len(set(seeds)) == 2  # one per worker, as under torch
    loader.close()


def test_a_dataset_declared_thread_safe_loads_on_several_threads():
    class Shared(Cheap):
        thread_safe = True

    loader = DataLoader(Shared(), batch_size=4, num_workers=2)
    assert loader.worker_type == "thread"
    assert {pid for _, pid, _ in consume(loader)} == {os.getpid()}
    loader.close()


def test_a_dataset_safe_on_threads_loads_batch_0_here_in_its_first_epoch_alone():
    class Shared(Cheap):
        """Two threads wait in parallel: clearly faster than the calling thread."""

        thread_safe = True

        def __getitem__(self, index):
            time.sleep(0.001)
            return super().__getitem__(index)

    loader = DataLoader(Shared(64), batch_size=8, num_workers="auto", shuffle=True, seed=6)
    direct = DataLoader(Shared(64), batch_size=8, shuffle=True, seed=6)
    for epoch in range(3):
        rows = consume(loader)
        assert [index for index, *_ in rows] == [index for index, *_ in consume(direct)]
        here = [index for index, _, thread in rows if thread == threading.get_ident()]
        assert here == ([index for index, *_ in rows[:8]] if epoch == 0 else [])
        assert {pid for _, pid, _ in rows} == {os.getpid()}
        assert loader.stats()["workers"]["type"] == "thread"
    loader.close()


@needs_two_cores
def test_num_workers_auto_starts_more_processes_for_items_that_wait():
    class Waiting(Cheap):
        def __getitem__(self, index):
            time.sleep(0.004)  # no CPU: a file or a network read
            return super().__getitem__(index)

    # 64 batches of 16 ms: enough to repay starting a process per 4 ms of waiting.
    loader = DataLoader(Waiting(256), batch_size=4, num_workers="auto")
    assert loader.num_workers == usable_cores()
    rows = consume(loader)
    assert [index for index, *_ in rows] == list(range(256))
    assert loader.worker_type == "process"
    assert loader.num_workers > usable_cores()
    assert len({pid for _, pid, _ in rows} - {os.getpid()}) > usable_cores()
    loader.close()


@needs_two_cores
def test_items_that_compute_on_a_busy_machine_get_a_process_per_core_not_more():
    # Other programs keep every core busy: the items wait for a core too,
    # which is not waiting for I/O.
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(usable_cores() + 1)]
    try:
        loader = DataLoader(Heavy(64), batch_size=4, num_workers="auto")
        rows = consume(loader)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert [index for index, *_ in rows] == list(range(64))
    assert loader.worker_type == "process"
    assert loader.stats()["workers"]["count"] == usable_cores()
    loader.close()


def test_memory_budget_bounds_the_batches_loaded_ahead():
    lock = threading.Lock()
    fetched = []

    class Arrays(Dataset):
        thread_safe = True

        def __len__(self):
            return 80

        def __getitem__(self, index):
            with lock:
                fetched.append(index)
            return np.zeros(250, np.float32)  # 1000 bytes: 4000 a batch

    # Three batches of 4000 bytes: the one the loop holds and two ahead.
    loader = DataLoader(Arrays(), batch_size=4, num_workers=4, memory_budget=12_000)
    ahead = []
    for consumed, _batch in enumerate(loader, start=1):
        time.sleep(0.002)  # a training step: the workers fill what the budget allows
        with lock:
            ahead.append(len(fetched) // 4 - consumed)
    # Two batches ahead, and the one being loaded.
    assert max(ahead) <= 2 + 1, ahead
    loader.close()


def test_a_memory_budget_under_two_batches_is_warned_of_once():
    loader = DataLoader(Heavy(32), batch_size=4, num_workers=2, memory_budget=100)
    with pytest.warns(UserWarning, match="memory_budget=100 holds fewer than two batches"):
        consume(loader)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [index for index, *_ in consume(loader)] == list(range(32))
    loader.close()


def test_the_choice_is_logged_once_when_it_changes(caplog):
    loader = DataLoader(Cheap(64), batch_size=8, num_workers=2)
    with caplog.at_level(logging.INFO, logger="dataloader"):
        for _ in range(3):
            consume(loader, step=0.001)
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("DataLoader loads on 1 worker thread:")
    loader.close()


def test_stats_say_how_much_of_the_time_the_consumer_waited():
    loader = DataLoader(Cheap(64), batch_size=8)
    for _batch in loader:
        time.sleep(0.01)  # the consumer's own work dwarfs loading
    figures = loader.stats()
    assert figures["wait_share"] < 0.5
    assert figures["item_seconds"] > 0
    assert figures["workers"] == {"type": "thread", "count": 0}


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({"memory_budget": 0}, ValueError, "memory_budget should be a positive"),
    ({"memory_budget": 1.5}, TypeError, "memory_budget should be a number of bytes"),
    ({"memory_budget": 10, "worker_type": "thread"}, ValueError, "kept by worker_type='auto'"),
    ({"num_workers": "many"}, TypeError, "num_workers should be an integer"),
])
def test_bad_arguments_are_refused(arguments, error, message):
    with pytest.raises(error, match=message):
        DataLoader(Cheap(), **arguments)


def test_decide_moves_back_to_threads_when_processes_measured_slower():
    measured = Measurements(load_seconds=0.05)
    arguments = dict(workers=2, safe_on_threads=False, cores=2, remaining=100,
                     prefetch_factor=2)
    assert decide(measured, **arguments).kind == "process"
    measured.add_interval("process", 0.06)  # slower than one thread, measured
    assert decide(measured, current="process", **arguments).kind == "thread"
    measured.add_interval("process", 0.045)  # not slower: they stay
    assert decide(measured, current="process", **arguments).kind == "process"
    # Starting them again takes a clear gain.
    assert decide(measured, current="thread", **arguments).kind == "thread"


def test_decide_loads_on_the_calling_thread_where_workers_measured_slower():
    # 64 cheap items: 10 us to load a batch, 5 us of the consumer's step. A
    # worker thread is predicted to keep up; measured, its hand-offs cost more.
    measured = Measurements(load_seconds=0.00001, consumer_seconds=0.000005)
    arguments = dict(workers=2, safe_on_threads=False, cores=2, remaining=1000,
                     prefetch_factor=2)
    assert decide(measured, **arguments) == Choice("thread", 1, 2, ANY)
    measured.add_interval("thread", 0.00004)
    measured.add_interval("process", 0.0004)
    choice = decide(measured, current="thread", **arguments)
    assert (choice.kind, choice.workers) == ("thread", 0)
    assert "on the calling thread" in choice.why
    # Batch 0 paid for first calls (40 us): loading here looks as slow as the thread,
    # until the worker thread measures what a warm batch costs to load.
    measured = Measurements(load_seconds=0.00004, consumer_seconds=0.000005)
    measured.add_interval("thread", 0.00004)
    measured.add_interval("process", 0.0004)
    assert decide(measured, current="thread", **arguments).workers == 1
    measured.add_thread_load(0.00001)
    assert decide(measured, current="thread", **arguments).workers == 0
    # A step that dwarfs loading: the thread overlaps it, the calling thread cannot.
    measured.consumer_seconds = 0.05
    measured.add_interval("thread", 0.05)
    measured.add_interval("process", 0.0503)
    assert decide(measured, current="thread", **arguments) == Choice("thread", 1, 2, ANY)


def test_an_epoch_whose_workers_measured_slow_loads_on_the_calling_thread():
    class Steady(Cheap):
        """A millisecond an item, every epoch: what was measured stays true."""

        def __getitem__(self, index):
            time.sleep(0.001)
            return super().__getitem__(index)

    loader = DataLoader(Steady(64), batch_size=8, num_workers=2, shuffle=True, seed=8)
    direct = DataLoader(Steady(64), batch_size=8, shuffle=True, seed=8)
    rows = consume(loader)
    assert [index for index, *_ in rows] == [index for index, *_ in consume(direct)]
    assert {thread for *_, thread in rows[8:]} != {threading.get_ident()}  # a worker thread
    # What a busy machine may measure, epoch after epoch (so it stands): hand-offs
    # slower than loading here.
    measured = loader._auto.measured
    for _ in range(2):
        measured.add_interval("thread", 10 * (measured.load_seconds + measured.consumer_seconds))
        measured.add_interval("process", 10 * (measured.load_seconds + measured.consumer_seconds))
    for _ in range(2):
        rows = consume(loader)
        assert [index for index, *_ in rows] == [index for index, *_ in consume(direct)]
        assert {thread for *_, thread in rows} == {threading.get_ident()}
        figures = loader.stats()["workers"]
        assert (figures["type"], figures["count"]) == ("thread", 0)
        assert "on the calling thread" in figures["why"]
    assert multiprocessing.active_children() == []
    loader.close()


def test_a_kind_measured_slow_once_is_predicted_again_after_a_few_epochs():
    # Cheap items, a 1 ms step: one thread predicted to keep up with the step.
    measured = Measurements(load_seconds=0.0001, consumer_seconds=0.001)
    arguments = dict(workers=2, safe_on_threads=False, cores=2, remaining=1000,
                     prefetch_factor=2)
    assert decide(measured, **arguments).kind == "thread"
    measured.epochs += 1
    measured.add_interval("thread", 0.002)  # hand-offs slowed by a busy machine
    assert decide(measured, current="thread", **arguments).kind == "process"
    for _ in range(MEASUREMENT_EPOCHS):
        measured.epochs += 1
        measured.add_interval("process", 0.0013)
        assert decide(measured, current="process", **arguments).kind == "process"
    measured.epochs += 1
    measured.add_interval("process", 0.0013)
    assert decide(measured, current="process", **arguments).kind == "thread"
    # Measured as slow as before, however long ago: it stands at once.
    assert measured.add_interval("thread", 0.002, expected=0.001)
    assert decide(measured, current="thread", **arguments).kind == "process"


def test_a_measurement_far_slower_than_the_kinds_last_is_set_aside_once():
    # Python work: two processes measured twice as fast as one thread.
    measured = Measurements(load_seconds=0.025)
    arguments = dict(workers=2, safe_on_threads=False, cores=2, remaining=100,
                     prefetch_factor=2)
    measured.add_interval("process", 0.0125)
    assert decide(measured, current="process", **arguments).kind == "process"
    # An epoch slowed by other programs: four times slower than the last. The
    # loader stays where it was and measures the kind again.
    assert not measured.add_interval("process", 0.05)
    assert measured.interval("process") == 0.0125
    assert decide(measured, current="process", **arguments).kind == "process"
    # As slow again: it stands, and the loader moves to a thread.
    assert measured.add_interval("process", 0.05)
    assert decide(measured, current="process", **arguments).kind == "thread"
    # A measurement back to normal after an outlier stands too.
    measured.add_interval("process", 0.0125)
    assert not measured.add_interval("process", 0.05)
    assert measured.add_interval("process", 0.013)
    assert not measured.set_aside


def test_a_first_measurement_far_slower_than_its_prediction_is_set_aside_once():
    measured = Measurements(load_seconds=0.025)
    arguments = dict(workers=2, safe_on_threads=False, cores=2, remaining=100,
                     prefetch_factor=2)
    choice = decide(measured, **arguments)
    assert choice.kind == "process" and choice.expected == pytest.approx(0.0128, rel=0.1)
    assert not measured.add_interval("process", 4 * choice.expected, choice.expected)
    assert decide(measured, current="process", **arguments).kind == "process"
    assert measured.add_interval("process", 4 * choice.expected, choice.expected)
    assert decide(measured, current="process", **arguments).kind == "thread"
    # Faster than predicted is no outlier.
    fresh = Measurements(load_seconds=0.025)
    assert fresh.add_interval("process", choice.expected / 2, choice.expected)


class SlowerOnWorkerProcesses(Cheap):
    """5 ms of waiting an item in the training process, 25 ms in a worker process: as
    processes measure while other programs take the cores, on any machine (a sleep)."""

    def __init__(self, n):
        super().__init__(n)
        self.parent = os.getpid()

    def __getitem__(self, index):
        time.sleep(0.005 if os.getpid() == self.parent else 0.025)
        return super().__getitem__(index)


@needs_two_cores
def test_an_epoch_measured_far_slower_than_predicted_does_not_move_the_next(caplog):
    loader = DataLoader(SlowerOnWorkerProcesses(64), batch_size=4, num_workers=2)
    kinds = []
    with caplog.at_level(logging.INFO, logger="dataloader"):
        for _ in range(2):
            assert [index for index, *_ in consume(loader)] == list(range(64))
            kinds.append(loader.worker_type)
    # Batch 0 predicted processes twice as fast as a thread; they measured five
    # times slower than that. Set aside, it left the second epoch on processes
    # (a thread, had it stood), and what they measured there stands.
    assert kinds == ["process", "process"]
    assert any("set aside" in record.getMessage() for record in caplog.records)
    assert loader._auto.measured.interval("process") is not None
    assert not loader._auto.measured.set_aside
    loader.close()
    assert multiprocessing.active_children() == []


def test_decide_keeps_python_work_on_threads_under_a_memory_budget():
    # Worker processes would deliver faster, but each keeps its own slots and
    # its copy of the training process's pages, beyond the batches in flight.
    measured = Measurements(load_seconds=0.05, batch_bytes=1000)
    arguments = dict(workers=None, safe_on_threads=False, cores=4, remaining=100,
                     prefetch_factor=2)
    assert decide(measured, **arguments).kind == "process"
    choice = decide(measured, memory_budget=3500, **arguments)  # 1 held + 2 ahead
    assert choice == Choice("thread", 1, 2, choice.why)
    assert "memory_budget" in choice.why
    # A dataset safe on several threads gets as many as the budget's batches ahead.
    shared = decide(measured, memory_budget=3500, **{**arguments, "safe_on_threads": True})
    assert (shared.kind, shared.workers, shared.window) == ("thread", 2, 2)
    few = decide(measured, workers=2, safe_on_threads=False, cores=2, remaining=1,
                 prefetch_factor=2)
    assert few.kind == "thread" and "do not repay" in few.why


@needs_two_cores
def test_a_memory_budget_keeps_python_work_on_one_thread_epoch_after_epoch():
    loader = DataLoader(Heavy(64), batch_size=4, num_workers="auto", shuffle=True, seed=2,
                        memory_budget=1 << 20)
    direct = DataLoader(Heavy(64), batch_size=4, shuffle=True, seed=2)
    for _ in range(2):
        rows = consume(loader)
        assert [index for index, *_ in rows] == [index for index, *_ in consume(direct)]
        assert {pid for _, pid, _ in rows} == {os.getpid()}
        assert multiprocessing.active_children() == []
    figures = loader.stats()["workers"]
    assert (figures["type"], figures["count"]) == ("thread", 1)
    assert "memory_budget" in figures["why"]
    loader.close()


def test_the_first_batch_loads_with_one_torch_thread_as_a_worker_loads_it():
    # The caller's intra-op threads would spin against the worker processes
    # starting beside batch 0, and make its items look dearer than on a worker.
    torch = pytest.importorskip("torch")

    class TorchThreads(Cheap):
        def __getitem__(self, index):
            return torch.get_num_threads()

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        loader = DataLoader(TorchThreads(16), batch_size=4, num_workers=2)
        for _ in range(2):
            batches = [batch.tolist() for batch in loader]
            assert batches == [[1] * 4] * 4  # batch 0 here, the rest on a worker thread
            assert torch.get_num_threads() == 2  # the caller's own count, given back
        loader.close()
    finally:
        torch.set_num_threads(before)


def test_decide_starts_no_more_workers_than_keep_up_with_the_consumer():
    # Batches take 100 ms to load, the training step 50 ms: 3 workers keep up.
    measured = Measurements(load_seconds=0.1, consumer_seconds=0.05, wait_share=0.5)
    choice = decide(measured, workers=None, safe_on_threads=False, cores=8, remaining=1000,
                    prefetch_factor=2)
    assert (choice.kind, choice.workers) == ("process", 3)
    # The step is the slower: one thread keeps up, no process is started.
    measured = Measurements(load_seconds=0.01, consumer_seconds=0.04, wait_share=0.0)
    assert decide(measured, workers=None, safe_on_threads=False, cores=8, remaining=1000,
                  prefetch_factor=2).kind == "thread"


def test_open_files_found_before_the_first_epoch_keep_it_on_one_thread():
    class Held(Heavy):
        def __init__(self):
            super().__init__(8)
            self.file = io.BytesIO(b"x")

    with pytest.warns(UserWarning, match="holds an open file"):
        loader = DataLoader(Held(), batch_size=4, num_workers=2)
        consume(loader)
    assert loader.worker_type == "thread"
    loader.close()


@needs_two_cores
def test_skipped_items_count_against_one_budget_across_the_hand_over():
    class Flaky(Heavy):
        def __getitem__(self, index):
            if index % 10 == 3:
                raise ValueError(index)
            return super().__getitem__(index)

    def run(**arguments):
        loader = DataLoader(Flaky(96), batch_size=4, on_error="skip", max_skipped=9,
                            **arguments)
        indices = []
        with pytest.raises(ValueError) as raised:  # the tenth failing item: 93
            for batch in loader:
                indices += batch["index"].tolist()
        skipped = loader.stats()["skipped"]["count"]
        if hasattr(loader, "close"):
            loader.close()
        return indices, skipped, raised.value.args

    assert run(num_workers=2) == run(num_workers=0)
