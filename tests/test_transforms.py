"""dataloader.transforms: each op against the kernels, numpy or Pillow; chains; errors."""

import dataclasses
import enum
import io
import pickle

import numpy as np
import pytest
from conftest import encode, natural_image
from PIL import Image as PILImage

from dataloader import kernels
from dataloader.kernels import Image
from dataloader.transforms import (
    CenterCrop,
    Compose,
    Crop,
    Decode,
    HFlip,
    Normalize,
    Pad,
    PadTo,
    RandomCrop,
    RandomHFlip,
    RandomResizedCrop,
    Resize,
    Rotate90,
    ToChw,
    ToFloat,
    ToGray,
    ToHwc,
    ToRgb,
    ToRgba,
    VFlip,
)

IMAGE = natural_image(37, 53)
JPEG = encode(IMAGE, "JPEG", quality=92)
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.mark.parametrize("size, expected", [(20, (20, 28)), ((10, 30), (10, 30)), ([16], (16, 22))])
def test_resize_follows_torchvisions_size_rules(size, expected):
    result = Resize(size)(IMAGE)
    assert result.shape == (*expected, 3)
    np.testing.assert_array_equal(result, kernels.resize(IMAGE, expected))


def test_resize_max_size_bounds_the_longer_side():
    assert Resize(20, max_size=25)(IMAGE).shape == (17, 25, 3)


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear", "bicubic", "lanczos"])
def test_resize_interpolations_match_the_kernel(interpolation):
    result = Resize((15, 70), interpolation=interpolation, antialias=False)(IMAGE)
    expected = kernels.resize(IMAGE, (15, 70), interpolation=interpolation, antialias=False)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("size", [(10, 10), (36, 52), (37, 53), (40, 60), (5, 70)])
def test_center_crop_rounds_and_pads_as_torchvision(size):
    h, w = size
    result = CenterCrop(size)(IMAGE)
    # torchvision: pad (zeros) up to the crop size, then crop at round((H - h) / 2).
    pad_h, pad_w = max(h - 37, 0), max(w - 53, 0)
    padded = np.pad(IMAGE, ((pad_h // 2, (pad_h + 1) // 2), (pad_w // 2, (pad_w + 1) // 2), (0, 0)))
    top = round((padded.shape[0] - h) / 2.0)
    left = round((padded.shape[1] - w) / 2.0)
    np.testing.assert_array_equal(result, padded[top : top + h, left : left + w])


def test_crop():
    np.testing.assert_array_equal(Crop(3, 4, 10, 20)(IMAGE), IMAGE[3:13, 4:24])
    with pytest.raises(ValueError, match=r"Crop\(top=30.*does not fit"):
        Crop(30, 0, 10, 10)(IMAGE)


def test_random_crop_takes_a_window_of_the_padded_image():
    padded = np.pad(IMAGE, ((2, 2), (2, 2), (0, 0)))
    windows = set()
    for seed in range(30):
        result = RandomCrop(20, padding=2)(IMAGE, seed=seed)
        matches = [(top, left)
                   for top in range(padded.shape[0] - 19) for left in range(padded.shape[1] - 19)
                   if np.array_equal(padded[top : top + 20, left : left + 20], result)]
        assert matches
        windows.add(matches[0])
    assert len(windows) > 5
    with pytest.raises(ValueError, match="RandomCrop: crop size 50x50 is larger"):
        RandomCrop(50)(IMAGE, seed=0)


def test_random_resized_crop_is_a_resized_window():
    chain = RandomResizedCrop((12, 14), scale=(0.2, 0.5))
    first, again, other = chain(IMAGE, seed=1), chain(IMAGE, seed=1), chain(IMAGE, seed=2)
    assert first.shape == (12, 14, 3)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_random_resized_crop_windows_follow_scale_and_ratio():
    # With a constant-row image, a window's rows tell where it lies: the
    # output's first and last rows come from the window's top and bottom.
    rows = np.repeat(np.arange(200, dtype=np.uint8)[:, None, None], 200, axis=1)
    for seed in range(20):
        out = RandomResizedCrop(50, scale=(0.25, 0.25), ratio=(1.0, 1.0),
                                interpolation="nearest")(rows, seed=seed)
        height = int(out[-1, 0, 0]) - int(out[0, 0, 0]) + 1
        assert abs(height - 100) <= 4  # a quarter of the area, square: 100 x 100


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize("padding", [2, (1, 3), (0, 1, 4, 2)])
def test_pad_matches_numpy(mode, padding):
    result = Pad(padding, fill=(9, 8, 7), mode=mode)(IMAGE)
    left, top, right, bottom = (padding,) * 4 if isinstance(padding, int) else (
        padding * 2 if len(padding) == 2 else padding)
    widths = ((top, bottom), (left, right), (0, 0))
    if mode == "constant":
        expected = np.stack([np.pad(IMAGE[:, :, c], widths[:2], constant_values=v)
                             for c, v in enumerate((9, 8, 7))], axis=-1)
    else:
        expected = np.pad(IMAGE, widths, mode=mode)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("anchor", ["top-left", "center", "bottom-right"])
def test_pad_to_matches_the_kernel(anchor):
    np.testing.assert_array_equal(PadTo(40, 60, fill=5, anchor=anchor)(IMAGE),
                                  kernels.pad_to(IMAGE, 40, 60, anchor=anchor, fill=5))
    with pytest.raises(ValueError, match="PadTo"):
        PadTo(10, 10)(IMAGE)


def test_flips_and_rotations_match_numpy():
    np.testing.assert_array_equal(HFlip()(IMAGE), IMAGE[:, ::-1])
    np.testing.assert_array_equal(VFlip()(IMAGE), IMAGE[::-1])
    for k in range(-1, 5):
        np.testing.assert_array_equal(Rotate90(k)(IMAGE), np.rot90(IMAGE, k))
    np.testing.assert_array_equal(RandomHFlip(p=1.0)(IMAGE), IMAGE[:, ::-1])
    np.testing.assert_array_equal(RandomHFlip(p=0.0)(IMAGE), IMAGE)
    flipped = sum(np.array_equal(RandomHFlip()(IMAGE, seed=s), IMAGE[:, ::-1]) for s in range(200))
    assert 60 < flipped < 140


def test_values_match_torchvisions_formulas():
    as_float = ToFloat()(IMAGE)
    np.testing.assert_array_equal(as_float, IMAGE.astype(np.float32) / np.float32(255))
    mean, std = np.array(MEAN, np.float32), np.array(STD, np.float32)
    normalized = Normalize(MEAN, STD)(as_float)
    np.testing.assert_array_equal(normalized, (as_float - mean) / std)
    # ToFloat, Normalize and ToChw fuse into one pass with the same result.
    fused = Compose([ToFloat(), Normalize(MEAN, STD), ToChw()])(IMAGE)
    np.testing.assert_array_equal(fused, ((as_float - mean) / std).transpose(2, 0, 1))


def test_layouts():
    chw = ToChw()(IMAGE)
    np.testing.assert_array_equal(chw, IMAGE.transpose(2, 0, 1))
    image = ToChw()(Image.from_array(IMAGE))
    assert image.layout == "CHW"
    np.testing.assert_array_equal(np.asarray(ToHwc()(image)), IMAGE)


@pytest.mark.parametrize("transform, mode", [(ToGray(), "L"), (ToRgba(), "RGBA")])
def test_conversions_match_pillow(transform, mode):
    expected = np.asarray(PILImage.fromarray(IMAGE).convert(mode))
    np.testing.assert_array_equal(transform(IMAGE).reshape(expected.shape), expected)
    assert ToRgb()(ToGray()(IMAGE)).shape == (37, 53, 3)


def test_decode_matches_the_kernel():
    np.testing.assert_array_equal(np.asarray(Decode()(JPEG)), kernels.decode(JPEG))
    png = encode(IMAGE, "PNG")
    np.testing.assert_array_equal(np.asarray(Decode("L")(png)), kernels.decode(png, mode="L"))


def test_decode_falls_back_to_pillow_for_other_formats():
    bmp = encode(IMAGE, "BMP")
    result = Compose([Decode(), HFlip()])(bmp)
    np.testing.assert_array_equal(np.asarray(result), IMAGE[:, ::-1])


def test_decode_limits_and_corrupt_data():
    with pytest.raises(ValueError, match="exceeds the limit"):
        Decode(max_width=40)(JPEG)
    with pytest.raises(ValueError, match="over the limit"):
        Decode(max_bytes=1000)(JPEG)
    with pytest.raises(ValueError, match="Decode: cannot decode"):
        Decode()(JPEG[: len(JPEG) // 2])
    with pytest.raises(ValueError, match="empty"):
        Decode()(b"")


@pytest.mark.parametrize(
    "transform, data, match",
    [
        (Resize(10), JPEG, "Resize got encoded bytes"),
        (Decode(), IMAGE, "Decode got a uint8 HWC image"),
        (Compose([ToFloat(), Resize(10)]), IMAGE, "Resize got a float32"),
        (Compose([ToChw(), HFlip()]), IMAGE, "HFlip got a uint8 CHW image"),
        (Normalize([0.5] * 2, [0.5] * 2), IMAGE, "Normalize has 2 means"),
        (HFlip(), np.zeros((2, 2), np.int64), "HFlip got an array of shape"),
    ],
)
def test_an_op_given_the_wrong_kind_of_value_names_itself(transform, data, match):
    with pytest.raises(ValueError, match=match):
        transform(data)


def test_an_op_given_something_other_than_an_image_raises_type_error():
    with pytest.raises(TypeError, match="Decode got float"):
        Decode()(1.5)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: Resize(0), ValueError, "size"),
        (lambda: Resize("big"), TypeError, "size"),
        (lambda: Resize((2, 2), max_size=10), ValueError, "max_size"),
        (lambda: Resize(4, interpolation="cubic"), ValueError, "interpolation"),
        (lambda: CenterCrop((1, 2, 3)), ValueError, "size"),  # as torchvision
        (lambda: Crop(-1, 0, 2, 2), ValueError, "top"),
        (lambda: RandomCrop(4, padding=(1, 2, 3)), ValueError, "padding"),
        (lambda: RandomResizedCrop(4, scale=(0.5, 0.1)), ValueError, "scale"),
        (lambda: RandomResizedCrop(4, ratio=(0, 1)), ValueError, "ratio"),
        (lambda: Pad(1, mode="wrap"), ValueError, "mode"),
        (lambda: Pad(1, fill="red"), TypeError, "fill"),
        (lambda: PadTo(4, 4, anchor="middle"), ValueError, "anchor"),
        (lambda: RandomHFlip(p=2), ValueError, "p"),
        (lambda: Rotate90(1.5), TypeError, "k"),
        (lambda: Normalize([0.5], [0.0]), ValueError, "std"),
        (lambda: Normalize([0.5, 0.5], [0.5]), ValueError, "same length"),
        (lambda: Decode(mode="CMYK"), ValueError, "mode"),
        (lambda: Decode(max_bytes=0), ValueError, "max_bytes"),
        (lambda: Compose([Resize(4), lambda x: x]), TypeError, r"transforms\[1\]"),
    ],
)
def test_arguments_are_validated_when_built(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_transforms_are_immutable_picklable_and_readable():
    chain = Compose([Decode("RGB"), RandomResizedCrop(224), RandomHFlip(), ToFloat(),
                     Normalize(MEAN, STD), ToChw()])
    assert pickle.loads(pickle.dumps(chain)) == chain
    assert repr(chain) == (
        "Compose([Decode(mode='RGB'), RandomResizedCrop(size=(224, 224)), RandomHFlip(), "
        "ToFloat(), Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)), ToChw()])"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        chain.transforms = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        Resize(4).size = 5


def test_calling_returns_an_image_or_an_array():
    assert isinstance(Decode()(JPEG), Image)
    assert isinstance(HFlip()(Image.from_array(IMAGE)), Image)
    assert isinstance(HFlip()(IMAGE), np.ndarray)


def test_nested_compose_is_flattened():
    nested = Compose([Compose([HFlip(), VFlip()]), Rotate90()])
    assert nested.transforms == (HFlip(), VFlip(), Rotate90())


def photo_chain_difference(data, chain_steps):
    """Per-sample absolute difference of the fused chain and the exact one."""
    fused = Compose([Decode("RGB"), *chain_steps])(data, seed=7)
    exact = Compose([Decode("RGB", exact=True), *chain_steps])(data, seed=7)
    return np.abs(np.asarray(fused).astype(np.float64) - np.asarray(exact))


@pytest.mark.parametrize("steps", [
    [Resize(64)], [Resize((60, 90))], [Resize(100), CenterCrop(96)], [RandomResizedCrop(56)],
], ids=["resize-short-side", "resize-pair", "eval-chain", "random-resized-crop"])
def test_fusion_stays_within_tolerance_on_photographs(photos, steps):
    jpegs = [data for name, data in photos.items() if name.endswith(".jpg")]
    jpegs.append(encode(np.asarray(PILImage.open(io.BytesIO(photos["astronaut.png"])).convert("RGB")),
                        "JPEG", quality=90))
    for data in jpegs:
        difference = photo_chain_difference(data, steps)
        # DCT scaling differs from decode-then-resize mostly at fine detail
        # (up to about 50 levels on the retina's vessels); an error over a
        # small area (a wrong block, row or edge) shows in the tail and the
        # maximum, not in the mean.
        assert difference.mean() <= 1.5
        assert np.percentile(difference, 99) <= 24
        assert difference.max() <= 80


def test_fusion_actually_decodes_at_a_smaller_scale(photos):
    data = photos["rocket.jpg"]
    fused = Compose([Decode(), Resize(32)])(data, seed=0)
    exact = Compose([Decode(exact=True), Resize(32)])(data, seed=0)
    # DCT scaling changes pixels slightly: equal output would mean no fusion.
    assert fused.shape == exact.shape
    assert not np.array_equal(np.asarray(fused), np.asarray(exact))


class InterpolationMode(enum.Enum):
    """torchvision's enum, as far as a transform reads it."""

    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"


def test_torchvision_names_and_arguments_mean_what_they_mean_there():
    from dataloader import transforms

    image = natural_image(37, 53)
    assert transforms.RandomHorizontalFlip is transforms.RandomHFlip
    assert transforms.RandomVerticalFlip is transforms.RandomVFlip
    np.testing.assert_array_equal(transforms.RandomHorizontalFlip(p=1.0)(image), image[:, ::-1])
    np.testing.assert_array_equal(transforms.RandomVerticalFlip(p=1.0)(image), image[::-1])
    # ToTensor: float32 CHW in [0, 1], as torchvision's on a uint8 HWC image.
    tensor = np.asarray(transforms.ToTensor()(image))
    np.testing.assert_allclose(tensor, image.transpose(2, 0, 1) / np.float32(255), rtol=1e-6)
    assert tensor.dtype == np.float32
    # Resize's positional order is torchvision's: size, interpolation, max_size.
    bicubic = transforms.Resize(20, InterpolationMode.BICUBIC)
    assert bicubic == transforms.Resize(size=20, interpolation="bicubic")
    expected = PILImage.fromarray(image).resize((28, 20), PILImage.Resampling.BICUBIC)
    got = np.asarray(bicubic(image)).astype(int)
    assert got.shape == (20, 28, 3) and np.abs(got - np.asarray(expected)).max() <= 1
    assert transforms.RandomResizedCrop(8, interpolation=InterpolationMode.NEAREST) \
        == transforms.RandomResizedCrop(8, interpolation="nearest")


def test_a_mistyped_or_torchvision_only_name_says_what_to_use():
    from dataloader import transforms

    with pytest.raises(AttributeError, match="did you mean 'RandomResizedCrop'"):
        transforms.RandomResizeCrop  # noqa: B018
    with pytest.raises(AttributeError, match="torchvision's Lambda has no counterpart here"):
        transforms.Lambda  # noqa: B018
    assert not hasattr(transforms, "Sharpen")
