"""One rule for images, and every transform and kernel argument checked when given.

An image has height and width of 1 to 16384 pixels and 1 to 4 channels:
transforms (one call or a chain on the loader's workers), kernels, ``Image``
and ``ImageCollator`` refuse anything else with a ``ValueError`` naming the
shape. Arguments are refused with the exception type torch and torchvision
use: ``TypeError`` for a wrong kind of object, ``ValueError`` for a wrong
value. The cases that used to kill the interpreter are also replayed in a
child process by ``test_crash_hunt.py``.
"""

import math

import numpy as np
import pytest
from conftest import encode, natural_image

from dataloader import DataLoader, ImageCollator, kernels, transforms
from dataloader.kernels import Image, ImageBatch
from dataloader.transforms import (
    CenterCrop,
    Compose,
    Crop,
    Decode,
    Normalize,
    Pad,
    PadTo,
    RandomCrop,
    RandomHFlip,
    RandomResizedCrop,
    Resize,
    Rotate90,
    ToFloat,
)

EMPTY = [(0, 5, 3), (5, 0, 3), (0, 0, 1), (5, 5, 0), (5, 5, 5), (0, 5)]


# --- the image rule --------------------------------------------------------

@pytest.mark.parametrize("shape", EMPTY)
@pytest.mark.parametrize("transform", [
    Resize(8), Resize((4, 6)), CenterCrop(3), RandomResizedCrop(4), RandomCrop(2, padding=3),
    Pad(1), Compose([]), Compose([ToFloat(), Normalize([0.5], [0.5])]), Rotate90(),
], ids=repr)
def test_transforms_refuse_images_breaking_the_rule(transform, shape):
    with pytest.raises(ValueError, match=rf"shape \({shape[0]}, {shape[1]}"):
        transform(np.zeros(shape, np.uint8), seed=0)


@pytest.mark.parametrize("shape", EMPTY)
@pytest.mark.parametrize("kernel", [
    lambda img: kernels.resize(img, 8), lambda img: kernels.resize(img, (4, 6)),
    lambda img: kernels.crop(img, 0, 0, 1, 1), lambda img: kernels.pad(img, 1),
    lambda img: kernels.pad_to(img, 8, 8), kernels.hflip, kernels.vflip, kernels.rotate90,
    lambda img: kernels.convert(img, "RGB"), kernels.to_chw,
    lambda img: kernels.normalize(img, [0.5], [0.5]),
    Image.from_array, lambda img: ImageCollator()([img]),
], ids=["resize-int", "resize-pair", "crop", "pad", "pad_to", "hflip", "vflip", "rotate90",
        "convert", "to_chw", "normalize", "Image.from_array", "ImageCollator"])
def test_kernels_refuse_images_breaking_the_rule(kernel, shape):
    with pytest.raises(ValueError, match=r"shape \(" + ", ".join(map(str, shape))):
        kernel(np.zeros(shape, np.uint8))


@pytest.mark.parametrize("args", [(0, 0), (0, 4), (4, 0), (2, 2, 0), (2, 2, 5), (16385, 1)])
def test_image_refuses_shapes_breaking_the_rule(args):
    with pytest.raises(ValueError, match="an image has height and width of 1 to 16384"):
        Image(*args)
    with pytest.raises(ValueError, match="an image has height and width"):
        ImageBatch(1, *args)


@pytest.mark.parametrize("args", [(2**70, 1), (1.5, 1), (True, 1), ("2", 1)])
def test_image_refuses_sizes_that_are_not_ints(args):
    with pytest.raises((TypeError, ValueError)) as info:
        Image(*args)
    assert info.type is (ValueError if isinstance(args[0], int) and not isinstance(args[0], bool)
                         else TypeError)


def test_a_chain_on_the_loaders_workers_refuses_an_empty_image():
    items = [np.zeros((4, 4, 3), np.uint8), np.zeros((0, 5, 3), np.uint8)] * 2
    loader = DataLoader(items, batch_size=2, num_workers=2, transform=Resize(8))
    with pytest.raises(ValueError, match=r"Resize .*shape \(0, 5, 3\)"):
        list(loader)


def test_a_native_transform_in_the_loader_refuses_an_empty_tuple_item():
    loader = DataLoader([(np.zeros((2, 2), np.uint8), 0), ()], batch_size=2,
                        transform=transforms.HFlip())
    with pytest.raises(ValueError, match="item 1 is an empty tuple"):
        list(loader)


def test_the_plan_pass_checks_every_intermediate_shape():
    # Valid input, but the shorter side of 8 makes the longer one 8 * 16384.
    with pytest.raises(ValueError, match=r"Resize would make .* shape \(8, 131072, 3\)"):
        Resize(8)(np.zeros((1, 16384, 3), np.uint8))
    with pytest.raises(ValueError, match=r"Pad would make .* shape \(16385, 3, 1\)"):
        Pad((1, 16384, 1, 0))(np.zeros((1, 1), np.uint8))
    # torchvision's max_size rule can shrink the shorter side to nothing.
    with pytest.raises(ValueError, match=r"Resize would make .* shape \(0, 2, 3\)"):
        Resize(1, max_size=2)(np.zeros((1, 100, 3), np.uint8))


def test_random_resized_crop_window_keeps_a_pixel_on_a_one_pixel_wide_jpeg():
    # The fallback window of an extreme ratio was 0 rows high; the fused
    # JPEG decode then divided by it.
    data = encode(natural_image(64, 1, 3), "JPEG")
    out = Compose([Decode(), RandomResizedCrop(4, ratio=(10.0, 20.0))])(data, seed=0)
    assert out.shape == (4, 4, 3)


def test_decoders_never_produce_an_empty_image():
    # A PNG header claiming a zero width is refused before any decode.
    data = bytearray(encode(natural_image(2, 2, 3), "PNG"))
    data[16:20] = (0).to_bytes(4, "big")
    with pytest.raises(ValueError, match="cannot decode"):
        kernels.decode(bytes(data))
    with pytest.raises(ValueError, match="cannot decode"):
        Decode()(bytes(data))


def test_image_from_array_copies_non_contiguous_views():
    base = natural_image(9, 12, 4)
    views = [base[::2, ::-3], base.transpose(1, 0, 2), base[:, :, 1:], np.asfortranarray(base),
             np.broadcast_to(base[:1], (5, 12, 4)), base[::-1, :, ::2]]
    for view in views:
        image = Image.from_array(view)
        np.testing.assert_array_equal(np.asarray(image), view)
    chw = Image.from_array(base.transpose(2, 0, 1)[:, ::3], layout="CHW")
    np.testing.assert_array_equal(np.asarray(chw), base.transpose(2, 0, 1)[:, ::3])


def test_image_collator_refuses_items_of_a_wrong_shape():
    collate = ImageCollator()
    good = np.zeros((2, 2, 3), np.uint8)
    with pytest.raises(ValueError, match=r"item 1 has shape \(2, 2, 7\)"):
        collate([good, np.zeros((2, 2, 7), np.uint8)])
    with pytest.raises(ValueError, match=r"item 0 has shape \(0, 2, 3\)"):
        collate([(np.zeros((0, 2, 3), np.uint8), 0)])
    with pytest.raises(ValueError,
                       match=r"item 1 is a uint8 image of shape \(H, W, C\) \(3, 2, 3\)"):
        collate([good, np.zeros((3, 2, 3), np.uint8)])
    with pytest.raises(ValueError, match=r"item 0 must have 3 dimensions \(HWC or HW\), "
                                         r"got shape \(2, 2, 2, 3\)"):
        collate([np.zeros((2, 2, 2, 3), np.uint8)])
    batch = collate([good[::-1], np.ones((2, 4, 3), np.uint8)[:, ::2]])
    assert batch.shape == (2, 3, 2, 2)


def test_image_collator_refuses_items_of_a_wrong_structure():
    # Found by the crash hunt: an empty tuple was an IndexError, and an image
    # after a labelled item had its first row taken for the image.
    collate = ImageCollator()
    good = np.zeros((2, 2, 3), np.uint8)
    with pytest.raises(ValueError, match="item 0 is tuple of length 0"):
        collate([()])
    with pytest.raises(ValueError, match="item 1 is ndarray"):
        collate([(good, 0), np.zeros((2, 2, 2, 3), np.uint8)])
    with pytest.raises(ValueError, match="item 1 is tuple of length 3"):
        collate([(good, 0), (good, 1, 2)])
    with pytest.raises(ValueError, match="empty batch"):
        collate.stack([])
    with pytest.raises(ValueError, match=r"ImageBatch has shape \(2, 3, 0, 2\)"):
        collate.new_batch(2, 0, 2, 3, "uint8")


def test_images_over_the_byte_limit_are_refused_before_allocating():
    # Found by the crash hunt: a valid shape whose size no machine holds was a MemoryError.
    with pytest.raises(ValueError, match="over the limit of 268435456"):
        ImageBatch(2, 16384, 16384)
    with pytest.raises(ValueError, match="over the limit of 268435456"):
        Image(16384, 16384, 4, dtype="float32")


# --- fills -----------------------------------------------------------------

@pytest.mark.parametrize("fill", [300, -1, 1.5, (0, 256, 0)])
def test_a_fill_uint8_cannot_hold_is_refused_alike_everywhere(fill):
    image = np.zeros((2, 2, 3), np.uint8)
    messages = []
    for call in (lambda: Pad(1, fill=fill)(image), lambda: PadTo(3, 3, fill=fill)(image),
                 lambda: kernels.pad(image, 1, fill=fill),
                 lambda: kernels.pad_to(image, 3, 3, fill=fill)):
        with pytest.raises(ValueError,
                           match=r"fill must be integers in 0\.\.255 for uint8") as info:
            call()
        messages.append(str(info.value))
    assert len(messages) == 4


def test_a_fill_float32_can_hold_pads_float32_images():
    image = np.zeros((1, 1, 1), np.float32)
    assert Pad(1, fill=300)(image)[0, 0, 0] == 300.0
    assert Compose([ToFloat(), Pad(1, fill=-1.5)])(np.zeros((1, 1), np.uint8))[0, 0, 0] == -1.5
    assert kernels.pad_to(image, 2, 2, fill=1.5)[1, 1, 0] == 1.5


def test_pad_to_with_three_fill_values_keeps_its_anchor():
    out = PadTo(3, 3, fill=(1, 2, 3), anchor="center")(np.zeros((1, 1, 3), np.uint8))
    assert out[1, 1].tolist() == [0, 0, 0] and out[0, 0].tolist() == [1, 2, 3]


# --- arguments ---------------------------------------------------------------

BIG = 2**31
TYPE_ERRORS = [
    lambda: Resize(8.0), lambda: Resize("8"), lambda: Resize(True), lambda: Resize((8, 1.5)),
    lambda: CenterCrop(None), lambda: Crop(0, 0, 1.0, 1), lambda: Pad("1"),
    lambda: Pad(1, fill="red"),
    lambda: Pad(1, fill=None), lambda: RandomHFlip("0.5"), lambda: RandomHFlip(None),
    lambda: RandomResizedCrop(4, scale=0.5), lambda: Normalize(["a"], [1]),
    lambda: Rotate90(1.0), lambda: Decode(exact=1), lambda: Resize(8, antialias=None),
    lambda: Decode(max_width=1.5), lambda: HFlipCall(seed=1.5),
    lambda: kernels.rotate90(np.zeros((2, 2), np.uint8), 1.5),
    lambda: kernels.crop(np.zeros((2, 2), np.uint8), 0.5, 0, 1, 1),
    lambda: kernels.resize(np.zeros((2, 2), np.uint8), 2.5),
    lambda: kernels.pad(np.zeros((2, 2), np.uint8), 1, fill="x"),
    lambda: kernels.decode(b"\x89PNG", max_width=None), lambda: ImageCollator(pool_capacity=1.0),
    lambda: transforms.HFlip()([[1, 2]]),
    lambda: kernels.resize(np.zeros((2, 2), np.uint8), 1, antialias=None),
]
VALUE_ERRORS = [
    lambda: Resize(0), lambda: Resize(-1), lambda: Resize(16385), lambda: Resize(BIG),
    lambda: Resize((8, 0)), lambda: Resize(8, max_size=8), lambda: Resize(8, max_size=BIG),
    lambda: Resize(8, interpolation="area"), lambda: CenterCrop(2**63), lambda: Crop(-1, 0, 1, 1),
    lambda: Crop(BIG, 0, 1, 1), lambda: RandomCrop(4, padding=-1),
    lambda: RandomCrop(4, padding=BIG),
    lambda: Pad(1, fill=math.nan), lambda: Pad(1, fill=math.inf), lambda: Pad(1, fill=1e39),
    lambda: Pad(1, mode="wrap"), lambda: PadTo(0, 1), lambda: PadTo(1, BIG),
    lambda: RandomHFlip(-0.1), lambda: RandomHFlip(1.5), lambda: RandomHFlip(math.nan),
    lambda: RandomResizedCrop(4, scale=(0.9, 0.1)), lambda: RandomResizedCrop(4, scale=(0.5, 2.0)),
    lambda: RandomResizedCrop(4, ratio=(2.0, 1.0)), lambda: RandomResizedCrop(4, ratio=(0.0, 1.0)),
    lambda: RandomResizedCrop(4, ratio=(1.0, math.inf)),
    lambda: RandomResizedCrop(4, scale=(math.nan, 1)),
    lambda: Normalize([math.nan], [1]), lambda: Normalize([0], [math.inf]),
    lambda: Normalize([0], [0]),
    lambda: Normalize([0, 0], [1]), lambda: Normalize([], []), lambda: Normalize([0] * 5, [1] * 5),
    lambda: Decode(mode="P"), lambda: Decode(max_width=0), lambda: Decode(max_height=16385),
    lambda: Decode(max_bytes=2**40), lambda: HFlipCall(seed=-1), lambda: HFlipCall(seed=2**64),
    lambda: kernels.resize(np.zeros((2, 2), np.uint8), 0),
    lambda: kernels.resize(np.zeros((2, 2), np.uint8), (BIG, 1)),
    lambda: kernels.crop(np.zeros((2, 2), np.uint8), BIG, 0, 1, 1),
    lambda: kernels.pad(np.zeros((2, 2), np.uint8), BIG),
    lambda: kernels.pad_to(np.zeros((2, 2), np.uint8), BIG, 2),
    lambda: kernels.normalize(np.zeros((2, 2), np.float32), [math.nan], [1]),
    lambda: kernels.normalize(np.zeros((2, 2), np.float32), [0], [1e-50]),
    lambda: kernels.decode(b"\x89PNG", max_width=0),
    lambda: kernels.decode(b"\x89PNG", min_size=(0, 1)),
    lambda: kernels.to_float(np.broadcast_to(np.zeros(1, np.uint8), (2**40,))),
    lambda: ImageBatch(2**20, 1, 1), lambda: ImageCollator(pool_capacity=10**6),
]


class HFlipCall:
    """A transform called with a ``seed`` argument only."""

    def __new__(cls, seed):
        return transforms.HFlip()(np.zeros((1, 1), np.uint8), seed=seed)


@pytest.mark.parametrize("call", TYPE_ERRORS)
def test_arguments_of_a_wrong_kind_raise_type_error(call):
    with pytest.raises(TypeError):
        call()


@pytest.mark.parametrize("call", VALUE_ERRORS)
def test_arguments_of_a_wrong_value_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_numpy_integers_are_ints():
    transform = Resize(np.int64(4))
    assert transform == Resize(4) and repr(transform) == "Resize(size=4)"
    assert kernels.crop(np.zeros((3, 3), np.uint8), np.int32(1), 1, 2, np.uint8(2)).shape == (2, 2)
