"""Which slot a worker process fills: the lowest its consumer has given back.

The worker runs here on a thread, over a pipe the test drives as the
consumer would, so that the order of requests and given-back slots is
exactly the test's.
"""

import gc
import multiprocessing
import os
import threading
from multiprocessing.reduction import recv_handle

import numpy as np
import pytest

from dataloader._loading.collate import default_collate
from dataloader._processes import protocol
from dataloader._processes import worker as process_worker
from dataloader._processes.transport import SlotWriter


class Gated:
    """Items are their index; loading ``gate_index`` sets ``entered`` and waits for
    ``gate``."""

    def __init__(self, gate_index: int) -> None:
        self.entered, self.gate, self.gate_index = threading.Event(), threading.Event(), gate_index

    def __len__(self) -> int:
        return 100

    def __getitem__(self, index: int) -> np.ndarray:
        if index == self.gate_index:
            self.entered.set()
            assert self.gate.wait(30)
        return np.full(1000, index)


@pytest.fixture
def worker():
    """A worker on a thread; ``load(position)`` sends a request, ``slot_of()`` reads
    the next reply's slot."""
    dataset = Gated(gate_index=40)
    spec = process_worker.WorkerSpec(
        dataset=dataset, transform=None, collate_fn=default_collate, batched=True,
        worker_init_fn=None, num_workers=1, base_seed=0, seeds_follow_seed=True,
        item_concurrency=1,
        report_skipped=False, skipping=False,
    )
    ours, theirs = multiprocessing.Pipe(duplex=True)
    serving = threading.Thread(
        target=process_worker._Worker(spec, 0, theirs).serve, daemon=True)
    ours.send(protocol.BeginEpoch(token=1, seed=0, epoch=0, stream_state=None))
    serving.start()

    def load(position):
        ours.send(protocol.Load(token=1, position=position, indices=[position]))

    def give_back(*slots):
        ours.send(protocol.GiveBack(list(slots)))

    def slot_of():
        assert ours.poll(30)
        message = ours.recv()
        if isinstance(message, protocol.SlotShared):
            os.close(recv_handle(ours))
            message = ours.recv()
        assert isinstance(message, protocol.Loaded), message
        return message.packed.slot

    yield dataset, load, give_back, slot_of
    dataset.gate.set()
    ours.send(protocol.Stop())
    serving.join(30)
    assert not serving.is_alive()


def test_a_worker_fills_its_lowest_free_slot(worker):
    _, load, give_back, slot_of = worker
    load(0)
    load(1)
    assert [slot_of(), slot_of()] == [0, 1]
    give_back(1)
    load(2)
    assert slot_of() == 1  # slot 0 still holds a batch
    load(3)
    assert slot_of() == 2
    give_back(2, 0)
    load(4)
    assert slot_of() == 0


def test_a_slot_given_back_after_a_queued_request_serves_that_request(worker):
    # The consumer asks for a batch, then releases one: the worker, busy,
    # reads both before it chooses the request's slot.
    dataset, load, give_back, slot_of = worker
    load(0)
    assert slot_of() == 0
    load(40)  # waits for the gate
    assert dataset.entered.wait(30)
    load(5)
    give_back(0)
    dataset.gate.set()
    assert slot_of() == 1
    assert slot_of() == 0


def test_take_and_give_back_choose_the_lowest_free_slot():
    writer = SlotWriter()
    assert [writer.take() for _ in range(3)] == [0, 1, 2]
    writer.give_back([2, 0])
    assert writer.take() == 0
    assert writer.take() == 2
    assert writer.take() == 3


def test_batches_kept_after_close_stay_readable_and_let_go_of_everything():
    from dataloader import DataLoader

    def descriptors():
        gc.collect()
        return len(os.listdir("/proc/self/fd"))

    before = descriptors()
    loader = DataLoader(Gated(gate_index=-1), batch_size=10, num_workers=2,
                        worker_type="process")
    kept = list(loader)
    loader.close()
    del loader
    assert descriptors() > before  # the slots' mappings live on with the batches
    for position, batch in enumerate(kept):
        np.testing.assert_array_equal(batch[:, 0], np.arange(10) + 10 * position)
    del kept, batch  # released after close: the slots' workers are gone
    assert descriptors() == before
