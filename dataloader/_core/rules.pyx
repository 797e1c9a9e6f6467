"""The image rule and the fill rule, as Python sees the C declarations.

``src/dl_ops.h`` declares both once: an image has a height and a width of 1
to ``MAX_SIDE`` pixels and 1 to 4 channels; a fill is a sample the image's
dtype holds exactly. The native chains check every shape and fill with the
C predicates; every Python entry point (kernels, ``Image``, ``ImageBatch``,
``ImageCollator``, the input of a chain) goes through the functions here,
which call the same predicates and say what broke the rule. Every entry
point that takes an array-like object reads it with :func:`as_array`.
"""
from libc.stddef cimport ptrdiff_t

import numpy as np


from dataloader._core.ops cimport (
    DL_FILL_RULE, DL_IMAGE_RULE, DL_MAX_BYTES, DL_MAX_SIDE, dl_is_fill_value, dl_is_image_shape,
)


# The decode limits: a side longer than MAX_SIDE or more than MAX_BYTES of
# samples is refused before any pixel memory is allocated.
MAX_SIDE = DL_MAX_SIDE
MAX_BYTES = DL_MAX_BYTES
IMAGE_RULE = DL_IMAGE_RULE.decode()
FILL_RULE = DL_FILL_RULE.decode()


cdef ptrdiff_t _side(object value):
    """``value`` in C's range, on the same side of the rule's bounds."""
    return max(-1, min(value, DL_MAX_SIDE + 1))


def check_image_shape(shape, str layout="HWC", str name="img"):
    """Raise ``ValueError`` naming ``shape`` unless it is an image's (or a batch's) shape.

    ``layout`` orders the axes: ``"HWC"`` or ``"CHW"`` for an image (a 2-D
    shape is one channel), ``"NHWC"`` or ``"NCHW"`` for a batch of 0 to
    ``MAX_SIDE`` of them.
    """
    dims = tuple(shape)
    if len(dims) == len(layout) == 4:
        if not 0 <= dims[0] <= DL_MAX_SIDE:
            raise ValueError(f"{name} has shape {dims}: a batch holds 0 to {DL_MAX_SIDE} images")
        image = dims[1:]
    elif len(dims) == 2 and len(layout) == 3:
        image = dims + (1,) if layout == "HWC" else (1,) + dims
    elif len(dims) == len(layout) == 3:
        image = dims
    else:
        raise ValueError(f"{name} must have {len(layout)} dimensions ({layout}"
                         f"{' or HW' if len(layout) == 3 else ''}), got shape {dims}")
    height, width, channels = ((image[0], image[1], image[2]) if layout.endswith("C")
                               else (image[1], image[2], image[0]))
    if not dl_is_image_shape(_side(height), _side(width), _side(channels)):
        raise ValueError(f"{name} has shape {dims} ({layout}): {IMAGE_RULE}")


def check_nbytes(shape, dtype, Py_ssize_t nbytes, str name="an image"):
    """Raise ``ValueError`` when ``nbytes`` (of one image, or of one item of any
    shape) is over ``MAX_BYTES``, the bound of every buffer a kernel allocates."""
    if nbytes > DL_MAX_BYTES:
        raise ValueError(f"{name} of shape {tuple(shape)} and dtype {dtype} needs {nbytes} "
                         f"bytes, over the limit of {DL_MAX_BYTES}")


def check_fill_samples(values, dtype, str name="fill"):
    """Raise ``ValueError`` unless every value of ``values`` is a sample of ``dtype`` exactly."""
    cdef int sample_size = np.dtype(dtype).itemsize
    for value in values:
        if not dl_is_fill_value(value, sample_size):
            raise ValueError(f"{name}={tuple(values)!r} for a {np.dtype(dtype)} image: {FILL_RULE}")


def as_array(obj, str name="obj"):
    """A numpy view of a numpy array, a CPU torch tensor (DLPack) or any buffer.

    ``TypeError`` naming ``name`` for an object that is none of these, or
    that holds no numbers.
    """
    if isinstance(obj, np.ndarray):
        return obj
    try:
        if hasattr(obj, "__dlpack__") and not hasattr(obj, "__array_interface__"):
            return np.from_dlpack(obj)
        array = np.asarray(obj)
    except Exception as err:
        raise TypeError(f"{name} must be an array or support the buffer protocol, "
                        f"got {type(obj).__name__}") from err
    if array.dtype == object:
        raise TypeError(f"{name} must be an array of numbers, got {type(obj).__name__}")
    return array
