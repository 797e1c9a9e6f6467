"""Async datasets: the loader's event loop, bounded concurrency, cancellation, lifecycle."""

import asyncio
import gc
import subprocess
import sys
import textwrap
import threading
import weakref

import aiohttp
import numpy as np
import pytest
from conftest import loader_thread_count as thread_count

from dataloader import AsyncDataset, DataLoader, get_worker_info

# A bound on waits for something that must happen: generous, since the
# machines are shared; reaching it means a hang, never mere slowness.
GENEROUS = 30.0


# The threaded modes of conftest.MODES, where an epoch has items in flight.
THREADED_MODES = [(0, 4), (2, 1), (2, 4)]




def loop_threads():
    return [t for t in threading.enumerate() if t.name == "dataloader-event-loop"]


class Remote(AsyncDataset):
    """Items fetched from the test server with one lazily created aiohttp session."""

    def __init__(self, base_url, n):
        self.base_url = base_url
        self.n = n
        self.session = None
        self.loop_threads = set()
        self.closed = threading.Event()

    def __len__(self):
        return self.n

    async def __getitem__(self, index):
        self.loop_threads.add(threading.get_ident())
        if self.session is None:
            self.session = aiohttp.ClientSession()
        async with self.session.get(f"{self.base_url}/items/{index}") as response:
            response.raise_for_status()
            return await response.read()

    async def aclose(self):
        if self.session is not None:
            await self.session.close()
            self.session = None
        self.closed.set()


def decode(index, item):
    return np.frombuffer(item.removeprefix(b"item "), dtype=np.uint8).copy()


def test_batches_come_in_sampler_order_in_every_mode(http_server, make_loader):
    dataset = Remote(http_server.url, 23)
    with make_loader(dataset, batch_size=4, shuffle=True, seed=3, collate_fn=list) as loader:
        order = [int(b.split()[1]) for batch in loader for b in batch]
    expected = [i for batch in DataLoader(list(range(23)), batch_size=4, shuffle=True, seed=3)
                for i in batch.tolist()]
    assert order == expected
    assert dataset.closed.is_set()


def test_items_overlap_and_in_flight_never_exceeds_the_pool(http_server):
    dataset = Remote(http_server.url, 64)
    with DataLoader(dataset, batch_size=8, num_workers=2, item_concurrency=8,
                    collate_fn=list) as loader:
        list(loader)  # warm-up: connections, loop and pool exist
        http_server.peak = 0
        # The server holds every answer until 8 requests are in flight at
        # once: loading one item at a time would wait out the gate.
        http_server.gate = 8
        batches = list(loader)
    assert [len(batch) for batch in batches] == [8] * 8
    assert http_server.gate_opened
    assert 8 <= http_server.peak <= 2 * 8


def test_one_loop_thread_serves_every_epoch_and_the_session_survives(http_server):
    dataset = Remote(http_server.url, 12)
    with DataLoader(dataset, batch_size=4, num_workers=2, item_concurrency=2,
                    collate_fn=list) as loader:
        for _ in range(3):
            assert sum(len(batch) for batch in loader) == 12
            assert len(loop_threads()) == 1
        session = dataset.session
        assert session is not None and not session.closed
    assert len(dataset.loop_threads) == 1
    assert dataset.closed.is_set() and session.closed
    assert loop_threads() == []


def test_transform_and_collate_run_on_workers_not_on_the_loop(http_server):
    dataset = Remote(http_server.url, 8)
    seen = []

    def transform(index, item):
        seen.append(("transform", threading.get_ident(), get_worker_info() is not None))
        return decode(index, item)

    def collate(items):
        seen.append(("collate", threading.get_ident(), get_worker_info() is not None))
        return items

    with DataLoader(dataset, batch_size=4, num_workers=2, transform=transform,
                    collate_fn=collate) as loader:
        list(loader)
    (loop_ident,) = dataset.loop_threads
    assert seen and all(ident != loop_ident and on_worker for _, ident, on_worker in seen)


class Failing(AsyncDataset):
    def __len__(self):
        return 12

    async def __getitem__(self, index):
        await asyncio.sleep(0)
        if index == 5:
            raise KeyError(index)
        if index == 9:
            raise TimeoutError(f"item {index} timed out")
        return index


def test_errors_keep_their_type_and_the_epoch_continues(make_loader):
    with make_loader(Failing(), batch_size=4) as loader:
        it = iter(loader)
        assert next(it).tolist() == [0, 1, 2, 3]
        with pytest.raises(KeyError) as raised:
            next(it)
        assert any("batch 1" in note for note in raised.value.__notes__)
        with pytest.raises(TimeoutError, match="item 9 timed out"):
            next(it)
        with pytest.raises(StopIteration):
            next(it)


def test_http_errors_keep_their_type(http_server):
    class Missing(Remote):
        async def __getitem__(self, index):
            if self.session is None:
                self.session = aiohttp.ClientSession()
            async with self.session.get(f"{self.base_url}/missing/{index}") as response:
                response.raise_for_status()

    with DataLoader(Missing(http_server.url, 2), batch_size=2, num_workers=2) as loader:
        with pytest.raises(aiohttp.ClientResponseError) as raised:
            next(iter(loader))
    assert raised.value.status == 404


class Blocking(AsyncDataset):
    """Items in ``blocked`` wait until cancelled; starts and cancellations are recorded."""

    def __init__(self, n, blocked):
        self.n = n
        self.blocked = set(blocked)
        self.entered = threading.Event()
        self.changed = threading.Condition()
        self.started = set()
        self.cancelled = []

    def __len__(self):
        return self.n

    async def __getitem__(self, index):
        if index in self.blocked:
            with self.changed:
                self.started.add(index)
            self.entered.set()
            try:
                await asyncio.Event().wait()  # until cancelled
            except asyncio.CancelledError:
                with self.changed:
                    self.cancelled.append(index)
                    self.changed.notify_all()
                raise
        return index

    def wait_all_cancelled(self):
        with self.changed:
            return self.changed.wait_for(
                lambda: sorted(self.cancelled) == sorted(self.started), GENEROUS
            )


@pytest.mark.parametrize("mode", THREADED_MODES, ids=["lanes", "workers", "workers+lanes"])
def test_break_cancels_pending_coroutines_and_the_next_epoch_is_complete(mode):
    num_workers, item_concurrency = mode
    dataset = Blocking(16, blocked=[4, 5, 9])
    loader = DataLoader(dataset, batch_size=4, num_workers=num_workers,
                        item_concurrency=item_concurrency)
    for batch in loader:
        assert batch.tolist() == [0, 1, 2, 3]
        assert dataset.entered.wait(GENEROUS)
        break
    # The loop variable's iterator is gone: its coroutines are cancelled.
    assert dataset.wait_all_cancelled()
    assert dataset.cancelled
    dataset.blocked.clear()
    assert [b.tolist() for b in loader] == [list(range(i, i + 4)) for i in range(0, 16, 4)]
    loader.close()


def test_item_lanes_with_item_concurrency_one_keep_one_item_per_worker():
    in_flight, peak, lock = [0], [0], threading.Lock()

    class Counting(AsyncDataset):
        def __len__(self):
            return 24

        async def __getitem__(self, index):
            with lock:
                in_flight[0] += 1
                peak[0] = max(peak[0], in_flight[0])
            await asyncio.sleep(0.005)
            with lock:
                in_flight[0] -= 1
            return index

    with DataLoader(Counting(), batch_size=6, num_workers=2) as loader:
        assert sum(len(batch) for batch in loader) == 24
    assert peak[0] <= 2


def test_async_getitems_takes_whole_batches(make_loader):
    class Batched(AsyncDataset):
        def __init__(self):
            self.calls = []

        def __len__(self):
            return 10

        async def __getitem__(self, index):
            return index

        async def __getitems__(self, indices):
            self.calls.append(list(indices))
            return [10 * index for index in indices]

    dataset = Batched()
    with make_loader(dataset, batch_size=4) as loader:
        batches = [batch.tolist() for batch in loader]
    if loader.item_concurrency == 1:  # like sync datasets, lanes do not use __getitems__
        assert batches == [[0, 10, 20, 30], [40, 50, 60, 70], [80, 90]]
        assert sorted(dataset.calls) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    else:
        assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_a_coroutine_getitem_without_subclassing_is_async(make_loader):
    class Plain:
        def __len__(self):
            return 5

        async def __getitem__(self, index):
            await asyncio.sleep(0)
            return index + 1

    with make_loader(Plain(), batch_size=None) as loader:
        assert [int(x) for x in loader] == [1, 2, 3, 4, 5]


def test_sync_method_on_an_async_dataset_is_a_type_error_naming_it():
    class Sync(AsyncDataset):
        def __len__(self):
            return 1

        def __getitem__(self, index):
            return index

    with pytest.raises(TypeError, match="__getitem__"):
        DataLoader(Sync())

    class SyncBatch(AsyncDataset):
        def __len__(self):
            return 1

        async def __getitem__(self, index):
            return index

        def __getitems__(self, indices):
            return indices

    with pytest.raises(TypeError, match="__getitems__"):
        DataLoader(SyncBatch())


def test_close_awaits_aclose_and_leaves_no_thread(http_server):
    baseline = thread_count()
    dataset = Remote(http_server.url, 8)
    loader = DataLoader(dataset, batch_size=4, num_workers=2, item_concurrency=2)
    it = iter(loader)
    next(it)
    loader.close()
    assert dataset.closed.is_set()
    assert loop_threads() == []
    assert thread_count() == baseline
    del it
    # The loader stays usable: a new loop and pool, a new session.
    dataset.closed.clear()
    assert sum(len(b) for b in loader) == 8
    loader.close()
    assert dataset.closed.is_set() and thread_count() == baseline


def test_collected_loader_awaits_aclose_and_stops_its_loop(http_server):
    baseline = thread_count()
    dataset = Remote(http_server.url, 8)
    loader = DataLoader(dataset, batch_size=4, num_workers=2)
    assert sum(len(b) for b in loader) == 8
    del loader
    gc.collect()
    assert dataset.closed.is_set()
    assert loop_threads() == []
    assert thread_count() == baseline


def test_failing_aclose_is_logged_not_raised(caplog):
    class BrokenClose(Failing):
        async def aclose(self):
            raise RuntimeError("cannot close")

    loader = DataLoader(BrokenClose(), batch_size=2, sampler=[0, 1])
    assert [b.tolist() for b in loader] == [[0, 1]]
    with caplog.at_level("ERROR", logger="dataloader"):
        loader.close()
    assert "aclose() failed" in caplog.text
    assert loop_threads() == []


@pytest.mark.parametrize("mode", THREADED_MODES, ids=["lanes", "workers", "workers+lanes"])
def test_close_cancels_coroutines_a_running_epoch_waits_for(mode):
    num_workers, item_concurrency = mode
    dataset = Blocking(64, blocked=[2])
    loader = DataLoader(dataset, batch_size=2, num_workers=num_workers,
                        item_concurrency=item_concurrency)
    it = iter(loader)
    assert next(it).tolist() == [0, 1]
    assert dataset.entered.wait(GENEROUS)
    loader.close()  # returns, though item 2 waits until cancelled (or the test times out)
    assert dataset.cancelled == [2]
    with pytest.raises(RuntimeError, match="closed"):
        while True:
            next(it)
    # Workers of the closed epoch never start a new loop.
    assert loop_threads() == []


def test_a_forked_child_runs_its_own_event_loop():
    code = textwrap.dedent(
        """
        import asyncio, os
        from dataloader import AsyncDataset, DataLoader

        class Items(AsyncDataset):
            def __len__(self):
                return 6

            async def __getitem__(self, index):
                await asyncio.sleep(0)
                return index

        loader = DataLoader(Items(), batch_size=3, num_workers=2)
        assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]]
        pid = os.fork()
        if pid == 0:
            ok = [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]]
            loader.close()
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]]
        loader.close()
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.stdout.strip() == "ok", result.stderr


def test_loader_in_a_reference_cycle_with_its_dataset_is_collected_and_its_loop_stops():
    baseline = thread_count()
    dataset = Failing()
    loader = DataLoader(dataset, batch_size=2, num_workers=2, sampler=[0, 1, 2, 3])
    dataset.loader = loader
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]
    assert len(loop_threads()) == 1
    alive = weakref.ref(loader)
    del dataset, loader
    gc.collect()
    assert alive() is None
    assert loop_threads() == []
    assert thread_count() == baseline
