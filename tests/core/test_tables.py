"""Facts declared once in C (src/dl_tables.h and the shape rule of dl_plan.c) as
Python sees them: op parameters by name, a chain's static output shape, and
checks that give one message whichever entry point reached them."""

import io

import numpy as np
import pytest
from PIL import Image as PILImage

from dataloader import kernels
from dataloader import transforms as T
from dataloader._core import codecs, pipeline
from dataloader._core.pipeline import Chain, step
from dataloader.kernels import Image


def test_step_places_named_parameters_in_their_slots():
    assert step("resize", height=7, width=9, max_size=0, filter=2, antialias=True) == (
        "resize", (7, 9, 0, 2, 1), ())
    # A sequence parameter is zero-padded to its slots; a parameter left out is 0.
    assert step("pad_to", height=3, width=4, fill=(1.0, 2.0), anchor=(0.5, 0.5)) == (
        "pad_to", (3, 4), (1.0, 2.0, 0.0, 0.0, 0.5, 0.5))
    assert step("random_crop", height=2, width=2) == ("random_crop", (2, 2, 0, 0, 0, 0), ())


@pytest.mark.parametrize("call,match", [
    (lambda: step("blur"), "unknown native op 'blur'"),
    (lambda: step("resize", height=2, size=3), "has no parameter 'size'"),
    (lambda: step("pad", padding=(1, 2, 3, 4, 5)), "padding takes at most 4 values"),
    (lambda: step("normalize", mean=0.5), "mean takes a sequence"),
    (lambda: Chain([("blur", (), ())]), "unknown native op 'blur'"),
])
def test_unknown_ops_and_parameters_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_every_op_has_a_transform_that_emits_it():
    emitted = {key for transform in (
        T.Decode(), T.ToGray(), T.Crop(0, 0, 1, 1), T.CenterCrop(1), T.RandomCrop(1),
        T.RandomResizedCrop(1), T.Pad(1), T.PadTo(1, 1), T.Resize(1), T.HFlip(),
        T.RandomHFlip(), T.Rotate90(), T.ToFloat(), T.Normalize([0.5], [0.5]), T.ToChw(),
        T.ToHwc(),
        T.ColorJitter(0.1), T.Grayscale(), T.GaussianBlur(3), T.RandomPosterize(4),
        T.RandomSolarize(128), T.RandomAdjustSharpness(2), T.RandomAutocontrast(),
        T.RandomEqualize(), T.RandomInvert(), T.RandomRotation(1), T.RandomAffine(1),
        T.RandomErasing(), T.RandAugment(), T.TrivialAugmentWide(), T.AutoAugment(),
    ) for key, _, _ in transform._steps()}
    assert emitted == set(pipeline.OPS)


# Each fixes the channels with a conversion: the input's are not known before it comes.
STATIC_CHAINS = [
    T.Compose([T.ToRgb(), T.CenterCrop(6), T.Resize(4), T.Pad((1, 2))]),
    T.Compose([T.ToRgb(), T.RandomResizedCrop((5, 7)), T.ToFloat(),
               T.Normalize([0.5] * 3, [0.2] * 3), T.ToChw()]),
    T.Compose([T.Resize((6, 9)), T.Rotate90(), T.ToRgba(), T.HFlip()]),
    T.Compose([T.ToGray(), T.RandomCrop(4, padding=(1, 2)), T.VFlip(), T.PadTo(9, 5),
               T.ToChw(), T.ToHwc()]),
    T.Compose([T.Crop(1, 2, 3, 4), T.Rotate90(3), T.ToGray(), T.ToFloat()]),
]


@pytest.mark.parametrize("chain", STATIC_CHAINS, ids=repr)
@pytest.mark.parametrize("size", [(11, 13), (20, 8)])
def test_the_static_shape_is_what_every_item_gets(chain, size):
    static = Chain(chain._steps()).output_shape()
    assert static is not None
    for seed in range(5):
        image = chain(Image.from_array(np.zeros(size + (3,), np.uint8)), seed=seed)
        height, width, channels = (image.shape if image.layout == "HWC"
                                   else image.shape[1:] + image.shape[:1])
        assert (height, width, channels, str(image.dtype), image.layout) == static


@pytest.mark.parametrize("chain", [
    T.Compose([T.Resize(8)]),                   # the aspect ratio of the input
    T.Compose([T.Decode(), T.CenterCrop(4)]),   # the channels of the file
    T.Compose([T.HFlip(), T.Pad(2)]),           # a border around any size
], ids=repr)
def test_no_static_shape_when_the_input_decides(chain):
    assert Chain(chain._steps()).output_shape() is None


def _png(height, width):
    buffer = io.BytesIO()
    PILImage.new("RGB", (width, height)).save(buffer, "PNG")
    return buffer.getvalue()


def test_decode_limits_give_one_message_to_the_kernel_and_the_transform():
    data = _png(40, 60)
    for limits in ({"max_width": 50}, {"max_bytes": 7000}):
        with pytest.raises(ValueError) as kernel:
            kernels.decode(data, **limits)
        with pytest.raises(ValueError) as transform:
            T.Decode(**limits)(data)
        assert str(transform.value) == f"Decode: {kernel.value}"


def test_the_dct_scale_rule_is_the_chains():
    # kernels.decode(min_size=...) and the fused chains ask the same C rule.
    # Scales in eighths: the smallest n/8 that still covers the minimum.
    assert codecs.jpeg_scale_for(800, 600, 100, 75) == 1
    assert codecs.jpeg_scale_for(800, 600, 101, 75) == 2
    assert codecs.jpeg_scale_for(800, 600, 301, 75) == 4
    assert codecs.jpeg_scale_for(800, 600, 700, 525) == 7
    assert codecs.jpeg_scale_for(800, 600, 800, 600) == 8
    assert codecs.jpeg_scaled_size(203, 301, 3) == (77, 113)


@pytest.mark.parametrize("call,dtype,shape", [
    (lambda out: kernels.resize(np.zeros((4, 4, 3), np.uint8), (2, 2), out=out), np.uint8,
     (2, 2, 3)),
    (lambda out: kernels.to_float(np.zeros((2, 2, 3), np.uint8), out=out), np.float32,
     (2, 2, 3)),
    (lambda out: kernels.stack([np.zeros((2, 3), np.uint8)], out=out), np.uint8, (1, 2, 3)),
    (lambda out: kernels.decode(_png(2, 2), out=out), np.uint8, (2, 2, 3)),
])
def test_every_kernel_checks_out_with_the_same_messages(call, dtype, shape):
    with pytest.raises(ValueError, match=r"^out must have dtype"):
        call(np.zeros(shape, np.int16))
    with pytest.raises(ValueError, match=r"^out must have shape \("):
        call(np.zeros((9, 9, 9), dtype))
    readonly = np.zeros(shape, dtype)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match=r"^out must be writable$"):
        call(readonly)
