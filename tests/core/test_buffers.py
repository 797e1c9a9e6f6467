"""``BufferPool`` and ``pooled_array``: batch memory handed back for reuse."""

import gc
import threading

import numpy as np
import pytest

from dataloader._core.buffers import POOL_CAPACITY_MAX, BufferPool, pooled_array
from dataloader._core.image import new_batch


def address(array):
    return array.__array_interface__["data"][0]


def test_an_array_returns_its_memory_when_its_last_view_is_gone():
    pool = BufferPool(capacity=2)
    batch = pooled_array(pool, (4, 1000), "float32")
    first = address(batch)
    view = batch[1:]
    del batch
    assert pool.idle == 0  # the view still holds it
    del view
    assert pool.idle == 1
    again = pooled_array(pool, (4, 1000), "float32")
    assert address(again) == first and pool.idle == 0
    other = pooled_array(pool, (5, 1000), "float32")  # another size: new memory
    assert address(other) != first


def test_pooled_arrays_are_writable_aligned_and_of_their_shape():
    array = pooled_array(BufferPool(), (3, 5, 7), np.uint16)
    assert array.shape == (3, 5, 7) and array.dtype == np.uint16
    assert array.flags.c_contiguous and array.flags.writeable
    assert address(array) % 4096 == 0
    array[...] = 7
    assert int(array.sum()) == 7 * 105
    assert pooled_array(BufferPool(), (0, 4), "float64").shape == (0, 4)


def test_at_most_capacity_idle_blocks_are_kept():
    pool = BufferPool(capacity=2)
    arrays = [pooled_array(pool, (1024,), "uint8") for _ in range(4)]
    del arrays
    gc.collect()
    assert pool.idle == 2
    with pytest.raises(ValueError, match="capacity"):
        BufferPool(capacity=POOL_CAPACITY_MAX + 1)


def test_a_torch_tensor_over_a_pooled_array_holds_its_memory():
    torch = pytest.importorskip("torch")
    pool = BufferPool()
    tensor = torch.frombuffer(pooled_array(pool, (4096,), "uint8"), dtype=torch.uint8)
    gc.collect()
    assert pool.idle == 0
    tensor.fill_(3)
    assert int(tensor.sum()) == 3 * 4096
    del tensor
    gc.collect()
    assert pool.idle == 1


@pytest.mark.parametrize("make", [
    lambda pool: pooled_array(pool, (4, 1000), "float32"),
    lambda pool: new_batch(pool, (2, 3, 8, 8), "uint8", "NCHW"),
], ids=["array", "image batch"])
def test_a_batch_made_on_a_waiting_thread_returns_when_another_thread_drops_it(make):
    # The maker stays blocked, as a worker thread idle between tasks: its
    # batch must not wait for it to run Python code again to be freed (the
    # free-threaded build queues an object dropped by another thread to the
    # thread that made it), or the next batch could not reuse the block.
    pool = BufferPool(capacity=2)
    made, ready, done = [], threading.Event(), threading.Event()

    def maker():
        made.append(make(pool))
        ready.set()
        done.wait()

    thread = threading.Thread(target=maker)
    thread.start()
    try:
        ready.wait()
        batch = made.pop()
        del batch
        assert pool.idle == 1
    finally:
        done.set()
        thread.join()
