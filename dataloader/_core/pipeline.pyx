"""Native transform chains: one item through decode, geometry and value ops.

A ``Chain`` holds the C description of a ``dataloader.transforms`` chain
(``src/dl_pipeline.c``: op codes and their parameters) and runs it on one
item in a single call without the GIL: only turning the input into a C view
and the output into an ``Image`` touch the interpreter. ``apply_into``
writes the result straight into an item's slot of an ``ImageBatch``.
"""
from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc

import numpy as np

from dataloader._core._tables cimport (
    DL_AUGMENT_COUNT,
    DL_OP_COUNT,
    DL_POLICY_COUNT,
    dl_augment_op_name,
    dl_auto_policy_name,
    dl_op_row,
    dl_op_row_t,
)
from dataloader._core._typedefs cimport uint8_t
from dataloader._core.codecs cimport DL_OK, DL_NEEDS_FALLBACK, raise_status
from dataloader._core.image cimport Image, ImageBatch, _Samples, adopt_image
from dataloader._core.ops cimport dl_image_t
from dataloader._core.rules import check_image_shape


cdef tuple _fields(const char* spec):
    """``(name, slots)`` of each parameter of a DL_OPS row's list ("a b*4")."""
    fields = []
    for word in spec.decode().split():
        name, _, count = word.partition("*")
        fields.append((name, int(count or 1)))
    return tuple(fields)


cdef dict _op_table():
    cdef const dl_op_row_t* row
    table = {}
    for kind in range(DL_OP_COUNT):
        row = dl_op_row(kind)
        table[row.key.decode()] = (kind, row.name.decode(), _fields(row.ints),
                                   _fields(row.reals))
    return table


# The native ops, read from the DL_OPS table of src/dl_tables.h: key ->
# (code, name in messages, integer parameters, real parameters).
_OPS = _op_table()
# Op keys in the order of their codes.
OPS = tuple(_OPS)
# The augmentation policies' sub-ops and AutoAugment's policies, in the
# order of their codes (DL_AUGMENT_OPS, DL_AUTO_POLICIES of src/dl_tables.h).
AUGMENT_OPS = tuple([dl_augment_op_name(code).decode() for code in range(DL_AUGMENT_COUNT)])
AUTO_AUGMENT_POLICIES = tuple([dl_auto_policy_name(code).decode()
                               for code in range(DL_POLICY_COUNT)])
_SAMPLE_DTYPES = {1: "uint8", 4: "float32"}
_LAYOUTS = {DL_LAYOUT_HWC: "HWC", DL_LAYOUT_CHW: "CHW"}


cdef tuple _pack(str key, tuple fields, dict params, object kind):
    values = []
    for name, slots in fields:
        value = params.pop(name, 0)
        if slots == 1:
            values.append(kind(value))
            continue
        if not isinstance(value, (tuple, list)):
            if value != 0:
                raise ValueError(f"op {key!r}: {name} takes a sequence, got {value!r}")
            value = ()
        if len(value) > slots:
            raise ValueError(f"op {key!r}: {name} takes at most {slots} values, got {value!r}")
        values.extend(kind(v) for v in value)
        values.extend([kind(0)] * (slots - len(value)))
    return tuple(values)


def step(str key, **params):
    """One native op as ``(key, ints, floats)``, from its parameters by name.

    The names and slots are those of the op's row in DL_OPS (``src/dl_tables.h``);
    a parameter left out is 0, a sequence parameter (``fill*4``) is padded
    with zeros.
    """
    if key not in _OPS:
        raise ValueError(f"unknown native op {key!r}; the ops are {list(OPS)}")
    _, _, ints, reals = _OPS[key]
    packed = (key, _pack(key, ints, params, int), _pack(key, reals, params, float))
    if params:
        raise ValueError(f"op {key!r} has no parameter {sorted(params)[0]!r}")
    return packed


def item_seed(uint64_t seed, uint64_t epoch, uint64_t index):
    """The seed of one item's random draws: a stable mix of ``(seed, epoch, index)``."""
    return dl_item_seed(seed, epoch, index)


cdef class Chain:
    """A compiled chain of ops.

    Parameters
    ----------
    steps : sequence of (name, ints, floats)
        One entry per op, as :func:`step` makes it: its key in ``OPS``, up to
        6 integer and 16 real parameters (named in ``src/dl_tables.h``).
    fallback : callable, optional
        ``fallback(data)`` decodes formats without a native decoder (through
        Pillow) when the chain starts with a decode.
    first_name : str, optional
        How errors about the chain's input name its first op.
    """

    cdef dl_op_t* ops
    cdef int n
    cdef readonly tuple steps
    cdef object fallback
    cdef str first_name
    cdef Chain rest       # the chain after its decode, for the fallback

    def __cinit__(self, steps, fallback=None, first_name=None):
        cdef int k, j
        self.steps = tuple(steps)
        self.n = len(self.steps)
        self.ops = <dl_op_t*> malloc(max(self.n, 1) * sizeof(dl_op_t))
        if self.ops == NULL:
            raise MemoryError()
        for k, (name, ints, floats) in enumerate(self.steps):
            if name not in _OPS:
                raise ValueError(f"unknown native op {name!r}; the ops are {list(OPS)}")
            if len(ints) > 6 or len(floats) > 16:
                raise ValueError(f"op {name!r} has too many parameters")
            self.ops[k].kind = _OPS[name][0]
            for j in range(6):
                self.ops[k].i[j] = ints[j] if j < len(ints) else 0
            for j in range(16):
                self.ops[k].f[j] = floats[j] if j < len(floats) else 0.0
        self.fallback = fallback
        self.first_name = first_name or (self.steps[0][0] if self.n else "the chain")
        if fallback is not None and self.n and self.steps[0][0] == "decode":
            self.rest = Chain(self.steps[1:])

    def __dealloc__(self):
        free(self.ops)

    def apply(self, data, uint64_t seed):
        """Run the chain on ``data`` (encoded bytes, an ``Image`` or an array); return an ``Image``."""
        cdef dl_chain_output_t out
        out.data = NULL
        status = self._run(data, seed, &out)
        if status == DL_NEEDS_FALLBACK:
            return self.rest.apply(self.fallback(data), seed)
        shape = (out.height, out.width, out.channels)
        if out.layout == DL_LAYOUT_CHW:
            shape = (out.channels, out.height, out.width)
        return adopt_image(out.data, shape, _SAMPLE_DTYPES[out.sample_size],
                           _LAYOUTS[out.layout])

    def output_shape(self):
        """``(height, width, channels, dtype, layout)`` of every output, or ``None``.

        Read from the ops alone, by the plan pass's own shape rule: ``None``
        when a side or the channels depend on the input image.
        """
        cdef dl_chain_output_t shape
        if not dl_chain_static_shape(self.ops, self.n, &shape):
            return None
        return (shape.height, shape.width, shape.channels, _SAMPLE_DTYPES[shape.sample_size],
                _LAYOUTS[shape.layout])

    def lead_window(self, int height, int width, int channels, uint64_t seed):
        """The window the chain's first op reads of a uint8 ``height`` x ``width`` x
        ``channels`` image for ``seed``, when that op is a crop inside the image.

        ``(top, left, window_height, window_width, out_height, out_width,
        filter, rest_seed)``: the window, the op's output size, its
        resampling filter's code (``resize.FILTERS``; -1 when it only cuts)
        and the seed from which the rest of the chain draws what the whole
        chain would (``dl_chain_lead_window``). ``None`` when the first op is
        not a crop, or its window reaches past the image.
        """
        cdef dl_lead_window_t window
        cdef char msg[256]
        cdef int status
        with nogil:
            status = dl_chain_lead_window(self.ops, self.n, height, width, channels, seed,
                                          &window, msg)
        if status != DL_OK:
            raise_status(status, msg, _OPS["decode"][1])
        if window.height == 0:
            return None
        return (window.top, window.left, window.height, window.width, window.out_height,
                window.out_width, window.filter, window.rest_seed)

    def apply_into(self, data, uint64_t seed, ImageBatch batch not None, Py_ssize_t index):
        """Run the chain on ``data`` and write the result into image ``index`` of ``batch``."""
        cdef dl_chain_output_t out
        cdef Py_ssize_t item_bytes = batch._strides[0]
        if not 0 <= index < batch._shape[0]:
            raise IndexError(f"index {index} is out of range for a batch of {batch._shape[0]}")
        out.data = <uint8_t*> batch.data + index * item_bytes
        out.sample_size = batch._itemsize
        if batch.layout == "NCHW":
            out.layout = DL_LAYOUT_CHW
            out.channels, out.height, out.width = batch._shape[1], batch._shape[2], batch._shape[3]
        else:
            out.layout = DL_LAYOUT_HWC
            out.height, out.width, out.channels = batch._shape[1], batch._shape[2], batch._shape[3]
        out.row_stride = batch._strides[1]
        if self._run(data, seed, &out) == DL_NEEDS_FALLBACK:
            self.rest.apply_into(self.fallback(data), seed, batch, index)

    def apply_frames_into(self, const uint8_t[:, :, :, ::1] frames,  # IN: (T, H, W, C)
                          uint64_t seed,
                          out,       # OUT: (T, H, W, C) or (T, C, H, W), C-contiguous
                          bint chw):
        """Run the chain on every frame of a clip with one ``seed`` (one draw of every
        random op for the whole clip), frame ``t`` into ``out[t]``.

        ``out`` is a C-contiguous uint8 or float32 array of ``T`` frames of the
        chain's output, in the layout the chain ends in (``chw``): the chain
        must produce exactly that shape, or fails as ``apply_into`` does.
        """
        cdef dl_chain_input_t source
        cdef dl_chain_output_t output
        cdef char msg[256]
        cdef int status = DL_OK
        cdef Py_ssize_t t, count = frames.shape[0]
        cdef Py_ssize_t frame_bytes
        cdef uint8_t* base
        if (not isinstance(out, np.ndarray) or out.ndim != 4 or out.shape[0] != count
                or out.dtype not in (np.uint8, np.float32) or not out.flags.c_contiguous
                or not out.flags.writeable):
            raise ValueError(f"out must be a writable C-contiguous uint8 or float32 array of "
                             f"{count} frames, got {getattr(out, 'dtype', type(out).__name__)} "
                             f"{getattr(out, 'shape', '')}")
        if count == 0:
            return
        frame_bytes = out.strides[0]
        base = <uint8_t*> <size_t> out.ctypes.data
        source.bytes = NULL
        source.size = 0
        source.layout = DL_LAYOUT_HWC
        source.image.height, source.image.width, source.image.channels = (
            frames.shape[1], frames.shape[2], frames.shape[3])
        source.image.sample_size = 1
        source.image.row_stride = frames.strides[1]
        output.sample_size = out.itemsize
        if chw:
            output.layout = DL_LAYOUT_CHW
            output.channels, output.height, output.width = out.shape[1], out.shape[2], out.shape[3]
        else:
            output.layout = DL_LAYOUT_HWC
            output.height, output.width, output.channels = out.shape[1], out.shape[2], out.shape[3]
        output.row_stride = out.strides[2] if chw else out.strides[1]
        with nogil:
            for t in range(count):
                source.image.data = <uint8_t*> &frames[t, 0, 0, 0]
                output.data = base + t * frame_bytes
                status = dl_chain_run(self.ops, self.n, &source, seed, &output, msg)
                if status != DL_OK:
                    break
        if status != DL_OK:
            raise_status(status, msg, _OPS["decode"][1])

    cdef int _run(self, data, uint64_t seed, dl_chain_output_t* out) except -1:
        cdef dl_chain_input_t source
        cdef const uint8_t[::1] encoded
        cdef char msg[256]
        cdef int status
        keep = _describe_input(data, &source, self._first_op_name())
        if isinstance(keep, (bytes, bytearray, memoryview)) or (
                isinstance(keep, np.ndarray) and keep.ndim == 1):
            encoded = keep
            source.bytes = &encoded[0] if encoded.shape[0] else <const uint8_t*> b""
            source.size = encoded.shape[0]
        with nogil:
            status = dl_chain_run(self.ops, self.n, &source, seed, out, msg)
        if status == DL_OK or (status == DL_NEEDS_FALLBACK and self.rest is not None):
            return status
        if status == DL_NEEDS_FALLBACK:
            raise ValueError(f"{self._first_op_name()}: no native decoder for this format")
        return raise_status(status, msg, _OPS["decode"][1])

    cdef str _first_op_name(self):
        return self.first_name


cdef object _describe_input(data, dl_chain_input_t* source, str first_op):
    """Fill ``source`` from ``data``; return the object that owns the memory."""
    cdef _Samples samples
    cdef dl_image_t* image = &source.image
    source.bytes = NULL
    source.size = 0
    source.layout = DL_LAYOUT_HWC
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data
    if isinstance(data, (Image, ImageBatch)):
        samples = <_Samples> data
        if samples._ndim != 3:
            raise ValueError(f"{first_op} got an ImageBatch; transforms apply to one image")
        if samples.layout == "CHW":
            source.layout = DL_LAYOUT_CHW
            image.channels, image.height, image.width = (
                samples._shape[0], samples._shape[1], samples._shape[2])
        else:
            image.height, image.width, image.channels = (
                samples._shape[0], samples._shape[1], samples._shape[2])
        image.data = <uint8_t*> samples.data
        image.sample_size = samples._itemsize
        image.row_stride = image.width * image.channels * image.sample_size
        return data
    if not isinstance(data, np.ndarray):
        raise TypeError(f"{first_op} got {type(data).__name__}; transforms take encoded "
                        "bytes, an Image or a numpy array")
    array = data
    if array.ndim == 1 and array.dtype == np.uint8:
        return np.ascontiguousarray(array)
    if array.dtype not in (np.uint8, np.float32) or array.ndim not in (2, 3):
        raise ValueError(f"{first_op} got an array of shape {array.shape} and dtype "
                         f"{array.dtype}; images are (H, W) or (H, W, C) uint8 or float32")
    # Before any copy, and before the sizes go into C ints; the plan pass
    # checks the same rule again, and every shape after it.
    check_image_shape(array.shape, "HWC", f"the input of {first_op}")
    if array.ndim == 2:
        array = array[:, :, None]
    if (array.strides[2] != array.itemsize or array.strides[1] != array.shape[2] * array.itemsize
            or array.strides[0] < 0):
        array = np.ascontiguousarray(array)
    image.height, image.width, image.channels = array.shape[0], array.shape[1], array.shape[2]
    image.sample_size = array.itemsize
    image.row_stride = array.strides[0]
    image.data = <uint8_t*> <size_t> array.ctypes.data
    return array
