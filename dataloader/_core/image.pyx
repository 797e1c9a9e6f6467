"""``Image`` and ``ImageBatch``: owned, aligned sample buffers for the kernels.

Both types own one block of memory (64-byte aligned, zero-filled when
allocated) and export it without a copy through the buffer protocol,
``__array_interface__`` (version 3) and DLPack (``__dlpack__``, legacy
``"dltensor"`` and versioned ``"dltensor_versioned"`` capsules).  Ownership:
every export holds a strong reference to the object, so the memory lives as
long as any view of it; a DLPack deleter releases its reference with the GIL
re-acquired, from whichever thread the consumer frees the tensor on.
"""
cimport cython
from cpython.buffer cimport PyBUF_F_CONTIGUOUS, PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES
from cpython.pycapsule cimport (PyCapsule_GetPointer, PyCapsule_IsValid, PyCapsule_New)
from cpython.ref cimport Py_DECREF, Py_INCREF
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from dataloader._core._dlpack cimport (
    DL_CPU, DL_FLAG_IS_COPIED, DL_FLOAT, DL_UINT, DLManagedTensor, DLManagedTensorVersioned,
    DLTensor,
)
from dataloader._core._typedefs cimport intp_t


import operator

import numpy as np


from dataloader._core.rules import MAX_BYTES, MAX_SIDE, as_array, check_image_shape, check_nbytes

cdef dict _DTYPES = {"uint8": ("B", 1, "|u1", DL_UINT), "float32": ("f", 4, "<f4", DL_FLOAT)}
cdef tuple _IMAGE_LAYOUTS = ("HWC", "CHW")
cdef tuple _BATCH_LAYOUTS = ("NCHW", "NHWC")
cdef size_t _ALIGNMENT = 64


cdef inline size_t _aligned_size(size_t nbytes) noexcept nogil:
    """``nbytes`` rounded up to whole alignment blocks, at least one block."""
    cdef size_t size = (nbytes + _ALIGNMENT - 1) // _ALIGNMENT * _ALIGNMENT
    return size if size else _ALIGNMENT


cdef void _dlpack_deleter(DLManagedTensor* managed) noexcept nogil:
    with gil:
        Py_DECREF(<object> managed.manager_ctx)
    free(managed)


cdef void _dlpack_versioned_deleter(DLManagedTensorVersioned* managed) noexcept nogil:
    with gil:
        Py_DECREF(<object> managed.manager_ctx)
    free(managed)


cdef void _capsule_destructor(object capsule) noexcept:
    # A consumer renames the capsule when it takes ownership; an unconsumed
    # capsule still owns its tensor and frees it here.
    cdef DLManagedTensor* legacy
    cdef DLManagedTensorVersioned* versioned
    if PyCapsule_IsValid(capsule, b"dltensor"):
        legacy = <DLManagedTensor*> PyCapsule_GetPointer(capsule, b"dltensor")
        legacy.deleter(legacy)
    elif PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        versioned = <DLManagedTensorVersioned*> PyCapsule_GetPointer(
            capsule, b"dltensor_versioned")
        versioned.deleter(versioned)


cdef class _Samples:
    """An owned C-contiguous block of uint8 or float32 samples (private base)."""

    def __dealloc__(self):
        if self.owner is None:
            free(self.data)

    def __reduce__(self):
        # The samples travel as an array (out of band under pickle protocol
        # 5), and come back viewing it: no copy when it arrives aligned.
        return _view_of, (type(self), np.asarray(self), self.layout)

    cdef _allocate(self, tuple shape, str dtype, str layout):
        cdef Py_ssize_t nbytes = self._describe(shape, dtype, layout)
        # aligned_alloc wants a multiple of the alignment; allocate at least one block.
        cdef size_t size = _aligned_size(nbytes)
        self.data = aligned_alloc(_ALIGNMENT, size)
        if self.data == NULL:
            raise MemoryError(f"cannot allocate {nbytes} bytes for shape {shape}")
        memset(self.data, 0, size)

    cdef Py_ssize_t _describe(self, tuple shape, str dtype, str layout) except -1:
        """Record shape, strides and sample type; return the size in bytes."""
        cdef Py_ssize_t nbytes
        cdef int axis
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be 'uint8' or 'float32', got {dtype!r}")
        fmt, itemsize, _, _ = _DTYPES[dtype]
        self._format = fmt.encode()
        self._itemsize = itemsize
        self._dtype = dtype
        self.layout = layout
        self._ndim = len(shape)
        nbytes = itemsize
        for axis in range(self._ndim - 1, -1, -1):
            if shape[axis] < 0:
                raise ValueError(f"dimensions must be non-negative, got shape {shape}")
            self._shape[axis] = shape[axis]
            self._strides[axis] = nbytes
            nbytes *= shape[axis]
        return nbytes

    @property
    def shape(self):
        """Dimensions, in the order the layout names them."""
        return tuple(self._shape[i] for i in range(self._ndim))

    @property
    def dtype(self):
        """Sample type: ``numpy.dtype('uint8')`` or ``numpy.dtype('float32')``."""
        return np.dtype(self._dtype)

    @property
    def nbytes(self):
        """Size of the sample buffer in bytes."""
        return self._strides[0] * self._shape[0]

    def __len__(self):
        return self._shape[0]

    def __getbuffer__(self, Py_buffer* view, int flags):
        if flags & PyBUF_F_CONTIGUOUS == PyBUF_F_CONTIGUOUS and self._ndim > 1:
            raise BufferError("samples are C-contiguous, not Fortran-contiguous")
        view.buf = self.data
        view.obj = self
        view.len = self._strides[0] * self._shape[0]
        view.readonly = 0
        view.itemsize = self._itemsize
        view.format = NULL
        if flags & PyBUF_FORMAT:
            view.format = <char*> self._format
        view.ndim = self._ndim
        view.shape = NULL
        if flags & PyBUF_ND:
            view.shape = self._shape
        view.strides = NULL
        if flags & PyBUF_STRIDES == PyBUF_STRIDES:
            view.strides = self._strides
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass

    @property
    def __array_interface__(self):
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": _DTYPES[self._dtype][2],
            "data": (<Py_ssize_t> self.data, False),
            "strides": None,
        }

    def __dlpack_device__(self):
        return (DL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export the samples as a DLPack capsule (CPU, no copy unless ``copy=True``)."""
        if stream is not None and stream != -1:
            raise BufferError("CPU memory has no stream: stream must be None")
        if dl_device is not None and tuple(dl_device) != (DL_CPU, 0):
            raise BufferError(f"cannot export CPU memory to device {dl_device}")
        source = self._copy() if copy else self
        versioned = max_version is not None and max_version[0] >= 1
        return (<_Samples> source)._export(versioned, bool(copy))

    cdef _Samples _copy(self):
        cdef _Samples twin = type(self).__new__(type(self))
        twin._allocate(self.shape, self._dtype, self.layout)
        np.asarray(twin)[...] = np.asarray(self)
        return twin

    cdef object _export(self, bint versioned, bint copied):
        cdef size_t head = sizeof(DLManagedTensorVersioned) if versioned else sizeof(DLManagedTensor)
        # The struct, then shape and strides (int64 each) in the same block.
        cdef char* block = <char*> malloc(head + 2 * 4 * sizeof(int64_t))
        cdef DLManagedTensor* legacy
        cdef DLManagedTensorVersioned* managed
        cdef DLTensor* tensor
        cdef int64_t* dims = <int64_t*> (block + head)
        cdef int axis
        if block == NULL:
            raise MemoryError("cannot allocate a DLPack tensor")
        if versioned:
            managed = <DLManagedTensorVersioned*> block
            managed.version.major = 1
            managed.version.minor = 0
            managed.manager_ctx = <void*> self
            managed.deleter = _dlpack_versioned_deleter
            managed.flags = DL_FLAG_IS_COPIED if copied else 0
            tensor = &managed.dl_tensor
        else:
            legacy = <DLManagedTensor*> block
            legacy.manager_ctx = <void*> self
            legacy.deleter = _dlpack_deleter
            tensor = &legacy.dl_tensor
        tensor.data = self.data
        tensor.device.device_type = DL_CPU
        tensor.device.device_id = 0
        tensor.ndim = self._ndim
        tensor.dtype.code = _DTYPES[self._dtype][3]
        tensor.dtype.bits = 8 * self._itemsize
        tensor.dtype.lanes = 1
        tensor.shape = dims
        tensor.strides = dims + 4
        tensor.byte_offset = 0
        for axis in range(self._ndim):
            dims[axis] = self._shape[axis]
            dims[4 + axis] = self._strides[axis] // self._itemsize
        # The tensor's reference to self; released by the deleter.
        Py_INCREF(self)
        name = b"dltensor_versioned" if versioned else b"dltensor"
        return PyCapsule_New(block, name, <void (*)(object) noexcept> _capsule_destructor)


def _view_of(cls, array, str layout):
    """An unpickled ``Image`` or ``ImageBatch``: a view of ``array`` when it is
    C-contiguous and aligned as the library allocates, else a copy."""
    array = _samples_of(array, layout, _IMAGE_LAYOUTS if cls is Image else _BATCH_LAYOUTS)
    if not array.flags.c_contiguous or array.ctypes.data % _ALIGNMENT:
        return cls.from_array(array, layout)
    cdef _Samples samples = cls.__new__(cls)
    samples._describe(array.shape, str(array.dtype), layout)
    samples.data = <void*> <intp_t> array.ctypes.data
    samples.owner = array
    return samples


cdef object _samples_of(obj, str layout, tuple layouts):
    """``obj`` as an array of uint8 or float32 samples of an image's (or a
    batch's) shape in ``layout``, one of ``layouts``: what ``from_array`` copies."""
    if layout not in layouts:
        raise ValueError(f"layout must be {' or '.join(map(repr, layouts))}, got {layout!r}")
    array = as_array(obj, "obj")
    if array.dtype not in (np.uint8, np.float32):
        raise ValueError(f"obj must hold uint8 or float32 samples, got {array.dtype}")
    check_image_shape(array.shape, layout, "obj")
    return array


cdef object _dimension(str name, value):
    """An int argument of a constructor, taken as Python's ``range`` takes it."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


cdef _check_bytes(tuple shape, str dtype, Py_ssize_t samples):
    """An image of ``samples`` samples stays within the decode limit of MAX_BYTES bytes."""
    check_nbytes(shape, dtype, samples * (_DTYPES[dtype][1] if dtype in _DTYPES else 1))


@cython.final
cdef class Image(_Samples):
    """One image: uint8 or float32 samples in ``"HWC"`` or ``"CHW"`` layout, 1 to 4 channels.

    Parameters
    ----------
    height, width : int
        Size in pixels.
    channels : int, default 3
        1 (gray), 2 (gray and alpha), 3 (RGB) or 4 (RGBA).
    dtype : {"uint8", "float32"}, default "uint8"
    layout : {"HWC", "CHW"}, default "HWC"

    Notes
    -----
    A new image is zero-filled.  ``numpy.asarray(image)``, ``memoryview(image)``
    and ``torch.from_dlpack(image)`` are views of its memory, which stays valid
    while any of them lives.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import Image
    >>> image = Image(2, 3, channels=1)
    >>> image.shape, image.layout, image.dtype
    ((2, 3, 1), 'HWC', dtype('uint8'))
    >>> view = np.asarray(image)
    >>> view[0, 0, 0] = 7
    >>> int(np.asarray(image)[0, 0, 0])
    7
    """

    def __init__(self, height, width, channels=3, str dtype="uint8", str layout="HWC"):
        if layout not in _IMAGE_LAYOUTS:
            raise ValueError(f"layout must be 'HWC' or 'CHW', got {layout!r}")
        cdef tuple shape = (_dimension("height", height), _dimension("width", width),
                            _dimension("channels", channels))
        if layout == "CHW":
            shape = (shape[2], shape[0], shape[1])
        check_image_shape(shape, layout, "Image")
        _check_bytes(shape, dtype, shape[0] * shape[1] * shape[2])
        self._allocate(shape, dtype, layout)

    @property
    def height(self):
        """Height in pixels."""
        return self._shape[0] if self.layout == "HWC" else self._shape[1]

    @property
    def width(self):
        """Width in pixels."""
        return self._shape[1] if self.layout == "HWC" else self._shape[2]

    @property
    def channels(self):
        """Number of channels (1 to 4)."""
        return self._shape[2] if self.layout == "HWC" else self._shape[0]

    @staticmethod
    def from_array(obj, str layout="HWC"):
        """Copy an array, a CPU torch tensor or any buffer into a new ``Image``.

        Parameters
        ----------
        obj : array_like
            uint8 or float32 samples of shape (H, W, C) for ``"HWC"``, (C, H, W)
            for ``"CHW"``, or (H, W) for one channel.
        layout : {"HWC", "CHW"}, default "HWC"
            How ``obj``'s axes are ordered; the image keeps that layout.

        Returns
        -------
        Image

        Raises
        ------
        ValueError
            For another dtype or shape, or a size over the decode limits
            (16384 pixels per side, 256 MiB).

        Examples
        --------
        >>> import numpy as np
        >>> from dataloader.kernels import Image
        >>> image = Image.from_array(np.arange(6, dtype=np.uint8).reshape(2, 3))
        >>> image.shape
        (2, 3, 1)
        >>> np.asarray(image)[:, :, 0].tolist()
        [[0, 1, 2], [3, 4, 5]]
        """
        array = _samples_of(obj, layout, _IMAGE_LAYOUTS)
        if array.ndim == 2:
            array = array[:, :, None] if layout == "HWC" else array[None]
        c = array.shape[2] if layout == "HWC" else array.shape[0]
        h, w = (array.shape[0], array.shape[1]) if layout == "HWC" else array.shape[1:]
        _check_bytes(array.shape, str(array.dtype), array.size)
        image = Image(h, w, c, str(array.dtype), layout)
        np.copyto(np.asarray(image), array)
        return image

    def __repr__(self):
        return f"Image(shape={self.shape}, dtype={self._dtype}, layout={self.layout!r})"


@cython.final
cdef class ImageBatch(_Samples):
    """N images of one shape in one contiguous buffer, ``"NCHW"`` or ``"NHWC"``.

    Parameters
    ----------
    n, height, width : int
        Batch size and image size in pixels.
    channels : int, default 3
    dtype : {"uint8", "float32"}, default "uint8"
    layout : {"NCHW", "NHWC"}, default "NCHW"

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader.kernels import ImageBatch
    >>> batch = ImageBatch(4, 2, 3, channels=3, dtype="float32")
    >>> batch.shape, batch.layout, len(batch)
    ((4, 3, 2, 3), 'NCHW', 4)
    >>> float(np.asarray(batch).sum())
    0.0
    """

    def __init__(self, n, height, width, channels=3, str dtype="uint8", str layout="NCHW"):
        if layout not in _BATCH_LAYOUTS:
            raise ValueError(f"layout must be 'NCHW' or 'NHWC', got {layout!r}")
        cdef tuple shape = (_dimension("n", n), _dimension("channels", channels),
                            _dimension("height", height), _dimension("width", width))
        if layout == "NHWC":
            shape = (shape[0], shape[2], shape[3], shape[1])
        check_image_shape(shape, layout, "ImageBatch")
        _check_bytes(shape, dtype, shape[1] * shape[2] * shape[3])
        self._allocate(shape, dtype, layout)

    @staticmethod
    def from_array(obj, str layout="NCHW"):
        """Copy an (N, C, H, W) or (N, H, W, C) array into a new ``ImageBatch``.

        Examples
        --------
        >>> import numpy as np
        >>> from dataloader.kernels import ImageBatch
        >>> batch = ImageBatch.from_array(np.ones((2, 5, 4, 3), np.uint8), layout="NHWC")
        >>> batch.shape
        (2, 5, 4, 3)
        """
        array = _samples_of(obj, layout, _BATCH_LAYOUTS)
        n, c, h, w = array.shape if layout == "NCHW" else (
            array.shape[0], array.shape[3], array.shape[1], array.shape[2])
        _check_bytes(array.shape, str(array.dtype), array.size // max(n, 1))
        batch = ImageBatch(n, h, w, c, str(array.dtype), layout)
        np.copyto(np.asarray(batch), array)
        return batch

    def pin_memory(self):
        """This batch as a torch tensor in page-locked memory (``pin_memory=True``).

        A batch from a pool (an ``ImageCollator``'s) registers its buffer
        with the accelerator the first time the buffer is pinned and shares
        it (no copy); the buffer stays registered while its pool reuses it,
        so later batches in it cost nothing to pin. Any other batch, or one
        the accelerator cannot register, is copied into pinned memory.
        Needs torch and an accelerator; a ``DataLoader`` with
        ``pin_memory=True`` calls it.

        Examples
        --------
        >>> from dataloader.kernels import ImageBatch
        >>> callable(ImageBatch(1, 2, 2).pin_memory)
        True
        """
        import torch

        from dataloader._core.buffers import host_memory

        if (self.pool is not None
                and self.pool.register(self.data, _aligned_size(self.nbytes), host_memory)):
            return torch.from_dlpack(self)
        return torch.from_dlpack(self).pin_memory()

    def __dealloc__(self):
        # Runs before _Samples.__dealloc__, which then has nothing to free:
        # a pooled block goes back to its pool, or is freed.
        if self.pool is not None:
            self.pool.release(self.data, _aligned_size(self.nbytes))
            self.data = NULL

    def __repr__(self):
        return f"ImageBatch(shape={self.shape}, dtype={self._dtype}, layout={self.layout!r})"


cdef Image adopt_image(void* data, tuple shape, str dtype, str layout):
    """An ``Image`` owning ``data`` (from ``aligned_alloc``), which it frees."""
    cdef Image image = Image.__new__(Image)
    image._describe(shape, dtype, layout)
    image.data = data
    return image


cdef ImageBatch pooled_batch(BufferPool pool, tuple shape, str dtype, str layout):
    """An uninitialised ``ImageBatch`` whose memory comes from (and returns to) ``pool``."""
    cdef ImageBatch batch = ImageBatch.__new__(ImageBatch)
    cdef size_t size = _aligned_size(batch._describe(shape, dtype, layout))
    batch.data = pool.take(size)
    if batch.data == NULL:
        raise MemoryError(f"cannot allocate {size} bytes for a batch of shape {shape}")
    batch.pool = pool
    # Freed on the thread that drops it last, not queued to this one (see share_refcount).
    share_refcount(batch)
    return batch


def new_batch(BufferPool pool, tuple shape, str dtype, str layout):
    """An ``ImageBatch`` of ``shape`` whose memory comes from ``pool`` (not zero-filled)."""
    if layout not in _BATCH_LAYOUTS:
        raise ValueError(f"layout must be 'NCHW' or 'NHWC', got {layout!r}")
    check_image_shape(shape, layout, "ImageBatch")
    _check_bytes(shape, dtype, shape[1] * shape[2] * shape[3])
    return pooled_batch(pool, shape, dtype, layout)
