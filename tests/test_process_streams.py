"""Worker processes for iterable-style and async datasets: each process iterates its
own stream (or runs its own event loop), with the semantics of worker threads."""

import asyncio
import multiprocessing
import os
import signal
import threading
import time

import numpy as np
import pytest
from stream_datasets import BY_TURN, Range, Uneven

from dataloader import AsyncDataset, DataLoader, get_worker_info, interleave, shard
from dataloader._processes.choice import free_threaded
from dataloader.sources import TarDataset, TarWriter
from dataloader.transforms import Compose, Decode, Resize


class Who(Range):
    """Each item says which process made it and the worker info it saw."""

    def __iter__(self):
        info = get_worker_info()
        for value in super().__iter__():
            yield {"value": value, "pid": os.getpid(), "worker": info.id,
                   "workers": info.num_workers, "batch_size": info.batch_size}


class KillsItself(Range):
    def __iter__(self):
        for value in super().__iter__():
            if value == 9:
                os.kill(os.getpid(), signal.SIGKILL)
            yield value


# A bound on waits for something that must happen: reaching it means a hang.
GENEROUS = 30.0


def loader_of(dataset, worker_type="process", **kwargs):
    kwargs.setdefault("num_workers", 2)
    kwargs.setdefault("timeout", 120)  # a hang fails the test instead of the suite
    return DataLoader(dataset, worker_type=worker_type, **kwargs)


def rows(batches):
    return sorted(batch.tolist() if hasattr(batch, "tolist") else batch for batch in batches)


@pytest.mark.parametrize("options", [
    {"batch_size": 4}, {"batch_size": 4, "drop_last": True}, {"batch_size": None},
    {"batch_size": 3, "num_workers": 3, "prefetch_factor": 1}, {"batch_size": 5, "in_order": False},
])
def test_process_streams_give_the_threads_batches(options):
    with loader_of(Range(37), "thread", **options) as threads:
        expected = rows(threads)
    with loader_of(Range(37), **options) as processes:
        assert processes.worker_type == "process"
        assert rows(processes) == expected
        assert rows(processes) == expected  # a second epoch, fresh processes


def test_each_stream_is_iterated_in_its_own_process_with_its_worker_info():
    with loader_of(Who(20), batch_size=5, num_workers=2) as loader:
        batches = list(loader)
    values = sorted(int(v) for batch in batches for v in batch["value"])
    assert values == list(range(20))
    for batch in batches:
        assert len(set(batch["pid"].tolist())) == 1  # a batch comes from one stream
        worker = int(batch["worker"][0])
        assert int(batch["pid"][0]) != os.getpid()
        assert batch["workers"].tolist() == [2] * 5
        assert batch["batch_size"].tolist() == [5] * 5
        assert all(int(v) % 2 == worker for v in batch["value"])
    assert len({int(b["pid"][0]) for b in batches}) == 2


def test_shard_splits_ranks_and_worker_processes_without_duplicates():
    source = [f"item{n}" for n in range(41)]
    seen = []
    for rank in range(2):
        with loader_of(shard(source, rank, 2), batch_size=4, num_workers=3) as loader:
            seen += [item for batch in loader for item in batch]
    assert sorted(seen) == sorted(source)


@pytest.mark.parametrize("persistent", [False, True])
def test_in_order_takes_the_streams_batches_by_turn_epoch_after_epoch(persistent):
    # torch's rule for any IterableDataset: batch j of every worker before batch
    # j + 1 of any, an ended stream leaving the turns. Worker 0 is held back in the
    # first epoch, so the others' batches are ready long before its: they wait.
    hold = multiprocessing.get_context("fork").Event()
    threading.Timer(0.2, hold.set).start()
    with loader_of(Uneven(hold), batch_size=2, num_workers=3,
                   persistent_workers=persistent) as loader:
        for _ in range(2):
            delivered = 0
            for position, batch in enumerate(loader):
                assert batch.tolist() == BY_TURN[position]
                delivered += 1
                del batch  # each batch dropped before the next: slots are reused
            assert delivered == len(BY_TURN)


def test_in_order_false_takes_the_streams_batches_as_they_arrive():
    release = multiprocessing.get_context("fork").Event()
    with loader_of(Uneven(release), batch_size=2, num_workers=3, in_order=False) as loader:
        iterator = iter(loader)
        # Worker 0 waits for the consumer: everything else arrives first.
        first = sorted(next(iterator).tolist() for _ in range(5))
        assert first == sorted(BY_TURN[1:])
        release.set()
        assert [batch.tolist() for batch in iterator] == [[0, 1]]


def test_streams_resume_their_turns_on_either_worker():
    for stop in (1, 3, 5):
        for first, then in (("process", "thread"), ("thread", "process")):
            with loader_of(Uneven(), first, batch_size=2, num_workers=3) as loader:
                iterator = iter(loader)
                head = [next(iterator).tolist() for _ in range(stop)]
                state = loader.state_dict()
            with loader_of(Uneven(), then, batch_size=2, num_workers=3) as loader:
                loader.load_state_dict(state)
                rest = []
                for batch in loader:
                    rest.append(batch.tolist())
                    del batch
                assert head + rest == BY_TURN, (stop, first, then)
                assert [b.tolist() for b in loader] == BY_TURN  # the next epoch


def test_the_stream_epoch_offers_its_worker_processes_as_torchs_iterator_does():
    with loader_of(Who(8), batch_size=2, num_workers=2) as loader:
        iterator = iter(loader)
        workers = iterator._workers
        assert len(workers) == 2
        assert all(isinstance(worker, multiprocessing.process.BaseProcess) for worker in workers)
        pids = [worker.pid for worker in workers]
        for batch in iterator:
            assert int(batch["pid"][0]) == pids[int(batch["worker"][0])]
            del batch
        for worker in workers:  # the epoch is over: its workers end with it
            worker.join(GENEROUS)
            assert not worker.is_alive()
    with loader_of(Range(8), "thread", batch_size=2) as loader:
        # Threads are not processes: no _workers, as torch's single-process iterator.
        assert not hasattr(iter(loader), "_workers")


@pytest.mark.parametrize("first, then", [("process", "thread"), ("thread", "process"),
                                         ("process", "process")])
def test_a_sharded_stream_resumes_exactly_on_either_worker_type(first, then):
    source = list(range(50))
    with loader_of(shard(source, 0, 1), first, batch_size=4) as loader:
        iterator = iter(loader)
        head = [next(iterator).tolist() for _ in range(5)]
        state = loader.state_dict()
    assert state["batches"] == 5
    with loader_of(shard(source, 0, 1), then, batch_size=4) as loader:
        loader.load_state_dict(state)
        rest = [batch.tolist() for batch in loader]
    items = sorted(item for batch in head + rest for item in batch)
    assert items == source  # every item once: nothing lost, nothing repeated


def test_interleaved_streams_match_threads_batch_for_batch():
    def make():
        return interleave([shard(list(range(30)), 0, 1), shard(list(range(100, 120)), 0, 1)],
                          [0.6, 0.4], seed=3)

    with loader_of(make(), "thread", batch_size=4) as threads:
        expected = [b.tolist() for b in threads]
    with loader_of(make(), batch_size=4) as processes:
        assert [b.tolist() for b in processes] == expected


def test_tar_shards_stream_from_processes_as_from_threads(tmp_path):
    with TarWriter(str(tmp_path / "s-{:02d}.tar"), shard_size=10_240) as writer:
        for n in range(40):
            writer.write({"__key__": f"{n:04d}", "bin": bytes([n]) * 1000, "cls": n})

    def keys(loader, epochs=2):
        return [sorted(key for batch in loader for key in batch["__key__"])
                for _ in range(epochs)]

    dataset = TarDataset(writer.shards, shuffle_buffer=8, seed=5)
    assert loader_of(dataset, batch_size=4).worker_type == "process"
    with loader_of(dataset, "thread", batch_size=4) as threads:
        expected = keys(threads)
    with loader_of(dataset, batch_size=4, persistent_workers=True) as processes:
        assert keys(processes) == expected == [[f"{n:04d}" for n in range(40)]] * 2


def outcomes(loader):
    """Every item delivered, and every error's type and message, in a canonical order."""
    found = []
    iterator = iter(loader)
    while True:
        try:
            found += [str(item) for item in next(iterator).tolist()]
        except StopIteration:
            return sorted(found)
        except (KeyError, ValueError) as exc:
            found.append(f"{type(exc).__name__}: {exc} {getattr(exc, '__notes__', [])}")


def test_an_iterator_error_ends_its_stream_and_a_transform_error_fails_its_batch():
    def transform(position, item):
        if item == 5:
            raise ValueError("bad five")
        return item

    for dataset, options in ((Range(20, failing_at=7), {}), (Range(12), {"transform": transform})):
        with loader_of(dataset, "thread", batch_size=2, **options) as threads:
            expected = outcomes(threads)
        with loader_of(dataset, batch_size=2, **options) as processes:
            assert outcomes(processes) == expected
    # Stream 1 gave [1, 3], then its iterator failed fetching [5, 7]: it ended there.
    with loader_of(Range(20, failing_at=7), batch_size=2) as loader:
        found = outcomes(loader)
    assert [item for item in found if item.isdigit()] == sorted(
        map(str, [*range(0, 20, 2), 1, 3]))
    [error] = [item for item in found if not item.isdigit()]
    assert "item 7 is broken" in error and "stream 1" in error


def test_stats_count_the_worker_processes_stages_and_skip_is_refused_as_on_threads():
    with loader_of(Range(30), batch_size=4) as loader:
        assert len(list(loader)) == 8
        figures = loader.stats()
    assert figures["fetch"]["count"] == 30
    assert figures["collate"]["count"] == 8
    assert figures["wait"]["count"] == 9
    assert figures["workers"] == {"type": "process", "count": 2}
    for worker_type in ("thread", "process"):
        with pytest.raises(ValueError, match="map-style"):
            loader_of(Range(3), worker_type, on_error="skip")


def test_persistent_stream_workers_serve_every_epoch():
    with loader_of(Who(12), batch_size=3, persistent_workers=True) as loader:
        epochs = [[batch for batch in loader] for _ in range(3)]
        partial = iter(loader)
        next(partial)  # an abandoned epoch: its replies are recognised and dropped
        last = [int(v) for batch in loader for v in batch["value"]]
    pids = [{int(b["pid"][0]) for b in batches} for batches in epochs]
    assert pids[0] == pids[1] == pids[2] and len(pids[0]) == 2
    assert sorted(last) == list(range(12))


def test_a_killed_stream_worker_raises_naming_its_pid_and_signal():
    with loader_of(KillsItself(40), batch_size=2) as loader:
        with pytest.raises(RuntimeError, match=r"pid \d+.*SIGKILL.*of its stream"):
            list(loader)


def test_auto_runs_python_streams_on_processes_and_native_or_in_memory_ones_on_threads(
        tmp_path):
    python_work = "thread" if free_threaded() else "process"
    assert DataLoader(Range(5), num_workers=2).worker_type == python_work
    assert DataLoader(Range(5), num_workers=0).worker_type == "thread"
    assert DataLoader(shard(list(range(5)), 0, 1), num_workers=2).worker_type == "thread"
    assert DataLoader(shard(np.arange(5), 0, 1), num_workers=2).worker_type == "thread"
    assert DataLoader(shard(Range(5), 0, 1), num_workers=2).worker_type == python_work
    with TarWriter(str(tmp_path / "one.tar")) as writer:
        writer.write({"__key__": "a", "bin": b"x"})
    assert DataLoader(TarDataset(writer.shards), num_workers=2).worker_type == "thread"
    native = Compose([Decode(), Resize(8)])
    assert DataLoader(Range(5), num_workers=2, transform=native).worker_type == "thread"
    # interleave's stats() count in this process's copy: threads keep them true.
    mixed = interleave([Range(6), Range(4)])
    with DataLoader(mixed, batch_size=None, num_workers=2) as loader:
        assert loader.worker_type == "thread"
        items = list(loader)
    assert sum(mixed.stats()["counts"]) == len(items) > 0


class Stalls(Range):
    def __iter__(self):
        if get_worker_info().id == 0:
            time.sleep(60)
        return super().__iter__()


def test_a_stalled_stream_times_out():
    with loader_of(Stalls(8), batch_size=2, timeout=0.3, in_order=False) as loader:
        iterator = iter(loader)
        assert sorted(next(iterator).tolist() + next(iterator).tolist()) == [1, 3, 5, 7]
        with pytest.raises(TimeoutError, match=r"0\.3"):
            next(iterator)


class Fetches(AsyncDataset):
    """Items fetched by coroutines; each says which process's event loop ran it."""

    def __init__(self, n=24):
        self.n = n

    def __len__(self):
        return self.n

    async def __getitem__(self, index):
        await asyncio.sleep(0.001)
        return {"index": index, "pid": os.getpid(),
                "loop": id(asyncio.get_running_loop()) % 2**31}


class FetchesBatches(Fetches):
    async def __getitems__(self, indices):
        await asyncio.sleep(0.001)
        return [{"index": index, "pid": os.getpid(), "loop": 0} for index in indices]


@pytest.mark.parametrize("dataset", [Fetches(), FetchesBatches()], ids=["item", "batch"])
@pytest.mark.parametrize("item_concurrency", [1, 3])
def test_async_datasets_run_on_an_event_loop_in_each_process(dataset, item_concurrency):
    with loader_of(dataset, batch_size=4, item_concurrency=item_concurrency) as loader:
        assert loader.worker_type == "process"
        batches = list(loader)
    assert [b["index"].tolist() for b in batches] == [list(range(i, i + 4))
                                                        for i in range(0, 24, 4)]
    pids = {int(pid) for batch in batches for pid in batch["pid"]}
    assert len(pids) == 2 and os.getpid() not in pids
    assert DataLoader(dataset, num_workers=2).worker_type == "thread"  # auto keeps threads
