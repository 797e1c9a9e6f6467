"""Image and ImageBatch: ownership, buffer protocol, array interface, DLPack."""

import gc
import sys
import weakref

import numpy as np
import pytest

from dataloader._core.image import MAX_SIDE, Image, ImageBatch


def test_new_image_is_zeroed_and_describes_itself():
    image = Image(5, 7, 3)
    assert image.shape == (5, 7, 3)
    assert (image.height, image.width, image.channels) == (5, 7, 3)
    assert image.dtype == np.uint8 and image.layout == "HWC"
    assert not np.asarray(image).any()
    chw = Image(5, 7, 2, dtype="float32", layout="CHW")
    assert chw.shape == (2, 5, 7) and chw.dtype == np.float32
    assert (chw.height, chw.width, chw.channels) == (5, 7, 2)
    assert chw.nbytes == 2 * 5 * 7 * 4


def test_batch_layouts():
    assert ImageBatch(4, 5, 6).shape == (4, 3, 5, 6)
    assert ImageBatch(4, 5, 6, 1, layout="NHWC").shape == (4, 5, 6, 1)
    assert len(ImageBatch(4, 5, 6)) == 4


@pytest.mark.parametrize("kwargs,message", [
    ({"channels": 5}, r"shape \(2, 2, 5\) \(HWC\): an image has .* 1 to 4 channels"),
    ({"dtype": "int16"}, "dtype must be"),
    ({"layout": "WHC"}, "layout must be"),
])
def test_invalid_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Image(2, 2, **kwargs)


def test_numpy_and_memoryview_are_views():
    image = Image(3, 4, 3)
    array = np.asarray(image)
    view = memoryview(image)
    assert view.format == "B" and view.shape == (3, 4, 3) and not view.readonly
    array[1, 2, 0] = 9
    assert view[1, 2, 0] == 9
    assert np.shares_memory(array, np.asarray(image))
    interface = image.__array_interface__
    assert interface["version"] == 3 and interface["typestr"] == "|u1"
    assert interface["data"][0] == array.ctypes.data


def test_float_buffer_format():
    image = Image(2, 3, 1, dtype="float32")
    assert memoryview(image).format == "f"
    assert image.__array_interface__["typestr"] == "<f4"
    np.asarray(image)[0, 0, 0] = 0.5
    assert memoryview(image)[0, 0, 0] == 0.5


def test_torch_from_dlpack_shares_memory_both_ways():
    torch = pytest.importorskip("torch")
    batch = ImageBatch(2, 3, 4, dtype="float32")
    tensor = torch.from_dlpack(batch)
    array = np.asarray(batch)
    assert tensor.shape == (2, 3, 3, 4) and tensor.dtype == torch.float32
    assert tensor.data_ptr() == array.ctypes.data
    tensor[1, 2, 0, 3] = 7.0
    assert array[1, 2, 0, 3] == 7.0
    array[0, 0, 0, 0] = -1.0
    assert tensor[0, 0, 0, 0].item() == -1.0


def test_views_survive_deletion_of_the_owner():
    torch = pytest.importorskip("torch")
    image = Image(4, 4, 1)
    owner = weakref.ref(image)
    tensor = torch.from_dlpack(image)
    array = np.asarray(image)
    del image
    gc.collect()
    assert owner() is not None          # the views keep the owner alive
    tensor[0, 0, 0] = 42
    assert array[0, 0, 0] == 42
    del array
    gc.collect()
    assert owner() is not None          # the tensor still holds it
    del tensor
    gc.collect()
    assert owner() is None              # the last view released it


@pytest.mark.parametrize("versioned", [False, True])
def test_capsules_are_consumed_and_unconsumed_ones_released(versioned):
    torch = pytest.importorskip("torch")
    image = Image(2, 3, 3)
    before = sys.getrefcount(image)
    kwargs = {"max_version": (1, 0)} if versioned else {}
    capsule = image.__dlpack__(**kwargs)
    name = "dltensor_versioned" if versioned else "dltensor"
    assert f'"{name}"' in repr(capsule)
    assert sys.getrefcount(image) == before + 1
    del capsule                          # never consumed: the destructor frees it
    assert sys.getrefcount(image) == before
    tensor = torch.utils.dlpack.from_dlpack(image.__dlpack__(**kwargs))
    tensor[0, 0, 0] = 5
    assert np.asarray(image)[0, 0, 0] == 5
    del tensor
    gc.collect()
    assert sys.getrefcount(image) == before


def test_numpy_from_dlpack_and_device():
    image = Image(2, 2, 4)
    assert image.__dlpack_device__() == (1, 0)
    array = np.from_dlpack(image)
    array[1, 1, 3] = 3
    assert np.asarray(image)[1, 1, 3] == 3


def test_dlpack_copy_and_bad_arguments():
    torch = pytest.importorskip("torch")
    image = Image(2, 2, 1)
    copied = torch.from_dlpack(image.__dlpack__(max_version=(1, 0), copy=True))
    copied[0, 0, 0] = 1
    assert np.asarray(image)[0, 0, 0] == 0
    with pytest.raises(BufferError, match="stream"):
        image.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="device"):
        image.__dlpack__(dl_device=(2, 0))


def test_from_array_copies_numpy_torch_and_buffers():
    torch = pytest.importorskip("torch")
    source = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    image = Image.from_array(source[:, ::2])       # strided input, one copy
    np.testing.assert_array_equal(np.asarray(image), source[:, ::2])
    source[0, 0, 0] = 99
    assert np.asarray(image)[0, 0, 0] == 0          # a copy, not a view
    tensor = torch.arange(12, dtype=torch.float32).reshape(3, 2, 2)
    chw = Image.from_array(tensor, layout="CHW")
    assert chw.shape == (3, 2, 2) and chw.dtype == np.float32 and chw.channels == 3
    np.testing.assert_array_equal(np.asarray(chw), tensor.numpy())
    gray = Image.from_array(memoryview(bytearray(range(6))).cast("B", (2, 3)))
    assert gray.shape == (2, 3, 1)


def test_from_array_rejects_bad_input():
    with pytest.raises(ValueError, match="uint8 or float32"):
        Image.from_array(np.zeros((2, 2, 3), np.int32))
    with pytest.raises(ValueError, match="1 to 4 channels"):
        Image.from_array(np.zeros((2, 2, 5), np.uint8))
    with pytest.raises(ValueError, match="shape"):
        Image.from_array(np.zeros((2, 2, 2, 2), np.uint8))
    big = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), (MAX_SIDE + 1, 2, 1), (0, 0, 0))
    with pytest.raises(ValueError, match=r"shape \(16385, 2, 1\).*width of 1 to 16384"):
        Image.from_array(big)


def test_batch_from_array():
    source = np.random.default_rng(0).integers(0, 255, (3, 5, 4, 3), dtype=np.uint8)
    batch = ImageBatch.from_array(source, layout="NHWC")
    np.testing.assert_array_equal(np.asarray(batch), source)
    with pytest.raises(ValueError, match="1 to 4 channels"):
        ImageBatch.from_array(source)   # NCHW would read 5 channels
