"""pin_memory=True: torch's warning without an accelerator; the pinning thread with one.

The machine running the suite has no accelerator: the pinning path runs
with torch's ``accelerator.is_available`` patched to say yes and
``Tensor.pin_memory`` replaced by a stand-in that records where it ran and
marks what it returned.
"""

import collections
import gc
import os
import threading
import time
import warnings
from itertools import chain

import numpy as np
import pytest

from dataloader import DataLoader, Dataset, ImageCollator, IterableDataset, interleave, shard
from dataloader.kernels import Image

NO_ACCELERATOR = "'pin_memory' argument is set as true but no accelerator is found"


def has_accelerator():
    try:
        import torch
    except ImportError:
        return False
    return torch.accelerator.is_available()


@pytest.mark.skipif(has_accelerator(), reason="this machine has an accelerator")
@pytest.mark.parametrize("num_workers", [0, 2])
def test_without_an_accelerator_torchs_warning_and_plain_batches(num_workers):
    loader = DataLoader(list(range(10)), batch_size=4, num_workers=num_workers, pin_memory=True)
    with pytest.warns(UserWarning, match=NO_ACCELERATOR):
        batches = list(loader)
    assert all(type(batch) is np.ndarray for batch in batches)
    assert [batch.tolist() for batch in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    loader.close()


@pytest.mark.skipif(has_accelerator(), reason="this machine has an accelerator")
def test_pin_memory_device_is_accepted_with_torchs_deprecation_warning():
    loader = DataLoader(list(range(4)), batch_size=2, pin_memory=True, pin_memory_device="cuda")
    assert loader.pin_memory_device == "cuda"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = [batch.tolist() for batch in loader]
    messages = [str(warning.message) for warning in caught]
    assert any("pin_memory_device is deprecated" in message for message in messages)
    assert any(NO_ACCELERATOR in message for message in messages)
    assert batches == [[0, 1], [2, 3]]


def test_pin_memory_device_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="pin_memory_device"):
        DataLoader(list(range(4)), pin_memory=True, pin_memory_device=0)


def test_without_pin_memory_no_warning_and_no_thread():
    loader = DataLoader(list(range(4)), batch_size=2, num_workers=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        it = iter(loader)
    assert not hasattr(it, "thread")
    assert [batch.tolist() for batch in it] == [[0, 1], [2, 3]]
    loader.close()


# -- the pinning path, with a stand-in accelerator -----------------------------


class FakeAccelerator:
    """Records every pin: the thread it ran on and the tensors it returned."""

    def __init__(self):
        self.lock = threading.Condition()
        self.threads = []
        self.pinned = []  # the tensors returned, kept alive so ids stay unique
        self.device_set = []
        self.fail_on = None

    def pin(self, tensor, *args):
        with self.lock:
            if self.fail_on is not None and self.fail_on(tensor):
                raise RuntimeError("pinning failed")
            self.threads.append(threading.current_thread().name)
            out = tensor.clone()
            self.pinned.append(out)
            self.lock.notify_all()
            return out

    def is_pinned(self, tensor):
        return any(tensor is out for out in self.pinned)

    def wait_for_pins(self, count):
        with self.lock:
            assert self.lock.wait_for(lambda: len(self.pinned) >= count, timeout=60)


@pytest.fixture
def accelerator(monkeypatch):
    torch = pytest.importorskip("torch")
    fake = FakeAccelerator()
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
    monkeypatch.setattr(torch.accelerator, "set_device_index", fake.device_set.append)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda tensor, *args: fake.pin(tensor))
    return fake


Point = collections.namedtuple("Point", "x y")


class Nested(Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, index):
        if index == 7:
            raise KeyError(index)
        return {"image": np.full((2, 2), index, np.float32), "label": index, "name": f"n{index}",
                "point": Point(np.float64(index), np.arange(3) + index)}


@pytest.mark.parametrize("num_workers", [2, 3])
def test_batches_are_pinned_on_the_dedicated_thread_in_order(accelerator, num_workers):
    loader = DataLoader(Nested(), batch_size=3, num_workers=num_workers, pin_memory=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # torch's warning for more worker processes than CPUs (a 2-CPU machine) is not the point.
        warnings.filterwarnings("ignore", "This DataLoader will create", UserWarning)
        it = iter(loader)
    assert len(it) == 4
    first = next(it)
    assert set(first) == {"image", "label", "name", "point"}
    assert accelerator.is_pinned(first["image"]) and accelerator.is_pinned(first["label"])
    assert first["image"][:, 0, 0].tolist() == [0, 1, 2]
    assert first["name"] == ["n0", "n1", "n2"]  # strings stay as they are
    assert type(first["point"]) is Point
    assert accelerator.is_pinned(first["point"].x) and accelerator.is_pinned(first["point"].y)
    assert len(it) == 3
    second = next(it)
    assert second["label"].tolist() == [3, 4, 5]
    with pytest.raises(KeyError) as raised:  # item 7: batch 2 fails, in its turn
        next(it)
    assert any("batch 2" in note for note in raised.value.__notes__)
    assert next(it)["label"].tolist() == [9, 10, 11]
    with pytest.raises(StopIteration):
        next(it)
    # Every pin ran on the pinning thread, which set the consumer's device.
    assert set(accelerator.threads) == {"dataloader-pin"}
    assert accelerator.device_set == [0]
    it.thread.join(timeout=60)
    assert not it.thread.is_alive()  # the end of the epoch stops it
    loader.close()


def test_num_workers_0_pins_on_the_calling_thread(accelerator):
    loader = DataLoader(list(range(5)), batch_size=2, pin_memory=True)
    batches = list(loader)
    assert all(accelerator.is_pinned(batch) for batch in batches)
    assert [batch.tolist() for batch in batches] == [[0, 1], [2, 3], [4]]
    assert set(accelerator.threads) == {threading.current_thread().name}


def test_pinned_batches_match_torchs_pin_memory_structure(accelerator):
    torch = pytest.importorskip("torch")
    from torch.utils.data._utils.pin_memory import pin_memory as torch_pin_memory

    from dataloader._loading.pinning import pin_memory

    batch = {"t": torch.ones(2), "s": "x", "pair": (torch.zeros(1), [torch.ones(1), "y"]),
             "point": Point(torch.ones(1), 3)}

    def shape(data):
        if isinstance(data, torch.Tensor):
            return ("tensor", accelerator.is_pinned(data))
        if isinstance(data, dict):
            return {key: shape(value) for key, value in data.items()}
        if isinstance(data, (list, tuple)):
            return (type(data).__name__, [shape(value) for value in data])
        return data

    assert shape(pin_memory(batch)) == shape(torch_pin_memory(batch))


def test_an_error_while_pinning_is_raised_from_its_batch(accelerator):
    accelerator.fail_on = lambda tensor: int(tensor.flatten()[0]) == 4
    loader = DataLoader(list(range(8)), batch_size=2, num_workers=2, pin_memory=True)
    it = iter(loader)
    assert next(it).tolist() == [0, 1]
    assert next(it).tolist() == [2, 3]
    with pytest.raises(RuntimeError, match="pinning failed") as raised:
        next(it)
    assert any("pinning a batch" in note for note in raised.value.__notes__)
    assert next(it).tolist() == [6, 7]
    loader.close()


def test_break_and_close_stop_the_pinning_thread(accelerator):
    loader = DataLoader(list(range(100)), batch_size=1, num_workers=2, pin_memory=True)
    it = iter(loader)
    next(it)
    thread = it.thread
    assert thread.is_alive()
    del it  # what `break` out of a for loop does to the iterator
    gc.collect()
    thread.join(timeout=60)
    assert not thread.is_alive()

    it = iter(loader)
    next(it)
    loader.close()
    assert not it.thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        next(it)


def test_batches_pinned_ahead_are_not_counted_as_delivered(accelerator):
    loader = DataLoader(list(range(40)), batch_size=2, num_workers=2, pin_memory=True,
                        shuffle=True, seed=3)
    it = iter(loader)
    delivered = [next(it).tolist() for _ in range(3)]
    accelerator.wait_for_pins(5)  # the thread has pinned ahead of the consumer
    state = loader.state_dict()
    assert state["batches"] == 3
    rest = [batch.tolist() for batch in it]
    resumed = DataLoader(list(range(40)), batch_size=2, shuffle=True)
    resumed.load_state_dict(state)
    assert [batch.tolist() for batch in resumed] == rest
    assert len(delivered) + len(rest) == 20
    loader.close()


class Stream(IterableDataset):
    def __iter__(self):
        from dataloader import get_worker_info

        info = get_worker_info()
        return iter(range(info.id, 30, info.num_workers))


@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_streaming_batches_are_pinned_and_all_delivered(accelerator, worker_type):
    loader = DataLoader(Stream(), batch_size=4, num_workers=2, pin_memory=True,
                        worker_type=worker_type)
    batches = list(loader)
    assert all(accelerator.is_pinned(batch) for batch in batches)
    assert sorted(chain.from_iterable(batch.tolist() for batch in batches)) == list(range(30))
    loader.close()


def images(n):
    return [(Image.from_array(np.full((4, 6, 3), i, np.uint8)), i) for i in range(n)]


def test_pooled_image_batches_are_registered_once_per_buffer(accelerator, monkeypatch):
    from dataloader._core.buffers import host_memory

    registered, unregistered = [], []
    monkeypatch.setattr(host_memory, "register",
                        lambda address, nbytes: registered.append((address, nbytes)) or True)
    monkeypatch.setattr(host_memory, "unregister", unregistered.append)
    collator = ImageCollator()
    loader = DataLoader(images(40), batch_size=2, num_workers=2, pin_memory=True,
                        collate_fn=collator)
    for _epoch in range(2):
        for batch, labels in loader:
            # The batch is a tensor over the registered buffer: no copy made.
            assert any(batch.data_ptr() == address for address, _ in registered)
            assert not accelerator.is_pinned(batch)
            assert batch.shape == (2, 3, 4, 6)
            assert int(batch[0, 0, 0, 0]) == int(labels[0])
            assert accelerator.is_pinned(labels)
            del batch
    addresses = [address for address, _ in registered]
    assert len(addresses) == len(set(addresses))  # each buffer registered once
    assert len(addresses) < 40  # buffers are reused across batches and epochs
    assert all(nbytes % 4096 == 0 for _, nbytes in registered)  # whole pages
    assert collator.pool.registered_blocks == len(addresses)
    loader.close()
    del loader, collator
    gc.collect()
    # Every registration is released before its buffer is freed.
    assert sorted(unregistered) == sorted(addresses)


def test_unpooled_image_batches_are_copied_into_pinned_memory(accelerator):
    from dataloader.kernels import ImageBatch

    batch = ImageBatch(2, 3, 4)
    pinned = batch.pin_memory()
    assert accelerator.is_pinned(pinned)
    assert tuple(pinned.shape) == (2, 3, 3, 4)


def test_a_failure_of_the_pinning_thread_is_raised_and_ends_the_epoch(accelerator, monkeypatch):
    import torch

    def no_device(index):
        raise RuntimeError(f"no device {index}")

    monkeypatch.setattr(torch.accelerator, "set_device_index", no_device)
    loader = DataLoader(list(range(8)), batch_size=2, num_workers=2, pin_memory=True)
    it = iter(loader)
    with pytest.raises(RuntimeError, match="no device 0"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    it.thread.join(timeout=60)
    assert not it.thread.is_alive()
    loader.close()


# -- resumed twice while the pinning thread runs ahead -------------------------

PINNED_KINDS = {
    "direct": {"num_workers": 0},
    "threads": {"num_workers": 2, "worker_type": "thread"},
    "processes": {"num_workers": 2, "worker_type": "process"},
}


def run_pinned_in_pieces(accelerator, make, pieces, lengths):
    """Batches of ``len(lengths)`` epochs (``lengths``: each one's batches), by epoch,
    taken by one pinned loader after another: loader ``i`` takes ``pieces[i]``
    batches and saves its state, a new loader resumes from it, the last one finishes."""
    done = [[] for _ in lengths]
    state = None
    for piece in [*pieces, None]:
        loader = make()
        if state is not None:
            loader.load_state_dict(state)
        state = take_pinned(accelerator, loader, piece, done, lengths)
        loader.close()
    return done


def take_pinned(accelerator, loader, count, done, lengths):
    """Take ``count`` batches (``None``: all that are left) across epoch ends, into
    ``done``; return the state after them, saved once the pinning thread has pinned
    batches beyond them (which the state must not count)."""
    taken = 0
    while True:
        pins_before = len(accelerator.pinned)
        it = iter(loader)
        epoch = loader.epoch
        start = len(done[epoch])
        for batch in it:
            assert accelerator.is_pinned(batch)
            done[epoch].append(batch.tolist())
            del batch
            taken += 1
            if count is None or taken < count:
                continue
            if len(done[epoch]) == lengths[epoch]:
                # The epoch's last batch: a training loop's `for` meets its end.
                with pytest.raises(StopIteration):
                    next(it)
                state = loader.state_dict()
                assert (state["epoch"], state["batches"]) == (epoch + 1, 0)
                return state
            if loader.num_workers:
                # The thread pins ahead: two batches handed off, a third held.
                ahead = min(len(done[epoch]) - start + 3, lengths[epoch] - start)
                accelerator.wait_for_pins(pins_before + ahead)
            state = loader.state_dict()
            assert (state["epoch"], state["batches"]) == (epoch, len(done[epoch]))
            return state
        if epoch == len(lengths) - 1:
            return loader.state_dict()


def pinned_stream():
    return interleave([shard(range(40), 0, 1), list(range(100, 120))], [0.6, 0.4], seed=3)


@pytest.mark.parametrize("pieces", [(3, 4), (5, 9), (3, "the rest of epoch 0")], ids=str)
@pytest.mark.parametrize("kind", PINNED_KINDS)
def test_a_pinned_stream_resumed_twice_continues_exactly(accelerator, kind, pieces):
    # An interleaved stream: one order whatever the workers (by turn), a new
    # one each epoch; its streams' states are recorded batch by batch as they
    # are delivered, not as they are pinned.
    def make(pin=True):
        return DataLoader(pinned_stream(), batch_size=4, pin_memory=pin, timeout=120,
                          **PINNED_KINDS[kind])

    with make(pin=False) as loader:
        expected = [as_lists(loader) for _ in range(2)]
    assert expected[0] != expected[1]
    lengths = [len(epoch) for epoch in expected]
    pieces = [lengths[0] - 3 if piece == "the rest of epoch 0" else piece for piece in pieces]
    assert run_pinned_in_pieces(accelerator, make, pieces, lengths) == expected


@pytest.mark.parametrize("kind", PINNED_KINDS)
def test_a_pinned_epoch_resumed_twice_continues_exactly(accelerator, kind):
    def make(pin=True):
        return DataLoader(list(range(40)), batch_size=3, shuffle=True, seed=8, pin_memory=pin,
                          timeout=120, **PINNED_KINDS[kind])

    with make(pin=False) as loader:
        expected = [as_lists(loader) for _ in range(2)]
    lengths = [len(epoch) for epoch in expected]  # 14 batches: (4, 10) ends epoch 0
    for pieces in ((4, 5), (4, 10)):
        assert run_pinned_in_pieces(accelerator, make, pieces, lengths) == expected


def as_lists(batches):
    return [batch.tolist() for batch in batches]


class SlowFromFour(Dataset):
    """Quick first batches, then items that take a while: the pinning thread waits."""

    def __len__(self):
        return 40

    def __getitem__(self, index):
        if index >= 4:
            time.sleep(1)
        return index


@pytest.mark.parametrize("persistent", [False, True], ids=["per-epoch", "persistent"])
def test_closing_a_pinned_process_epoch_wakes_its_waiting_pinning_thread(accelerator, persistent):
    loader = DataLoader(SlowFromFour(), batch_size=2, num_workers=2, pin_memory=True,
                        worker_type="process", persistent_workers=persistent)
    it = iter(loader)
    assert [next(it).tolist(), next(it).tolist()] == [[0, 1], [2, 3]]
    loader.close()  # the pinning thread waits on batch 2's slow items
    # Stopped by the close, not by the items' end nor by a join's time limit.
    it.thread.join(timeout=20)
    assert not it.thread.is_alive()
    with pytest.raises(RuntimeError):
        next(it)


@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_a_forked_child_refuses_an_inherited_pinned_epoch(accelerator, worker_type):
    loader = DataLoader(list(range(12)), batch_size=2, num_workers=2, pin_memory=True,
                        worker_type=worker_type, timeout=60)
    it = iter(loader)
    first = next(it).tolist()
    pid = os.fork()
    if pid == 0:  # the pinning thread does not exist here: next() must not wait for it
        code = 3
        try:
            next(it)
        except RuntimeError as exc:
            code = 0 if "fork()" in str(exc) else 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert first + [value for batch in it for value in batch.tolist()] == list(range(12))
