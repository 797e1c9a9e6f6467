"""Batches from worker processes to the consumer through shared memory.

A worker packs each batch into a *slot*: an anonymous shared-memory file
(``memfd``) that it creates once and reuses for later batches, growing it
when a batch needs more room. The batch's structure travels over the
worker's pipe as a small pickle (protocol 5); its arrays travel
*out of band*: their bytes are copied once into the slot, and the consumer
unpickles them as views of its own mapping of the slot -- no copy on the
consumer's side, no segment created per batch, and nothing in
``/dev/shm`` (a memfd disappears with the last process holding it).

A slot is free again when the batch read from it is released -- when the
last array viewing it is garbage collected, as ``ImageCollator``'s pooled
buffers are recycled, and the consumer gives it back to its worker. A
worker fills the lowest free slot when it starts a batch, so a steady
epoch cycles through as few slots as the batches in flight need.

A slot's pages stay in its file, and mapped on both sides, for its next
batch: a fresh segment per batch (torch's way) costs a page fault and a
page of zeroes per 4 KiB on both sides, about a tenth of the loading time
of a batch of images. Only the slots a steady epoch cycles through keep
their pages (``prefetch_factor + 2`` per worker); a slot beyond them, used
while the consumer keeps many batches, returns its pages to the system
once released (``MADV_REMOVE``). Files and pages go with their worker.

numpy arrays, ``Image`` / ``ImageBatch`` and CPU torch tensors are sent out
of band; anything else picklable is pickled with the batch.

Each slot takes a file descriptor in its worker and one in the consumer
(their mappings' own), so batches kept alive in numbers hold descriptors
in numbers: running out is a ``RuntimeError`` saying what to do
(:func:`explained_descriptor_limit`), as torch's is.

Examples
--------
>>> import numpy as np
>>> from dataloader._processes.transport import SlotReader, SlotWriter
>>> writer, reader = SlotWriter(), SlotReader()
>>> slot = writer.take()
>>> packed = writer.pack(slot, {"x": np.arange(4), "name": "a"})
>>> reader.attach(0, 0, writer.share(0))
>>> returned = []
>>> batch = reader.unpack(0, packed, returned)
>>> batch["x"].tolist(), batch["name"]
([0, 1, 2, 3], 'a')
>>> del batch; returned
[(0, 0)]
"""

from __future__ import annotations

import contextlib
import errno
import io
import mmap
import os
import pickle
import resource
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dataloader._core.buffers import Lease

__all__ = ["Arena", "Packed", "SlotReader", "SlotWriter", "explained_descriptor_limit"]

# Buffers start on cache-line boundaries, which numpy and the kernels like.
_ALIGNMENT = 64
# A slot grows by at least this factor, so that batches of slowly growing
# size do not make a new file each time.
_GROWTH = 1.25


@dataclass(frozen=True, slots=True)
class Packed:
    """A batch as it crosses the pipe: its pickle and where its buffers are in the slot.

    Attributes
    ----------
    slot : int
        The slot holding the buffers.
    header : bytes
        The batch pickled with protocol 5, its buffers left out of band.
    layout : tuple of (int, int)
        Each out-of-band buffer's ``(offset, nbytes)`` in the slot, in the
        order the pickle refers to them.
    """

    slot: int
    header: bytes
    layout: tuple[tuple[int, int], ...]


class _Slot:
    __slots__ = ("fd", "size", "mapping", "memory")

    def __init__(self, size: int) -> None:
        self.fd = os.memfd_create("dataloader-batch", os.MFD_CLOEXEC)
        self.size = size
        try:
            os.ftruncate(self.fd, size)
            self.mapping = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise
        # The mapping's bytes, for allocating into it and finding buffers in it.
        self.memory = np.frombuffer(self.mapping, np.uint8)

    def offset_of(self, view: memoryview) -> int:
        """Where ``view``'s bytes are in this slot, or -1 when they are elsewhere."""
        if view.nbytes == 0:
            return -1
        offset = np.frombuffer(view, np.uint8).ctypes.data - self.memory.ctypes.data
        return offset if 0 <= offset <= self.size - view.nbytes else -1

    def close(self) -> bool:
        """Unmap and close; ``False`` while arrays still view the mapping (retry later)."""
        self.memory = np.empty(0, np.uint8)
        try:
            self.mapping.close()
        except BufferError:
            return False
        os.close(self.fd)
        return True


class Arena:
    """Room in a slot for the arrays of the batch about to be packed into it.

    A collate function that allocates its stacked arrays here
    (``dataloader._loading.collate.batch_allocator``) writes them straight
    into shared memory: packing the batch then copies nothing.
    """

    def __init__(self, memory: np.ndarray) -> None:
        self._memory = memory
        self.used = 0

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """An uninitialised array in the slot, or from ``numpy.empty`` when it does not fit."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        start = _aligned(self.used)
        if dtype.hasobject or nbytes == 0 or start + nbytes > len(self._memory):
            return np.empty(shape, dtype)
        self.used = start + nbytes
        return self._memory[start:start + nbytes].view(dtype).reshape(shape)


class SlotWriter:
    """A worker's side: packs batches into its slots.

    ``take()`` is the slot for the next batch, ``pack(slot, batch)``
    returns the :class:`Packed` batch; when it had to create (or grow) the
    slot's file, ``share(slot)`` is that file's descriptor, to be sent to
    the consumer before the batch. ``give_back(slots)`` frees slots again.
    """

    def __init__(self) -> None:
        self._slots: dict[int, _Slot] = {}
        # How many slots there are (0 to _count - 1), and which of them are free.
        self._count = 0
        self._free: set[int] = set()
        self._unshared: set[int] = set()
        # Slots replaced by bigger ones while arrays still viewed them.
        self._retired: list[_Slot] = []

    def take(self) -> int:
        """The lowest free slot, or a new one when every slot holds a batch."""
        if not self._free:
            self._count += 1
            return self._count - 1
        slot = min(self._free)
        self._free.remove(slot)
        return slot

    def give_back(self, slots: Iterable[int]) -> None:
        """Free ``slots`` for later batches: their batches are released."""
        self._free.update(slots)

    def arena(self, slot: int) -> Arena | None:
        """Room in ``slot`` for the next batch's arrays (``None`` before its first batch)."""
        state = self._slots.get(slot)
        return None if state is None else Arena(state.memory)

    def pack(self, slot: int, batch: Any, arena: Arena | None = None) -> Packed:
        """Pickle ``batch``; copy into ``slot`` the buffers that are not there already.

        ``arena`` is the slot's :meth:`arena` the batch was collated in.
        """
        self._retired = [state for state in self._retired if not state.close()]
        buffers: list[pickle.PickleBuffer] = []
        stream = io.BytesIO()
        _BatchPickler(stream, buffers.append).dump(batch)
        views = [buffer.raw() for buffer in buffers]
        state = self._slots.get(slot)
        placed = [state.offset_of(view) if state is not None else -1 for view in views]
        layout, end = [], _aligned(arena.used) if arena is not None else 0
        for view, offset in zip(views, placed, strict=True):
            if offset < 0:
                offset, end = end, _aligned(end + view.nbytes)
            layout.append((offset, view.nbytes))
        if state is None or state.size < end:
            # A new or bigger file: everything is copied, the arena's arrays too.
            placed = [-1] * len(views)
            state = self._replace(slot, max(end, 1))
        for (start, nbytes), view, offset in zip(layout, views, placed, strict=True):
            if offset < 0:
                state.mapping[start:start + nbytes] = view
        return Packed(slot, stream.getvalue(), tuple(layout))

    def needs_sharing(self, slot: int) -> bool:
        """Whether ``slot``'s file is new since it was last shared."""
        return slot in self._unshared

    def share(self, slot: int) -> int:
        """The descriptor of ``slot``'s file, marked as shared (the writer keeps it open)."""
        self._unshared.discard(slot)
        return self._slots[slot].fd

    def close(self) -> None:
        """Unmap and close every slot no array views any more."""
        for state in [*self._slots.values(), *self._retired]:
            state.close()
        self._slots.clear()
        self._retired.clear()

    def _replace(self, slot: int, nbytes: int) -> _Slot:
        old = self._slots.get(slot)
        size = nbytes if old is None else max(nbytes, int(old.size * _GROWTH))
        state = self._slots[slot] = _Slot(_aligned(size))
        self._unshared.add(slot)
        if old is not None and not old.close():
            self._retired.append(old)
        return state


class SlotReader:
    """The consumer's side: maps the workers' slots and unpickles batches as views of them."""

    def __init__(self) -> None:
        self._mappings: dict[tuple[int, int], mmap.mmap] = {}

    def attach(self, worker: int, slot: int, fd: int) -> None:
        """Map the file ``fd`` as ``worker``'s ``slot`` (replacing an older one); closes ``fd``."""
        try:
            self._mappings[worker, slot] = mmap.mmap(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)

    def unpack(self, worker: int, packed: Packed, returned: Any, wake: Any = None,
               keep_pages: bool = True) -> Any:
        """The batch of ``packed``; once no array views its slot, ``(worker, slot)`` is
        appended to ``returned`` and a byte written to ``wake.write_fd`` (if given).

        The slot's pages then stay in its file, and mapped, for its next
        batch, or with ``keep_pages=False`` go back to the system.
        """
        mapping = self._mappings[worker, packed.slot]
        # Buffers are not in offset order once a slot is reused (an arena's
        # arrays come first, whatever their place in the batch): the lease
        # reaches the end of the furthest one.
        end = max((start + nbytes for start, nbytes in packed.layout), default=0)
        # One lease per batch holds the slot: every buffer handed to the
        # unpickler is a view of it, so it dies with the batch's last array.
        lease = Lease(mapping, end, returned, (worker, packed.slot), wake,
                      remove_pages=not keep_pages)
        whole = memoryview(lease)
        buffers = [whole[start:start + nbytes] for start, nbytes in packed.layout]
        del whole, lease
        return pickle.loads(packed.header, buffers=buffers)


@contextlib.contextmanager
def explained_descriptor_limit(who: str) -> Iterator[None]:
    """Turn running out of file descriptors into a ``RuntimeError`` saying what to do.

    ``who`` is the process that ran out, as the message names it. Other
    errors pass through unchanged.

    Examples
    --------
    >>> import errno
    >>> from dataloader._processes.transport import explained_descriptor_limit
    >>> try:
    ...     with explained_descriptor_limit("the consumer"):
    ...         raise OSError(errno.EMFILE, "Too many open files")
    ... except RuntimeError as error:
    ...     print("ulimit -n" in str(error), type(error.__cause__).__name__)
    True OSError
    """
    try:
        yield
    except OSError as error:
        if error.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        raise RuntimeError(_descriptor_advice(who, error.errno)) from error


def _descriptor_advice(who: str, code: int) -> str:
    if code == errno.EMFILE:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        limit = f"its limit of {soft} open files (`ulimit -n`)"
    else:
        limit = "the system's limit of open files (fs.file-max)"
    return (
        f"{who} reached {limit}. A worker process hands each batch over in a "
        "shared-memory file, which stays that batch's until its last array is released, "
        "and each such file holds a descriptor in the worker and one in the consumer: "
        "batches kept alive in numbers use descriptors up. Keep fewer batches alive (copy "
        "what you keep: array.copy(), tensor.clone()), raise the limit (`ulimit -n 65536` "
        "in the shell, or resource.setrlimit(resource.RLIMIT_NOFILE, ...) before the "
        "workers start), or use worker_type='thread', whose batches take no descriptor. "
        "torch's advice for its own error of this kind, "
        "torch.multiprocessing.set_sharing_strategy('file_system'), does not apply: these "
        "batches do not go through torch's sharing"
    )


class _BatchPickler(pickle.Pickler):
    """Protocol 5, with CPU torch tensors sent as the numpy arrays they share memory with."""

    def __init__(self, stream: io.BytesIO, buffer_callback: Callable[[Any], None]) -> None:
        super().__init__(stream, protocol=5, buffer_callback=buffer_callback)

    def reducer_override(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is not None and type(obj) is torch.Tensor and _plain_cpu_tensor(obj):
            return _tensor_from_array, _tensor_as_array(obj)
        return NotImplemented


def _plain_cpu_tensor(tensor: Any) -> bool:
    return (tensor.device.type == "cpu" and tensor.layout is sys.modules["torch"].strided
            and not tensor.requires_grad and not tensor.is_quantized)


# numpy has no bfloat16: such tensors travel as the integers of their width.
def _tensor_as_array(tensor: Any) -> tuple[np.ndarray, str | None]:
    tensor = tensor.contiguous()
    try:
        return tensor.numpy(), None
    except TypeError:
        width = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}[tensor.element_size()]
        return tensor.view(getattr(sys.modules["torch"], width)).numpy(), str(tensor.dtype)


def _tensor_from_array(array: np.ndarray, dtype: str | None) -> Any:
    import torch

    tensor = torch.from_numpy(array)
    return tensor if dtype is None else tensor.view(getattr(torch, dtype.removeprefix("torch.")))



def _aligned(nbytes: int) -> int:
    return -(-nbytes // _ALIGNMENT) * _ALIGNMENT
