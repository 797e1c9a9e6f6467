"""Batches through shared-memory slots: what goes in comes out, as views, and
slots are recycled only once the consumer lets go of a batch."""

import errno
import gc
import os
import pickle
import resource
import warnings

import numpy as np
import pytest

from dataloader._processes.transport import SlotReader, SlotWriter, explained_descriptor_limit
from dataloader.kernels import Image, ImageBatch


class Pair:
    def __init__(self, left, right):
        self.left, self.right = left, right


@pytest.fixture
def pipe():
    writer, reader = SlotWriter(), SlotReader()
    released = []

    def send(batch, slot=0):
        packed = writer.pack(slot, batch)
        if writer.needs_sharing(slot):
            reader.attach(0, slot, os.dup(writer.share(slot)))
        return reader.unpack(0, packed, released)

    send.writer, send.released = writer, released
    yield send
    writer.close()


def test_nested_batches_come_back_equal(pipe):
    batch = {
        "image": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        "labels": np.array([3, 1]),
        "fortran": np.asfortranarray(np.arange(6).reshape(2, 3)),
        "strided": np.arange(10)[::2],
        "empty": np.zeros((0, 3)),
        "scalar": np.float64(2.5),
        "objects": np.array(["a", None], dtype=object),
        "names": ["x", "y"],
        "pair": Pair(np.ones(3, np.uint8), "z"),
    }
    got = pipe(batch)
    for key in ("image", "labels", "fortran", "strided", "empty", "objects"):
        assert got[key].dtype == batch[key].dtype
        np.testing.assert_array_equal(got[key], batch[key])
    assert got["fortran"].flags.f_contiguous
    assert got["scalar"] == 2.5 and got["names"] == ["x", "y"]
    assert got["pair"].right == "z" and got["pair"].left.tolist() == [1, 1, 1]


def test_arrays_are_views_of_the_slot_not_copies(pipe):
    got = pipe({"x": np.arange(1000, dtype=np.int64)})
    assert not got["x"].flags.owndata
    assert got["x"].flags.writeable
    # The pickle carries the structure only: the array's bytes are out of band.
    packed = pipe.writer.pack(1, {"x": np.arange(1000, dtype=np.int64)})
    assert len(packed.header) < 1000 and packed.layout[0][1] == 8000


def test_a_slot_is_released_once_no_array_views_it(pipe):
    got = pipe({"a": np.ones(100), "b": np.zeros(50)})
    kept = got["b"]
    del got
    gc.collect()
    assert pipe.released == []
    del kept
    gc.collect()
    assert pipe.released == [(0, 0)]


def test_a_reused_slot_keeps_its_file_until_a_batch_needs_more(pipe):
    first = pipe(np.ones(1000, np.uint8))
    del first
    assert not pipe.writer.needs_sharing(0)
    second = pipe(np.full(900, 7, np.uint8))
    assert not pipe.writer.needs_sharing(0) and second.tolist() == [7] * 900
    # A bigger batch grows the slot: a new file, shared again; the old
    # batch's views keep the old mapping alive and unchanged.
    third = pipe(np.full(5000, 9, np.uint8))
    assert third.tolist() == [9] * 5000 and second.tolist() == [7] * 900


def test_images_come_back_as_images_viewing_the_slot(pipe):
    batch = ImageBatch.from_array(np.arange(2 * 3 * 4 * 5, dtype=np.uint8).reshape(2, 3, 4, 5))
    image = Image.from_array(np.ones((4, 5, 3), np.float32))
    got_batch, got_image = pipe((batch, image))
    assert type(got_batch) is ImageBatch and got_batch.layout == "NCHW"
    np.testing.assert_array_equal(np.asarray(got_batch), np.asarray(batch))
    assert type(got_image) is Image and np.asarray(got_image).sum() == 60
    # Without the slot, plain pickling round-trips them too.
    again = pickle.loads(pickle.dumps(batch))
    np.testing.assert_array_equal(np.asarray(again), np.asarray(batch))


def test_torch_tensors_come_back_as_tensors_sharing_the_slot(pipe):
    torch = pytest.importorskip("torch")
    batch = {"x": torch.arange(12, dtype=torch.float32).reshape(3, 4),
             "half": torch.ones(5, dtype=torch.bfloat16),
             "grad": torch.zeros(2, requires_grad=True)}
    got = pipe(batch)
    assert isinstance(got["x"], torch.Tensor) and torch.equal(got["x"], batch["x"])
    assert got["half"].dtype == torch.bfloat16 and torch.equal(got["half"], batch["half"])
    assert got["grad"].requires_grad
    got["x"][0, 0] = 100  # writable, and a view: the slot's bytes change
    assert pipe.writer._slots[0].mapping[:4] == np.float32(100).tobytes()


def test_a_batch_collated_in_the_slot_is_packed_without_a_copy(pipe):
    from dataloader._loading.collate import batch_allocator, default_collate

    pipe(np.zeros(8192, np.uint8))  # the slot exists from its first batch on
    writer = pipe.writer
    arena = writer.arena(0)
    batch_allocator(arena.empty)
    try:
        batch = default_collate([np.full(1000, 3, np.int32), np.full(1000, 4, np.int32)])
    finally:
        batch_allocator(None)
    # The stacked array lives in the slot already: its offset is the arena's.
    assert writer._slots[0].offset_of(memoryview(batch).cast("B")) == 0
    packed = writer.pack(0, batch, arena)
    assert packed.layout == ((0, 8000),) and not writer.needs_sharing(0)
    del batch


def test_buffers_out_of_offset_order_come_back_whole():
    # Collated in a reused slot, the stacked image lands in the arena at
    # offset 0 and the labels are copied after it, yet the labels come first
    # in the pickle: the consumer's view must reach the furthest buffer.
    from dataloader._loading.collate import batch_allocator, default_collate

    writer, reader = SlotWriter(), SlotReader()
    items = [{"label": i, "image": np.full((8, 8, 3), i, np.uint8)} for i in range(4)]
    for round_ in range(3):
        slot = writer.take()
        arena = writer.arena(slot)
        batch_allocator(arena.empty if arena is not None else None)
        try:
            batch = default_collate(items)
        finally:
            batch_allocator(None)
        packed = writer.pack(slot, batch, arena)
        if writer.needs_sharing(slot):
            reader.attach(0, slot, os.dup(writer.share(slot)))
        del batch
        returned = []
        received = reader.unpack(0, packed, returned)
        assert received["label"].tolist() == [0, 1, 2, 3], round_
        assert received["image"][:, 0, 0, 0].tolist() == [0, 1, 2, 3], round_
        del received
        gc.collect()
        writer.give_back(slot for _, slot in returned)
    offsets = [start for start, _ in packed.layout]
    assert offsets != sorted(offsets)  # the case this test is about did happen
    writer.close()


def test_an_arena_too_small_falls_back_to_a_copy_into_a_bigger_slot(pipe):
    pipe(np.zeros(64, np.uint8))
    writer = pipe.writer
    arena = writer.arena(0)
    big = arena.empty((10_000,), np.float64)  # does not fit: ordinary memory
    assert writer._slots[0].offset_of(memoryview(big).cast("B")) == -1
    big[:] = 1.5
    packed = writer.pack(0, big, arena)
    assert writer.needs_sharing(0) and packed.layout == ((0, 80_000),)


def test_torch_batches_are_stacked_in_the_slot():
    torch = pytest.importorskip("torch")
    from dataloader._loading.collate import batch_allocator, default_collate

    memory = np.zeros(1 << 16, np.uint8)
    used = []

    def empty(shape, dtype):
        used.append((shape, np.dtype(dtype)))
        return memory[:int(np.prod(shape)) * np.dtype(dtype).itemsize].view(dtype).reshape(shape)

    batch_allocator(empty)
    try:
        batch = default_collate([torch.ones(2, 3), torch.zeros(2, 3)])
    finally:
        batch_allocator(None)
    assert used == [((48,), np.dtype(np.uint8))]
    assert batch.shape == (2, 2, 3) and batch.dtype == torch.float32
    assert memory[:24].view(np.float32).tolist() == [1.0] * 6


def page_faults():
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_a_released_slot_keeps_its_pages_mapped_for_the_next_batch(pipe):
    # A fresh segment per batch costs a fault and a page of zeroes per 4 KiB
    # on both sides; a kept slot's next batch faults in nothing.
    values = np.arange(1 << 20, dtype=np.float64)  # 8 MiB, 2,048 pages
    batch = pipe({"x": values})
    np.testing.assert_array_equal(batch["x"], values)
    del batch
    gc.collect()
    assert pipe.released == [(0, 0)]
    assert os.fstat(pipe.writer.share(0)).st_blocks * 512 >= values.nbytes
    reversed_values = values[::-1].copy()
    faults = page_faults()
    again = pipe({"x": reversed_values})  # the same slot, written over
    assert again["x"].sum() == values.sum()  # the consumer reads every page
    assert page_faults() - faults < 256
    np.testing.assert_array_equal(again["x"], reversed_values)


def test_a_slot_beyond_the_kept_ones_returns_its_pages_once_released():
    writer, reader = SlotWriter(), SlotReader()
    values = np.arange(1 << 20, dtype=np.float64)  # 8 MiB
    packed = writer.pack(0, {"x": values})
    reader.attach(0, 0, os.dup(writer.share(0)))
    batch = reader.unpack(0, packed, [], keep_pages=False)
    np.testing.assert_array_equal(batch["x"], values)
    del batch
    gc.collect()
    assert os.fstat(writer.share(0)).st_blocks * 512 < values.nbytes // 8
    writer.close()


def test_buffers_start_on_64_byte_boundaries(pipe):
    batch = [np.arange(size, dtype=np.uint8) for size in (1, 63, 65, 100)]
    packed = pipe.writer.pack(1, batch)
    assert [offset % 64 for offset, _ in packed.layout] == [0, 0, 0, 0]
    got = pipe(batch)
    assert [array.ctypes.data % 64 for array in got] == [0, 0, 0, 0]
    assert [array.tolist() for array in got] == [array.tolist() for array in batch]


def test_a_slot_grows_by_a_quarter_so_slowly_growing_batches_reuse_its_file(pipe):
    writer = pipe.writer
    pipe(np.zeros(64_000, np.uint8))
    assert os.fstat(writer.share(0)).st_size == 64_000
    pipe(np.zeros(64_001, np.uint8))  # one byte more: a new file, a quarter bigger
    assert os.fstat(writer.share(0)).st_size == 80_000
    for size in (70_000, 80_000):
        writer.pack(0, np.zeros(size, np.uint8))
        assert not writer.needs_sharing(0)
    writer.pack(0, np.zeros(80_001, np.uint8))
    assert writer.needs_sharing(0)


def test_an_arena_holds_arrays_from_one_byte_to_the_whole_slot(pipe):
    pipe(np.zeros(8192, np.uint8))
    writer = pipe.writer
    whole = writer.arena(0).empty((8192,), np.uint8)
    assert writer._slots[0].offset_of(memoryview(whole)) == 0
    del whole
    arena = writer.arena(0)
    one, rest = arena.empty((1,), np.uint8), arena.empty((100,), np.uint8)
    one[0], rest[:] = 3, np.arange(100)
    packed = writer.pack(0, [one, rest], arena)
    # Both are in the slot already, where the arena put them: nothing is copied.
    assert packed.layout == ((0, 1), (64, 100)) and not writer.needs_sharing(0)
    reader = SlotReader()
    reader.attach(0, 0, os.dup(writer.share(0)))
    got = reader.unpack(0, packed, [])
    assert got[0].tolist() == [3] and got[1].tolist() == list(range(100))
    del one, rest, got


def test_empty_arrays_in_a_reused_slot_come_back_empty(pipe):
    pipe(np.zeros(8192, np.uint8))
    got = pipe([np.arange(100), np.zeros((0, 3), np.float32)])
    assert got[0].tolist() == list(range(100))
    assert got[1].shape == (0, 3) and got[1].dtype == np.float32


def test_an_array_running_past_the_end_of_the_slot_is_copied(pipe):
    # Memory right after a mapping can belong to another one. The slot's file
    # is 4,160 bytes: its second page is mapped beyond them, so the array
    # below (which is never read past the file) is valid memory.
    pipe(np.zeros(4160, np.uint8))
    writer = pipe.writer
    across = np.lib.stride_tricks.as_strided(writer._slots[0].memory[4096:], shape=(128,))
    assert writer._slots[0].offset_of(memoryview(across)) == -1
    packed = writer.pack(0, across[:64])  # inside the slot: where it is
    assert packed.layout == ((4096, 64),)
    del across


def memfds():
    """How many slot files this process holds open (a mapping holds a descriptor too)."""
    files = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:dataloader-batch"):
                files.add(os.stat(f"/proc/self/fd/{fd}").st_ino)
        except OSError:
            pass  # the listing's own descriptor, closed since
    return len(files)


def test_a_file_replaced_while_an_array_views_it_is_closed_once_the_array_is_gone():
    gc.collect()  # files of earlier batches, if any, are gone before counting
    before = memfds()
    writer = SlotWriter()
    writer.pack(0, np.zeros(64, np.uint8))
    kept = writer.arena(0).empty((64,), np.uint8)
    kept[:] = 5
    writer.pack(0, np.zeros(10_000, np.uint8))  # a bigger file; the old one is still viewed
    writer.pack(0, np.zeros(10, np.uint8))
    assert memfds() == before + 2 and kept.tolist() == [5] * 64
    del kept
    gc.collect()
    writer.pack(0, np.zeros(10, np.uint8))  # closes the file nothing views any more
    assert memfds() == before + 1
    writer.close()
    assert memfds() == before


def test_torch_tensors_of_dtypes_numpy_lacks_come_back_bit_for_bit(pipe):
    torch = pytest.importorskip("torch")
    values = torch.tensor([0.5, 1.0, -2.0, 448.0])
    batch = {"float8": values.to(torch.float8_e4m3fn), "bfloat16": values.to(torch.bfloat16)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # complex32 is experimental in torch
        batch["complex32"] = torch.complex(values, -values).to(torch.complex32)
    got = pipe(batch)
    for name, tensor in batch.items():
        assert got[name].dtype == tensor.dtype, name
        assert torch.equal(got[name].view(torch.uint8), tensor.view(torch.uint8)), name


def test_running_out_of_descriptors_is_a_runtime_error_saying_what_to_do():
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    with pytest.raises(RuntimeError, match=f"^a worker reached its limit of {soft} open files "
                                           r"\(`ulimit -n`\)") as raised:
        with explained_descriptor_limit("a worker"):
            raise OSError(errno.EMFILE, "Too many open files")
    assert isinstance(raised.value.__cause__, OSError)  # the system's error, kept
    for advice in ("Keep fewer batches alive", "resource.setrlimit", "worker_type='thread'"):
        assert advice in str(raised.value)
    with pytest.raises(RuntimeError, match=r"the system's limit of open files \(fs.file-max\)"):
        with explained_descriptor_limit("a worker"):
            raise OSError(errno.ENFILE, "Too many open files in system")


def test_other_os_errors_pass_through_unexplained():
    with pytest.raises(FileNotFoundError):
        with explained_descriptor_limit("a worker"):
            os.open("/nonexistent/file", os.O_RDONLY)
