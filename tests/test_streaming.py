"""Iterable-style (streaming) datasets: every mode, sharding, errors, lifecycle."""

import gc
import itertools
import subprocess
import sys
import textwrap
import threading
import time
from itertools import chain

import numpy as np
import pytest
from stream_datasets import BY_TURN, Range, Uneven

from dataloader import DataLoader, IterableDataset, get_worker_info, shard
from dataloader._errors import EpochClosedError

# A bound on waits for something that must happen: generous, since the
# machines are shared; reaching it means a hang, never mere slowness.
GENEROUS = 30.0


class Unsized(IterableDataset):
    def __init__(self, source):
        self.source = source

    def __iter__(self):
        return iter(self.source)


def split(source):
    """``source`` as a stream that workers share without duplicates."""
    return shard(source, 0, 1)


def flat(batches):
    return sorted(itertools.chain.from_iterable(batch.tolist() for batch in batches))


def test_every_item_once_in_every_mode(make_loader, mode):
    loader = make_loader(Range(53), batch_size=4)
    batches = list(loader)
    assert flat(batches) == list(range(53))
    if mode[0] == 0:  # one stream, on the consumer: exactly its order
        assert [b.tolist() for b in batches][:2] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(loader) == 14


@pytest.mark.parametrize("num_workers", [1, 2, 3])
@pytest.mark.parametrize("item_concurrency", [1, 4])
def test_worker_info_describes_the_streams(num_workers, item_concurrency):
    seen = set()

    class Recording(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            seen.add((info.id, info.num_workers))
            return iter(range(info.id, 30, info.num_workers))

    loader = DataLoader(Recording(), batch_size=4, num_workers=num_workers,
                        item_concurrency=item_concurrency, worker_type="thread")
    assert flat(loader) == list(range(30))
    assert seen == {(worker, num_workers) for worker in range(num_workers)}
    loader.close()


@pytest.mark.parametrize("num_workers", [0, 2, 3])
def test_shard_divides_ranks_and_workers_without_duplicates(num_workers):
    everything = []
    for rank in range(3):
        with DataLoader(shard(range(100), rank, 3), batch_size=7,
                        num_workers=num_workers) as loader:
            mine = flat(loader)
        assert len(mine) == len(set(mine)) == len(range(rank, 100, 3))
        everything += mine
    assert sorted(everything) == list(range(100))


def test_shard_helpers():
    assert [list(shard("abcdefg", rank, 3)) for rank in range(3)] == [
        ["a", "d", "g"], ["b", "e"], ["c", "f"]]
    assert list(Unsized(range(9)).shard(rank=2, world_size=4)) == [2, 6]
    assert len(shard(range(9), 0, 4)) == 3
    with pytest.raises(ValueError, match="Invalid rank"):
        shard(range(3), 3, 3)
    with pytest.raises(TypeError):
        len(shard(Unsized(range(3)), 0, 2))


def test_in_order_false_delivers_batches_in_arrival_order():
    release = threading.Event()

    class SlowFirstWorker(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            if info.id == 0:
                release.wait(GENEROUS)
            return iter(range(info.id * 100, info.id * 100 + 6))

    with DataLoader(SlowFirstWorker(), batch_size=2, num_workers=2, in_order=False,
                    worker_type="thread") as loader:
        it = iter(loader)
        first = [next(it).tolist() for _ in range(3)]
        assert first == [[100, 101], [102, 103], [104, 105]]
        release.set()
        assert [b.tolist() for b in it] == [[0, 1], [2, 3], [4, 5]]


@pytest.mark.parametrize("item_concurrency", [1, 3])
def test_in_order_takes_the_workers_batches_by_turn_epoch_after_epoch(item_concurrency):
    # torch's rule for any IterableDataset: batch j of every worker before batch
    # j + 1 of any, an ended stream leaving the turns. Workers 1 and 2 are ready
    # long before worker 0 in the first epoch: their batches still wait for its turn.
    hold = threading.Event()
    threading.Timer(0.2, hold.set).start()
    with DataLoader(Uneven(hold), batch_size=2, num_workers=3, worker_type="thread",
                    item_concurrency=item_concurrency) as loader:
        for _ in range(2):
            delivered = 0
            for position, batch in enumerate(loader):
                assert batch.tolist() == BY_TURN[position]
                delivered += 1
                del batch  # each batch dropped before the next, as training does
            assert delivered == len(BY_TURN)
    with DataLoader(Uneven(), batch_size=2, num_workers=3, in_order=False,
                    worker_type="thread") as loader:
        assert sorted(b.tolist() for b in loader) == sorted(BY_TURN)


def test_in_order_gives_each_worker_its_turn_in_every_epoch():
    # torch's test_multi_epochs_reproducibility: worker w's only batch is batch w.
    class WorkerIds(IterableDataset):
        def __iter__(self):
            return iter([get_worker_info().id] * 10)

    with DataLoader(WorkerIds(), batch_size=10, num_workers=3, worker_type="thread") as loader:
        for _ in range(3):
            assert [b.tolist() for b in loader] == [[worker] * 10 for worker in range(3)]


@pytest.mark.parametrize("stop", range(1, 6))
def test_streams_resume_their_turns(stop):
    # After stop 4 worker 0 has ended: the turns go on among the others.
    def make():
        return DataLoader(Uneven(), batch_size=2, num_workers=3, worker_type="thread")

    with make() as loader:
        iterator = iter(loader)
        head = [next(iterator).tolist() for _ in range(stop)]
        state = loader.state_dict()
    with make() as loader:
        loader.load_state_dict(state)
        rest = []
        for batch in loader:
            rest.append(batch.tolist())
            del batch
        assert head + rest == BY_TURN
        assert [b.tolist() for b in loader] == BY_TURN  # the next epoch, from its start


def test_len_follows_torchs_rule():
    assert len(DataLoader(Range(10), batch_size=3)) == 4
    assert len(DataLoader(Range(10), batch_size=3, drop_last=True)) == 3
    assert len(DataLoader(Range(10), batch_size=None)) == 10
    with pytest.raises(TypeError):
        len(DataLoader(Unsized(range(3)), batch_size=2))


def test_drop_last_and_no_batching(make_loader):
    assert [b.tolist() for b in make_loader(Unsized(range(7)), batch_size=3, drop_last=True,
                                            num_workers=0)] == [[0, 1, 2], [3, 4, 5]]
    items = list(make_loader(split([np.int64(4)]), batch_size=None))
    assert [type(item) for item in items] == [np.ndarray] and items[0].tolist() == 4


def test_transform_and_collate_run_per_batch(make_loader, mode):
    threads = set()

    def collate(items):
        threads.add(threading.get_ident())
        return items

    loader = make_loader(split(range(5)), batch_size=2, collate_fn=collate,
                         transform=lambda position, item: item * 10)
    assert sorted(chain.from_iterable(loader)) == [0, 10, 20, 30, 40]
    assert (threading.get_ident() in threads) == (mode == (0, 1))


def test_iterator_error_keeps_its_type_and_ends_its_stream(make_loader, mode):
    it = iter(make_loader(Range(20, failing_at=9), batch_size=2))
    delivered, errors = [], []
    while True:
        try:
            delivered += next(it).tolist()
        except StopIteration:
            break
        except KeyError as exc:
            errors.append(exc)
    assert len(errors) == 1 and "item 9 is broken" in str(errors[0])
    assert any("iterator of stream" in note for note in errors[0].__notes__)
    if mode[0] == 0:  # the only stream ends: the items before the failing batch
        assert delivered == list(range(8))
    else:  # worker 1 (odd items) fails in its batch [9, 11]; worker 0's stream goes on to the end
        assert sorted(delivered) == sorted(list(range(0, 20, 2)) + [1, 3, 5, 7])
    with pytest.raises(StopIteration):
        next(it)


def test_transform_error_fails_only_its_batch(make_loader):
    def transform(position, item):
        if item == 2:
            raise ArithmeticError("bad item")
        return item

    it = iter(make_loader(Unsized(range(6)), batch_size=2, transform=transform, num_workers=0))
    assert next(it).tolist() == [0, 1]
    with pytest.raises(ArithmeticError, match="bad item"):
        next(it)
    assert next(it).tolist() == [4, 5]


def test_error_in_iter_of_the_dataset_is_raised():
    class Broken(IterableDataset):
        def __iter__(self):
            raise OSError("no such bucket")

    for num_workers in (0, 2):
        with DataLoader(Broken(), batch_size=2, num_workers=num_workers) as loader:
            with pytest.raises(OSError, match="no such bucket"):
                next(iter(loader))


def test_window_bounds_batches_loaded_ahead():
    # 2 endless streams, each with its own copy of the dataset's iterator;
    # beyond the batches delivered, at most 2 * 2 = 4 wait in the window and
    # one more is being fetched per worker.
    ahead = 2 * 2 + 2
    changed = threading.Condition()
    produced, beyond = [], []
    delivered = 0

    class Endless(IterableDataset):
        def __iter__(self):
            for value in itertools.count():
                with changed:
                    # The batch on its way to the consumer is not counted yet: one more.
                    if len(produced) >= delivered + ahead + 1:
                        beyond.append((len(produced), delivered))
                    produced.append(value)
                    changed.notify_all()
                yield value

    with DataLoader(Endless(), batch_size=1, num_workers=2, prefetch_factor=2,
                    worker_type="thread") as loader:
        it = iter(loader)
        for _ in range(60):
            next(it)
            with changed:
                delivered += 1
                # The consumer is slow: it waits until the window is full.
                full = delivered + 4
                assert changed.wait_for(lambda full=full: len(produced) >= full, GENEROUS)
                assert beyond == []


@pytest.mark.parametrize("num_workers, item_concurrency", [(0, 4), (2, 1), (2, 4)])
def test_break_and_del_cancel_and_the_next_epoch_is_complete(num_workers, item_concurrency):
    class Endless(IterableDataset):
        def __iter__(self):
            return itertools.count()

    loader = DataLoader(Endless(), batch_size=3, num_workers=num_workers,
                        item_concurrency=item_concurrency)
    for _ in range(3):
        for index, _batch in enumerate(loader):
            if index == 4:
                break
    gc.collect()
    loader_finite = loader
    loader_finite.close()
    started = time.monotonic()
    finite = DataLoader(split(range(10)), batch_size=3, num_workers=num_workers,
                        item_concurrency=item_concurrency)
    assert flat(finite) == list(range(10))
    assert time.monotonic() - started < GENEROUS  # a hang, not a speed
    finite.close()


def test_close_ends_a_running_streaming_epoch_promptly():
    class Endless(IterableDataset):
        def __iter__(self):
            return itertools.count()

    loader = DataLoader(Endless(), batch_size=2, num_workers=2)
    it = iter(loader)
    next(it)
    loader.close()  # returns although the streams never end (or the test times out)
    with pytest.raises((StopIteration, EpochClosedError)):
        next(it)


def test_a_new_epoch_replaces_a_running_one():
    loader = DataLoader(split(range(10)), batch_size=2, num_workers=2)
    first = iter(loader)
    next(first)
    assert flat(iter(loader)) == list(range(10))
    with pytest.raises(RuntimeError, match="replaced"):
        next(first)
    loader.close()


def test_timeout_applies_to_streams():
    release = threading.Event()

    class Slow(IterableDataset):
        def __iter__(self):
            release.wait(30)
            return iter(range(get_worker_info().id, 4, 2))

    with DataLoader(Slow(), batch_size=2, num_workers=2, timeout=0.3,
                    worker_type="thread") as loader:
        it = iter(loader)
        with pytest.raises(TimeoutError, match=r"0\.3"):
            next(it)
        release.set()
        assert flat(it) == [0, 1, 2, 3]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_equal_batches_from_shard_arithmetic(num_workers):
    counts = []
    for rank in range(2):
        loader = DataLoader(shard(range(101), rank, 2), batch_size=5, num_workers=num_workers,
                            equal_batches=True)
        batches = list(loader)
        assert len(loader) == len(batches)
        counts.append(len(batches))
        loader.close()
    assert counts[0] == counts[1] == 10


def test_equal_batches_without_counts_or_torch_distributed_is_a_value_error():
    loader = DataLoader(Unsized(range(10)), batch_size=2, equal_batches=True)
    with pytest.raises(ValueError, match="equal_batches=True needs"):
        iter(loader)


def run_script(code, timeout=60):
    """Run ``code`` in a fresh interpreter; a hang fails the test instead of blocking it."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout)


def test_fork_child_refuses_an_inherited_streaming_epoch():
    result = run_script("""
        import os
        from dataloader import DataLoader, shard
        loader = DataLoader(shard(range(6), 0, 1), batch_size=2, num_workers=2)
        it = iter(loader)
        next(it)
        pid = os.fork()
        if pid == 0:
            try:
                next(it)
                code = 3
            except RuntimeError as exc:
                code = 0 if "fork()" in str(exc) else 4
            batches = sorted(sum((b.tolist() for b in loader), []))
            os._exit(code if batches == list(range(6)) else 5)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "child 0"


def test_interpreter_exit_with_a_running_endless_stream():
    result = run_script("""
        import itertools
        from dataloader import DataLoader, IterableDataset

        class Endless(IterableDataset):
            def __iter__(self):
                return itertools.count()

        loaders = [DataLoader(Endless(), batch_size=2, num_workers=2) for _ in range(2)]
        iterators = [iter(loader) for loader in loaders]
        for it in iterators:
            next(it)
        print("exiting")
    """)
    assert result.returncode == 0, result.stderr
    assert "Fatal Python error" not in result.stderr
    assert result.stdout.strip() == "exiting"


def test_torch_iterable_dataset_with_len_is_a_stream():
    """torch's Dataset base defines ``__getitem__``: its streams are known by class."""
    torch_data = pytest.importorskip("torch.utils.data")

    class TorchRange(torch_data.IterableDataset):
        def __len__(self):
            return 5

        def __iter__(self):
            return iter(range(5))

    loader = DataLoader(TorchRange(), batch_size=2)
    expected = [batch.tolist() for batch in torch_data.DataLoader(TorchRange(), batch_size=2)]
    assert [batch.tolist() for batch in loader] == expected == [[0, 1], [2, 3], [4]]


def test_torch_dataset_split_by_torchs_worker_info_yields_each_item_once():
    torch_data = pytest.importorskip("torch.utils.data")

    class TorchSplitRange(torch_data.IterableDataset):
        def __iter__(self):
            info = torch_data.get_worker_info()
            start, step = (0, 1) if info is None else (info.id, info.num_workers)
            return iter(range(start, 20, step))

    loader = DataLoader(TorchSplitRange(), batch_size=3, num_workers=2)
    assert flat(loader) == list(range(20))
    assert torch_data.get_worker_info() is None  # the consumer thread is no worker
